"""TensorFlow's CIFAR-10 tutorial step, per layer and whole: the peer of `bench_step`.

Run by hand with TensorFlow installed (never in CI), right before or after our side:

    python bench/peers/tf_cifar10_step.py [--reps 20]
    cargo run --release -p towers-bench --bin bench_step

The net is `cifar10.py`'s (conv1 5x5x64, pool 3x3/2 SAME, LRN(4, 1, 0.001/9, 0.75), conv2,
LRN, pool, local3 384, local4 192, softmax_linear; weight decay 0.004 on local3/local4),
batch 128 of 24x24x3 (NHWC, TF's layout), plain SGD at 0.1, as `tf.function` graphs.

With `--precision bf16`, the net computes as Keras's `mixed_bfloat16` policy does: variables
stay f32 and are cast to bf16 where a layer uses them, the images are cast to bf16, every layer
(convolutions, pools, dense; LRN, which has no bf16 CPU kernel, in f32 between casts) runs in
bf16, and the logits are cast back to f32 for the
loss; oneDNN then runs the products on AMX where the CPU has it. (Ours keeps activations in
f32 and rounds only the products' operands: `towers_models::Precision`.)

Each layer is timed in isolation as `bench_step` times ours: forward alone, then forward and
backward (the gradient of the output's sum, with respect to the layer's weights and, except
for conv1 whose input is the images, its input); backward is the difference. Then the whole
step: the loss forward, forward+backward, and forward+backward+update. Medians of `--reps`
calls after a warm-up.
"""

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

BATCH = 128


def variables(rng):
    def v(shape, stddev, name):
        return tf.Variable(rng.normal(0, stddev, shape).astype(np.float32), name=name)

    return {
        "conv1/w": v([5, 5, 3, 64], 5e-2, "conv1/w"),
        "conv1/b": tf.Variable(tf.zeros([64]), name="conv1/b"),
        "conv2/w": v([5, 5, 64, 64], 5e-2, "conv2/w"),
        "conv2/b": tf.Variable(tf.fill([64], 0.1), name="conv2/b"),
        "local3/w": v([6 * 6 * 64, 384], 0.04, "local3/w"),
        "local3/b": tf.Variable(tf.fill([384], 0.1), name="local3/b"),
        "local4/w": v([384, 192], 0.04, "local4/w"),
        "local4/b": tf.Variable(tf.fill([192], 0.1), name="local4/b"),
        "softmax/w": v([192, 10], 1 / 192, "softmax/w"),
        "softmax/b": tf.Variable(tf.zeros([10]), name="softmax/b"),
    }


COMPUTE = tf.float32


def cast(v):
    """A variable as the layers compute with it (Keras casts variables to the compute type)."""
    return tf.cast(v, COMPUTE)


def layers(w):
    """(name, function, input shape, weights it owns, input differentiated) in order."""
    conv = lambda k, b: lambda x: tf.nn.relu(  # noqa: E731
        tf.nn.bias_add(tf.nn.conv2d(x, cast(w[k]), [1, 1, 1, 1], "SAME"), cast(w[b]))
    )
    pool = lambda x: tf.nn.max_pool2d(x, 3, 2, "SAME")  # noqa: E731
    # TF's CPU LRN has no bf16 kernel: in bf16 it runs in f32 between casts.
    lrn = lambda x: tf.cast(  # noqa: E731
        tf.nn.lrn(tf.cast(x, tf.float32), 4, bias=1.0, alpha=0.001 / 9.0, beta=0.75), x.dtype
    )
    dense = lambda k, b, act: lambda x: act(tf.matmul(x, cast(w[k])) + cast(w[b]))  # noqa: E731
    return [
        ("conv1 + relu", conv("conv1/w", "conv1/b"), [BATCH, 24, 24, 3], ["conv1/w", "conv1/b"], False),
        ("pool1", pool, [BATCH, 24, 24, 64], [], True),
        ("norm1 (LRN)", lrn, [BATCH, 12, 12, 64], [], True),
        ("conv2 + relu", conv("conv2/w", "conv2/b"), [BATCH, 12, 12, 64], ["conv2/w", "conv2/b"], True),
        ("norm2 (LRN)", lrn, [BATCH, 12, 12, 64], [], True),
        ("pool2", pool, [BATCH, 12, 12, 64], [], True),
        (
            "flatten + local3 + relu",
            lambda x: dense("local3/w", "local3/b", tf.nn.relu)(tf.reshape(x, [BATCH, -1])),
            [BATCH, 6, 6, 64],
            ["local3/w", "local3/b"],
            True,
        ),
        ("local4 + relu", dense("local4/w", "local4/b", tf.nn.relu), [BATCH, 384], ["local4/w", "local4/b"], True),
        ("softmax_linear", dense("softmax/w", "softmax/b", tf.identity), [BATCH, 192], ["softmax/w", "softmax/b"], True),
    ]


