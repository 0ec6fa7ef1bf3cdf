"""TF's own top-5 probabilities for JPEG photos under a TF-slim Inception v3 checkpoint written
by TF, against ours (`classify --json`): the check that our JPEG decoding and evaluation
preprocessing give TF's classification of real photos, not only of PNGs.

    python scripts/tf_fixtures/classify_top5.py OUT_DIR [--ours CLASSIFY_BINARY] [JPEG...]

OUT_DIR: a checkpoint written by inception_v3_checkpoint.py (seeded random weights, scaled so
that the softmax is far from flat); written there first when OUT_DIR has none. JPEGs: by
default the two photos scikit-learn ships (sklearn/datasets/images/china.jpg and flower.jpg,
640x427 baseline JPEGs), copied to OUT_DIR/jpeg/.

TF's side is TF-slim's Inception evaluation path (inception_preprocessing.preprocess_for_eval):
tf.io.decode_jpeg(channels=3) with its defaults, convert_image_dtype to float, central crop
0.875, bilinear resize to 299 (TF 1.x, align_corners=False), scale to [-1, 1]; then the
network's `Predictions`. Writes OUT_DIR/jpeg_expected.json (per image: file, top5, probs, as
expected.json's `images`). With --ours, runs

    CLASSIFY_BINARY --model inception --weights OUT_DIR/model.ckpt-0 --json IMAGES...

(e.g. target/release/examples/classify) and prints, per image, whether the top-5 classes are
TF's and the largest relative difference of the five probabilities; exits 1 above 2%.

Needs tensorflow, tf_slim, tf-keras, pillow and scikit-learn (for the photos).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import inception_v3_checkpoint as ckpt  # noqa: E402  (sets up tf_slim's imports, TF 1.x mode)

tf = ckpt.tf
slim = ckpt.slim
slim_v3 = ckpt.slim_v3
SIZE = ckpt.SIZE
TOLERANCE = 0.02


def sklearn_photos():
    import sklearn.datasets

    folder = os.path.join(os.path.dirname(sklearn.datasets.__file__), "images")
    return [os.path.join(folder, name) for name in ("china.jpg", "flower.jpg")]


def eval_preprocess(jpeg):
    """TF-slim's preprocess_for_eval (central_fraction 0.875) of an encoded JPEG."""
    image = tf.image.convert_image_dtype(tf.io.decode_jpeg(jpeg, channels=3), tf.float32)
    image = tf.image.central_crop(image, central_fraction=0.875)
    image = tf.image.resize_bilinear(tf.expand_dims(image, 0), [SIZE, SIZE], align_corners=False)
    return (image - 0.5) * 2.0


def tf_top5(out, files):
    tf.reset_default_graph()
    images = tf.placeholder(tf.float32, [None, SIZE, SIZE, 3])
    with slim.arg_scope(slim_v3.inception_v3_arg_scope()):
        _, end_points = slim_v3.inception_v3(images, num_classes=1001, is_training=False)
    saver = tf.train.Saver(tf.global_variables())
    jpeg = tf.placeholder(tf.string)
    preprocessed = eval_preprocess(jpeg)
    results = []
    with tf.Session() as sess:
        saver.restore(sess, os.path.join(out, "model.ckpt-0"))
        for path in files:
            x = sess.run(preprocessed, {jpeg: open(path, "rb").read()})
            probs = sess.run(end_points["Predictions"], {images: x})[0]
            top = np.argsort(-probs)[:5]
            results.append({"file": os.path.basename(path), "top5": top.tolist(),
                            "probs": probs[top].tolist()})
    return results


def compare(binary, out, files, expected):
    command = [binary, "--model", "inception", "--weights", os.path.join(out, "model.ckpt-0"),
               "--json"] + files
    lines = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    ours = [json.loads(line) for line in lines.splitlines() if line.startswith("{")]
    worst_all = 0.0
    for want, got in zip(expected, ours):
        classes = [t["class"] for t in got["top"]]
        probs = [t["prob"] for t in got["top"]]
        worst = max(abs(p - q) / q for p, q in zip(probs, want["probs"]))
        same = classes == want["top5"]
        worst_all = max(worst_all, worst if same else float("inf"))
        print(f"{want['file']}: TF top 5 {want['top5']} {np.round(want['probs'], 5).tolist()}")
        print(f"{'':{len(want['file'])}}  ours     {classes} {np.round(probs, 5).tolist()}")
        print(f"{'':{len(want['file'])}}  same classes: {same}; largest relative difference of "
              f"the probabilities {worst:.2e}")
    return worst_all


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("jpegs", nargs="*")
    parser.add_argument("--ours", help="our classify binary, to compare with")
    args = parser.parse_args()
    if not os.path.exists(os.path.join(args.out, "model.ckpt-0.index")):
        ckpt.main(args.out)
    folder = os.path.join(args.out, "jpeg")
    os.makedirs(folder, exist_ok=True)
    files = []
    for path in args.jpegs or sklearn_photos():
        files.append(os.path.join(folder, os.path.basename(path)))
        shutil.copyfile(path, files[-1])
    expected = tf_top5(args.out, files)
    with open(os.path.join(args.out, "jpeg_expected.json"), "w") as f:
        json.dump({"images": expected}, f, indent=1)
    for e in expected:
        print(e["file"], e["top5"], np.round(e["probs"], 5).tolist())
    if args.ours:
        worst = compare(args.ours, args.out, files, expected)
        print(f"largest relative difference over all images: {worst:.2e} "
              f"({'within' if worst <= TOLERANCE else 'beyond'} {TOLERANCE:.0%})")
        sys.exit(0 if worst <= TOLERANCE else 1)


if __name__ == "__main__":
    main()
