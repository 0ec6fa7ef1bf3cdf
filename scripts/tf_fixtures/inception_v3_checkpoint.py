"""Writes a TF-slim Inception v3 checkpoint (random weights, 1001 classes) and TF's outputs
for it, for the tests that need a full Inception v3 checkpoint (about 95 MB, not committed).

    /work/venv-tf/bin/python scripts/tf_fixtures/inception_v3_checkpoint.py OUT_DIR [VARIABLE_LIST]
    TOWERS_TF_INCEPTION_V3=OUT_DIR cargo test --workspace --test integration tf_inception_v3

The network is tf_slim's `nets.inception_v3` under `inception_v3_arg_scope`, as the published
`inception_v3.ckpt` was written. Weights are the slim initializers, then made informative for a
test: every batch-norm beta random, the logits weights larger (so the classes spread), and the
moving statistics those of a batch of the two pictures, flipped and not, and 4 random
images (one training pass with decay 0), so that every input gives logits of a sensible scale.

OUT_DIR gets: model.ckpt-0.{index,data-*}, `checkpoint`, inputs.f32 (2 x 299 x 299 x 3 f32,
NHWC, already in [-1, 1]), images/*.png (2 images), expected.json (logits of inputs.f32, and
for the PNG images after TF's Inception eval preprocessing: logits, top-5 and probabilities).
VARIABLE_LIST, when given, gets every variable's name and shape (committed as test data).
"""
import json
import os
import sys

import numpy as np
import tensorflow.compat.v1 as tf
import tf_keras.src.legacy_tf_layers.normalization
from tf_slim.nets import inception_v3 as slim_v3

import tf_slim as slim
from pictures import pictures

# tf_slim's batch_norm loads TF's legacy layers from `tf_keras.legacy_tf_layers`, which
# tf-keras 2.21 (`pip install tf-keras`) ships under `tf_keras.src`.
sys.modules["tf_keras.legacy_tf_layers"] = sys.modules["tf_keras.src.legacy_tf_layers"]
sys.modules["tf_keras.legacy_tf_layers.normalization"] = tf_keras.src.legacy_tf_layers.normalization
tf.disable_eager_execution()
SIZE = 299


def eval_preprocess(png):
    """TF's Inception eval_image: central crop 0.875, bilinear resize (TF 1.x), scale to [-1, 1]."""
    image = tf.image.convert_image_dtype(tf.image.decode_png(png, channels=3), tf.float32)
    image = tf.image.central_crop(image, central_fraction=0.875)
    image = tf.image.resize_bilinear(tf.expand_dims(image, 0), [SIZE, SIZE], align_corners=False)
    return (image - 0.5) * 2.0


def main(out, variable_list=None):
    os.makedirs(os.path.join(out, "images"), exist_ok=True)
    rng = np.random.default_rng(5)
    tf.set_random_seed(5)
    images = tf.placeholder(tf.float32, [None, SIZE, SIZE, 3])
    arg_scope = slim_v3.inception_v3_arg_scope(batch_norm_decay=0.0)
    with slim.arg_scope(arg_scope):
        slim_v3.inception_v3(images, num_classes=1001, is_training=True)
        logits, end_points = slim_v3.inception_v3(images, num_classes=1001, is_training=False,
                                                  reuse=True)
    update_stats = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
    variables = tf.global_variables()
    saver = tf.train.Saver(variables)
    global_step = tf.train.get_or_create_global_step()
    saver = tf.train.Saver(variables + [global_step])
    pngs = [open(p, "rb").read() for p in pictures(rng, out)]
    png = tf.placeholder(tf.string)
    preprocessed = eval_preprocess(png)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for v in variables:
            name = v.op.name
            if name.endswith("BatchNorm/beta"):
                sess.run(v.assign(rng.normal(0, 0.2, v.shape.as_list())))
            elif name.endswith("Conv2d_1c_1x1/weights") or name.endswith("Conv2d_2b_1x1/weights"):
                sess.run(v.assign(rng.normal(0, 0.15, v.shape.as_list())))
            elif name.endswith("biases"):
                sess.run(v.assign(rng.normal(0, 0.5, v.shape.as_list())))
        pictures_in = [sess.run(preprocessed, {png: data}) for data in pngs]
        noise = rng.uniform(-1, 1, (4, SIZE, SIZE, 3)).astype(np.float32)
        flipped = [p[:, :, ::-1] for p in pictures_in]
        sess.run(update_stats, {images: np.concatenate(pictures_in + flipped + [noise])})
        inputs = rng.uniform(-1, 1, (2, SIZE, SIZE, 3)).astype(np.float32)
        inputs.tofile(os.path.join(out, "inputs.f32"))
        expected = {"inputs_logits": sess.run(logits, {images: inputs}).tolist(), "images": []}
        for path, x in zip(sorted(os.listdir(os.path.join(out, "images"))), pictures_in):
            lg, probs = sess.run([logits, end_points["Predictions"]], {images: x})
            top = np.argsort(-probs[0])[:5]
            expected["images"].append({"file": path, "logits": lg[0].tolist(),
                                       "top5": top.tolist(),
                                       "probs": probs[0][top].tolist()})
            print(path, top.tolist(), probs[0][top].round(4).tolist())
        prefix = saver.save(sess, os.path.join(out, "model.ckpt"), global_step=0,
                            write_meta_graph=False)
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f)
    if variable_list:
        with open(variable_list, "w") as f:
            for name, shape in tf.train.list_variables(prefix):
                f.write(f"{name}\t{shape}\n")
    print("wrote", prefix)


if __name__ == "__main__":
    main(*sys.argv[1:])
