"""Writes crates/data/tests/data/tf_compressed: the same three records in TFRecord files written
by TensorFlow itself, uncompressed (`none.tfrecord`) and with each of TF's compressions
(`gzip.tfrecord`, `zlib.tfrecord`), which the readers must read as TF reads them.

    /tmp/tfvenv/bin/python scripts/tf_fixtures/compressed_tfrecords.py crates/data/tests/data/tf_compressed
"""
import os
import sys

import tensorflow as tf

RECORDS = [b"first record", b"", b"the third, a little longer " * 4]


def main(out):
    os.makedirs(out, exist_ok=True)
    for name, compression in [("none", ""), ("gzip", "GZIP"), ("zlib", "ZLIB")]:
        path = os.path.join(out, f"{name}.tfrecord")
        options = tf.io.TFRecordOptions(compression_type=compression)
        with tf.io.TFRecordWriter(path, options) as writer:
            for record in RECORDS:
                writer.write(record)
        read = [r.numpy() for r in tf.data.TFRecordDataset(path, compression_type=compression)]
        assert read == RECORDS, (path, read)
        print(path, os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main(sys.argv[1])
