"""Inception v3's, ResNet-50's, ResNet50V2's or MobileNetV2's training step in TF Keras, f32 or
`mixed_bfloat16`: the peer of the Inception, ResNet-50, ResNet50V2 and MobileNetV2 rows of
`bench_models`.

Run by hand with TensorFlow installed (never in CI); `side_by_side.py` runs both sides in turn:

    python bench/peers/tf_keras_step.py [--model inception|resnet50|resnet50v2|mobilenet_v2|efficientnet_b0|mobilenet_v3_large] [--precision f32|bf16] [--reps 3]

`tf.keras.applications.InceptionV3` (no weights, 1001 classes, no auxiliary head: Keras has
none; batch 32 of 299x299x3), `ResNet50`, `ResNet50V2` or `MobileNetV2` (no weights, 1000
classes; batch 32 of 224x224x3),
plain SGD at 0.01 on the sparse cross-entropy, as one `tf.function` (forward, backward,
update), the loss read back. With `--precision bf16` the model is built under Keras's
`mixed_bfloat16` policy: f32 variables, bf16 compute, f32 loss. Prints the mean milliseconds
per image of `--reps` steps after two warm-up steps.
"""

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

BATCH = 32


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=["inception", "resnet50", "resnet50v2", "mobilenet_v2",
                                            "efficientnet_b0", "mobilenet_v3_large"],
                        default="inception")
    parser.add_argument("--precision", choices=["f32", "bf16"], default="f32")
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    if args.precision == "bf16":
        tf.keras.mixed_precision.set_global_policy("mixed_bfloat16")
    application, size, classes, name = {
        "inception": (tf.keras.applications.InceptionV3, 299, 1001, "Inception v3"),
        "resnet50": (tf.keras.applications.ResNet50, 224, 1000, "ResNet-50"),
        "resnet50v2": (tf.keras.applications.ResNet50V2, 224, 1000, "ResNet50V2"),
        "mobilenet_v2": (tf.keras.applications.MobileNetV2, 224, 1000, "MobileNetV2"),
        "efficientnet_b0": (tf.keras.applications.EfficientNetB0, 224, 1000, "EfficientNet-B0"),
        "mobilenet_v3_large": (tf.keras.applications.MobileNetV3Large, 224, 1000,
                               "MobileNetV3-Large"),
    }[args.model]
    model = application(weights=None, classes=classes, classifier_activation=None)
    optimizer = tf.keras.optimizers.SGD(0.01)
    rng = np.random.default_rng(0)
    images = tf.constant(rng.uniform(-1, 1, [BATCH, size, size, 3]).astype(np.float32))
    labels = tf.constant(np.arange(BATCH) % classes)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            logits = tf.cast(model(images, training=True), tf.float32)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    for _ in range(2):
        step().numpy()
    start = time.perf_counter()
    for _ in range(args.reps):
        step().numpy()
    per_image = (time.perf_counter() - start) / args.reps / BATCH * 1e3
    print(f"TensorFlow {tf.__version__}, CPU, {name} {args.precision}, batch {BATCH}")
    print(f"train step ms/image {per_image:.2f}")


if __name__ == "__main__":
    main()
