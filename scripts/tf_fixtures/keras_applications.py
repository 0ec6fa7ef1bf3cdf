"""Writes one of keras.applications' networks (random weights, 1000 classes), InceptionV3,
ResNet50, ResNet50V2, MobileNetV2, EfficientNetB0, MobileNetV3Large or MobileNetV3Small, in
Keras's weight files, and Keras's outputs for it, for the tests that need the full network
(about 95 MB a file, not committed).

    /tmp/peers/bin/python scripts/tf_fixtures/keras_applications.py NET OUT_DIR [LAYER_LIST]
    TOWERS_KERAS_INCEPTION_V3=OUT_DIR cargo test --workspace --test integration keras_applications
    TOWERS_KERAS_RESNET50=OUT_DIR cargo test --workspace --test integration keras_applications
    TOWERS_KERAS_RESNET50V2=OUT_DIR cargo test --workspace --test integration keras_applications
    TOWERS_KERAS_MOBILENET_V2=OUT_DIR cargo test --workspace --test integration keras_applications
    TOWERS_KERAS_EFFICIENTNET_B0=OUT_DIR cargo test --workspace --test integration keras_applications
    TOWERS_KERAS_MOBILENET_V3_LARGE=OUT_DIR cargo test --workspace --test integration keras_applications
    TOWERS_KERAS_MOBILENET_V3_SMALL=OUT_DIR cargo test --workspace --test integration keras_applications

NET is `inception_v3`, `resnet50`, `resnet50v2`, `mobilenet_v2`, `efficientnet_b0`,
`mobilenet_v3_large` or `mobilenet_v3_small`. Needs
tensorflow-cpu (Keras 3) and tf-keras (Keras 2), `pip install tensorflow-cpu tf-keras`. The
weights are Keras's initializers, then made informative for a test: every batch-norm beta and
every convolution bias random, the classifier's weights larger (so the classes spread), and the
moving statistics those of a batch of the two pictures and 4 random images (one training pass
with momentum 0, dropout off), so that every input gives logits of a sensible scale.

MobileNetV3's classifier is not a `Dense` but a 1x1 `Conv2D` named `logits` (after pooling, the
1x1 `Conv2D` `conv_2` with its bias, hard swish and dropout), then `Flatten` and the softmax
`predictions`; its logits are the `Flatten`'s outputs. It preprocesses inside the model
(`Rescaling(1/127.5, offset=-1)`, no weights: `weights=None` and `weights="imagenet"` build the
same network), so its inputs are raw pixels in [0, 255]. tf-keras names its layers otherwise
(`Conv/BatchNorm`, `expanded_conv_3/squeeze_excite/Conv` where Keras 3 has `conv_bn`,
`expanded_conv_3_squeeze_excite_conv`), as its ImageNet files
(`weights_mobilenet_v3_large_224_1.0_float.h5`) do.

EfficientNetB0 preprocesses inside the model (`Rescaling(1/255)`, then a `Normalization` layer
with weights), and `weights="imagenet"` adds a second `Rescaling` (by 1/sqrt(stddev) a channel)
that `weights=None` lacks. Its fixture is the network as users of the ImageNet weights build it:
`EfficientNetB0(weights="imagenet")`, with keras.applications' download (`get_file`) answered by
a local file instead (no network), and the Normalization holding what the ImageNet file holds
(mean [0.485, 0.456, 0.406], variance [0.229, 0.224, 0.225]: the standard deviations, see
tensorflow/tensorflow#49930).

OUT_DIR gets the same weights in each of Keras's files:
- NET_keras2.h5: `save_weights` of Keras 2 (tf-keras), the format of the ImageNet weights
  keras.applications downloads (`inception_v3_weights_tf_dim_ordering_tf_kernels.h5`), with
  tf-keras's layer names; for
  EfficientNetB0 it is the file `weights="imagenet"` loads in both Keras versions;
- NET.weights.h5: `save_weights` of Keras 3 (3.6 and later record each layer's own name);
- NET_unnamed.weights.h5: the same without those names, as Keras 3.0-3.5 wrote it;
- NET.keras: `model.save` of Keras 3 (a zip with the weights file inside);
- TF2's object-based files: NET_saved/ (Keras 3's model as a SavedModel,
  `tf.saved_model.save`), NET_exported/ (Keras 3's `model.export`, each variable saved
  twice), NET_tf_keras_saved/ (tf-keras's `model.save` of a folder, a
  SavedModel), NET_checkpoint/ (`tf.train.Checkpoint(model=model).save`, Keras 3); for
  EfficientNetB0 also NET_plain_tf_keras_saved/, the same weights in tf-keras's network built
  with `weights=None`;
- for EfficientNetB0, files that keep the model's configuration, which says whether it has the
  second `Rescaling`: NET_plain.keras, the same weights in the model `weights=None` builds
  (Keras 3's `model.save`), and NET_model_keras2.h5, the `weights="imagenet"` model in a Keras
  2 whole-model file (tf-keras's `model.save`, its configuration the `model_config` attribute);
- transfer_keras2.h5, transfer.weights.h5, transfer_unnamed.weights.h5 and transfer.keras
  (Keras 3's `model.save`): transfer learning
  as Keras users write it, the network without its top (`include_top=False`, the same
  weights; EfficientNetB0's built with `weights="imagenet"`) nested in a model that adds
  pooling, dropout and a new `Dense(5)` (MobileNetV3's on the pooled features of `conv_1`,
  without `conv_2`), and its TF2 files as the network's: transfer_saved/,
  transfer_tf_keras_saved/, transfer_checkpoint/;
and inputs.f32 (2 x SIZE x SIZE x 3 f32, NHWC, already preprocessed: in [-1, 1] for
InceptionV3, ResNet50V2 and MobileNetV2, BGR less the mean pixel for ResNet50, raw pixels in
[0, 255] for EfficientNetB0 and MobileNetV3), images/*.png (2 pictures), expected.json
(logits of inputs.f32, before the softmax, and the transfer model's; for EfficientNetB0 also
`logits_without_imagenet_rescaling`, the logits of the same weights in the model
`weights=None` builds; for the PNG pictures after the network's preprocessing, TF's Inception
eval preprocessing or Keras's `load_img` and `preprocess_input`: top-5 and probabilities).
LAYER_LIST, when given, gets the Keras 2 file's layers in its order, each weight's name and
shape on a line (committed as test data).
"""
import contextlib
import json
import os
import shutil
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import h5py  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras  # noqa: E402
from keras.src.applications import efficientnet as keras3_efficientnet  # noqa: E402
from pictures import pictures  # noqa: E402
from tf_keras.src.applications import efficientnet as keras2_efficientnet  # noqa: E402

