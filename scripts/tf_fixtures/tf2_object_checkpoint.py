"""Writes crates/models/tests/data/tf2_object: TF2's object-based files of a small Keras model
(a convolution, a batch norm, a depthwise convolution, dropout, a dense layer), whose keys are
paths through Python objects and whose object graph records each variable's own name:

- `ckpt-1` (and its `checkpoint` state file): `tf.train.Checkpoint(model=..., optimizer=...)
  .save` of the Keras 3 model, as TF2's custom training loops and its MirroredStrategy tutorial
  save one (its optimizer's variables too);
- `saved/`: the same model as a SavedModel (`tf.saved_model.save`);
- `exported/`: the same as Keras 3 exports it for serving (`model.export`), each variable saved
  twice (under `variables/` and `_all_variables/`);
- `tf_keras_saved/`: the model built by tf-keras (Keras 2) with the same weights, saved as
  tf-keras saves a model to a folder (`model.save("dir")`: a SavedModel);
- `variables.json`: each model's floating-point variables by the names Keras gave them (Keras
  3's `path`, tf-keras's `name` without `:0`), with their shapes and values (Keras 3's dropout
  keeps its random-number state in an integer variable too).

    /tmp/tfvenv/bin/python scripts/tf_fixtures/tf2_object_checkpoint.py crates/models/tests/data/tf2_object

(tensorflow-cpu 2.21 with its Keras 3, and tf-keras 2.21, from PyPI.)
"""
import json
import os
import shutil
import sys

import keras
import numpy as np
import tensorflow as tf
import tf_keras


def layers(module):
    """The model's layers in Keras `module` (Keras 3 or tf-keras)."""
    return [module.layers.Conv2D(2, 1), module.layers.BatchNormalization(),
            module.layers.DepthwiseConv2D(3, padding="same"), module.layers.Flatten(),
            module.layers.Dropout(0.5), module.layers.Dense(3)]


def variables(model, name_of):
    """Each of `model`'s variables by the name `name_of` gives it: shape and values."""
    return {name_of(v): {"shape": list(v.shape), "values": np.ravel(v.numpy()).tolist()}
            for v in model.variables if "float" in str(v.dtype)}


def main(out):
    for folder in ("saved", "exported", "tf_keras_saved"):
        shutil.rmtree(os.path.join(out, folder), ignore_errors=True)
    os.makedirs(out, exist_ok=True)
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4, 4, 3))] + layers(keras))
    optimizer = keras.optimizers.SGD(0.1, momentum=0.9)
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer)
    print(checkpoint.save(os.path.join(out, "ckpt")))
    tf.saved_model.save(model, os.path.join(out, "saved"))
    model.export(os.path.join(out, "exported"))
    keras2 = tf_keras.Sequential([tf_keras.Input((4, 4, 3))] + layers(tf_keras))
    keras2.set_weights(model.get_weights())
    keras2.save(os.path.join(out, "tf_keras_saved"))
    expected = {
        "keras3": variables(model, lambda v: v.path),
        "tf_keras": variables(keras2, lambda v: v.name.removesuffix(":0")),
    }
    with open(os.path.join(out, "variables.json"), "w") as f:
        json.dump(expected, f, indent=1)


if __name__ == "__main__":
    main(*sys.argv[1:])
