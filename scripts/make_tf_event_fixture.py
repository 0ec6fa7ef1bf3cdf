"""Writes crates/train/tests/data/tf_summaries.tfevents with TensorFlow's own TF1 summary ops
and event writer, the way the TF trainers wrote their train directories.

The Rust tests (crates/train/src/summary/tests.rs) read it back and rebuild every value from
the same formulas, so keep the formulas below and there in step.

    /work/venv-tf/bin/python scripts/make_tf_event_fixture.py
"""

import glob
import os
import shutil
import tempfile

import numpy as np
import tensorflow.compat.v1 as tf
from tensorflow.core.util import event_pb2

tf.disable_eager_execution()

OUT = os.path.join(os.path.dirname(__file__), "..", "crates", "train", "tests", "data",
                   "tf_summaries.tfevents")


def histogram_values():
    """30 float32 values from -5 up by 0.37, then zero, values below TF's smallest bucket
    (1e-12) and above its largest finite one (1e20)."""
    ramp = np.arange(30, dtype=np.float32) * np.float32(0.37) - np.float32(5.0)
    return np.concatenate([ramp, np.array([0.0, 1e-13, -1e-13, 3e20], dtype=np.float32)])


def images():
    """Two 4x5 RGB float images (HWC): one with negative values and a NaN pixel (TF's
    shift-and-scale branch and its bad colour), one non-negative (the scale-only branch)."""
    i = np.arange(4 * 5 * 3, dtype=np.float32)
    signed = (i % 17) * np.float32(0.25) - np.float32(1.5)
    signed[7] = np.nan
    positive = (i % 13) * np.float32(3.0)
    return np.stack([signed.reshape(4, 5, 3), positive.reshape(4, 5, 3)])


def main():
    loss = tf.placeholder(tf.float32, [])
    hist = tf.placeholder(tf.float32, [None])
    img = tf.placeholder(tf.float32, [None, 4, 5, 3])
    step1 = tf.summary.merge([
        tf.summary.scalar("loss", loss),
        tf.summary.scalar("tower_0/loss", loss * 2.0),
        tf.summary.histogram("conv1/weight", hist),
        tf.summary.image("tower_0/images", img, max_outputs=3),
    ])
    with tempfile.TemporaryDirectory() as logdir:
        writer = tf.summary.FileWriter(logdir)
        writer.add_session_log(event_pb2.SessionLog(status=event_pb2.SessionLog.START), 0)
        with tf.Session() as sess:
            s = sess.run(step1, {loss: 2.5, hist: histogram_values(), img: images()})
            writer.add_summary(s, 1)
            s = sess.run(tf.summary.scalar("learning_rate", tf.constant(0.1)))
            writer.add_summary(s, 2)
        writer.close()
        (path,) = glob.glob(os.path.join(logdir, "events.out.tfevents.*"))
        shutil.copyfile(path, OUT)
    print("wrote", os.path.normpath(OUT), os.path.getsize(OUT), "bytes")


if __name__ == "__main__":
    main()