# Each network's class in keras.applications, input side, and the module of its
# `preprocess_input` (None: TF's Inception eval preprocessing).
NETS = {
    "inception_v3": ("InceptionV3", 299, None),
    "resnet50": ("ResNet50", 224, "resnet50"),
    "resnet50v2": ("ResNet50V2", 224, "resnet_v2"),
    "mobilenet_v2": ("MobileNetV2", 224, "mobilenet_v2"),
    "efficientnet_b0": ("EfficientNetB0", 224, "efficientnet"),
    "mobilenet_v3_large": ("MobileNetV3Large", 224, "mobilenet_v3"),
    "mobilenet_v3_small": ("MobileNetV3Small", 224, "mobilenet_v3"),
}
# The networks that preprocess inside the model, built as users of the ImageNet weights build
# them (`weights="imagenet"`, see `downloads`); their inputs are raw pixels in [0, 255].
PREPROCESSING_INSIDE = {"efficientnet_b0"}
# The networks whose classifier is MobileNetV3's 1x1 `Conv2D` `logits` (then `Flatten` and the
# softmax `predictions`), and whose layers tf-keras names otherwise (see `keras3_name`). They
# preprocess inside the model too (a `Rescaling` to [-1, 1], no weights), but are built with
# `weights=None`, which builds the network `weights="imagenet"` builds.
MOBILENET_V3 = {"mobilenet_v3_large", "mobilenet_v3_small"}
# What the Normalization layer of EfficientNet's ImageNet file holds: ImageNet's mean and, as
# its variance, the standard deviations (tensorflow/tensorflow#49930), which the second
# `Rescaling` of `weights="imagenet"` (1/sqrt(stddev) a channel) makes a division by the
# standard deviation.
IMAGENET_MEAN = [0.485, 0.456, 0.406]
IMAGENET_STDDEV = [0.229, 0.224, 0.225]


