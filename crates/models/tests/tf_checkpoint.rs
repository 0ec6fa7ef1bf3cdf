//! The TF checkpoint reader against checkpoints written by TensorFlow itself
//! (scripts/tf_fixtures/*.py): values as TF reads them back, every dtype, and named errors
//! for damaged or foreign files.

use std::path::{Path, PathBuf};

use towers_models::weights::{TfCheckpoint, TfDType, TfValues};
use towers_testing::assert_error_names;

fn data(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(path)
}

fn error(path: &Path) -> String {
    TfCheckpoint::open(path).unwrap_err().to_string()
}

/// The V2 checkpoint and the V1 file TF wrote of the same variables (the V1 file without the
/// 16-bit floats, which TF's V1 saver cannot save or its reader read) read as TF reads them.
#[test]
fn reads_every_dtype_as_tensorflow_reads_it_back() {
    let expected: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(data("tf_dtypes/values.json")).unwrap())
            .unwrap();
    let expected = expected.as_object().unwrap();
    let v1 = TfCheckpoint::open(&data("tf_dtypes/v1/model.ckpt")).unwrap();
    let in_v1 = |name: &&String| !name.ends_with("16");
    assert_same_tensors(&v1, expected.iter().filter(|(name, _)| in_v1(name)));
    let ckpt = TfCheckpoint::open(&data("tf_dtypes/dtypes")).unwrap();
    assert_same_tensors(&ckpt, expected.iter());
    let dtype = |name| ckpt.info(name).unwrap().dtype;
    assert_eq!(dtype("scope/f16"), TfDType::Half);
    assert_eq!(dtype("scope/bf16"), TfDType::BFloat16);
    assert_eq!(
        dtype("global_step"),
        TfDType::Int {
            bytes: 8,
            signed: true
        }
    );
    assert!(
        ckpt.read_f32("global_step")
            .unwrap_err()
            .to_string()
            .contains("global_step")
    );
}

/// `ckpt` holds exactly the tensors of `expected` (name: shape and values, as TF read them
/// back), with those shapes and values.
fn assert_same_tensors<'a>(
    ckpt: &TfCheckpoint,
    expected: impl Iterator<Item = (&'a String, &'a serde_json::Value)> + Clone,
) {
    let names: Vec<&str> = ckpt.tensors().map(|(name, _)| name).collect();
    let want_names: Vec<&str> = expected.clone().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, want_names);
    for (name, want) in expected {
        let shape: Vec<usize> = serde_json::from_value(want["shape"].clone()).unwrap();
        assert_eq!(ckpt.info(name).unwrap().shape, shape, "{name}");
        let values = want["values"].as_array().unwrap();
        match ckpt.read(name).unwrap() {
            TfValues::Float(got) => {
                let want: Vec<f32> = values.iter().map(|v| v.as_f64().unwrap() as f32).collect();
                assert_eq!(got, want, "{name}");
            }
            TfValues::Int(got) => {
                let want: Vec<i64> = values.iter().map(|v| v.as_i64().unwrap()).collect();
                assert_eq!(got, want, "{name}");
            }
            TfValues::Bool(got) => {
                let want: Vec<bool> = values.iter().map(|v| v.as_i64().unwrap() != 0).collect();
                assert_eq!(got, want, "{name}");
            }
            TfValues::String(got) => {
                // Strings as text, or as their bytes' numbers.
                let want: Vec<Vec<u8>> = values
                    .iter()
                    .map(|v| match v.as_str() {
                        Some(text) => text.as_bytes().to_vec(),
                        None => serde_json::from_value(v.clone()).unwrap(),
                    })
                    .collect();
                assert_eq!(got, want, "{name}");
            }
            other => panic!("{name}: values of a kind this test does not know: {other:?}"),
        }
    }
}

