//! Checksum fix-ups for fuzzing: mutated bytes get past a format's CRCs to the parsers beneath
//! (a fuzzer cannot guess a CRC). Shared by the proptest targets (`tests/fuzz/`) and the
//! cargo-fuzz targets (`fuzz/`).

use std::ops::Range;

use prost::encoding::decode_varint;
use towers_data::tfrecord::masked_crc;

/// Sets the CRC32C trailer of one of our checkpoint files (`BTOWCKP2`, then the content, then
/// the trailer) to match the content, so that the parsers beneath it are reached.
pub fn fix_checkpoint_crc(bytes: &mut [u8]) {
    if bytes.starts_with(b"BTOWCKP2") && bytes.len() >= 20 {
        let split = bytes.len() - 4;
        let crc = crc32c::crc32c(&bytes[..split]);
        bytes[split..].copy_from_slice(&crc.to_le_bytes());
    }
}

/// Rewrites every CRC a TFRecord file's framing reaches (each length's, each record's data's).
pub fn fix_tfrecord_crcs(bytes: &mut [u8]) {
    let mut at = 0usize;
    while at + 12 <= bytes.len() {
        let len_bytes: [u8; 8] = bytes[at..at + 8].try_into().expect("8 bytes");
        let crc = masked_crc(&len_bytes);
        bytes[at + 8..at + 12].copy_from_slice(&crc.to_le_bytes());
        let end = usize::try_from(u64::from_le_bytes(len_bytes))
            .ok()
            .and_then(|len| (at + 12).checked_add(len));
        let Some(end) = end.filter(|end| end.checked_add(4).is_some_and(|e| e <= bytes.len()))
        else {
            return;
        };
        let crc = masked_crc(&bytes[at + 12..end]);
        bytes[end..end + 4].copy_from_slice(&crc.to_le_bytes());
        at = end + 4;
    }
}

/// A LevelDB varint at the front of `rest`, advancing past it: prost's reader, the one the
/// table reader (`towers_models::weights`) uses.
fn varint(rest: &mut &[u8]) -> Option<usize> {
    usize::try_from(decode_varint(rest).ok()?).ok()
}

/// Rewrites the trailer CRC of the table block whose handle (offset, size) starts `handle`;
/// returns the block's range.
fn fix_block(bytes: &mut [u8], mut handle: &[u8]) -> Option<Range<usize>> {
    let offset = varint(&mut handle)?;
    let size = varint(&mut handle)?;
    let end = offset.checked_add(size)?;
    if end.checked_add(5)? > bytes.len() {
        return None;
    }
    let crc = masked_crc(&bytes[offset..=end]);
    bytes[end + 1..end + 5].copy_from_slice(&crc.to_le_bytes());
    Some(offset..end)
}

/// Rewrites the CRCs of a TF checkpoint index (a LevelDB table): its index block's and those
/// of the data blocks the index block lists.
pub fn fix_table_crcs(bytes: &mut [u8]) {
    let Some(footer) = bytes.len().checked_sub(48) else {
        return;
    };
    let footer = bytes[footer..footer + 40].to_vec();
    let mut handles = &footer[..];
    // The metaindex handle, then the index block's.
    if varint(&mut handles).and(varint(&mut handles)).is_none() {
        return;
    }
    let Some(index) = fix_block(bytes, handles) else {
        return;
    };
    let block = bytes[index].to_vec();
    let restarts = block.len().checked_sub(4).and_then(|at| {
        let n = u32::from_le_bytes(block[at..].try_into().ok()?) as usize;
        block.len().checked_sub(4 + n.checked_mul(4)?)
    });
    let Some(restarts) = restarts else {
        return;
    };
    // Each entry: shared and unshared key lengths, value length, the key's unshared bytes, the
    // value (a data block's handle).
    let mut entries = &block[..];
    while block.len() - entries.len() < restarts {
        let (Some(_), Some(unshared), Some(len)) = (
            varint(&mut entries),
            varint(&mut entries),
            varint(&mut entries),
        ) else {
            return;
        };
        let Some(value) = entries.get(unshared..).and_then(|rest| rest.get(..len)) else {
            return;
        };
        fix_block(bytes, value);
        entries = &entries[unshared + len..];
    }
}