def inception_preprocess(png, size):
    """TF's Inception eval_image: central crop 0.875, bilinear resize (TF 1.x), scale to [-1, 1]."""
    image = tf.image.convert_image_dtype(tf.image.decode_png(png, channels=3), tf.float32)
    image = tf.image.central_crop(image, central_fraction=0.875)
    image = tf.compat.v1.image.resize_bilinear(tf.expand_dims(image, 0), [size, size],
                                               align_corners=False)
    return ((image - 0.5) * 2.0).numpy()


def keras_preprocess(module, path, size):
    """Keras's ResNet50 example: `load_img` to the size (Pillow's nearest), then the
    `preprocess_input` of keras.applications' `module`."""
    image = keras.utils.img_to_array(keras.utils.load_img(path, target_size=(size, size)))
    return getattr(keras.applications, module).preprocess_input(image[None])


def preprocess(net, path, size):
    """The picture at `path` as `net`'s input, a batch of one."""
    module = NETS[net][2]
    if module is None:
        return inception_preprocess(open(path, "rb").read(), size)
    return keras_preprocess(module, path, size)


def random_inputs(net, rng, n, size):
    """`n` random images in the range of `net`'s preprocessed inputs."""
    raw_pixels = (0, 255)  # the networks that preprocess inside the model
    low, high = {"resnet50": (-124, 152), "efficientnet_b0": raw_pixels,
                 "mobilenet_v3_large": raw_pixels,
                 "mobilenet_v3_small": raw_pixels}.get(net, (-1, 1))
    return rng.uniform(low, high, (n, size, size, 3)).astype(np.float32)


def classifier(model):
    """The classifier's layer with weights: the `Dense` `predictions`, or MobileNetV3's 1x1
    `Conv2D` `logits` (its `predictions` the softmax `Activation` after a `Flatten`)."""
    layer = model.get_layer("predictions")
    if isinstance(layer, keras.layers.Dense):
        return layer
    layer = model.get_layer("logits")
    assert isinstance(layer, keras.layers.Conv2D) and layer.kernel.shape[:2] == (1, 1)
    return layer


def informative(model, rng, batch):
    """Random betas and convolution biases and a spread classifier; the moving statistics of
    `batch` (dropout off: those of the network that infers). Leaves the Normalization layers
    (EfficientNet's) as they are."""
    top = classifier(model)
    for layer in model.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            layer.beta.assign(rng.normal(0, 0.2, layer.beta.shape).astype(np.float32))
            layer.momentum = 0.0
        if isinstance(layer, keras.layers.Conv2D) and layer.use_bias and layer is not top:
            layer.bias.assign(rng.normal(0, 0.1, layer.bias.shape).astype(np.float32))
    top.kernel.assign(rng.normal(0, 0.15, top.kernel.shape).astype(np.float32))
    top.bias.assign(rng.normal(0, 0.5, top.bias.shape).astype(np.float32))
    # EfficientNet's stochastic depth (`Dropout(noise_shape=(None, 1, 1, 1))`) would drop
    # whole samples' residual branches in the training pass.
    dropouts = [layer for layer in model.layers if isinstance(layer, keras.layers.Dropout)]
    rates = [layer.rate for layer in dropouts]
    for layer in dropouts:
        layer.rate = 0.0
    normalizations = [layer for layer in model.layers
                      if isinstance(layer, keras.layers.Normalization)]
    before = [layer.get_weights() for layer in normalizations]
    model(batch, training=True)
    for layer, rate in zip(dropouts, rates):
        layer.rate = rate
    for layer, weights in zip(normalizations, before):
        assert all(np.array_equal(a, b) for a, b in zip(layer.get_weights(), weights))


