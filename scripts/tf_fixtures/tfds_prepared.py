"""Writes crates/data/tests/data/tfds/: small datasets prepared by TensorFlow Datasets, in the
layout `tfds.load` leaves under its `data_dir` (`~/tensorflow_datasets` by default), and what
`tfds.load` reads back from them, for the TFDS reader's tests to compare against.

- `cifar10/3.0.2/`: TFDS's own `cifar10` builder (its features, supervised keys and label
  names), its `_split_generators` fed a tiny `cifar-10-batches-bin` of random images (the real
  download is 160 MB): 40 training and 12 test images, PNG-encoded by TFDS.
- `tiny_flowers/small/1.0.0/` and `tiny_flowers/small/1.1.0/`: a builder of our own in the
  shape of `tf_flowers` and `imagenet2012` (JPEG images of several sizes, a named
  `ClassLabel`, a file name), with a builder config, two versions (1.1.0 holds more images)
  and its training split in 3 shards, so that a reader must pick the newest version and order
  the shards by index.
- `expected/slices.tsv`: what `tfds.load(..., split=SPEC)` reads of the tiny flowers for split
  specs with TFDS's slicing (percent rounded to the closest, half to even; negative and
  absolute bounds, shard units, `+`): per record the spec, the version, the label and the sha256.
- `expected/<dataset>-<version>-<split>.tsv`: per record, in the order `tfds.load(...,
  shuffle_files=False)` yields them: the label, the image's height and width, and the sha256
  of its decoded RGB bytes (TF's decoders: `decode_png`, `decode_jpeg` with TF's default DCT).

    /tmp/tfvenv/bin/python scripts/tf_fixtures/tfds_prepared.py crates/data/tests/data/tfds

TensorFlow Datasets 4.9.10, TensorFlow 2.21.
"""
import hashlib
import io
import os
import shutil
import sys
import tempfile

import numpy as np
import tensorflow_datasets as tfds
from PIL import Image
from tensorflow_datasets.image_classification import cifar

CIFAR_CLASSES = [
    "airplane", "automobile", "bird", "cat", "deer",
    "dog", "frog", "horse", "ship", "truck",
]


def write_cifar_bin(folder, counts, rng):
    """A tiny `cifar-10-batches-bin`: `counts` maps file names to record counts."""
    os.makedirs(folder)
    for name, count in counts.items():
        labels = rng.integers(0, 10, size=(count, 1), dtype=np.uint8)
        images = rng.integers(0, 256, size=(count, 3072), dtype=np.uint8)
        with open(os.path.join(folder, name), "wb") as f:
            f.write(np.concatenate([labels, images], axis=1).tobytes())
    with open(os.path.join(folder, "batches.meta.txt"), "w") as f:
        f.write("\n".join(CIFAR_CLASSES) + "\n\n")


class Cifar10(cifar.Cifar10, skip_registration=True):
    """TFDS's `cifar10`, reading its batches from `TINY_CIFAR` instead of the download."""

    def _split_generators(self, dl_manager):
        root = os.environ["TINY_CIFAR"]
        info = self._cifar_info
        path = os.path.join(root, info.prefix)
        with open(os.path.join(path, "batches.meta.txt")) as f:
            self.info.features["label"].names = [n for n in f.read().split("\n") if n]
        files = lambda names: (os.path.join(path, n) for n in names)
        return {
            tfds.Split.TRAIN: self._generate_examples("train_", files(info.train_files)),
            tfds.Split.TEST: self._generate_examples("test_", files(info.test_files)),
        }


FLOWERS = ["daisy", "rose", "tulip"]


