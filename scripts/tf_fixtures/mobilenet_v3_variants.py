"""Writes keras.applications' MobileNetV3 at another width and minimalistic (random weights,
1000 classes, made informative as keras_applications.py makes its networks) in tf-keras's and
Keras 3's weight files, and Keras's logits for them, for the test that our widths and
minimalistic networks are Keras's (tests/keras_applications.rs). Not committed:

    /tmp/peers/bin/python scripts/tf_fixtures/mobilenet_v3_variants.py OUT_DIR
    TOWERS_KERAS_MOBILENET_V3_VARIANTS=OUT_DIR cargo test --workspace --test integration keras_applications

OUT_DIR gets, for each of `large_075` (MobileNetV3Large, alpha 0.75) and `small_minimalistic`
(MobileNetV3Small, minimalistic): NAME_keras2.h5 (tf-keras's `save_weights`, the format of
Keras's ImageNet files for them) and NAME.weights.h5 (Keras 3's); inputs.f32 (2 x 224 x 224 x 3
f32, NHWC, raw pixels in [0, 255]) and expected.json (the logits of inputs.f32 under each, by
NAME).
"""
import json
import os
import sys

import keras
import numpy as np
import tf_keras

from keras_applications import informative, keras3_name, logits_of, random_inputs

# Each variant: keras.applications' class, and its `alpha` and `minimalistic`.
VARIANTS = {
    "large_075": ("MobileNetV3Large", 0.75, False),
    "small_minimalistic": ("MobileNetV3Small", 1.0, True),
}


def keras2_copy(name, alpha, minimalistic, model):
    """tf-keras's network of the same class and options with `model`'s weights, layer by
    layer by Keras 3's spelling of tf-keras's names."""
    keras2 = getattr(tf_keras.applications, name)(
        alpha=alpha, minimalistic=minimalistic, weights=None, classes=1000)
    copied = set()
    for layer in keras2.layers:
        if layer.weights:
            own = keras3_name("mobilenet_v3_large", layer.name)
            layer.set_weights(model.get_layer(own).get_weights())
            copied.add(own)
    assert copied == {layer.name for layer in model.layers if layer.weights}
    return keras2


def main(out):
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(11)
    keras.utils.set_random_seed(11)
    inputs = random_inputs("mobilenet_v3_large", rng, 2, 224)
    inputs.tofile(os.path.join(out, "inputs.f32"))
    expected = {}
    for variant, (name, alpha, minimalistic) in VARIANTS.items():
        model = getattr(keras.applications, name)(
            alpha=alpha, minimalistic=minimalistic, weights=None, classes=1000)
        informative(model, rng, random_inputs("mobilenet_v3_large", rng, 6, 224))
        model.save_weights(os.path.join(out, f"{variant}.weights.h5"))
        keras2 = keras2_copy(name, alpha, minimalistic, model)
        keras2.save_weights(os.path.join(out, f"{variant}_keras2.h5"))
        logits = logits_of(model, inputs)
        probs = np.asarray(model(inputs))
        assert np.allclose(np.asarray(keras2(inputs)), probs, rtol=1e-3, atol=2e-5)
        expected[variant] = logits.tolist()
        print(variant, model.count_params(), np.abs(logits).max())
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f)
    print("wrote", out)


if __name__ == "__main__":
    main(*sys.argv[1:])