def logits_of(model, images):
    """The classifier's outputs before its softmax (MobileNetV3's: the `Flatten`'s outputs)."""
    dense = model.get_layer("predictions")
    if not isinstance(dense, keras.layers.Dense):
        return np.asarray(keras.Model(model.input, dense.input)(images))
    features = keras.Model(model.input, dense.input)(images)
    return np.asarray(features) @ np.asarray(dense.kernel) + np.asarray(dense.bias)


def keras3_name(net, name):
    """Keras 3's name of the tf-keras layer `name` of `net`: the same but for MobileNetV3's
    (tf-keras `Conv`, `Conv/BatchNorm`, `expanded_conv_3/squeeze_excite/Conv_1`, `Logits`; Keras 3
    `conv`, `conv_bn`, `expanded_conv_3_squeeze_excite_conv_1`, `logits`)."""
    if net not in MOBILENET_V3:
        return name
    return name.replace("/BatchNorm", "_bn").replace("/", "_").lower()


def text(name):
    """An attribute's string: bytes where Keras wrote fixed-length strings."""
    return name.decode() if isinstance(name, bytes) else name


def transfer(keras_module, net, full, rng_head):
    """Transfer learning as Keras users write it: `net` without its top, with `full`'s weights,
    then pooling, dropout and a new `Dense(5)` with the weights `rng_head` gives. The networks
    of PREPROCESSING_INSIDE are built with `weights="imagenet"` (inside `downloads`, which gives
    a file of `full`'s weights without its top)."""
    name, size, _ = NETS[net]
    imagenet = net in PREPROCESSING_INSIDE
    base = getattr(keras_module.applications, name)(
        weights="imagenet" if imagenet else None, include_top=False, input_shape=(size, size, 3))
    # The top's layers come last: the base's weights lead `full`'s, in the same order.
    weights = full.get_weights()[:len(base.weights)]
    if imagenet:
        assert all(np.array_equal(a, b) for a, b in zip(base.get_weights(), weights))
    else:
        base.set_weights(weights)
    inputs = keras_module.layers.Input((size, size, 3))
    x = keras_module.layers.GlobalAveragePooling2D()(base(inputs))
    x = keras_module.layers.Dropout(0.2)(x)
    head = keras_module.layers.Dense(5)
    model = keras_module.Model(inputs, head(x))
    head.set_weights(rng_head)
    return model


@contextlib.contextmanager
def downloads(files):
    """keras.applications' download of EfficientNet's ImageNet weights (`get_file` in Keras 3
    and in tf-keras) answered by `files` (the file's name, as `efficientnetb0.h5`: the local
    path), without the network."""
    modules = (keras3_efficientnet.file_utils, keras2_efficientnet.data_utils)
    saved = [module.get_file for module in modules]
    for module in modules:
        module.get_file = lambda fname, *args, **kwargs: files[fname]
    try:
        yield
    finally:
        for module, get_file in zip(modules, saved):
            module.get_file = get_file


def imagenet_file(name, path):
    """A Keras 2 file of `name` as `weights=None` builds it (Keras's initializers) but for the
    Normalization layer, which holds what the ImageNet file's holds."""
    model = getattr(tf_keras.applications, name)(weights=None, classes=1000)
    normalization = model.get_layer("normalization")
    count = normalization.get_weights()[2]
    normalization.set_weights([np.float32(IMAGENET_MEAN), np.float32(IMAGENET_STDDEV), count])
    model.save_weights(path)
    return path


def keras2_notop(name, size, full, path):
    """`full`'s weights (a tf-keras model) in the Keras 2 file of `name` without its top."""
    base = getattr(tf_keras.applications, name)(weights=None, include_top=False,
                                                input_shape=(size, size, 3))
    base.set_weights(full.get_weights()[:len(base.weights)])
    base.save_weights(path)
    return path


