"""Writes crates/models/tests/data/tf_dtypes: small checkpoints written by TensorFlow itself
for the reader's tests.

- `dtypes/model.ckpt-7` (V2, by tf.compat.v1.train.Saver): float32, float64, float16, bfloat16,
  int32, int64, uint8, bool and string variables plus `global_step`; values.json holds what TF
  reads back from it (floats as TF converts them to float32).
- `v1/model.ckpt` (V1, the one-file format of TF before 0.12 and of TF-slim's published
  checkpoints): the same variables but the 16-bit floats, which TF's V1 saver cannot save or
  its reader read; TF reads them back as values.json too.

    /tmp/tfvenv/bin/python scripts/tf_fixtures/dtypes_checkpoint.py crates/models/tests/data/tf_dtypes
"""
import json
import os
import sys

import numpy as np
import tensorflow.compat.v1 as tf

tf.disable_eager_execution()

V1_LACKS = ("scope/bf16", "scope/f16")


def main(out):
    rng = np.random.default_rng(3)
    values = {
        "scope/f32": (rng.normal(size=(2, 3)), tf.float32),
        "scope/f64": (rng.normal(size=(3,)), tf.float64),
        "scope/f16": (rng.normal(size=(2, 2)), tf.float16),
        "scope/bf16": (rng.normal(size=(4,)), tf.bfloat16),
        "ints/i32": (np.array([-3, 0, 2**31 - 1]), tf.int32),
        "ints/i64": (np.array([[-(2**40), 5]]), tf.int64),
        "ints/u8": (np.array([0, 200, 255]), tf.uint8),
        "flags/b": (np.array([True, False, True]), tf.bool),
        "text/s": (np.array([b"hello", b"", b"checkpoint"]), tf.string),
    }
    tf.train.get_or_create_global_step()
    variables = {}
    for name, (value, dtype) in values.items():
        variables[name] = tf.Variable(tf.constant(value, dtype=dtype), name=name)
    assign = tf.assign(tf.train.get_global_step(), 7)
    os.makedirs(os.path.join(out, "dtypes"), exist_ok=True)
    os.makedirs(os.path.join(out, "v1"), exist_ok=True)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(assign)
        prefix = tf.train.Saver().save(sess, os.path.join(out, "dtypes", "model.ckpt"),
                                       global_step=7, write_meta_graph=False)
        # TF's V1 saver cannot save bfloat16 ("not yet supported"), nor its reader read the
        # float16 it saves ("Data type not supported").
        in_v1 = [v for n, v in variables.items() if n not in V1_LACKS]
        in_v1.append(tf.train.get_global_step())
        v1 = tf.train.Saver(in_v1, write_version=tf.train.SaverDef.V1)
        v1_file = v1.save(sess, os.path.join(out, "v1", "model.ckpt"), write_meta_graph=False,
                          write_state=False)
    reader = tf.train.load_checkpoint(prefix)
    expected = {}
    for name, shape in tf.train.list_variables(prefix):
        value = reader.get_tensor(name)
        if value.dtype.kind == "f" or str(value.dtype) == "bfloat16":
            value = value.astype(np.float32).ravel().tolist()
        elif value.dtype.kind in "iub":
            value = value.astype(np.int64).ravel().tolist()
        else:
            value = [v.decode() for v in value.ravel()]
        expected[name] = {"shape": shape, "values": value}
    v1_reader = tf.train.load_checkpoint(v1_file)
    for name in (n for n in expected if n not in V1_LACKS):
        assert np.array_equal(v1_reader.get_tensor(name), reader.get_tensor(name)), name
    with open(os.path.join(out, "values.json"), "w") as f:
        json.dump(expected, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
