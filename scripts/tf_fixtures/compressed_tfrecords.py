"""Writes crates/data/tests/data/tf_compressed: the same three records in TFRecord files written
by TensorFlow itself, uncompressed (`none.tfrecord`) and with each of TF's compressions
(`gzip.tfrecord`, `zlib.tfrecord`), which the readers must read as TF reads them; and
`cuts.tsv`: how tf.data reads each compressed file cut at every length from 0 to whole (its
first N bytes): `file<TAB>bytes kept<TAB>records read<TAB>error` (1 where tf.data raised after
those records, 0 where it ended without an error).

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
    write_cuts(out)


def write_cuts(out):
    lines = []
    for name, compression in [("gzip", "GZIP"), ("zlib", "ZLIB")]:
        whole = open(os.path.join(out, f"{name}.tfrecord"), "rb").read()
        cut = os.path.join(out, "cut.tmp")
        for kept in range(len(whole) + 1):
            with open(cut, "wb") as file:
                file.write(whole[:kept])
            read, error = 0, 0
            try:
                for record in tf.data.TFRecordDataset(cut, compression_type=compression):
                    assert record.numpy() == RECORDS[read], (name, kept, read)
                    read += 1
            except tf.errors.DataLossError:
                error = 1
            lines.append(f"{name}.tfrecord\t{kept}\t{read}\t{error}\n")
        os.remove(cut)
    with open(os.path.join(out, "cuts.tsv"), "w") as file:
        file.writelines(lines)


if __name__ == "__main__":
    main(sys.argv[1])