def flower_jpeg(rng, label, index):
    """A JPEG of a size that varies with `index`, coloured by its class."""
    height, width = 20 + 3 * (index % 5), 24 + 2 * (index % 7)
    base = np.zeros((height, width, 3), np.uint8)
    base[..., label] = 200
    noise = rng.integers(0, 56, size=(height, width, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(base + noise).save(out, format="JPEG", quality=90)
    return out.getvalue()


class TinyFlowers(tfds.core.GeneratorBasedBuilder, skip_registration=True):
    """`tf_flowers`' shape: JPEGs of several sizes, a named ClassLabel, a file name."""

    BUILDER_CONFIGS = [tfds.core.BuilderConfig(name="small")]
    VERSION = tfds.core.Version(os.environ.get("TINY_FLOWERS_VERSION", "1.1.0"))

    def _info(self):
        return tfds.core.DatasetInfo(
            builder=self,
            features=tfds.features.FeaturesDict({
                "image": tfds.features.Image(encoding_format="jpeg"),
                "label": tfds.features.ClassLabel(names=FLOWERS),
                "file_name": tfds.features.Text(),
            }),
            supervised_keys=("image", "label"),
        )

    def _split_generators(self, dl_manager):
        train = 24 if str(self.VERSION) == "1.1.0" else 9
        return {
            "train": self._generate_examples(train, seed=1),
            "validation": self._generate_examples(6, seed=2),
        }

    def _generate_examples(self, count, seed):
        rng = np.random.default_rng(seed)
        for index in range(count):
            label = int(rng.integers(0, len(FLOWERS)))
            name = f"{FLOWERS[label]}_{seed}_{index:03d}.jpg"
            yield name, {
                "image": flower_jpeg(rng, label, index),
                "label": label,
                "file_name": name,
            }


def write_expected(out, builder, data_dir, split):
    name = builder.info.full_name.replace("/", "-")
    dataset = builder.as_dataset(split=split, shuffle_files=False)
    path = os.path.join(out, "expected", f"{name}-{split}.tsv")
    with open(path, "w") as f:
        f.write("label\theight\twidth\tsha256\n")
        for example in tfds.as_numpy(dataset):
            image = example["image"]
            digest = hashlib.sha256(image.tobytes()).hexdigest()
            f.write(f"{example['label']}\t{image.shape[0]}\t{image.shape[1]}\t{digest}\n")


SLICES = {
    "1.1.0": ["train[:30%]", "train[5:-5]", "train[-25%:]", "train[33.3%:66.7%]",
              "validation[:50%]+train[1shard:2shard]", "validation"],
    # 9 records: 50% is 4.5, which TFDS rounds to the even 4.
    "1.0.0": ["train[:50%]", "train[50%:]"],
}


def write_slices(out, builders):
    with open(os.path.join(out, "expected", "slices.tsv"), "w") as f:
        f.write("spec\tversion\tlabel\tsha256\n")
        for version, specs in SLICES.items():
            for spec in specs:
                dataset = builders[version].as_dataset(split=spec, shuffle_files=False)
                for example in tfds.as_numpy(dataset):
                    digest = hashlib.sha256(example["image"].tobytes()).hexdigest()
                    f.write(f"{spec}\t{version}\t{example['label']}\t{digest}\n")


def prepare(builder, num_shards=None):
    config = tfds.download.DownloadConfig(num_shards=num_shards)
    builder.download_and_prepare(download_config=config)


def main(out):
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(os.path.join(out, "expected"))
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        counts = {f"data_batch_{i}.bin": 8 for i in range(1, 6)}
        counts["test_batch.bin"] = 12
        write_cifar_bin(os.path.join(tmp, "cifar-10-batches-bin"), counts, rng)
        os.environ["TINY_CIFAR"] = tmp
        cifar10 = Cifar10(data_dir=out)
        prepare(cifar10)
        for split in ["train", "test"]:
            write_expected(out, cifar10, out, split)
    builders = {}
    for version, shards in [("1.0.0", None), ("1.1.0", 3)]:
        os.environ["TINY_FLOWERS_VERSION"] = version
        TinyFlowers.VERSION = tfds.core.Version(version)
        flowers = TinyFlowers(data_dir=out, config="small")
        prepare(flowers, shards)
        for split in ["train", "validation"]:
            write_expected(out, flowers, out, split)
        builders[version] = flowers
    write_slices(out, builders)
    shutil.rmtree(os.path.join(out, "downloads"), ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1])
