"""Writes crates/models/tests/data/tf2_object: a TF2 object-based checkpoint
(`tf.train.Checkpoint(model=..., optimizer=...).save`, as TF2's custom training loops and its
MirroredStrategy tutorial save one) of a small Keras 3 model, for the test that such a file is
refused with an error saying what it is and what to save instead
(crates/models/tests/tf_object_checkpoint.rs).

    /tmp/peers/bin/python scripts/tf_fixtures/tf2_object_checkpoint.py crates/models/tests/data/tf2_object

(tensorflow-cpu 2.21 and its Keras 3 from PyPI.)
"""
import os
import sys

import keras
import tensorflow as tf


def main(out):
    os.makedirs(out, exist_ok=True)
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [keras.Input((4, 4, 3)), keras.layers.Conv2D(2, 1), keras.layers.BatchNormalization(),
         keras.layers.Flatten(), keras.layers.Dense(3)]
    )
    optimizer = keras.optimizers.SGD(0.1, momentum=0.9)
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer)
    print(checkpoint.save(os.path.join(out, "ckpt")))


if __name__ == "__main__":
    main(*sys.argv[1:])