/// Partitioned variables (`tf_partitioned`, by TF 2.21: its V2 saver, its sharded save with
/// each variable's slices on two devices in turn, its V1 saver) read whole, as TF restores
/// them into variables that are not partitioned; their slices are not tensors of their own.
#[test]
fn partitioned_variables_read_whole_as_tensorflow_restores_them() {
    let expected: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(data("tf_partitioned/values.json")).unwrap())
            .unwrap();
    for saved in ["v2", "sharded", "v1"] {
        let ckpt = TfCheckpoint::open(&data(&format!("tf_partitioned/{saved}/model.ckpt")))
            .unwrap_or_else(|e| panic!("{saved}: {e}"));
        assert_same_tensors(&ckpt, expected.as_object().unwrap().iter());
    }
}

/// A slice's damaged bytes are a checksum error naming the variable, the slice and the data
/// shard it lies in; the variables whose slices are whole still read.
#[test]
fn a_damaged_slice_is_named_with_its_variable_and_shard() {
    let tmp = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(data("tf_partitioned/sharded")).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, tmp.path().join(path.file_name().unwrap())).unwrap();
    }
    let ckpt = TfCheckpoint::open(&tmp.path().join("model.ckpt")).unwrap();
    let clean = match ckpt.read("wide/m").unwrap() {
        TfValues::Float(values) => values,
        other => panic!("{other:?}"),
    };
    // A value of wide/m's second slice (rows 65..130), in whichever shard holds it.
    let (shard, offset) = ["data-00000-of-00002", "data-00001-of-00002"]
        .into_iter()
        .find_map(|shard| {
            let bytes = std::fs::read(tmp.path().join(format!("model.ckpt.{shard}"))).unwrap();
            let offset = (bytes.windows(4)).position(|w| w == clean[200].to_le_bytes())?;
            Some((shard, offset))
        })
        .unwrap();
    damage(&tmp.path().join(format!("model.ckpt.{shard}")), |b| {
        b[offset] ^= 0x40
    });
    let msg = ckpt.read("wide/m").unwrap_err().to_string();
    assert_error_names(&msg, &["checksum", "wide/m (slice 65,65:0,2)", shard]);
    assert!(ckpt.read("emb/a").is_ok(), "other variables still read");
}

/// TF2's object-based files of a small Keras model (`tf2_object`, by TF 2.21 with Keras 3 and
/// tf-keras 2.21: a `tf.train.Checkpoint`, the model as a SavedModel, Keras 3's export of it,
/// which saves each variable twice, tf-keras's SavedModel of it) list each variable by the name
/// Keras gave it (Keras 3's `path`, tf-keras's `name`), with its values; a SavedModel opens by
/// its folder or its `saved_model.pb`.
#[test]
fn object_based_checkpoints_list_variables_by_the_names_keras_gave_them() {
    let expected: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(data("tf2_object/variables.json")).unwrap())
            .unwrap();
    let saved = [
        ("ckpt-1", "keras3"),
        ("saved", "keras3"),
        ("saved/saved_model.pb", "keras3"),
        ("exported", "keras3"),
        ("tf_keras_saved", "tf_keras"),
    ];
    for (path, keras) in saved {
        let ckpt = TfCheckpoint::open(&data(&format!("tf2_object/{path}"))).unwrap();
        assert!(ckpt.is_object_based(), "{path}");
        let listed: Vec<&str> = ckpt.tensors().map(|(name, _)| name).collect();
        for (name, want) in expected[keras].as_object().unwrap() {
            assert!(
                listed.contains(&name.as_str()),
                "{path}: {name} in {listed:?}"
            );
            let shape: Vec<usize> = serde_json::from_value(want["shape"].clone()).unwrap();
            assert_eq!(ckpt.info(name).unwrap().shape, shape, "{path}: {name}");
            let values: Vec<f32> = serde_json::from_value(want["values"].clone()).unwrap();
            assert_eq!(ckpt.read_f32(name).unwrap(), values, "{path}: {name}");
        }
    }
    let by_names = TfCheckpoint::open(&data("tf_dtypes/dtypes")).unwrap();
    assert!(!by_names.is_object_based());
}

