"""tf.data's images/sec on the Inception training input, the peer of `bench_input`.

Run by hand with TensorFlow installed (never in CI):

    python bench/peers/tf_inception_input.py make-shards /tmp/jpeg-shards
    python bench/peers/tf_inception_input.py time /tmp/jpeg-shards --parallel 4
    cargo run --release -p towers-bench --bin bench_input -- --only inception --shards-dir /tmp/jpeg-shards

`make-shards` writes TFRecord shards in TF's ImageNet layout (`train-00000-of-00008`, the keys
of `build_imagenet_data.py`, labels 1..=N, one object box per image): 380x300 JPEGs encoded by
Pillow (libjpeg-turbo, quality 90, 4:2:0) of seeded 1/f noise, whose spectrum is that of
natural photographs, so the entropy decoder works as hard as on real ones.

`time` runs the preprocessing of TF's Inception trainer (`inception/image_processing.py`):
`decode_jpeg(channels=3)`, `convert_image_dtype(float32)`, `sample_distorted_bounding_box`
(min_object_covered 0.1, aspect 0.75..1.33, area 0.05..1, 100 attempts), slice, resize to
299x299 with the method `thread_id % 4`, random flip, `distort_color` in the order
`thread_id % 2`, clip, scale to [-1, 1]; then shuffle (10 batches), batch 32, prefetch 2.
tf.data has no thread id: the example's index plays its part, so all four resize methods
and both colour orders are used in the same proportions as in our pipeline, which draws them.
`--parallel` is `num_parallel_calls` and `num_parallel_reads` (our reader threads).
"""

import argparse
import io
import os
import statistics
import time

import numpy as np


def make_shards(args):
    import tensorflow as tf
    from PIL import Image

    rng = np.random.default_rng(args.seed)
    os.makedirs(args.dir, exist_ok=True)
    per_shard = args.images // args.shards
    fy = np.fft.fftfreq(args.height)[:, None]
    fx = np.fft.rfftfreq(args.width)[None, :]
    falloff = 1.0 / np.maximum(np.hypot(fy, fx), 1.0 / max(args.height, args.width))
    for shard in range(args.shards):
        path = os.path.join(args.dir, f"train-{shard:05d}-of-{args.shards:05d}")
        with tf.io.TFRecordWriter(path) as writer:
            for i in range(per_shard):
                label = 1 + (shard * per_shard + i) % args.classes
                writer.write(example(rng, falloff, label, args, Image).SerializeToString())
        print(path)


def example(rng, falloff, label, args, Image):
    import tensorflow as tf

    planes = []
    for _ in range(3):
        spectrum = falloff * (rng.normal(size=falloff.shape) + 1j * rng.normal(size=falloff.shape))
        plane = np.fft.irfft2(spectrum, s=(args.height, args.width))
        planes.append((plane - plane.mean()) / (plane.std() + 1e-9))
    pixels = np.clip(np.stack(planes, -1) * 50 + 128 + (label % 7) * 8, 0, 255).astype(np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, "JPEG", quality=90)
    y0, x0 = rng.uniform(0, 0.4, 2)
    y1, x1 = y0 + rng.uniform(0.5, 0.6), x0 + rng.uniform(0.5, 0.6)

    def b(v):
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[v]))

    def i(v):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[v]))

    def f(v):
        return tf.train.Feature(float_list=tf.train.FloatList(value=[v]))

    features = {
        "image/encoded": b(out.getvalue()),
        "image/format": b(b"JPEG"),
        "image/colorspace": b(b"RGB"),
        "image/channels": i(3),
        "image/height": i(args.height),
        "image/width": i(args.width),
        "image/class/label": i(label),
        "image/class/synset": b(b"n%08d" % label),
        "image/class/text": b(b"class %d" % label),
        "image/filename": b(b"noise_%d.JPEG" % label),
        "image/object/bbox/ymin": f(y0),
        "image/object/bbox/xmin": f(x0),
        "image/object/bbox/ymax": f(y1),
        "image/object/bbox/xmax": f(x1),
        "image/object/bbox/label": i(label),
    }
    return tf.train.Example(features=tf.train.Features(feature=features))


