"""Inception v3's training step in TF Keras, f32 or `mixed_bfloat16`: the peer of the Inception
rows of `bench_models`.

Run by hand with TensorFlow installed (never in CI); `side_by_side.py` runs both sides in turn:

    python bench/peers/tf_inception_step.py [--precision f32|bf16] [--reps 3]

`tf.keras.applications.InceptionV3` (no weights, 1001 classes, no auxiliary head: Keras has
none), batch 32 of 299x299x3, plain SGD at 0.01 on the sparse cross-entropy, as one
`tf.function` (forward, backward, update), the loss read back. With `--precision bf16` the model
is built under Keras's `mixed_bfloat16` policy: f32 variables, bf16 compute, f32 loss. Prints
the mean milliseconds per image of `--reps` steps after two warm-up steps.
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
    parser.add_argument("--precision", choices=["f32", "bf16"], default="f32")
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    if args.precision == "bf16":
        tf.keras.mixed_precision.set_global_policy("mixed_bfloat16")
    model = tf.keras.applications.InceptionV3(weights=None, classes=1001, classifier_activation=None)
    optimizer = tf.keras.optimizers.SGD(0.01)
    rng = np.random.default_rng(0)
    images = tf.constant(rng.uniform(-1, 1, [BATCH, 299, 299, 3]).astype(np.float32))
    labels = tf.constant(np.arange(BATCH) % 1001)

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
    print(f"TensorFlow {tf.__version__}, CPU, Inception v3 {args.precision}, batch {BATCH}")
    print(f"train step ms/image {per_image:.2f}")


if __name__ == "__main__":
    main()
