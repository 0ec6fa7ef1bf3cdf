//! What the fuzz targets share: a scratch directory in memory for readers that take a path,
//! and the checksum fix-ups (`towers_testing::crc_fixups`) that let mutated bytes past a
//! format's CRCs to the parsers beneath (libFuzzer cannot guess a CRC; a target fixes them when
//! the input's first byte says so).

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

/// The input's flags byte and the rest, its checksums set right by `fix` when the flags' bit 0
/// asks for it (a target whose whole file has checksums; one that fixes part of its input
/// splits it first).
pub fn flags_and_fixed(data: &[u8], fix: impl FnOnce(&mut [u8])) -> (u8, Vec<u8>) {
    let (flags, rest) = flags(data);
    let mut file = rest.to_vec();
    if flags & 1 == 1 {
        fix(&mut file);
    }
    (flags, file)
}

pub use towers_testing::crc_fixups::{fix_checkpoint_crc, fix_table_crcs, fix_tfrecord_crcs};
