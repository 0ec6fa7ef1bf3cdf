"""Writes crates/models/tests/data/tf_partitioned: checkpoints of partitioned variables
(`tf.compat.v1.get_variable(..., partitioner=...)`, TF 1's way to split a large embedding or
layer across parameter servers), written by TensorFlow itself.

- `v2/model.ckpt` (V2, `tf.compat.v1.train.Saver`): each variable's entry lists its slices,
  and each slice is an entry of its own under TF's encoded "name and slice" key. Variables cut
  unevenly along either axis, slices starting past 63 and 8191 (one-, two- and three-byte
  numbers in those keys), int64, uint8, string and float16 variables, and a variable that is
  not partitioned.
- `sharded/model.ckpt` (V2, `Saver(sharded=True)`, the variables' parts placed on two
  devices in turn, as `replica_device_setter` places them on parameter servers): the slices of
  one variable in two data shards.
- `v1/model.ckpt` (V1, the one-file format): the same variables.

`values.json` holds each variable whole, as initialized, and as TF restores it into a variable
of the same name that is not partitioned (`tf.train.load_checkpoint` refuses them: "Sliced
checkpoints are not supported"); every checkpoint restores to those values, but for the string
and float16 variables, which TF saves partitioned but cannot restore ("Dtype string not
supported").

    /tmp/tfvenv/bin/python scripts/tf_fixtures/partitioned_checkpoint.py crates/models/tests/data/tf_partitioned
"""
import itertools
import json
import os
import shutil
import sys

import numpy as np
import tensorflow.compat.v1 as tf

tf.disable_eager_execution()

UNRESTORABLE = ("half/h", "text/s")


def variables():
    """Name: (value, dtype, number of parts, axis)."""
    rng = np.random.default_rng(11)
    return {
        "emb/a": (rng.normal(size=(7, 4)), tf.float32, 3, 0),
        "dense/b": (rng.normal(size=(2, 5)), tf.float32, 2, 1),
        "ints/c": (np.arange(10) - 4, tf.int64, 4, 0),
        "wide/m": (rng.normal(size=(130, 2)), tf.float32, 2, 0),
        "big/u": (rng.integers(0, 256, size=16386), tf.uint8, 2, 0),
        "half/h": (rng.normal(size=(6,)), tf.float16, 2, 0),
        "text/s": (np.array([b"a", b"", b"partitioned", b"\x00\xff", b"end"]), tf.string, 2, 0),
        "plain/w": (rng.normal(size=(3,)), tf.float32, 1, 0),
    }


def build(names, devices=None):
    """The variables of `names`, partitioned as `variables()` says."""
    out = {}
    for name in names:
        value, dtype, parts, axis = variables()[name]
        partitioner = tf.fixed_size_partitioner(parts, axis=axis) if parts > 1 else None
        with tf.device(devices):
            out[name] = tf.get_variable(name, initializer=tf.constant(value, dtype=dtype),
                                        partitioner=partitioner)
    return out


def two_devices_in_turn():
    """A device function placing each variable (each part of a partitioned one) on the next of
    two CPUs, as `replica_device_setter` places them on parameter servers in turn."""
    turn = itertools.count()

    def device(op):
        if op.type in ("VariableV2", "VarHandleOp"):
            return f"/device:CPU:{next(turn) % 2}"
        return op.device

    return device


def save(out, names, folder, **saver_args):
    version = saver_args.pop("write_version", tf.train.SaverDef.V2)
    devices = saver_args.pop("devices", None)
    graph = tf.Graph()
    with graph.as_default():
        build(names, devices)
        config = tf.ConfigProto(device_count={"CPU": 2})
        with tf.Session(config=config) as sess:
            sess.run(tf.global_variables_initializer())
            os.makedirs(os.path.join(out, folder))
            saver = tf.train.Saver(write_version=version, **saver_args)
            return saver.save(sess, os.path.join(out, folder, "model.ckpt"),
                              write_meta_graph=False, write_state=False)


def restore_whole(prefix, names):
    """Each variable as TF restores it into one that is not partitioned."""
    graph = tf.Graph()
    with graph.as_default():
        whole = {}
        for name in names:
            value, dtype, _, _ = variables()[name]
            whole[name] = tf.get_variable(name, shape=value.shape, dtype=dtype)
        with tf.Session() as sess:
            tf.train.Saver().restore(sess, prefix)
            return sess.run(whole)


def as_json(value):
    if value.dtype.kind == "f":
        return value.astype(np.float32).ravel().tolist()
    if value.dtype.kind in "iub":
        return value.astype(np.int64).ravel().tolist()
    return [list(v) for v in value.ravel()]  # strings as their bytes


def main(out):
    for folder in ("v2", "sharded", "v1"):
        shutil.rmtree(os.path.join(out, folder), ignore_errors=True)
    names = list(variables())
    v2 = save(out, names, "v2")
    sharded = save(out, names, "sharded", sharded=True, devices=two_devices_in_turn())
    v1 = save(out, names, "v1", write_version=tf.train.SaverDef.V1)
    expected = {n: v[0].astype(v[1].as_numpy_dtype) for n, v in variables().items()}
    restorable = [n for n in names if n not in UNRESTORABLE]
    for prefix in (v2, sharded, v1):
        for name, value in restore_whole(prefix, restorable).items():
            assert np.array_equal(value, expected[name]), (prefix, name)
    shards = [f for f in os.listdir(os.path.join(out, "sharded")) if ".data-" in f]
    assert len(shards) == 2, shards
    values = {n: {"shape": list(v.shape), "values": as_json(v)} for n, v in expected.items()}
    with open(os.path.join(out, "values.json"), "w") as f:
        json.dump(dict(sorted(values.items())), f, separators=(",", ":"))


if __name__ == "__main__":
    main(sys.argv[1])
