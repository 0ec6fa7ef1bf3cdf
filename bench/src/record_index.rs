//! Time to index a TFRecord file of many small records, the work before the first batch of a
//! file (`tfrecord::index`: every header read and its length CRC checked, the data skipped),
//! against tf.data counting the same file's records (`bench/peers/tf_count_records.py`, run in
//! the same sitting). Small records are where indexing costs most per byte.

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;
use std::time::Instant;

use burn_towers::data::tfrecord::{self, TfRecordWriter};

/// Records written when the file does not exist yet.
const RECORDS: usize = 2_000_000;
/// Bytes of data per record: 116 bytes with the framing, a small `tf.train.Example`'s size.
const RECORD_BYTES: usize = 100;
/// Timed rounds; the median is printed.
const ROUNDS: usize = 5;

/// Writes `file` (`RECORDS` records of `RECORD_BYTES`) unless it exists, then prints the
/// median time of indexing it, warm in the page cache.
pub fn print(file: &Path) -> anyhow::Result<()> {
    if !file.exists() {
        let mut writer = TfRecordWriter::new(BufWriter::new(File::create(file)?));
        for i in 0..RECORDS {
            writer.write(&[(i % 251) as u8; RECORD_BYTES])?;
        }
        writer.into_inner()?;
    }
    let bytes = std::fs::metadata(file)?.len();
    let mut times = Vec::new();
    let mut records = 0;
    for _ in 0..=ROUNDS {
        let started = Instant::now();
        records = tfrecord::index(file)?.len();
        times.push(started.elapsed().as_secs_f64());
    }
    // The first round only brings the file into the page cache.
    times.remove(0);
    times.sort_by(f64::total_cmp);
    let median = times[ROUNDS / 2];
    println!(
        "indexed {} ({records} records, {bytes} bytes), median of {ROUNDS}: {:.1} ms, {:.2} M records/s",
        file.display(),
        median * 1e3,
        records as f64 / median / 1e6
    );
    Ok(())
}