/// An object-based checkpoint whose object graph is damaged is an error naming it, not a
/// checkpoint listed by its keys.
#[test]
fn a_damaged_object_graph_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    for file in ["ckpt-1.index", "ckpt-1.data-00000-of-00001"] {
        std::fs::copy(data("tf2_object").join(file), tmp.path().join(file)).unwrap();
    }
    let shard = tmp.path().join("ckpt-1.data-00000-of-00001");
    let bytes = std::fs::read(&shard).unwrap();
    let at = (bytes.windows(14))
        .position(|w| w == b"VARIABLE_VALUE")
        .unwrap();
    damage(&shard, |b| b[at] ^= 0x20);
    let message = error(&tmp.path().join("ckpt-1"));
    assert_error_names(&message, &["_CHECKPOINTABLE_OBJECT_GRAPH", "checksum"]);
}

/// A SavedModel whose `variables/` is missing (one whose weights are constants in its graph,
/// or a copy not finished) is an error naming its folder.
#[test]
fn a_saved_model_without_variables_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::copy(
        data("tf2_object/saved/saved_model.pb"),
        tmp.path().join("saved_model.pb"),
    )
    .unwrap();
    for path in [tmp.path().to_path_buf(), tmp.path().join("saved_model.pb")] {
        let message = error(&path);
        assert_error_names(
            &message,
            &[
                tmp.path().to_str().unwrap(),
                "a SavedModel without variables",
            ],
        );
    }
}

#[test]
fn opens_a_prefix_its_index_a_data_shard_or_a_train_directory() {
    let dir = data("tf_cifar10");
    let prefix = dir.join("model.ckpt-200");
    let index = dir.join("model.ckpt-200.index");
    let shard = dir.join("model.ckpt-200.data-00000-of-00001");
    for path in [&dir, &prefix, &index, &shard] {
        let ckpt = TfCheckpoint::open(path).unwrap();
        assert_eq!(ckpt.prefix(), prefix, "{}", path.display());
    }
    // The variable list TF's list_variables wrote when it generated the fixture.
    let ckpt = TfCheckpoint::open(&dir).unwrap();
    let listed: String = ckpt
        .tensors()
        .map(|(name, info)| format!("{name}\t{:?}\n", info.shape))
        .collect();
    assert_eq!(
        listed,
        std::fs::read_to_string(dir.join("variables_12x12.txt")).unwrap()
    );
    let step = ckpt.read("global_step").unwrap();
    assert_eq!(step, TfValues::Int(vec![200]));
}

/// A train directory moved from where TF 1's `Saver` wrote its absolute state file opens its
/// own checkpoint; where that absolute path still holds one, it is taken, as TF takes it.
#[test]
fn a_moved_train_directory_opens_its_own_checkpoint() {
    let (tmp, prefix) = copy_of_cifar10();
    let state = "model_checkpoint_path: \"/gone/train/model.ckpt-200\"\n";
    std::fs::write(tmp.path().join("checkpoint"), state).unwrap();
    assert_eq!(TfCheckpoint::open(tmp.path()).unwrap().prefix(), prefix);
    let (_elsewhere, other) = copy_of_cifar10();
    let state = format!("model_checkpoint_path: \"{}\"\n", other.display());
    std::fs::write(tmp.path().join("checkpoint"), state).unwrap();
    assert_eq!(TfCheckpoint::open(tmp.path()).unwrap().prefix(), other);
    let state = "model_checkpoint_path: \"/gone/train/model.ckpt-300\"\n";
    std::fs::write(tmp.path().join("checkpoint"), state).unwrap();
    assert_error_names(&error(tmp.path()), &["/gone/train/model.ckpt-300"]);
}

/// A copy of the CIFAR-10 fixture in a temporary directory, to damage.
fn copy_of_cifar10() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    for file in [
        "model.ckpt-200.index",
        "model.ckpt-200.data-00000-of-00001",
        "checkpoint",
    ] {
        std::fs::copy(data("tf_cifar10").join(file), tmp.path().join(file)).unwrap();
    }
    let prefix = tmp.path().join("model.ckpt-200");
    (tmp, prefix)
}