def plain_model(name, model):
    """`model`'s weights in the model `weights=None` builds (without the second `Rescaling` of
    `weights="imagenet"`)."""
    plain = getattr(keras.applications, name)(weights=None, classes=1000)
    rescalings = [sum(isinstance(layer, keras.layers.Rescaling) for layer in m.layers)
                  for m in (model, plain)]
    assert rescalings == [2, 1], rescalings
    # The same layers with weights, in the same order.
    plain.set_weights(model.get_weights())
    for layer in plain.layers:
        if isinstance(layer, keras.layers.Normalization):
            # Keras 3's `set_weights` leaves its constants at the old weights.
            layer.finalize_state()
    return plain


def unnamed(path, out):
    """`path` without each layer's own name (the `name` of its `vars`), written to `out`."""
    shutil.copy(path, out)
    with h5py.File(out, "r+") as f:
        # Collected first: `visititems` stops at the first visit that returns anything.
        groups = []
        f.visititems(lambda name, group: groups.append(group) if name.endswith("vars") else None)
        for group in groups:
            group.attrs.pop("name", None)
        assert groups and not any("name" in group.attrs for group in groups)


def layer_list(path, out):
    """The Keras 2 file's layers in its order: `layer<TAB>weight<TAB>shape` per weight."""
    with h5py.File(path) as f, open(out, "w") as listing:
        for layer in map(text, f.attrs["layer_names"]):
            for weight in map(text, f[layer].attrs["weight_names"]):
                listing.write(f"{layer}\t{weight}\t{list(f[layer][weight].shape)}\n")