def preprocess(tf, index, serialized):
    """`parse_example_proto` and `image_preprocessing(train=True)` of image_processing.py."""
    f32 = tf.io.VarLenFeature(tf.float32)
    parsed = tf.io.parse_single_example(
        serialized,
        {
            "image/encoded": tf.io.FixedLenFeature([], tf.string),
            "image/class/label": tf.io.FixedLenFeature([], tf.int64),
            "image/object/bbox/xmin": f32,
            "image/object/bbox/ymin": f32,
            "image/object/bbox/xmax": f32,
            "image/object/bbox/ymax": f32,
        },
    )
    edges = [tf.sparse.to_dense(parsed[f"image/object/bbox/{k}"]) for k in ("ymin", "xmin", "ymax", "xmax")]
    bbox = tf.expand_dims(tf.stack(edges, axis=1), 0)
    image = tf.image.decode_jpeg(parsed["image/encoded"], channels=3)
    image = tf.image.convert_image_dtype(image, tf.float32)
    begin, size, _ = tf.image.sample_distorted_bounding_box(
        tf.shape(image),
        bounding_boxes=bbox,
        min_object_covered=0.1,
        aspect_ratio_range=[0.75, 1.33],
        area_range=[0.05, 1.0],
        max_attempts=100,
        use_image_if_no_bounding_boxes=True,
    )
    image = tf.slice(image, begin, size)
    resize = tf.compat.v1.image.resize_images
    methods = [
        tf.compat.v1.image.ResizeMethod.BILINEAR,
        tf.compat.v1.image.ResizeMethod.NEAREST_NEIGHBOR,
        tf.compat.v1.image.ResizeMethod.BICUBIC,
        tf.compat.v1.image.ResizeMethod.AREA,
    ]
    image = tf.switch_case(
        tf.cast(index % 4, tf.int32),
        [lambda m=m: resize(image, [299, 299], method=m) for m in methods],
    )
    image.set_shape([299, 299, 3])
    image = tf.image.random_flip_left_right(image)
    image = tf.cond(index % 2 == 0, lambda: distort_color(tf, image, 0), lambda: distort_color(tf, image, 1))
    image = (image - 0.5) * 2.0
    return image, parsed["image/class/label"]


def distort_color(tf, image, ordering):
    image = tf.image.random_brightness(image, max_delta=32.0 / 255.0)
    if ordering == 0:
        image = tf.image.random_saturation(image, lower=0.5, upper=1.5)
        image = tf.image.random_hue(image, max_delta=0.2)
        image = tf.image.random_contrast(image, lower=0.5, upper=1.5)
    else:
        image = tf.image.random_contrast(image, lower=0.5, upper=1.5)
        image = tf.image.random_saturation(image, lower=0.5, upper=1.5)
        image = tf.image.random_hue(image, max_delta=0.2)
    return tf.clip_by_value(image, 0.0, 1.0)


def time_input(args):
    import tensorflow as tf

    files = sorted(tf.io.gfile.glob(os.path.join(args.dir, "train-*-of-*")))
    if not files:
        raise SystemExit(f"no train-*-of-* shards in {args.dir}")
    dataset = (
        tf.data.Dataset.from_tensor_slices(files)
        .shuffle(len(files), seed=0)
        .repeat()
        .interleave(tf.data.TFRecordDataset, cycle_length=args.parallel, num_parallel_calls=args.parallel)
        .enumerate()
        .map(lambda i, s: preprocess(tf, i, s), num_parallel_calls=args.parallel)
        .shuffle(10 * args.batch, seed=0)
        .batch(args.batch, drop_remainder=True)
        .prefetch(2)
    )
    batches = iter(dataset)
    for _ in range(12):  # past the shuffle buffer's fill, as bench_input warms up
        next(batches)
    rates, cpu = [], []
    images = args.batches * args.batch
    for _ in range(args.rounds):
        start, cpu_start = time.perf_counter(), time.process_time()
        for _ in range(args.batches):
            next(batches)
        rates.append(images / (time.perf_counter() - start))
        cpu.append((time.process_time() - cpu_start) * 1e3 / images)
    rounds = ", ".join(f"{r:.0f}" for r in rates)
    print(
        f"tf.data {tf.__version__}, {args.parallel} parallel calls, batch {args.batch}: "
        f"{statistics.median(rates):.0f} images/sec (median of {args.rounds}: {rounds}), "
        f"{statistics.median(cpu):.2f} CPU ms/image (all threads), load {os.getloadavg()[0]:.2f}"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    make = sub.add_parser("make-shards", help="write TFRecord shards of 380x300 JPEGs")
    make.add_argument("dir")
    make.add_argument("--shards", type=int, default=8)
    make.add_argument("--images", type=int, default=1024)
    make.add_argument("--classes", type=int, default=10)
    make.add_argument("--height", type=int, default=300)
    make.add_argument("--width", type=int, default=380)
    make.add_argument("--seed", type=int, default=1)
    timing = sub.add_parser("time", help="images/sec of tf.data on the shards")
    timing.add_argument("dir")
    timing.add_argument("--parallel", type=int, default=4)
    timing.add_argument("--batch", type=int, default=32)
    timing.add_argument("--batches", type=int, default=25)
    timing.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    make_shards(args) if args.command == "make-shards" else time_input(args)


if __name__ == "__main__":
    main()
