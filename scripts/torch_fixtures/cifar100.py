"""Writes crates/data/tests/data/cifar100/: one small CIFAR-100 (20 training and 8 test images,
random pixels and labels) in each layout it comes in, and what the real tools read from them.

- `cifar-100-binary/`: `train.bin`, `test.bin`: records of a coarse label byte, a fine label
  byte and the R, G and B planes (the published binary layout, as TFDS's `cifar100` builder
  reads it).
- `cifar-100-python/`: `train`, `test` and `meta` as the published files are: Python 2's
  protocol-2 pickles (the pickler of `cifar10_python.py`), the dicts' keys in the published
  order (filenames, batch_label, fine_labels, coarse_labels, data).
- `tfds/cifar100/3.0.2/`: TFDS 4.9.10's own `cifar100` builder run on `cifar-100-binary`.
- `expected/<split>.tsv`: per image, in order: the fine label, the coarse label and the sha256
  of its RGB bytes (row by row, HWC), as torchvision 0.29's `CIFAR100` (fine labels, pixels),
  Python's `pickle` (coarse labels) and `tfds.load("cifar100", shuffle_files=False)` (both
  labels, pixels, in its own record order: `expected/tfds-<split>.tsv`) read them; the script
  checks the first two against the arrays written.

    /tmp/tfvenv/bin/python scripts/torch_fixtures/cifar100.py crates/data/tests/data/cifar100
"""
import hashlib
import os
import pickle
import shutil
import sys

import numpy as np
import tensorflow_datasets as tfds
import torchvision
from tensorflow_datasets.image_classification import cifar

sys.path.insert(0, os.path.dirname(__file__))
from cifar10_python import python2_pickle  # noqa: E402

COUNTS = {"train": 20, "test": 8}


def digest(hwc):
    return hashlib.sha256(np.ascontiguousarray(hwc).tobytes()).hexdigest()


def write_tsv(path, rows):
    with open(path, "w") as f:
        f.write("fine\tcoarse\tsha256\n")
        for fine, coarse, sha in rows:
            f.write(f"{fine}\t{coarse}\t{sha}\n")


class Unchecked(torchvision.datasets.CIFAR100):
    """torchvision's CIFAR100 without the published files' checksums (its `meta` too)."""

    def _check_integrity(self):
        return True

    def _load_meta(self):
        checked = torchvision.datasets.cifar.check_integrity
        torchvision.datasets.cifar.check_integrity = lambda *args: True
        try:
            super()._load_meta()
        finally:
            torchvision.datasets.cifar.check_integrity = checked


class Cifar100(cifar.Cifar100, skip_registration=True):
    """TFDS's `cifar100`, reading `cifar-100-binary` from `TINY_CIFAR100`."""

    def _split_generators(self, dl_manager):
        path = os.path.join(os.environ["TINY_CIFAR100"], self._cifar_info.prefix)
        for key, name in zip(self._cifar_info.label_keys, self._cifar_info.label_files):
            with open(os.path.join(path, name)) as f:
                self.info.features[key].names = [n for n in f.read().split("\n") if n]
        files = lambda names: (os.path.join(path, n) for n in names)
        info = self._cifar_info
        return {
            tfds.Split.TRAIN: self._generate_examples("train_", files(info.train_files)),
            tfds.Split.TEST: self._generate_examples("test_", files(info.test_files)),
        }


def main(out):
    shutil.rmtree(out, ignore_errors=True)
    rng = np.random.default_rng(100)
    binary = os.path.join(out, "cifar-100-binary")
    python = os.path.join(out, "cifar-100-python")
    for folder in (binary, python, os.path.join(out, "expected")):
        os.makedirs(folder)
    fine_names = [f"fine_{i:02d}" for i in range(100)]
    coarse_names = [f"coarse_{i:02d}" for i in range(20)]
    for name, names in (("fine_label_names.txt", fine_names),
                        ("coarse_label_names.txt", coarse_names)):
        with open(os.path.join(binary, name), "w") as f:
            f.write("\n".join(names) + "\n")
    meta = {"fine_label_names": fine_names, "coarse_label_names": coarse_names}
    with open(os.path.join(python, "meta"), "wb") as f:
        f.write(python2_pickle(meta))
    for split, count in COUNTS.items():
        fine = rng.integers(0, 100, size=count)
        coarse = rng.integers(0, 20, size=count)
        data = rng.integers(0, 256, size=(count, 3072), dtype=np.uint8)
        records = np.concatenate(
            [coarse[:, None].astype(np.uint8), fine[:, None].astype(np.uint8), data], axis=1)
        with open(os.path.join(binary, f"{split}.bin"), "wb") as f:
            f.write(records.tobytes())
        batch = {
            "filenames": [f"img_{split}_{i:04d}.png" for i in range(count)],
            "batch_label": f"{split}ing batch 1 of 1",
            "fine_labels": [int(x) for x in fine],
            "coarse_labels": [int(x) for x in coarse],
            "data": data,
        }
        with open(os.path.join(python, split), "wb") as f:
            f.write(python2_pickle(batch))
        # torchvision's CIFAR100 (fine labels, pixels) and pickle (coarse labels).
        dataset = Unchecked(out, train=split == "train")
        with open(os.path.join(python, split), "rb") as f:
            loaded = pickle.load(f, encoding="latin1")
        hwc = data.reshape(count, 3, 32, 32).transpose(0, 2, 3, 1)
        assert (dataset.data == hwc).all() and dataset.targets == batch["fine_labels"]
        assert loaded["coarse_labels"] == batch["coarse_labels"]
        rows = [(t, c, digest(image))
                for t, c, image in zip(dataset.targets, loaded["coarse_labels"], dataset.data)]
        write_tsv(os.path.join(out, "expected", f"{split}.tsv"), rows)
    os.environ["TINY_CIFAR100"] = out
    builder = Cifar100(data_dir=os.path.join(out, "tfds"))
    builder.download_and_prepare()
    for split in COUNTS:
        dataset = builder.as_dataset(split=split, shuffle_files=False)
        rows = [(e["label"], e["coarse_label"], digest(e["image"]))
                for e in tfds.as_numpy(dataset)]
        write_tsv(os.path.join(out, "expected", f"tfds-{split}.tsv"), rows)
    shutil.rmtree(os.path.join(out, "tfds", "downloads"), ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1])
