//! Temporary files and folders that an exit without destructors removes too.
//!
//! Their owners delete them when dropped: the examples' built-in data, a decompressed copy
//! with a name, a file written atomically and never committed. A process that ends by
//! [`std::process::exit`] or `MPI_Abort` runs no destructor, and three places end one that way
//! on purpose, because the thread holding those owners may be stuck in a device call: the
//! trainer's second Ctrl-C, a tower past its timeout and a rank's abort. So while its owner
//! lives, each such path is also listed here ([`ScratchPath`]), and [`exit_now`] (or
//! [`remove_scratch`] before an abort) removes every path listed. Nothing runs on a `kill -9`:
//! that is why, on Linux, the decompressed copies have no name at all (towers-data's
//! `compressed.rs`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

/// The temporary paths listed in this process.
static SCRATCH: Listing = Listing::new();

/// Lists `path` until the returned [`ScratchPath`] drops.
pub fn list_scratch(path: &Path) -> ScratchPath {
    SCRATCH.list(path)
}

/// Removes every temporary path listed now, folders with what they hold: for a process about
/// to end without running destructors (their owners' files are gone after it). Errors are
/// ignored: a path already gone, or one that cannot be removed, is left to the system.
pub fn remove_scratch() {
    SCRATCH.remove_all();
}

/// Removes every listed temporary path ([`remove_scratch`]), then ends the process with
/// `code`, running no destructor: for an exit that cannot wait for the threads that hold them.
pub fn exit_now(code: i32) -> ! {
    remove_scratch();
    std::process::exit(code)
}

/// A temporary path listed for [`remove_scratch`] until this drops: its owner keeps it beside
/// the path and still deletes the path itself.
#[derive(Debug)]
#[must_use = "the path is listed only while this lives"]
pub struct ScratchPath {
    id: u64,
    listing: &'static Listing,
}

impl Drop for ScratchPath {
    fn drop(&mut self) {
        self.listing.paths().remove(&self.id);
    }
}

/// Paths by the number they were listed under.
#[derive(Debug)]
struct Listing {
    paths: Mutex<BTreeMap<u64, PathBuf>>,
    next: AtomicU64,
}

impl Listing {
    const fn new() -> Self {
        Self {
            paths: Mutex::new(BTreeMap::new()),
            next: AtomicU64::new(0),
        }
    }

    fn list(&'static self, path: &Path) -> ScratchPath {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.paths().insert(id, path.to_path_buf());
        ScratchPath { id, listing: self }
    }

    /// The map, also after a panic while it was held: each change is one insert or remove,
    /// so it is never left half-changed, and an exit must still find it.
    fn paths(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, PathBuf>> {
        self.paths.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn remove_all(&self) {
        for path in self.paths().values() {
            let removed = match std::fs::symlink_metadata(path) {
                Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(path),
                Ok(_) => std::fs::remove_file(path),
                Err(e) => Err(e),
            };
            drop(removed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A listing of the test's own, so that removing everything listed in it cannot touch
    /// another test's files (the process-wide one is tested in child processes, in
    /// towers-data's `tests/hard_exit.rs` and towers-train's `tests/signals.rs`).
    fn listing() -> &'static Listing {
        Box::leak(Box::new(Listing::new()))
    }

    #[test]
    fn removes_listed_files_and_folders_and_forgets_dropped_ones() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("data");
        std::fs::create_dir_all(folder.join("inner")).unwrap();
        std::fs::write(folder.join("inner/a.bin"), b"a").unwrap();
        let file = dir.path().join("copy");
        std::fs::write(&file, b"b").unwrap();
        let kept = dir.path().join("kept");
        std::fs::write(&kept, b"c").unwrap();
        let listing = listing();
        let _folder = listing.list(&folder);
        let _file = listing.list(&file);
        drop(listing.list(&kept));
        let _gone = listing.list(&dir.path().join("never made"));
        listing.remove_all();
        let mut left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        left.sort();
        assert_eq!(left, ["kept"]);
    }
}
