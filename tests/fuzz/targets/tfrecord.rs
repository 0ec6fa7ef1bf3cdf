//! TFRecord framing: the index of a shard (length CRCs, lengths) and each record's data CRC.

use std::path::Path;

use burn_towers::data::tfrecord::{index_reader, record_data};
use proptest::prelude::*;
use towers_testing::crc_fixups::fix_tfrecord_crcs;

use super::seed_shard;
use crate::fuzz;
use crate::mutate::mutated;

/// Indexes and reads every record; the spans must lie inside the input.
fn read_all(bytes: &[u8]) -> bool {
    let path = Path::new("shard");
    let Ok(spans) = index_reader(std::io::Cursor::new(bytes), bytes.len() as u64, path) else {
        return false;
    };
    for (i, span) in spans.iter().enumerate() {
        let start = span.offset as usize;
        assert!(
            start + span.len <= bytes.len(),
            "span {span:?} past the input"
        );
        let _ = record_data(path, i, &bytes[start..start + span.len]);
    }
    true
}

#[test]
fn fuzz_tfrecord_framing() {
    let inputs = (mutated(vec![seed_shard()]), any::<bool>()).prop_map(|(mut bytes, fix)| {
        if fix {
            fix_tfrecord_crcs(&mut bytes);
        }
        bytes
    });
    fuzz("tfrecord", inputs, |bytes| read_all(&bytes));
}
