"""Writes crates/data/tests/data/cifar10_python/: small CIFAR-10 batches in the python layout
(`cifar-10-batches-py`) as they come, and the same images and labels as torchvision's
`CIFAR10` reads them, in the binary layout, for the reader's tests to compare against.

- `py2/`: the five training batches and the test batch as the published files are: pickles of
  Python 2's cPickle, protocol 2, whose strings are Python 2 `str` (BINSTRING opcodes) and
  whose dict has the published key order (batch_label, labels, data, filenames). No Python 2
  here: a pickler writes Python 3's bytes and str as Python 2's str, and the script first
  checks it against the published `batches.meta` (158 bytes, from a public copy of the
  dataset), byte for byte, and copies it there (torchvision reads it).
- `protocol3/`, `protocol4/`: the test batch re-saved by Python 3 (numpy 2, `pickle.dump`,
  text keys, the labels a numpy int64 array); its 25 images are over 64 KiB, so that protocol
  4 frames the pickle around them.
- `protocol5/`: the same at protocol 5, where numpy writes its array as `_frombuffer` of a
  byte array.
- `python3_protocol2/`: one image at protocol 2 from Python 3, which writes bytes as latin-1
  text to be encoded back (`_codecs.encode`): refused by the reader, with what to do.
- `expected/`: each batch as torchvision 0.29's `CIFAR10` reads it (its `data` and `targets`,
  the published files' checksums not checked), written in the binary layout: a label byte then
  the R, G and B planes.

    /tmp/tfvenv/bin/python scripts/torch_fixtures/cifar10_python.py \
        crates/data/tests/data/cifar10_python PATH/TO/published/batches.meta
"""
import io
import os
import pickle
import sys

import numpy as np
import torchvision


class Python2Pickler(pickle._Pickler):
    """Protocol 2 as Python 2's cPickle wrote it: every string a `str` (bytes), memo indices
    from 1."""

    def memoize(self, obj):
        index = len(self.memo) + 1
        self.write(self.put(index))
        self.memo[id(obj)] = index, obj

    def save_bytes(self, obj):
        n = len(obj)
        if n < 256:
            self.write(pickle.SHORT_BINSTRING + bytes([n]) + obj)
        else:
            self.write(pickle.BINSTRING + n.to_bytes(4, "little") + obj)
        self.memoize(obj)

    def save_str(self, obj):
        self.save_bytes(obj.encode("latin-1"))

    def save_global(self, obj, name=None):
        # numpy 2 pickles under numpy._core, Python 2's numpy wrote numpy.core.
        module = getattr(obj, "__module__", "")
        if module.startswith("numpy._core"):
            name = name or obj.__qualname__
            module = module.replace("numpy._core", "numpy.core")
            line = f"{module}\n{name}\n".encode("ascii")
            self.write(pickle.GLOBAL + line)
            self.memoize(obj)
        else:
            super().save_global(obj, name)

    dispatch = dict(pickle._Pickler.dispatch)
    dispatch[bytes] = save_bytes
    dispatch[str] = save_str


def python2_pickle(obj):
    out = io.BytesIO()
    Python2Pickler(out, protocol=2).dump(obj)
    return out.getvalue()


def check_against_published(meta_path):
    published = open(meta_path, "rb").read()
    meta = {
        "num_cases_per_batch": 10000,
        "label_names": ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse",
                        "ship", "truck"],
        "num_vis": 3072,
    }
    ours = python2_pickle(meta)
    assert ours == published, (ours, published)


def batch(rng, label, count):
    images = rng.integers(0, 256, size=(count, 3072), dtype=np.uint8)
    labels = [int(x) for x in rng.integers(0, 10, size=count)]
    names = [f"img_s_{rng.integers(0, 10**6):06d}.png" for _ in range(count)]
    return {"batch_label": label, "labels": labels, "data": images, "filenames": names}


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def write_expected(root, name, train, out):
    """The batches under root/cifar-10-batches-py as torchvision reads them."""

    class Unchecked(torchvision.datasets.CIFAR10):
        def _check_integrity(self):
            return True

    Unchecked.train_list = [[name, None]] if train else []
    Unchecked.test_list = [] if train else [[name, None]]
    dataset = Unchecked(root, train=train)
    records = [
        bytes([label]) + image.transpose(2, 0, 1).tobytes()
        for image, label in zip(dataset.data, dataset.targets)
    ]
    write(out, b"".join(records))


def main(out, meta_path):
    check_against_published(meta_path)
    rng = np.random.default_rng(10)
    py2 = os.path.join(out, "py2", "cifar-10-batches-py")
    os.makedirs(py2, exist_ok=True)
    names = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
    batches = {}
    for i, name in enumerate(names):
        label = f"training batch {i + 1} of 5" if name != "test_batch" else "testing batch 1 of 1"
        batches[name] = batch(rng, label, 3 if name != "test_batch" else 25)
        write(os.path.join(py2, name), python2_pickle(batches[name]))
    write(os.path.join(py2, "batches.meta"), open(meta_path, "rb").read())
    test = dict(batches["test_batch"], labels=np.array(batches["test_batch"]["labels"]))
    for protocol in (3, 4, 5):
        folder = os.path.join(out, f"protocol{protocol}")
        os.makedirs(folder, exist_ok=True)
        write(os.path.join(folder, "test_batch"), pickle.dumps(test, protocol=protocol))
    folder = os.path.join(out, "python3_protocol2")
    os.makedirs(folder, exist_ok=True)
    one = dict(test, data=test["data"][:1], labels=test["labels"][:1])
    write(os.path.join(folder, "test_batch"), pickle.dumps(one, protocol=2))
    os.makedirs(os.path.join(out, "expected"), exist_ok=True)
    for name in names:
        write_expected(os.path.join(out, "py2"), name, name != "test_batch",
                       os.path.join(out, "expected", name + ".bin"))
    for protocol in (3, 4, 5):
        loaded = pickle.load(open(os.path.join(out, f"protocol{protocol}", "test_batch"), "rb"))
        assert (loaded["data"] == test["data"]).all() and (loaded["labels"] == test["labels"]).all()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
