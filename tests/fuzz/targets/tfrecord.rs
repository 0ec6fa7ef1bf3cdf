//! TFRecord framing: the index of a shard (length CRCs, lengths) and each record's data CRC.

use std::path::Path;

use burn_towers::data::tfrecord::{index_reader, masked_crc, record_data};
use proptest::prelude::*;

use super::seed_shard;
use crate::fuzz;
use crate::mutate::mutated;

/// Rewrites every CRC the framing reaches, so that edits inside records pass the checks.
fn fix_crcs(bytes: &mut [u8]) {
    let mut at = 0usize;
    while at + 12 <= bytes.len() {
        let len_bytes: [u8; 8] = bytes[at..at + 8].try_into().unwrap();
        bytes[at + 8..at + 12].copy_from_slice(&masked_crc(&len_bytes).to_le_bytes());
        let len = u64::from_le_bytes(len_bytes);
        let Some(end) = usize::try_from(len)
            .ok()
            .and_then(|l| (at + 12).checked_add(l))
        else {
            return;
        };
        if end + 4 > bytes.len() {
            return;
        }
        let crc = masked_crc(&bytes[at + 12..end]);
        bytes[end..end + 4].copy_from_slice(&crc.to_le_bytes());
        at = end + 4;
    }
}

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
            fix_crcs(&mut bytes);
        }
        bytes
    });
    fuzz("tfrecord", inputs, |bytes| read_all(&bytes));
}
