//! TensorFlow V2 checkpoints: the index (LevelDB table: footer, block handles, prefix-compressed
//! keys, block CRCs), its protos (bundle header and entries; partitioned variables' slices
//! and their keys; an object-based checkpoint's entries, whose graph names them) and the data
//! shard (tensor bytes of every dtype, strings with varint
//! lengths, CRC32C per tensor).

use std::path::{Path, PathBuf};

use burn_towers::models::weights::TfCheckpoint;
use proptest::prelude::*;
use towers_testing::crc_fixups::fix_table_crcs;

use crate::fuzz;
use crate::mutate::mutated;

/// A checkpoint TensorFlow wrote, as its prefix under `crates/models/tests/data`.
type Seed = &'static str;

/// One variable of every dtype the reader knows (`scripts/tf_fixtures/dtypes_checkpoint.py`).
const DTYPES: Seed = "tf_dtypes/dtypes/model.ckpt-7";
/// Partitioned variables of several dtypes (`scripts/tf_fixtures/partitioned_checkpoint.py`).
const PARTITIONED: Seed = "tf_partitioned/v2/model.ckpt";
/// A TF2 object-based checkpoint of a small Keras model, its variables named by its object
/// graph (`scripts/tf_fixtures/tf2_object_checkpoint.py`).
const OBJECT_BASED: Seed = "tf2_object/ckpt-1";

/// The file of `checkpoint` ending in `suffix`: its `.index` or its data shard.
fn seed(checkpoint: Seed, suffix: &str) -> Vec<u8> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/models/tests/data");
    std::fs::read(dir.join(format!("{checkpoint}{suffix}"))).expect("the TF checkpoint")
}

const INDEX: &str = ".index";
const DATA: &str = ".data-00000-of-00001";

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

/// A directory holding `checkpoint` as `model.ckpt-7`, one of whose files the target
/// overwrites.
fn checkpoint_dir(checkpoint: Seed) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    for suffix in [INDEX, DATA] {
        std::fs::write(
            dir.path().join(format!("model.ckpt-7{suffix}")),
            seed(checkpoint, suffix),
        )
        .unwrap();
    }
    let path = dir.path().to_path_buf();
    (dir, path)
}

/// Mutations of `checkpoint`'s index, its block CRCs fixed half the time.
fn fuzz_index(name: &str, checkpoint: Seed) {
    let (_keep, dir) = checkpoint_dir(checkpoint);
    let index = seed(checkpoint, INDEX);
    let inputs = (mutated(vec![index]), any::<bool>()).prop_map(|(mut bytes, fix)| {
        if fix {
            fix_table_crcs(&mut bytes);
        }
        bytes
    });
    fuzz(name, inputs, |bytes| {
        std::fs::write(dir.join(format!("model.ckpt-7{INDEX}")), &bytes).unwrap();
        read_all(&dir)
    });
}

#[test]
fn fuzz_tf_checkpoint_index() {
    fuzz_index("tf checkpoint index", DTYPES);
}

#[test]
fn fuzz_tf_checkpoint_partitioned_index() {
    fuzz_index("tf checkpoint partitioned index", PARTITIONED);
}

#[test]
fn fuzz_tf_checkpoint_object_based_index() {
    fuzz_index("tf checkpoint object-based index", OBJECT_BASED);
}

#[test]
fn fuzz_tf_checkpoint_data() {
    let (_keep, dir) = checkpoint_dir(DTYPES);
    fuzz(
        "tf checkpoint data",
        mutated(vec![seed(DTYPES, DATA)]),
        |bytes| {
            std::fs::write(dir.join(format!("model.ckpt-7{DATA}")), &bytes).unwrap();
            read_all(&dir)
        },
    );
}

/// The fix-up is right: the seeds' CRCs are what it writes.
#[test]
fn fixing_the_seeds_crcs_changes_nothing() {
    for checkpoint in [DTYPES, PARTITIONED, OBJECT_BASED] {
        let mut index = seed(checkpoint, INDEX);
        fix_table_crcs(&mut index);
        assert_eq!(index, seed(checkpoint, INDEX), "{checkpoint}");
    }
}