def median_ms(f, reps):
    f()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        f()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def per_layer(w, reps, rng):
    rows = []
    for name, f, shape, owned, wrt_input in layers(w):
        x = tf.constant(rng.uniform(-1, 1, shape).astype(np.float32), dtype=COMPUTE)
        params = [w[k] for k in owned]
        forward = tf.function(lambda x=x, f=f: tf.reduce_sum(f(x)))

        @tf.function
        def both(x=x, f=f, params=params, wrt_input=wrt_input):
            with tf.GradientTape() as tape:
                if wrt_input:
                    tape.watch(x)
                y = tf.reduce_sum(f(x))
            return tape.gradient(y, params + ([x] if wrt_input else []))

        fwd = median_ms(lambda: forward().numpy(), reps)
        fwd_bwd = median_ms(lambda: [g.numpy() for g in both()], reps)
        rows.append((name, fwd, fwd_bwd))
    return rows


def whole_step(w, reps, rng):
    images = tf.constant(rng.uniform(-1, 1, [BATCH, 24, 24, 3]).astype(np.float32))
    labels = tf.constant(np.arange(BATCH) % 10)
    fns = [f for _, f, _, _, _ in layers(w)]
    params = list(w.values())

    def loss():
        x = tf.cast(images, COMPUTE)
        for f in fns:
            x = f(x)
        x = tf.cast(x, tf.float32)
        xent = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, x))
        decay = 0.004 * (tf.nn.l2_loss(w["local3/w"]) + tf.nn.l2_loss(w["local4/w"]))
        return xent + decay

    forward = tf.function(loss)

    @tf.function
    def grads():
        with tf.GradientTape() as tape:
            value = loss()
        return tape.gradient(value, params)

    optimizer = tf.keras.optimizers.SGD(0.1)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            value = loss()
        optimizer.apply_gradients(zip(tape.gradient(value, params), params))
        return value

    return [
        ("whole net: loss forward", median_ms(lambda: forward().numpy(), reps)),
        ("whole net: forward+backward", median_ms(lambda: [g.numpy() for g in grads()], reps)),
        ("whole step: forward+backward+SGD", median_ms(lambda: step().numpy(), reps)),
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--precision", choices=["f32", "bf16"], default="f32")
    parser.add_argument("--whole-step-only", action="store_true")
    args = parser.parse_args()
    global COMPUTE
    COMPUTE = tf.bfloat16 if args.precision == "bf16" else tf.float32
    rng = np.random.default_rng(0)
    w = variables(rng)
    print(f"TensorFlow {tf.__version__}, CPU, {args.precision}, batch {BATCH}, median of {args.reps}, ms")
    if not args.whole_step_only:
        print(f"{'layer':<34} {'forward':>8} {'backward':>9} {'fwd+bwd':>8}")
        total = [0.0, 0.0]
        for name, fwd, fwd_bwd in per_layer(w, args.reps, rng):
            total[0] += fwd
            total[1] += fwd_bwd
            print(f"{name:<34} {fwd:>8.2f} {fwd_bwd - fwd:>9.2f} {fwd_bwd:>8.2f}")
        print(f"{'sum of layers':<34} {total[0]:>8.2f} {total[1] - total[0]:>9.2f} {total[1]:>8.2f}")
    for name, ms in whole_step(w, args.reps, rng):
        print(f"{name:<34} {ms:>8.2f}")
    step_ms = ms
    print(f"training: {BATCH / step_ms * 1e3:.0f} examples/s")


if __name__ == "__main__":
    main()
