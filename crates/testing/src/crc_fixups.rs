//! Checksum fix-ups for fuzzing: mutated bytes get past a format's CRCs to the parsers beneath
//! (a fuzzer cannot guess a CRC). Shared by the proptest targets (`tests/fuzz/`) and the
//! cargo-fuzz targets (`fuzz/`).

use towers_data::tfrecord::masked_crc;

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

/// A LevelDB varint at `*at`, advancing it.
fn varint(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *bytes.get(*at)?;
        *at += 1;
        value |= u64::from(byte & 0x7F) << shift;
        if byte < 0x80 {
            return Some(value);
        }
    }
    None
}

/// Rewrites the trailer CRC of the table block whose handle (offset, size) is at `handle`;
/// returns the block's range.
fn fix_block(bytes: &mut [u8], handle: &[u8]) -> Option<std::ops::Range<usize>> {
    let mut at = 0;
    let offset = usize::try_from(varint(handle, &mut at)?).ok()?;
    let size = usize::try_from(varint(handle, &mut at)?).ok()?;
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
    let handles = bytes[footer..footer + 40].to_vec();
    let mut at = 0;
    // The metaindex handle, then the index block's.
    if varint(&handles, &mut at)
        .and(varint(&handles, &mut at))
        .is_none()
    {
        return;
    }
    let Some(index) = fix_block(bytes, &handles[at..]) else {
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
    let mut at = 0;
    while at < restarts {
        let (Some(_), Some(unshared), Some(len)) = (
            varint(&block, &mut at),
            varint(&block, &mut at),
            varint(&block, &mut at),
        ) else {
            return;
        };
        let value = usize::try_from(unshared)
            .ok()
            .and_then(|u| at.checked_add(u));
        let end = value
            .zip(usize::try_from(len).ok())
            .and_then(|(v, l)| v.checked_add(l));
        let (Some(value), Some(end)) = (value, end) else {
            return;
        };
        if end > block.len() {
            return;
        }
        fix_block(bytes, &block[value..end]);
        at = end;
    }
}
