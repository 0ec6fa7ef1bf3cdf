//! The sorted string table of a TF checkpoint's `.index` file: LevelDB's table format, which
//! TF's `tensorflow/core/lib/io/table` copies (footer, index block, data blocks with prefix-
//! compressed keys, a CRC32C trailer per block).
//!
//! Written here because no maintained crate exposes a reader of a single table: rusty-leveldb
//! (the pure-Rust LevelDB) keeps its table reader private behind a whole database directory,
//! and the other crates bind LevelDB's C++ library. TF writes index tables uncompressed, so
//! this reader needs no Snappy; a compressed block is a clear error.

use std::path::Path;

use prost::encoding::decode_varint;

use super::error::{Result, WeightsError};

/// The last 8 bytes of every table.
const MAGIC: u64 = 0xdb47_7524_8b80_fb57;
/// Two block handles (up to 20 bytes each, padded to 40) and the magic.
const FOOTER_LEN: usize = 48;
/// Compression type (1 byte) and masked CRC32C (4 bytes) after each block.
const TRAILER_LEN: usize = 5;

/// A key and its value.
pub(super) type Entry = (Vec<u8>, Vec<u8>);

/// Every key and value of the table in `bytes` (the content of `path`), in key order.
///
/// Offsets and lengths read from the file are checked against its real size before use, so a
/// corrupt length field is an error, never a large allocation.
pub(super) fn read_table(path: &Path, bytes: &[u8]) -> Result<Vec<Entry>> {
    let bad = |reason: String| WeightsError::format(path, reason);
    if bytes.len() < FOOTER_LEN {
        return Err(bad(format!(
            "{} bytes, shorter than a table's footer: truncated, or not a checkpoint index",
            bytes.len()
        )));
    }
    let footer = &bytes[bytes.len() - FOOTER_LEN..];
    let magic = u64::from_le_bytes(footer[40..].try_into().expect("8 bytes"));
    if magic != MAGIC {
        return Err(bad(
            "no table magic at the end: truncated, or not a checkpoint index".into(),
        ));
    }
    let mut handles = &footer[..40];
    let _metaindex = BlockHandle::decode(&mut handles).map_err(&bad)?;
    let index = BlockHandle::decode(&mut handles).map_err(&bad)?;
    let mut entries = Vec::new();
    for (_, handle) in block_entries(index.read(bytes).map_err(&bad)?).map_err(&bad)? {
        let handle = BlockHandle::decode(&mut handle.as_slice()).map_err(&bad)?;
        entries.extend(block_entries(handle.read(bytes).map_err(&bad)?).map_err(&bad)?);
    }
    Ok(entries)
}

/// Where a block lies in the file.
#[derive(Debug, Clone, Copy)]
struct BlockHandle {
    offset: u64,
    size: u64,
}

impl BlockHandle {
    fn decode(buf: &mut &[u8]) -> Result<Self, String> {
        let mut varint = || decode_varint(buf).map_err(|e| format!("bad block handle: {e}"));
        Ok(Self {
            offset: varint()?,
            size: varint()?,
        })
    }

    /// The block's contents, after checking its trailer (uncompressed, CRC32C as TF masks it).
    fn read(self, file: &[u8]) -> Result<&[u8], String> {
        let start = usize::try_from(self.offset).ok();
        let end = start
            .zip(usize::try_from(self.size).ok())
            .and_then(|(s, n)| s.checked_add(n)?.checked_add(TRAILER_LEN));
        let (Some(start), Some(end)) = (start, end) else {
            return Err("block handle out of range".into());
        };
        if end > file.len() - FOOTER_LEN {
            return Err(format!(
                "a block at {start}..{end} runs past the end of the table ({} bytes): truncated",
                file.len()
            ));
        }
        let contents = &file[start..end - TRAILER_LEN];
        let trailer = &file[end - TRAILER_LEN..end];
        let stored = u32::from_le_bytes(trailer[1..].try_into().expect("4 bytes"));
        let actual = crc32c::crc32c_append(crc32c::crc32c(contents), &trailer[..1]);
        if stored != mask_crc(actual) {
            return Err(format!("bad checksum of the block at {start}: corrupt"));
        }
        match trailer[0] {
            0 => Ok(contents),
            kind => Err(format!(
                "block at {start} is compressed (type {kind}); TF writes checkpoint indexes \
                 uncompressed and only those are supported"
            )),
        }
    }
}

/// The key-value pairs of one block: entries with keys sharing a prefix with the previous
/// key, then a restart array (u32 each) and its length (u32).
fn block_entries(block: &[u8]) -> Result<Vec<Entry>, String> {
    let corrupt = || "corrupt block".to_string();
    let u32_at = |at: usize| -> Option<usize> {
        let b = block.get(at..at + 4)?;
        Some(u32::from_le_bytes(b.try_into().ok()?) as usize)
    };
    let num_restarts = block
        .len()
        .checked_sub(4)
        .and_then(u32_at)
        .ok_or_else(corrupt)?;
    let data_len = num_restarts
        .checked_mul(4)
        .and_then(|r| block.len().checked_sub(4 + r))
        .ok_or_else(corrupt)?;
    let mut data = &block[..data_len];
    let mut entries: Vec<Entry> = Vec::new();
    let mut key = Vec::new();
    while !data.is_empty() {
        let mut varint = || {
            decode_varint(&mut data)
                .ok()
                .and_then(|v| usize::try_from(v).ok())
                .ok_or_else(corrupt)
        };
        let (shared, unshared, value_len) = (varint()?, varint()?, varint()?);
        let end = unshared.checked_add(value_len).ok_or_else(corrupt)?;
        if shared > key.len() || end > data.len() {
            return Err(corrupt());
        }
        key.truncate(shared);
        key.extend_from_slice(&data[..unshared]);
        entries.push((key.clone(), data[unshared..end].to_vec()));
        data = &data[end..];
    }
    Ok(entries)
}

/// TF's CRC mask (`crc32c::Mask`), as in TFRecord framing: rotate right by 15, add a constant.
pub(super) fn mask_crc(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}
