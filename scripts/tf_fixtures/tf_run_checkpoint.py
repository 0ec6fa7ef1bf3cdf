"""Writes the TF training runs of crates/train/tests/data/tf_runs: train directories a TF 1.x
trainer left, for `--resume` to continue.

Each run is the CIFAR-10 tutorial's graph (cifar10_checkpoint.py's, at 4x4 images to keep the
files small) fine-tuned as TF-slim's `--trainable_scopes` does (the optimizer's `var_list`), by
`tf.train.Saver` (V2 format, a `checkpoint` state file): its variables, `global_step`, the
optimizer's slots and, for the RMSProp run, the moving averages of the trained variables
(inception_train.py's `ExponentialMovingAverage(0.9999, global_step)`).

    rmsprop/   RMSPropOptimizer(decay 0.9, momentum 0.9, epsilon 1.0), Inception's trainer's:
               slots `RMSProp` (mean square, starts at 1) and `RMSProp_1` (momentum); local4 and
               softmax_linear trained
    momentum/  MomentumOptimizer(momentum 0.9): slot `Momentum`; softmax_linear trained
    adam/      AdamOptimizer(0.9, 0.999, epsilon 1.0, TF-slim's --opt_epsilon): slots `Adam` and
               `Adam_1`, `beta1_power` and `beta2_power`; softmax_linear trained
    centered_rmsprop/  RMSProp centered: slots `RMSProp`, `RMSProp_1` (the mean gradient) and
               `RMSProp_2` (momentum); softmax_linear trained (not continued here: refused)

Each run trains STEPS steps (the Adam run 900, past where `beta1_power`, 0.9^901, leaves f32's
normal numbers) on the 200 images of tf_cifar10/test_batch.bin (the whole file each step), saves
`model.ckpt-STEPS`, then goes on for CONTINUE more steps as TF would after a
restore; expected.json holds those steps' losses and the trained variables (and their averages)
after them: sums, absolute sums and the first values in TF's layout. The learning rate is
piecewise constant at the save's step (0.01 up to and including it, then 0.003), so a
continuation that lost the step takes the wrong rate.

The frozen variables are rounded to multiples of 1/64 before training (git compresses them).

    /tmp/tfvenv/bin/python scripts/tf_fixtures/tf_run_checkpoint.py crates/train/tests/data/tf_runs
"""
import json
import os
import sys

import numpy as np
import tensorflow.compat.v1 as tf

sys.path.insert(0, os.path.dirname(__file__))
from cifar10_checkpoint import inference, loss, preprocess  # noqa: E402

tf.disable_eager_execution()

SIZE = 4
STEPS = 6
CONTINUE = 2
HEAD = 16
TEST_BATCH = os.path.join(os.path.dirname(__file__),
                          "../../crates/models/tests/data/tf_cifar10/test_batch.bin")

RUNS = {
    "rmsprop": dict(optimizer=lambda lr: tf.train.RMSPropOptimizer(lr, 0.9, momentum=0.9,
                                                                  epsilon=1.0),
                    scopes=["local4", "softmax_linear"], averages=True),
    "momentum": dict(optimizer=lambda lr: tf.train.MomentumOptimizer(lr, 0.9),
                     scopes=["softmax_linear"], averages=False),
    "adam": dict(optimizer=lambda lr: tf.train.AdamOptimizer(lr, 0.9, 0.999, epsilon=1.0),
                 scopes=["softmax_linear"], averages=False, steps=900),
    "centered_rmsprop": dict(optimizer=lambda lr: tf.train.RMSPropOptimizer(
        lr, 0.9, momentum=0.9, epsilon=1.0, centered=True), scopes=["softmax_linear"],
        averages=False),
}


def read_cifar_bin(path):
    raw = np.fromfile(path, np.uint8).reshape(-1, 1 + 3 * 32 * 32)
    return raw[:, 1:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1), raw[:, 0].astype(np.int64)


def summary(values):
    flat = np.asarray(values, np.float64).reshape(-1)
    return {"sum": float(flat.sum()), "abs_sum": float(np.abs(flat).sum()),
            "head": flat[:HEAD].tolist()}


def write_run(out, name, run, images, labels):
    tf.reset_default_graph()
    tf.set_random_seed(5)
    global_step = tf.train.get_or_create_global_step()
    x = tf.constant(images)
    y = tf.constant(labels)
    total_loss = loss(inference(preprocess(x, SIZE)), y)
    trained = [v for v in tf.trainable_variables() if v.op.name.split("/")[0] in run["scopes"]]
    frozen = [v for v in tf.trainable_variables() if v not in trained]
    steps = run.get("steps", STEPS)
    lr = tf.train.piecewise_constant(global_step, [steps], [0.01, 0.003])
    opt = run["optimizer"](lr)
    train_op = opt.apply_gradients(opt.compute_gradients(total_loss, trained),
                                   global_step=global_step)
    shadows = {}
    if run["averages"]:
        averages = tf.train.ExponentialMovingAverage(0.9999, global_step)
        with tf.control_dependencies([train_op]):
            train_op = averages.apply(trained)
        shadows = {v.op.name: averages.average(v) for v in trained}
    saver = tf.train.Saver()
    run_dir = os.path.join(out, name)
    os.makedirs(run_dir, exist_ok=True)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for v in frozen:
            sess.run(v.assign(np.round(sess.run(v) * 64) / 64))
        if shadows:  # the shadows start at their variables' (rounded) values
            sess.run([s.assign(v) for v, s in zip(trained, shadows.values())])
        for _ in range(steps):
            sess.run(train_op)
        saver.save(sess, os.path.join(run_dir, "model.ckpt"), global_step=global_step,
                   write_meta_graph=False)
        losses = []
        for _ in range(CONTINUE):
            losses.append(float(sess.run(total_loss)))
            sess.run(train_op)
        after = {v.op.name: summary(sess.run(v)) for v in trained}
        after.update({s.op.name: summary(sess.run(s)) for s in shadows.values()})
        expected = {"checkpoint_step": steps, "image_size": SIZE, "scopes": run["scopes"],
                    "learning_rates": [0.01, 0.003], "losses": losses, "after": after,
                    "step_after": int(sess.run(global_step))}
    with open(os.path.join(run_dir, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
    print(name, "losses", losses, "variables", [n for n, _ in tf.train.list_variables(
        os.path.join(run_dir, f"model.ckpt-{steps}"))])


def main(out):
    images, labels = read_cifar_bin(TEST_BATCH)
    for name, run in RUNS.items():
        write_run(out, name, run, images, labels)


if __name__ == "__main__":
    main(sys.argv[1])