fn damage(path: &Path, f: impl FnOnce(&mut Vec<u8>)) {
    let mut bytes = std::fs::read(path).unwrap();
    f(&mut bytes);
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn a_corrupt_tensor_is_a_checksum_error_naming_the_shard_and_tensor() {
    let (_tmp, prefix) = copy_of_cifar10();
    let shard = prefix.with_extension("ckpt-200.data-00000-of-00001");
    let ckpt = TfCheckpoint::open(&prefix).unwrap();
    // Flip one byte inside conv2/weights.
    let clean = ckpt.read_f32("conv2/weights").unwrap();
    let offset = std::fs::read(&shard)
        .unwrap()
        .windows(4)
        .position(|w| w == clean[100].to_le_bytes())
        .unwrap();
    damage(&shard, |b| b[offset] ^= 0x40);
    let msg = ckpt.read("conv2/weights").unwrap_err().to_string();
    assert_error_names(&msg, &["checksum", "conv2/weights", "data-00000-of-00001"]);
    assert!(
        ckpt.read("conv1/weights").is_ok(),
        "other tensors still read"
    );
}

#[test]
fn a_missing_or_short_data_shard_is_named() {
    let (_tmp, prefix) = copy_of_cifar10();
    let shard = prefix.with_extension("ckpt-200.data-00000-of-00001");
    damage(&shard, |b| b.truncate(b.len() / 2));
    // Refused at open, before anything is read: the index puts a tensor past the cut.
    let msg = error(&prefix);
    assert_error_names(
        &msg,
        &[
            "data-00000-of-00001",
            "tensor `",
            "past the end of this shard",
        ],
    );

    std::fs::remove_file(&shard).unwrap();
    let msg = error(&prefix);
    // The shard, and a tensor that needs it.
    assert_error_names(&msg, &["data-00000-of-00001", "missing", "tensor `"]);
}

#[test]
fn a_damaged_index_is_a_named_error() {
    let (_tmp, prefix) = copy_of_cifar10();
    let index = prefix.with_extension("ckpt-200.index");
    let clean = std::fs::read(&index).unwrap();
    damage(&index, |b| b[20] ^= 0x01);
    let msg = error(&prefix);
    assert_error_names(&msg, &["model.ckpt-200.index", "checksum"]);

    std::fs::write(&index, &clean[..clean.len() - 30]).unwrap();
    let msg = error(&prefix);
    assert_error_names(&msg, &["model.ckpt-200.index", "truncated"]);
    std::fs::write(&index, &clean[..10]).unwrap();
    assert!(error(&prefix).contains("truncated"));
}

/// A V1 file (TF-slim's published checkpoints) opens as itself, through its `.meta` and
/// through its train directory's state file, whose name TF escapes; a damaged one is a
/// checksum error naming it. Files that are not checkpoints are told apart.
#[test]
fn v1_checkpoints_open_and_foreign_files_are_told_apart() {
    let tmp = tempfile::tempdir().unwrap();
    let copy = tmp.path().join("we\"ird-5");
    std::fs::copy(data("tf_dtypes/v1/model.ckpt"), &copy).unwrap();
    let state = "model_checkpoint_path: \"we\\\"ird-5\"\n";
    std::fs::write(tmp.path().join("checkpoint"), state).unwrap();
    for path in [&copy, &tmp.path().join("we\"ird-5.meta"), tmp.path()] {
        let ckpt = TfCheckpoint::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(ckpt.prefix(), copy);
        assert_eq!(ckpt.read_f32("scope/f32").unwrap().len(), 6);
    }
    damage(&copy, |b| b[30] ^= 0x01);
    assert_error_names(&error(&copy), &["ird-5", "checksum"]);

    let msg = error(&data("tf_cifar10/test_batch.bin"));
    assert_error_names(&msg, &["not a TensorFlow checkpoint"]);
    let msg = error(&data("tf_cifar10/no-such-prefix"));
    assert_error_names(&msg, &["no checkpoint here"]);
    let empty = tempfile::tempdir().unwrap();
    let msg = error(empty.path());
    // A directory without a state file.
    assert_error_names(&msg, &["checkpoint"]);
}
