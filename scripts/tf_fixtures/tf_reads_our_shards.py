"""Reads `folder_to_shards`' output with TensorFlow as TF's Inception trainer and TF-slim read
ImageNet's shards (`tf.io.parse_single_example` with their feature map, `decode_jpeg`) and
checks every example against the image folder it came from: label (1-based, the class's
place in sorted order), class name, file name, height and width, and the pixels' mean
difference from Pillow's decoding of the source (re-encoded sources differ by JPEG's loss).
Not run by CI (TensorFlow is not installed there).

    cargo run --release --example folder_to_shards -- --input photos --output shards --shards 2
    /tmp/tfvenv/bin/python scripts/tf_fixtures/tf_reads_our_shards.py photos shards
"""
import glob, os, sys
import numpy as np
import tensorflow as tf
from PIL import Image

folder, shards = sys.argv[1], sys.argv[2]
classes = sorted(d for d in os.listdir(folder) if os.path.isdir(os.path.join(folder, d)))
spec = {
    "image/encoded": tf.io.FixedLenFeature([], tf.string, default_value=""),
    "image/format": tf.io.FixedLenFeature([], tf.string, default_value="jpeg"),
    "image/class/label": tf.io.FixedLenFeature([1], tf.int64, default_value=-1),
    "image/class/text": tf.io.FixedLenFeature([], tf.string, default_value=""),
    "image/height": tf.io.FixedLenFeature([], tf.int64, default_value=-1),
    "image/width": tf.io.FixedLenFeature([], tf.int64, default_value=-1),
    "image/filename": tf.io.FixedLenFeature([], tf.string, default_value=""),
}
for k in ["xmin", "ymin", "xmax", "ymax"]:
    spec[f"image/object/bbox/{k}"] = tf.io.VarLenFeature(tf.float32)
files = sorted(glob.glob(os.path.join(shards, "train-*-of-*")))
seen = 0
for record in tf.data.TFRecordDataset(files):
    ex = tf.io.parse_single_example(record, spec)
    image = tf.io.decode_jpeg(ex["image/encoded"], channels=3).numpy()
    label = int(ex["image/class/label"][0])
    text = ex["image/class/text"].numpy().decode()
    name = ex["image/filename"].numpy().decode()
    assert text == classes[label - 1], (text, label)
    src = os.path.join(folder, text, name)
    assert os.path.exists(src), src
    h, w = int(ex["image/height"]), int(ex["image/width"])
    assert image.shape == (h, w, 3), (image.shape, h, w)
    pil = np.asarray(Image.open(src).convert("RGB"))
    assert pil.shape == image.shape, (pil.shape, image.shape, src)
    diff = np.abs(pil.astype(int) - image.astype(int)).mean()
    assert ex["image/format"].numpy() == b"JPEG"
    print(f"{name}: label {label} {text} {image.shape} mean |TF - Pillow| {diff:.2f}")
    seen += 1
print(seen, "examples read by TF")
