"""Writes the train directory of a TF-slim Inception v3 run as `train_image_classifier.py`
leaves it (not committed: about 400 MB), for continuing it by hand:

    /tmp/tfvenv/bin/python scripts/tf_fixtures/slim_inception_run.py /tmp/slim_run [STEPS]
    cargo run --release --example inception -- --train-dir /tmp/slim_run --resume \
        --num-classes 1001 --max-steps $((STEPS + 2))

The graph is tf_slim's `nets.inception_v3` (1001 classes, auxiliary logits) under
`inception_v3_arg_scope`, trained as train_image_classifier.py trains it with its defaults but
the batch (2 random 299x299 images): the losses of both heads with label smoothing 0 and the
arg scope's weight decay, RMSProp (decay 0.9, momentum 0.9, `--opt_epsilon` 1.0), the batch
norms' `UPDATE_OPS`, `--moving_average_decay` 0.9999 over the trainable and moving-average
variables, `global_step`; saved by `tf.train.Saver` (V2, a `checkpoint` state file).
"""
import os
import sys

import numpy as np
import tensorflow.compat.v1 as tf
import tf_keras.src.legacy_tf_layers.normalization
from tf_slim.nets import inception_v3 as slim_v3

import tf_slim as slim

# As inception_v3_checkpoint.py: tf_slim's batch_norm under tf-keras 2.21.
sys.modules["tf_keras.legacy_tf_layers"] = sys.modules["tf_keras.src.legacy_tf_layers"]
sys.modules["tf_keras.legacy_tf_layers.normalization"] = tf_keras.src.legacy_tf_layers.normalization
tf.disable_eager_execution()


def main(out, steps):
    tf.set_random_seed(3)
    global_step = tf.train.get_or_create_global_step()
    rng = np.random.default_rng(3)
    images = tf.constant(rng.uniform(-1, 1, (2, 299, 299, 3)).astype(np.float32))
    labels = tf.one_hot([3, 700], 1001)
    with slim.arg_scope(slim_v3.inception_v3_arg_scope()):
        logits, end_points = slim_v3.inception_v3(images, num_classes=1001, is_training=True)
    tf.losses.softmax_cross_entropy(labels, end_points["AuxLogits"], weights=0.4)
    tf.losses.softmax_cross_entropy(labels, logits)
    total_loss = tf.add_n(tf.losses.get_losses() + tf.losses.get_regularization_losses())
    averages = tf.train.ExponentialMovingAverage(0.9999, global_step)
    moving_average_variables = slim.get_model_variables()
    update_ops = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
    update_ops.append(averages.apply(moving_average_variables))
    opt = tf.train.RMSPropOptimizer(0.01, decay=0.9, momentum=0.9, epsilon=1.0)
    train_op = opt.minimize(total_loss, global_step=global_step)
    with tf.control_dependencies([train_op] + update_ops):
        train_op = tf.identity(total_loss)
    saver = tf.train.Saver()
    os.makedirs(out, exist_ok=True)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for step in range(steps):
            print("step", step + 1, "loss", sess.run(train_op))
        saver.save(sess, os.path.join(out, "model.ckpt"), global_step=global_step)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 2)
