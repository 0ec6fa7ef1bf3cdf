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
pub(super) const MAGIC: u64 = 0xdb47_7524_8b80_fb57;
/// Two block handles (up to 20 bytes each, padded to 40) and the magic.
const FOOTER_LEN: usize = 48;
/// Compression type (1 byte) and masked CRC32C (4 bytes) after each block.
const TRAILER_LEN: usize = 5;

/// A key and its value.
pub(super) type Entry = (Vec<u8>, Vec<u8>);

/// The most bytes of keys and values a table may decode to, per byte of the file. Keys are
/// prefix-compressed, so a few bytes may stand for a long key; the indexes TF wrote in
/// `crates/models/tests/data` decode to 0.75 and 1.04 times their size (keys and values, index
/// block included), and even keys of 200 bytes differing in their last byte, with TF's
/// ~20-byte entries, would stay under 16x. Without a cap, a 1 MB index of keys
/// sharing 64 KiB prefixes decodes to gigabytes.
const MAX_DECODED_PER_FILE_BYTE: usize = 16;

/// Every key and value of the table in `bytes` (the content of `path`), in key order.
///
/// Bounded by the input: offsets and lengths are checked against the file's real size before
/// use; data blocks must lie in increasing order without overlapping (so no block is decoded
/// twice); keys must be strictly increasing, as every table writer makes them; and all keys and
/// values together may take at most [`MAX_DECODED_PER_FILE_BYTE`] times the file's size,
/// checked before each entry is allocated. Each violation is an error naming the file.
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
    let mut decoder = Decoder::new(bytes.len());
    let block_handles = decoder
        .entries(index.read(bytes).map_err(&bad)?, "index block")
        .map_err(&bad)?;
    decoder.last_key = None;
    let mut next_free = 0u64;
    let mut entries = Vec::new();
    for (number, (_, handle)) in block_handles.iter().enumerate() {
        let handle = BlockHandle::decode(&mut handle.as_slice()).map_err(&bad)?;
        next_free = handle
            .follows(next_free)
            .map_err(|e| bad(format!("data block {number}: {e}")))?;
        let block = handle.read(bytes).map_err(&bad)?;
        let what = format!("data block {number}");
        entries.extend(decoder.entries(block, &what).map_err(&bad)?);
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

    /// Where the next block may start, if this one starts at or after `free` (the end of the
    /// previous block with its trailer): blocks in increasing order, none overlapping another.
    fn follows(self, free: u64) -> Result<u64, String> {
        if self.offset < free {
            return Err(format!(
                "starts at byte {}, before the end of the previous block ({free}): blocks \
                 overlap or repeat",
                self.offset
            ));
        }
        self.offset
            .checked_add(self.size)
            .and_then(|end| end.checked_add(TRAILER_LEN as u64))
            .ok_or_else(|| "block handle out of range".to_string())
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

/// What the blocks of one table decoded so far: the bytes left to decode and the last key.
struct Decoder {
    /// Bytes of keys and values still allowed ([`MAX_DECODED_PER_FILE_BYTE`] per file byte).
    budget: usize,
    /// The file's size, for the message when the budget runs out.
    file_len: usize,
    /// The previous entry's key, which the next must follow.
    last_key: Option<Vec<u8>>,
}

impl Decoder {
    fn new(file_len: usize) -> Self {
        Self {
            budget: file_len.saturating_mul(MAX_DECODED_PER_FILE_BYTE),
            file_len,
            last_key: None,
        }
    }

    /// The key-value pairs of one block (`what`, for messages): entries with keys sharing a
    /// prefix with the previous key, then a restart array (u32 each) and its length (u32).
    fn entries(&mut self, block: &[u8], what: &str) -> Result<Vec<Entry>, String> {
        let corrupt = |number: usize| format!("{what}, entry {number}: corrupt");
        let u32_at = |at: usize| -> Option<usize> {
            let b = block.get(at..at + 4)?;
            Some(u32::from_le_bytes(b.try_into().ok()?) as usize)
        };
        let num_restarts = block
            .len()
            .checked_sub(4)
            .and_then(u32_at)
            .ok_or_else(|| format!("{what}: corrupt restart array"))?;
        let data_len = num_restarts
            .checked_mul(4)
            .and_then(|r| block.len().checked_sub(4 + r))
            .ok_or_else(|| format!("{what}: corrupt restart array"))?;
        let mut data = &block[..data_len];
        let mut entries: Vec<Entry> = Vec::new();
        let mut key = Vec::new();
        while !data.is_empty() {
            let number = entries.len();
            let mut varint = || {
                decode_varint(&mut data)
                    .ok()
                    .and_then(|v| usize::try_from(v).ok())
                    .ok_or_else(|| corrupt(number))
            };
            let (shared, unshared, value_len) = (varint()?, varint()?, varint()?);
            let end = unshared
                .checked_add(value_len)
                .ok_or_else(|| corrupt(number))?;
            if shared > key.len() || end > data.len() {
                return Err(corrupt(number));
            }
            self.spend(shared + end, what, number)?;
            key.truncate(shared);
            key.extend_from_slice(&data[..unshared]);
            self.follow(&key, what, number)?;
            entries.push((key.clone(), data[unshared..end].to_vec()));
            data = &data[end..];
        }
        Ok(entries)
    }

    /// Takes `bytes` (an entry's key and value, about to be allocated) from the budget.
    fn spend(&mut self, bytes: usize, what: &str, number: usize) -> Result<(), String> {
        self.budget = self.budget.checked_sub(bytes).ok_or_else(|| {
            format!(
                "{what}, entry {number}: the keys and values decode to more than \
                 {MAX_DECODED_PER_FILE_BYTE} times the file's {} bytes (keys sharing long \
                 prefixes): not an index TF writes",
                self.file_len
            )
        })?;
        Ok(())
    }

    /// Checks that `key` comes strictly after the previous key, and makes it the previous key.
    fn follow(&mut self, key: &[u8], what: &str, number: usize) -> Result<(), String> {
        if let Some(last) = &self.last_key
            && key <= last.as_slice()
        {
            return Err(format!(
                "{what}, entry {number}: key {:?} does not come after the previous key {:?}: \
                 keys must be strictly increasing",
                shown(key),
                shown(last)
            ));
        }
        match &mut self.last_key {
            Some(last) => {
                last.clear();
                last.extend_from_slice(key);
            }
            None => self.last_key = Some(key.to_vec()),
        }
        Ok(())
    }
}

/// A key for a message: at most its first 80 bytes (a crafted key may be 64 KiB long).
fn shown(key: &[u8]) -> String {
    let text = String::from_utf8_lossy(&key[..key.len().min(80)]).into_owned();
    match key.len() > 80 {
        true => format!("{text}… ({} bytes)", key.len()),
        false => text,
    }
}

/// TF's CRC mask (`crc32c::Mask`), as in TFRecord framing: rotate right by 15, add a constant.
pub(super) fn mask_crc(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}
