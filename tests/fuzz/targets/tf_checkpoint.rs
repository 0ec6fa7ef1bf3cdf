//! TensorFlow V2 checkpoints: the index (LevelDB table: footer, block handles, prefix-compressed
//! keys, block CRCs), its protos (bundle header and entries) and the data shard (tensor bytes
//! of every dtype, strings with varint lengths, CRC32C per tensor).

use std::path::{Path, PathBuf};

use burn_towers::models::weights::TfCheckpoint;
use proptest::prelude::*;

use crate::fuzz;
use crate::mutate::mutated;

/// The checkpoint TensorFlow wrote with one variable of every dtype the reader knows
/// (`scripts/tf_fixtures/dtypes_checkpoint.py`): its `.index` and its data shard.
fn seed(suffix: &str) -> Vec<u8> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/models/tests/data/tf_dtypes");
    std::fs::read(dir.join(format!("dtypes/model.ckpt-7{suffix}"))).expect("the TF checkpoint")
}

const INDEX: &str = ".index";
const DATA: &str = ".data-00000-of-00001";

/// TF's masked CRC32C of a block's contents and compression byte.
fn block_crc(contents_and_type: &[u8]) -> u32 {
    let crc = crc32c::crc32c(contents_and_type);
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

/// A varint at `*at`, advancing it.
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

/// Rewrites the trailer CRC of the block at `handle` (offset, size varints at `*at`); returns
/// the block's range.
fn fix_block(bytes: &mut [u8], handle: &[u8]) -> Option<std::ops::Range<usize>> {
    let mut at = 0;
    let offset = usize::try_from(varint(handle, &mut at)?).ok()?;
    let size = usize::try_from(varint(handle, &mut at)?).ok()?;
    let end = offset.checked_add(size)?;
    if end.checked_add(5)? > bytes.len() {
        return None;
    }
    let crc = block_crc(&bytes[offset..=end]);
    bytes[end + 1..end + 5].copy_from_slice(&crc.to_le_bytes());
    Some(offset..end)
}

/// Rewrites the CRCs of the index block and of every data block it lists, so that edits
/// inside blocks reach the table and proto parsers beneath.
fn fix_crcs(bytes: &mut [u8]) {
    let Some(footer) = bytes.len().checked_sub(48) else {
        return;
    };
    let handles = bytes[footer..footer + 40].to_vec();
    let mut at = 0;
    let (Some(_), Some(_)) = (varint(&handles, &mut at), varint(&handles, &mut at)) else {
        return;
    };
    let Some(index) = fix_block(bytes, &handles[at..]) else {
        return;
    };
    let block = bytes[index].to_vec();
    let Some(restarts) = block.len().checked_sub(4).and_then(|at| {
        let n = u32::from_le_bytes(block[at..].try_into().ok()?) as usize;
        block.len().checked_sub(4 + n.checked_mul(4)?)
    }) else {
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
        let Some(value) = usize::try_from(unshared)
            .ok()
            .and_then(|u| at.checked_add(u))
        else {
            return;
        };
        let Some(end) = usize::try_from(len).ok().and_then(|l| value.checked_add(l)) else {
            return;
        };
        if end > block.len() {
            return;
        }
        fix_block(bytes, &block[value..end]);
        at = end;
    }
}

/// Opens the checkpoint in `dir` and reads every tensor; what reads is as long as its shape
/// says (strings aside).
fn read_all(dir: &Path) -> bool {
    let Ok(checkpoint) = TfCheckpoint::open(&dir.join("model.ckpt-7")) else {
        return false;
    };
    let names: Vec<(String, usize)> = checkpoint
        .tensors()
        .map(|(name, info)| (name.to_string(), info.shape.iter().product()))
        .collect();
    let mut all = true;
    for (name, len) in names {
        match checkpoint.read(&name) {
            Ok(burn_towers::models::weights::TfValues::Float(v)) => assert_eq!(v.len(), len),
            Ok(burn_towers::models::weights::TfValues::Int(v)) => assert_eq!(v.len(), len),
            Ok(_) => {}
            Err(_) => all = false,
        }
    }
    all
}

/// A directory holding the seed checkpoint, one of whose files the target overwrites.
fn checkpoint_dir() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    for suffix in [INDEX, DATA] {
        std::fs::write(
            dir.path().join(format!("model.ckpt-7{suffix}")),
            seed(suffix),
        )
        .unwrap();
    }
    let path = dir.path().to_path_buf();
    (dir, path)
}

#[test]
fn fuzz_tf_checkpoint_index() {
    let (_keep, dir) = checkpoint_dir();
    let inputs = (mutated(vec![seed(INDEX)]), any::<bool>()).prop_map(|(mut bytes, fix)| {
        if fix {
            fix_crcs(&mut bytes);
        }
        bytes
    });
    fuzz("tf checkpoint index", inputs, |bytes| {
        std::fs::write(dir.join(format!("model.ckpt-7{INDEX}")), &bytes).unwrap();
        read_all(&dir)
    });
}

#[test]
fn fuzz_tf_checkpoint_data() {
    let (_keep, dir) = checkpoint_dir();
    fuzz("tf checkpoint data", mutated(vec![seed(DATA)]), |bytes| {
        std::fs::write(dir.join(format!("model.ckpt-7{DATA}")), &bytes).unwrap();
        read_all(&dir)
    });
}

/// The fix-up is right: the seed's CRCs are what it writes.
#[test]
fn fixing_the_seeds_crcs_changes_nothing() {
    let mut index = seed(INDEX);
    fix_crcs(&mut index);
    assert_eq!(index, seed(INDEX));
}
