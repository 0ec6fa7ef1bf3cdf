"""Writes one small Keras network's weights in each of Keras's weight files, with values that
say where they belong, for the reader's tests (a few KB each, committed):

    /tmp/peers/bin/python scripts/tf_fixtures/keras_weight_files.py crates/models/tests/data/keras

Needs tensorflow-cpu (Keras 3) and tf-keras (Keras 2). The network: `conv2d` (3x3, 2 to 4
channels, no bias), `batch_normalization` (no scale), `batch_normalization_1` (with scale),
`predictions` (dense, 4 to 3). Each weight's values are `layer + weight / 10 + k / 1000` for
its k-th element (row-major), with layer and weight the indices of its layer and of the weight
within its layer, so a value read from the wrong place shows where it came from.

OUT_DIR gets:
- keras2.h5: `save_weights` of Keras 2 (tf-keras 2.21), attributes as variable-length strings;
- keras2_fixed_strings.h5: the same file with its attributes as fixed-length byte strings, as
  Keras 2.0-2.2 wrote them (the ImageNet weights keras.applications downloads date from then);
- model.weights.h5: `save_weights` of Keras 3 (3.6 and later record each layer's own name);
- unnamed.weights.h5: the same without those names, as Keras 3.0-3.5 wrote it;
- model.keras: `model.save` of Keras 3;
- model_keras2.h5: `model.save` of Keras 2 (weights under `model_weights`, and the model's
  configuration);
- nested_keras2.h5 and nested.weights.h5: two convolutions, each with a batch norm, as a model
  of their own inside one that adds pooling, dropout and `dense` (transfer learning as Keras
  users write it), by Keras 2 and Keras 3;
- huge_claim.h5: a hostile file in Keras 2's layout, of 4 KB, whose one weight claims 2^28
  float32 values (1 GiB) in chunks it never wrote, which HDF5 reads as the fill value;
- linked_cycle.weights.h5: a hostile file in Keras 3's layout whose nested model's `layers`
  is a hard link to the root's `layers`, so that the group is its own descendant (found by the
  Keras fuzz target: the walk into nested models recursed until the stack overflowed);
- dtypes.weights.h5 and dtypes.json: `save_weights` of Keras 3 of dense layers in bfloat16
  (which h5py stores as an opaque 2-byte type with the attribute `dtype="bfloat16"`), float16
  and float64, and the values Keras loads back from it, as float32;
- relu_infinity.keras: `model.save` of Keras 3 of a model whose `ReLU(max_value=inf)` puts
  Python's bare `Infinity` in config.json (not JSON, which Python's json writes and reads);
- deep_layers.weights.h5: a hostile file in Keras 3's layout of models nested 40 deep (each
  level ~300 bytes: 20,000 levels in 6 MB would overflow a reader's stack).
"""
import json
import os
import shutil
import sys
import zipfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import h5py  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tf_keras  # noqa: E402


def network(layers):
    inputs = layers.Input((5, 5, 2))
    x = layers.Conv2D(4, 3, use_bias=False, name="conv2d")(inputs)
    x = layers.BatchNormalization(scale=False, name="batch_normalization")(x)
    x = layers.BatchNormalization(name="batch_normalization_1")(x)
    x = layers.GlobalAveragePooling2D()(x)
    return layers.Dense(3, name="predictions")(x), inputs


def nested(keras_module):
    """Two convolutions, each with a batch norm, as a model of their own nested in one that adds
    pooling, dropout and `dense`: transfer learning as Keras users write it."""
    layers = keras_module.layers
    inner_inputs = layers.Input((5, 5, 2))
    x = layers.Conv2D(4, 3, use_bias=False, name="conv2d")(inner_inputs)
    x = layers.BatchNormalization(scale=False, name="batch_normalization")(x)
    x = layers.Conv2D(4, 1, use_bias=False, name="conv2d_1")(x)
    x = layers.BatchNormalization(scale=False, name="batch_normalization_1")(x)
    inner = keras_module.Model(inner_inputs, x, name="base")
    inputs = layers.Input((5, 5, 2))
    x = layers.Dropout(0.2)(layers.GlobalAveragePooling2D()(inner(inputs)))
    return keras_module.Model(inputs, layers.Dense(3, name="dense")(x))


def leaves(model):
    """The layers with weights of `model`, those of a nested model in its place."""
    for layer in model.layers:
        if hasattr(layer, "layers"):
            yield from leaves(layer)
        elif layer.weights:
            yield layer


def numbered(model):
    """Every weight set to values that say where it belongs."""
    for i, layer in enumerate(leaves(model)):
        layer.set_weights([
            i + j / 10 + np.arange(w.size).reshape(w.shape) / 1000
            for j, w in enumerate(layer.get_weights())
        ])


