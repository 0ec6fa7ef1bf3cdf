"""Writes tests/data/fuzz_seeds.tfrecord: the real-file seeds of the fuzz tests (tests/fuzz).

TensorFlow itself writes the TFRecord framing and the tf.train.Example protos, and encodes
the images (JPEG colour and greyscale, progressive JPEG, PNG RGB, PNG with alpha, PNG 16-bit),
in the ImageNet layout that `build_imagenet_data.py` writes. Small on purpose: each record is
a fuzz seed, and so is each image inside it.

    /work/venv-tf/bin/python scripts/fuzz_seeds.py
"""

import numpy as np
import tensorflow as tf


def feature(value):
    if isinstance(value, bytes):
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))
    if isinstance(value, int):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))
    return tf.train.Feature(float_list=tf.train.FloatList(value=value))


def example(encoded, label, height, width, fmt):
    return tf.train.Example(features=tf.train.Features(feature={
        "image/encoded": feature(encoded),
        "image/class/label": feature(label),
        "image/class/text": feature(b"class %d" % label),
        "image/class/synset": feature(b"n0144076%d" % label),
        "image/object/bbox/xmin": feature([0.1, 0.25]),
        "image/object/bbox/ymin": feature([0.2, 0.3]),
        "image/object/bbox/xmax": feature([0.8, 0.9]),
        "image/object/bbox/ymax": feature([0.7, 1.0]),
        "image/height": feature(height),
        "image/width": feature(width),
        "image/filename": feature(b"seed_%d.%s" % (label, fmt)),
        "image/format": feature(fmt.upper()),
    }))


def main():
    rng = np.random.default_rng(7)
    rgb = rng.integers(0, 256, size=(12, 16, 3), dtype=np.uint8)
    grey = rng.integers(0, 256, size=(9, 10, 1), dtype=np.uint8)
    rgba = rng.integers(0, 256, size=(8, 8, 4), dtype=np.uint8)
    deep = rng.integers(0, 65536, size=(6, 7, 3), dtype=np.uint16)
    images = [
        (tf.io.encode_jpeg(rgb, quality=90).numpy(), rgb.shape, b"jpeg"),
        (tf.io.encode_jpeg(grey, quality=75).numpy(), grey.shape, b"jpeg"),
        (tf.io.encode_jpeg(rgb, progressive=True, chroma_downsampling=False).numpy(), rgb.shape, b"jpeg"),
        (tf.io.encode_png(rgb).numpy(), rgb.shape, b"png"),
        (tf.io.encode_png(rgba).numpy(), rgba.shape, b"png"),
        (tf.io.encode_png(deep).numpy(), deep.shape, b"png"),
    ]
    with tf.io.TFRecordWriter("tests/data/fuzz_seeds.tfrecord") as writer:
        for label, (encoded, shape, fmt) in enumerate(images, start=1):
            writer.write(example(encoded, label, shape[0], shape[1], fmt).SerializeToString())


if __name__ == "__main__":
    main()
