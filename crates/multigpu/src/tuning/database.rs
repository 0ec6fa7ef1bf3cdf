//! The tuning database opened by one process at a time.
//!
//! CubeCL's tuning database ([`tuning_file`]) is one file for every process that shares the user
//! cache or the working tree: MPI ranks of one machine, a training run and its evaluation side
//! by side, two runs on two GPUs. CubeCL 0.11.3 opens it lazily, on the thread that first
//! compiles or tunes a kernel, through Turso's multi-process WAL (turso 0.8.3's
//! `experimental_multiprocess_wal`), and brings its tables to its schema as it opens it.
//! Processes doing so at the same moment race: the loser's open fails with a warning (found
//! 2026-12-06 on lavapipe, two MPI ranks of the `cifar10` example on a fresh cache: `Unable to
//! open the Turso cache: Parse error: no such table: meta`), which the run's
//! [`TuningReport`](super::TuningReport) takes for a database that keeps nothing, though
//! CubeCL opens it again at its next write. Once a process has it open, CubeCL keeps that
//! database for every table, and Turso coordinates the processes' reads and writes.
//!
//! So [`open_tuning_database`] opens it before any kernel does, holding an exclusive lock on
//! `FILE.lock` beside it (`std::fs::File::lock`: `flock`, released by the kernel however the
//! process ends): processes open it one after another, each in milliseconds.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use cubecl_environment::persistence::{Access, Database};

use super::tuning_file;

/// Opens the active tuning database ([`tuning_file`]: CubeCL's default, or the bundle
/// [`load_tuning_bundle`](super::load_tuning_bundle) mounted) for this process, waiting while
/// another process opens it (see the module docs); once per file and process.
/// [`Towers::new`](crate::towers::Towers::new) calls it for GPU towers, the evaluation
/// programs for their GPU (towers-train's `WeightsArgs::device`), and loading a bundle for the
/// bundle; a program of your own that runs GPU kernels before any of them calls it first.
///
/// A database that will not open is left to CubeCL, which tries again as it tunes, warns,
/// and keeps the tuning in memory ([`TuningReport`](super::TuningReport) then says so).
pub fn open_tuning_database() {
    static OPENED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
    let file = tuning_file();
    let mut opened = OPENED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if opened.contains(&file) {
        return;
    }
    opened.push(file.clone());
    let _lock = locked_beside(&file);
    // CubeCL keeps the database this opens for every later use in the process; this handle
    // is not needed past the open.
    let _ = Database::open_at(&file, Access::ReadWrite);
}

/// `FILE.lock` beside `file`, locked exclusively (waiting while another process holds it), or
/// `None` where it cannot be made (a directory nobody may write: CubeCL then opens the
/// database read-only, and no process writes it).
fn locked_beside(file: &Path) -> Option<File> {
    std::fs::create_dir_all(file.parent()?).ok()?;
    let mut name = file.as_os_str().to_owned();
    name.push(".lock");
    let lock = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(name)
        .ok()?;
    lock.lock().ok()?;
    Some(lock)
}