def fixed_strings(path):
    """Every string attribute rewritten as an array of fixed-length byte strings."""
    with h5py.File(path, "r+") as f:
        groups = [f] + [f[name] for name in f.attrs["layer_names"]]
        for group in groups:
            for key, value in list(group.attrs.items()):
                if isinstance(value, np.ndarray) and value.dtype == object and value.size:
                    group.attrs[key] = np.array([v.encode() for v in value])


def unnamed(path):
    """Each layer's own name (the `name` of its `vars` group) deleted."""
    with h5py.File(path, "r+") as f:
        for layer in f["layers"].values():
            del layer["vars"].attrs["name"]


def huge_claim(path):
    """Keras 2's layout around a dataset of 2^28 float32 values, none of them written."""
    with h5py.File(path, "w") as f:
        f.attrs["layer_names"] = np.array([b"conv2d"])
        layer = f.create_group("conv2d")
        layer.attrs["weight_names"] = np.array([b"conv2d/kernel:0"])
        layer.create_dataset("conv2d/kernel:0", shape=(2**28,), dtype="f4", chunks=(1024,))


def linked_cycle(path):
    """Keras 3's layout, a layer `functional` whose nested `layers` is the root's `layers`."""
    with h5py.File(path, "w") as f:
        layers = f.create_group("layers")
        layers.create_group("functional")["layers"] = layers


def deep_layers(path, depth=40):
    """Keras 3's layout, a layer `f` holding a model whose layer `f` holds one, `depth` deep."""
    with h5py.File(path, "w") as f:
        group = f.create_group("layers")
        for _ in range(depth):
            group = group.create_group("f").create_group("layers")


def dtypes(path, values_path):
    """Dense layers in bfloat16, float16 and float64, and the values Keras reads back."""
    def model():
        layers = [keras.layers.Dense(2, dtype=dtype, name=dtype) for dtype in
                  ("bfloat16", "float16", "float64")]
        return keras.Sequential([keras.Input((4,)), *layers])
    saved = model()
    rng = np.random.default_rng(5)
    for layer in saved.layers:
        layer.set_weights([rng.normal(size=w.shape) for w in layer.get_weights()])
    saved.save_weights(path)
    loaded = model()
    loaded.load_weights(path)
    values = {}
    with h5py.File(path) as f:
        names = []
        f.visititems(lambda name, obj: names.append(name) if isinstance(obj, h5py.Dataset) else None)
    for name, weight in zip(sorted(names), loaded.get_weights()):
        values[name] = np.asarray(weight).astype(np.float32).ravel().tolist()
    with open(values_path, "w") as f:
        json.dump(values, f, indent=1)


def relu_infinity(path):
    """A Keras 3 archive whose config.json holds `"max_value": Infinity`."""
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3),
                              keras.layers.ReLU(max_value=float("inf")), keras.layers.Dense(2)])
    model.save(path)
    assert b"Infinity" in zipfile.ZipFile(path).read("config.json")
    keras.saving.load_model(path)


def main(out):
    os.makedirs(out, exist_ok=True)
    outputs, inputs = network(keras.layers)
    model = keras.Model(inputs, outputs)
    numbered(model)
    model.save_weights(os.path.join(out, "model.weights.h5"))
    model.save(os.path.join(out, "model.keras"))
    outputs, inputs = network(tf_keras.layers)
    keras2 = tf_keras.Model(inputs, outputs)
    numbered(keras2)
    keras2.save_weights(os.path.join(out, "keras2.h5"))
    keras2.save(os.path.join(out, "model_keras2.h5"))
    for keras_module, name in [(keras, "nested.weights.h5"), (tf_keras, "nested_keras2.h5")]:
        model = nested(keras_module)
        numbered(model)
        model.save_weights(os.path.join(out, name))
    shutil.copy(os.path.join(out, "keras2.h5"), os.path.join(out, "keras2_fixed_strings.h5"))
    fixed_strings(os.path.join(out, "keras2_fixed_strings.h5"))
    shutil.copy(os.path.join(out, "model.weights.h5"), os.path.join(out, "unnamed.weights.h5"))
    unnamed(os.path.join(out, "unnamed.weights.h5"))
    huge_claim(os.path.join(out, "huge_claim.h5"))
    linked_cycle(os.path.join(out, "linked_cycle.weights.h5"))
    deep_layers(os.path.join(out, "deep_layers.weights.h5"))
    relu_infinity(os.path.join(out, "relu_infinity.keras"))
    dtypes(os.path.join(out, "dtypes.weights.h5"), os.path.join(out, "dtypes.json"))
    for name in sorted(os.listdir(out)):
        print(name, os.path.getsize(os.path.join(out, name)))


if __name__ == "__main__":
    main(*sys.argv[1:])
