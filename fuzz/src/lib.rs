//! What the fuzz targets share: a scratch directory in memory for readers that take a path,
//! and the checksum fix-ups that let mutated bytes past a format's CRCs to the parsers beneath
//! (libFuzzer cannot guess a CRC; a target fixes them when the input's first byte says so).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// A directory for this process's scratch files: in `/dev/shm` where there is one (no disk I/O
/// per input), else the system's temporary directory. Lives as long as the process.
pub fn scratch_dir() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let shm = Path::new("/dev/shm");
        let dir = if shm.is_dir() {
            tempfile::tempdir_in(shm)
        } else {
            tempfile::tempdir()
        };
        dir.expect("a scratch directory")
    })
    .path()
}

/// `name` in the scratch directory.
pub fn scratch(name: &str) -> PathBuf {
    scratch_dir().join(name)
}

/// Splits off the input's first byte, the flags of how the rest is used (0 for an empty input).
pub fn flags(data: &[u8]) -> (u8, &[u8]) {
    match data.split_first() {
        Some((&flags, rest)) => (flags, rest),
        None => (0, data),
    }
}

/// TFRecord's masked CRC32C.
fn masked(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

/// Rewrites every CRC a TFRecord file's framing reaches (each length's, each record's data's).
pub fn fix_tfrecord_crcs(bytes: &mut [u8]) {
    let mut at = 0usize;
    while at + 12 <= bytes.len() {
        let len_bytes: [u8; 8] = bytes[at..at + 8].try_into().expect("8 bytes");
        let crc = masked(crc32c::crc32c(&len_bytes));
        bytes[at + 8..at + 12].copy_from_slice(&crc.to_le_bytes());
        let end = usize::try_from(u64::from_le_bytes(len_bytes))
            .ok()
            .and_then(|len| (at + 12).checked_add(len));
        let Some(end) = end.filter(|end| end.checked_add(4).is_some_and(|e| e <= bytes.len()))
        else {
            return;
        };
        let crc = masked(crc32c::crc32c(&bytes[at + 12..end]));
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
    let crc = masked(crc32c::crc32c(&bytes[offset..=end]));
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
