"""Writes the TF CIFAR-10 tutorial checkpoint fixture of crates/models/tests/data/tf_cifar10.

The graph is the tutorial's (tensorflow/models tutorials/image/cifar10/cifar10.py), built with
tf.compat.v1 as TF 1.x built it: the same variable names, initializers, weight-decay losses,
loss averages (`.../avg`), moving averages of the weights (`.../ExponentialMovingAverage`) and
`global_step`, saved by `tf.train.Saver` (V2 format). To keep the fixture small the images are
12x12 instead of 24x24 (local3/weights is [576, 384] instead of [2304, 384]); the full-size
variable list is written too (variables_24x24.txt) from a checkpoint saved to a temporary dir.

Also written: a 200-image `test_batch.bin` (CIFAR-10 binary), TF's evaluation of it as
`cifar10_eval.py` does it (moving averages restored, in_top_k), and for 4 of its images TF's
preprocessed input and logits (raw weights and moving averages) in expected.json.

    /work/venv-tf/bin/python scripts/tf_fixtures/cifar10_checkpoint.py crates/models/tests/data/tf_cifar10
"""
import json
import os
import sys
import tempfile

import numpy as np
import tensorflow.compat.v1 as tf

tf.disable_eager_execution()

NUM_CLASSES = 10
MOVING_AVERAGE_DECAY = 0.9999
SMALL = 12  # image side of the committed checkpoint
TEST_IMAGES = 200


def _variable_on_cpu(name, shape, initializer):
    with tf.device("/cpu:0"):
        return tf.get_variable(name, shape, initializer=initializer, dtype=tf.float32)


def _variable_with_weight_decay(name, shape, stddev, wd):
    var = _variable_on_cpu(name, shape, tf.truncated_normal_initializer(stddev=stddev))
    if wd is not None:
        weight_decay = tf.multiply(tf.nn.l2_loss(var), wd, name="weight_loss")
        tf.add_to_collection("losses", weight_decay)
    return var


def inference(images):
    """The tutorial's cifar10.inference, line for line."""
    with tf.variable_scope("conv1") as scope:
        kernel = _variable_with_weight_decay("weights", [5, 5, 3, 64], 5e-2, None)
        conv = tf.nn.conv2d(images, kernel, [1, 1, 1, 1], padding="SAME")
        biases = _variable_on_cpu("biases", [64], tf.constant_initializer(0.0))
        conv1 = tf.nn.relu(tf.nn.bias_add(conv, biases), name=scope.name)
    pool1 = tf.nn.max_pool(conv1, [1, 3, 3, 1], [1, 2, 2, 1], padding="SAME", name="pool1")
    norm1 = tf.nn.lrn(pool1, 4, bias=1.0, alpha=0.001 / 9.0, beta=0.75, name="norm1")
    with tf.variable_scope("conv2") as scope:
        kernel = _variable_with_weight_decay("weights", [5, 5, 64, 64], 5e-2, None)
        conv = tf.nn.conv2d(norm1, kernel, [1, 1, 1, 1], padding="SAME")
        biases = _variable_on_cpu("biases", [64], tf.constant_initializer(0.1))
        conv2 = tf.nn.relu(tf.nn.bias_add(conv, biases), name=scope.name)
    norm2 = tf.nn.lrn(conv2, 4, bias=1.0, alpha=0.001 / 9.0, beta=0.75, name="norm2")
    pool2 = tf.nn.max_pool(norm2, [1, 3, 3, 1], [1, 2, 2, 1], padding="SAME", name="pool2")
    with tf.variable_scope("local3") as scope:
        reshape = tf.reshape(pool2, [images.get_shape().as_list()[0], -1])
        dim = reshape.get_shape()[1]
        weights = _variable_with_weight_decay("weights", [dim, 384], 0.04, 0.004)
        biases = _variable_on_cpu("biases", [384], tf.constant_initializer(0.1))
        local3 = tf.nn.relu(tf.matmul(reshape, weights) + biases, name=scope.name)
    with tf.variable_scope("local4") as scope:
        weights = _variable_with_weight_decay("weights", [384, 192], 0.04, 0.004)
        biases = _variable_on_cpu("biases", [192], tf.constant_initializer(0.1))
        local4 = tf.nn.relu(tf.matmul(local3, weights) + biases, name=scope.name)
    with tf.variable_scope("softmax_linear") as scope:
        weights = _variable_with_weight_decay("weights", [192, NUM_CLASSES], 1 / 192.0, None)
        biases = _variable_on_cpu("biases", [NUM_CLASSES], tf.constant_initializer(0.0))
        return tf.add(tf.matmul(local4, weights), biases, name=scope.name)


def loss(logits, labels):
    cross_entropy = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=tf.cast(labels, tf.int64), logits=logits, name="cross_entropy_per_example")
    tf.add_to_collection("losses", tf.reduce_mean(cross_entropy, name="cross_entropy"))
    return tf.add_n(tf.get_collection("losses"), name="total_loss")


