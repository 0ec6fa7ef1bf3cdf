//! A TFRecord shard of `tf.train.Example`s as the pipeline reads it: the framing indexed
//! (`tfrecord::index_reader`: lengths, length CRCs), each record's data CRC checked
//! (`record_data`) and its Example parsed (`ImageRecord::parse`: the Inception keys).
//!
//! Input: a flags byte (bit 0: rewrite every CRC the framing reaches first), then the shard.

#![no_main]

use std::io::Cursor;
use std::path::Path;

use libfuzzer_sys::fuzz_target;
use towers_data::tf_example::ImageRecord;
use towers_data::tfrecord::{index_reader, record_data};
use towers_fuzz::{fix_tfrecord_crcs, flags_and_fixed};

fuzz_target!(|data: &[u8]| {
    let (_, shard) = flags_and_fixed(data, fix_tfrecord_crcs);
    let path = Path::new("train-00000-of-00001");
    let Ok(spans) = index_reader(Cursor::new(&shard), shard.len() as u64, path) else {
        return;
    };
    for (i, span) in spans.iter().enumerate() {
        let start = usize::try_from(span.offset).unwrap();
        let end = start.checked_add(span.len).unwrap();
        assert!(end <= shard.len(), "span {span:?} past the input");
        let Ok(record) = record_data(path, i, &shard[start..end]) else {
            continue;
        };
        // What parses writes back to what parses the same. Compared as printed: a box
        // coordinate may be NaN, which equals nothing, and the bytes may differ (the features
        // are a map, written in any order).
        if let Ok(example) = ImageRecord::parse(record) {
            let again = ImageRecord::parse(&example.encode()).expect("its own encoding parses");
            assert_eq!(format!("{again:?}"), format!("{example:?}"));
        }
    }
});
