//! An exit that runs no destructor (`towers_multigpu::exit_now`: the trainer's second Ctrl-C,
//! a tower past its timeout) leaves none of this crate's temporary files behind: a child
//! process makes both built-in datasets and a file half-written atomically, then exits so.

use std::io::Write;
use std::path::Path;

use towers_data::atomic_file::AtomicFile;
use towers_data::cifar10::BuiltinCifar10;
use towers_data::inception::{BuiltinShards, BuiltinShardsConfig};
use towers_testing::child::{child, role};

/// What the child exits with, so that the test knows it got that far.
const CODE: i32 = 3;

#[test]
fn an_exit_without_destructors_leaves_no_temporary_files() {
    if let Some(out) = role() {
        let cifar = BuiltinCifar10::create(2, 2, 1).unwrap();
        let config = BuiltinShardsConfig::new(2, 32)
            .with_train_shards(1)
            .with_per_shard(2);
        let shards = BuiltinShards::create(config).unwrap();
        let mut half_written = AtomicFile::create(&Path::new(&out).join("model.ckpt")).unwrap();
        half_written.write_all(&[7; 4096]).unwrap();
        half_written.flush().unwrap();
        println!("made {}", cifar.dir().display());
        println!("made {}", shards.dir().display());
        towers_multigpu::exit_now(CODE);
    }
    let (tmp, out) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let test = towers_testing::test_name!("an_exit_without_destructors_leaves_no_temporary_files");
    let child = child(&test, out.path().to_str().unwrap(), &[], "")
        .env("TMPDIR", tmp.path())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&child.stdout) + String::from_utf8_lossy(&child.stderr);
    assert_eq!(child.status.code(), Some(CODE), "{said}");
    // The first after libtest's `test NAME ... `, on the same line.
    let made: Vec<String> = said
        .lines()
        .filter_map(|line| Some(line.split_once("made ")?.1.to_string()))
        .collect();
    assert_eq!(made.len(), 2, "{said}");
    for dir in &made {
        assert!(
            Path::new(dir).starts_with(tmp.path()),
            "{dir} outside TMPDIR"
        );
    }
    let left = |dir: &Path| -> Vec<_> { std::fs::read_dir(dir).unwrap().collect() };
    assert!(
        left(tmp.path()).is_empty(),
        "left in TMPDIR: {:?}",
        left(tmp.path())
    );
    assert!(
        left(out.path()).is_empty(),
        "left beside the file: {:?}",
        left(out.path())
    );
}