def train(total_loss, global_step):
    """The tutorial's cifar10.train: loss averages, SGD, moving averages of the weights."""
    loss_averages = tf.train.ExponentialMovingAverage(0.9, name="avg")
    losses = tf.get_collection("losses")
    loss_averages_op = loss_averages.apply(losses + [total_loss])
    with tf.control_dependencies([loss_averages_op]):
        opt = tf.train.GradientDescentOptimizer(0.1)
        grads = opt.compute_gradients(total_loss)
    apply_gradient_op = opt.apply_gradients(grads, global_step=global_step)
    variable_averages = tf.train.ExponentialMovingAverage(MOVING_AVERAGE_DECAY, global_step)
    with tf.control_dependencies([apply_gradient_op]):
        return variable_averages.apply(tf.trainable_variables())


def synthetic(n, rng):
    """CIFAR-10-shaped uint8 images [n, 32, 32, 3] with a weak class signal, and labels."""
    labels = rng.integers(0, NUM_CLASSES, n)
    colours = np.linspace(40, 215, NUM_CLASSES)
    images = rng.normal(128, 60, (n, 32, 32, 3))
    for i, label in enumerate(labels):
        images[i, :, :, label % 3] += (colours[label] - 128) * 0.5
        images[i, label::NUM_CLASSES, :, :] += 30
    return np.clip(images, 0, 255).astype(np.uint8), labels


def write_cifar_bin(path, images, labels):
    """CIFAR-10 binary: a label byte, then the red, green and blue 32x32 planes."""
    with open(path, "wb") as f:
        for image, label in zip(images, labels):
            f.write(bytes([label]))
            f.write(image.transpose(2, 0, 1).tobytes())


def preprocess(images, size):
    """cifar10_input.inputs(eval_data=True): central crop or pad, per-image standardization."""
    x = tf.cast(images, tf.float32)
    x = tf.image.resize_with_crop_or_pad(x, size, size)
    return tf.map_fn(tf.image.per_image_standardization, x)


def train_and_save(size, steps, train_dir, rng):
    tf.reset_default_graph()
    tf.set_random_seed(1)
    global_step = tf.train.get_or_create_global_step()
    images, labels = synthetic(64 * 8, rng)
    x = tf.placeholder(tf.uint8, [64, 32, 32, 3])
    y = tf.placeholder(tf.int64, [64])
    logits = inference(preprocess(x, size))
    train_op = train(loss(logits, y), global_step)
    saver = tf.train.Saver()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for step in range(steps):
            i = (step % 8) * 64
            sess.run(train_op, {x: images[i:i + 64], y: labels[i:i + 64]})
        return saver.save(sess, os.path.join(train_dir, "model.ckpt"), global_step=global_step,
                          write_meta_graph=False)


def evaluate(prefix, size, images, labels, moving_averages):
    """cifar10_eval.py: logits, in_top_k(1); moving averages restored in their variables' place."""
    tf.reset_default_graph()
    x = tf.placeholder(tf.uint8, [len(images), 32, 32, 3])
    inputs = preprocess(x, size)
    logits = inference(inputs)
    top_1 = tf.nn.in_top_k(logits, tf.constant(labels, tf.int32), 1)
    if moving_averages:
        averages = tf.train.ExponentialMovingAverage(MOVING_AVERAGE_DECAY)
        saver = tf.train.Saver(averages.variables_to_restore())
    else:
        saver = tf.train.Saver(tf.trainable_variables())
    with tf.Session() as sess:
        saver.restore(sess, prefix)
        return sess.run([inputs, logits, top_1], {x: images})


def variable_list(prefix):
    return "".join(f"{name}\t{shape}\n" for name, shape in tf.train.list_variables(prefix))


def main(out):
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(7)
    prefix = train_and_save(SMALL, 200, out, rng)
    with open(os.path.join(out, "variables_12x12.txt"), "w") as f:
        f.write(variable_list(prefix))
    with tempfile.TemporaryDirectory() as tmp:
        full = train_and_save(24, 1, tmp, rng)
        with open(os.path.join(out, "variables_24x24.txt"), "w") as f:
            f.write(variable_list(full))

    images, labels = synthetic(TEST_IMAGES, np.random.default_rng(11))
    write_cifar_bin(os.path.join(out, "test_batch.bin"), images, labels)
    expected = {"checkpoint": os.path.basename(prefix), "image_size": SMALL,
                "examples": TEST_IMAGES, "labels": labels[:4].tolist()}
    for key, averages in [("raw", False), ("moving_averages", True)]:
        inputs, logits, top_1 = evaluate(prefix, SMALL, images, labels, averages)
        expected[key] = {"correct_at_1": int(top_1.sum()), "logits": logits[:4].tolist()}
        print(f"{key}: precision @ 1 = {top_1.mean():.4f} ({top_1.sum()}/{TEST_IMAGES})")
    # NHWC, as TF's graph saw them.
    expected["inputs_nhwc"] = inputs[:4].tolist()
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f)


if __name__ == "__main__":
    main(sys.argv[1])