def main(net, out, listing=None):
    name, size, _ = NETS[net]
    imagenet = net in PREPROCESSING_INSIDE
    os.makedirs(os.path.join(out, "images"), exist_ok=True)
    rng = np.random.default_rng(7)
    keras.utils.set_random_seed(7)
    # The ImageNet files `weights="imagenet"` loads (PREPROCESSING_INSIDE): `get_file`'s name
    # (`efficientnetb0.h5`, `efficientnetb0_notop.h5`) and the path of a file written here.
    files = {}
    top_file = f"{name.lower()}.h5"
    with tempfile.TemporaryDirectory() as tmp, downloads(files):
        if imagenet:
            files[top_file] = imagenet_file(name, os.path.join(tmp, top_file))
            model = getattr(keras.applications, name)(weights="imagenet", classes=1000)
        else:
            model = getattr(keras.applications, name)(weights=None, classes=1000)
        pictures_in = [preprocess(net, p, size) for p in pictures(rng, out)]
        noise = random_inputs(net, rng, 4, size)
        informative(model, rng, np.concatenate(pictures_in + [noise]))

        model.save_weights(os.path.join(out, f"{net}.weights.h5"))
        unnamed(os.path.join(out, f"{net}.weights.h5"),
                os.path.join(out, f"{net}_unnamed.weights.h5"))
        model.save(os.path.join(out, f"{net}.keras"))
        if imagenet:
            # Layer names as in a new session (`normalization`, not `normalization_1`).
            tf_keras.backend.clear_session()
        keras2 = getattr(tf_keras.applications, name)(weights=None, classes=1000)
        # Layer by layer: the two Keras versions may order their layers differently, but both
        # name them in the order the code builds them (`conv2d`, `conv2d_1`, ...) where the
        # code does not name them (MobileNetV3's names differ: `keras3_name`).
        copied = []
        for layer in keras2.layers:
            if layer.weights:
                copied.append(keras3_name(net, layer.name))
                source = model.get_layer(copied[-1])
                assert [tuple(w.shape) for w in layer.weights] == \
                    [tuple(w.shape) for w in source.weights], layer.name
                layer.set_weights(source.get_weights())
        # Every layer with weights copied, once.
        assert sorted(copied) == sorted(layer.name for layer in model.layers if layer.weights)
        keras2.save_weights(os.path.join(out, f"{net}_keras2.h5"))
        if imagenet:
            # The same weights in tf-keras's `weights=None` network, whose configuration
            # (keras_metadata.pb) says it lacks the ImageNet network's rescaling.
            keras2.save(os.path.join(out, f"{net}_plain_tf_keras_saved"))
            # The Keras 2 model users build: the ImageNet file is NET_keras2.h5.
            files[top_file] = os.path.join(out, f"{net}_keras2.h5")
            files[f"{name.lower()}_notop.h5"] = keras2_notop(
                name, size, keras2, os.path.join(tmp, f"{name.lower()}_notop.h5"))
            keras2 = getattr(tf_keras.applications, name)(weights="imagenet", classes=1000)
        # TF2's object-based files, keyed by paths through Python objects: a SavedModel of
        # each Keras (Keras 3's by `tf.saved_model.save`, tf-keras's by `model.save` of a
        # folder, its default, which keeps the configuration too) and Keras 3's
        # `tf.train.Checkpoint`.
        tf.saved_model.save(model, os.path.join(out, f"{net}_saved"))
        model.export(os.path.join(out, f"{net}_exported"))
        keras2.save(os.path.join(out, f"{net}_tf_keras_saved"))
        tf.train.Checkpoint(model=model).save(os.path.join(out, f"{net}_checkpoint", "ckpt"))

        inputs = random_inputs(net, rng, 2, size)
        inputs.tofile(os.path.join(out, "inputs.f32"))
        logits = logits_of(model, inputs)
        # Keras 2's copy computes the same network: its probabilities are Keras 3's, but for
        # float rounding (5e-6 of 0.12 on 2026-12-03).
        probs = np.asarray(model(inputs))
        assert np.allclose(np.asarray(keras2(inputs)), probs, rtol=1e-3, atol=2e-5)
        expected = {"inputs_logits": logits.tolist(), "images": []}
        if imagenet:
            plain = plain_model(name, model)
            expected["logits_without_imagenet_rescaling"] = logits_of(plain, inputs).tolist()
            plain.save(os.path.join(out, f"{net}_plain.keras"))
            keras2.save(os.path.join(out, f"{net}_model_keras2.h5"))
        for path, x in zip(sorted(os.listdir(os.path.join(out, "images"))), pictures_in):
            probs = np.asarray(model(x))[0]
            top = np.argsort(-probs)[:5]
            expected["images"].append({"file": path, "top5": top.tolist(),
                                       "probs": probs[top].tolist()})
            print(path, top.tolist(), probs[top].round(4).tolist())
        # The channels the top pools (MobileNetV3's `conv_2` widens them before its classifier).
        features = [layer for layer in model.layers
                    if isinstance(layer, keras.layers.GlobalAveragePooling2D)][-1].input.shape[-1]
        head = [rng.normal(0, 0.15, (features, 5)).astype(np.float32),
                rng.normal(0, 0.5, 5).astype(np.float32)]
        transfer3 = transfer(keras, net, model, head)
        transfer3.save_weights(os.path.join(out, "transfer.weights.h5"))
        unnamed(os.path.join(out, "transfer.weights.h5"),
                os.path.join(out, "transfer_unnamed.weights.h5"))
        transfer3.save(os.path.join(out, "transfer.keras"))
        transfer2 = transfer(tf_keras, net, keras2, head)
        transfer2.save_weights(os.path.join(out, "transfer_keras2.h5"))
        tf.saved_model.save(transfer3, os.path.join(out, "transfer_saved"))
        transfer2.save(os.path.join(out, "transfer_tf_keras_saved"))
        tf.train.Checkpoint(model=transfer3).save(os.path.join(out, "transfer_checkpoint", "ckpt"))
    transfer_logits = np.asarray(transfer3(inputs))
    assert np.allclose(np.asarray(transfer2(inputs)), transfer_logits, rtol=1e-3, atol=1e-3)
    expected["transfer_logits"] = transfer_logits.tolist()
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f)
    if listing:
        layer_list(os.path.join(out, f"{net}_keras2.h5"), listing)
    print("wrote", out)


if __name__ == "__main__":
    main(*sys.argv[1:])
