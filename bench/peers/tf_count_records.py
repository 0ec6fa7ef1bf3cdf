"""tf.data's time to count a TFRecord file's records, the peer of `bench_input --index`.

Run by hand with TensorFlow installed (never in CI), after `bench_input` wrote the file:

    cargo run --release -p towers-bench --bin bench_input -- --index /tmp/small.tfrecord
    python bench/peers/tf_count_records.py /tmp/small.tfrecord

TF has no index: it reads every record (its length CRC checked, the data read) to count
them, which is the pass it makes before a file's first batch when it is asked for the
cardinality, and the pass our index makes (headers read, data skipped). The count runs as
one `reduce` in TF's runtime over batches of 4096 records: the fastest count found (a
`reduce` record by record took 30x longer, Python iteration longer still). Median of 5
rounds, after one that brings the file into the page cache, as `bench_input` does.
"""

import statistics
import sys
import time

import tensorflow as tf


def main():
    path = sys.argv[1]
    dataset = tf.data.TFRecordDataset(path)
    batches = dataset.batch(4096)
    count = tf.function(
        lambda: batches.reduce(
            tf.constant(0, tf.int64), lambda n, batch: n + tf.cast(tf.shape(batch)[0], tf.int64)
        )
    )
    times = []
    for _ in range(6):
        started = time.perf_counter()
        records = int(count())
        times.append(time.perf_counter() - started)
    median = statistics.median(times[1:])
    print(
        f"tf.data {tf.__version__} counted {path} ({records} records), median of 5: "
        f"{median * 1e3:.1f} ms, {records / median / 1e6:.2f} M records/s"
    )


if __name__ == "__main__":
    main()
