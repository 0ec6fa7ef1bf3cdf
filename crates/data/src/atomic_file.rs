//! Files that appear whole or not at all: written to a temporary file beside the target,
//! flushed to disk, then renamed over it.
//!
//! A crash (or an error, or a panic) during the write leaves the previous version of the
//! file, if any, untouched, and no partial file under the target's name. The rename is atomic
//! on POSIX file systems when source and target are in one directory, which is why the
//! temporary file is created there. Shards, label maps, checkpoints and plots are all written
//! this way.
//!
//! Errors are plain `io::Error`s, as from `std::fs::write`: callers add the path in their own
//! error type.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use towers_multigpu::{ScratchPath, list_scratch};

/// A file being written under a temporary name; [`AtomicFile::commit`] gives it its real name.
/// Dropped without a commit (an error, a panic), the temporary file is removed; so it is by an
/// exit that runs no destructor (`towers_multigpu::exit_now`: a second Ctrl-C while a
/// checkpoint is being written).
#[derive(Debug)]
pub struct AtomicFile {
    target: PathBuf,
    temp: PathBuf,
    writer: Option<BufWriter<File>>,
    _listed: ScratchPath,
}

impl AtomicFile {
    /// Starts writing `path`: creates the temporary file beside it.
    pub fn create(path: &Path) -> io::Result<Self> {
        // A process killed while writing leaves its temporary file; a later process with the
        // same id (common in containers) may come to the same name: take the next one.
        let (temp, file) = loop {
            let temp = temp_path(directory_of(path), path);
            match OpenOptions::new().write(true).create_new(true).open(&temp) {
                Ok(file) => break (temp, file),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        };
        Ok(Self {
            target: path.to_path_buf(),
            _listed: list_scratch(&temp),
            temp,
            writer: Some(BufWriter::new(file)),
        })
    }

    /// Flushes the data to disk, then renames the file to its target, replacing any file there.
    pub fn commit(mut self) -> io::Result<()> {
        let writer = self.writer.take().expect("written only before commit");
        let file = writer.into_inner().map_err(|e| e.into_error())?;
        // Data on disk before the name points at it, or a crash could leave an empty file.
        file.sync_all()?;
        drop(file);
        fs::rename(&self.temp, &self.target)?;
        // The rename itself reaches the disk with the directory. A sync that fails (EIO) is an
        // error: the new name may not survive a crash, and a caller must not delete older
        // files on its strength.
        sync_dir(directory_of(&self.target))
    }

    fn writer(&mut self) -> &mut BufWriter<File> {
        self.writer.as_mut().expect("written only before commit")
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.writer().write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.writer().flush()
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        // After a commit the temporary name no longer exists and this does nothing.
        drop(self.writer.take());
        let _ = fs::remove_file(&self.temp);
    }
}

/// Writes `path` atomically with `write`. On any failure the temporary file is removed and
/// `path` is as it was.
pub fn write_atomic(
    path: &Path,
    write: impl FnOnce(&mut AtomicFile) -> io::Result<()>,
) -> io::Result<()> {
    let mut file = AtomicFile::create(path)?;
    write(&mut file)?;
    file.commit()
}

/// Creates `dir` and its missing parents, as `create_dir_all`, so that they survive a crash:
/// each directory created is written into its parent by syncing the parent. (A file synced
/// into a directory whose own name never reached the disk can vanish with it: a new train
/// directory's first checkpoint, after a power loss.)
pub fn create_dir_durably(dir: &Path) -> io::Result<()> {
    let missing: Vec<&Path> = (dir.ancestors())
        .take_while(|d| !d.as_os_str().is_empty() && !d.exists())
        .collect();
    fs::create_dir_all(dir)?;
    missing
        .iter()
        .rev()
        .try_for_each(|created| sync_dir(directory_of(created)))
}

/// Syncs the directory `dir`, so that the names made in it reach the disk. Not every platform
/// can open a directory, nor every file system sync one (EINVAL): no error then.
fn sync_dir(dir: &Path) -> io::Result<()> {
    let synced = File::open(dir).and_then(|dir| dir.sync_all());
    match synced {
        Err(e) if e.kind() != io::ErrorKind::InvalidInput && cfg!(unix) => Err(e),
        _ => Ok(()),
    }
}

fn directory_of(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

/// Numbers the temporary files of this process.
static COUNTER: AtomicU64 = AtomicU64::new(0);

/// `.NAME.tmp-PID-N` beside the target: hidden, and unique within and across running
/// processes.
fn temp_path(dir: &Path, target: &Path) -> PathBuf {
    let name = target
        .file_name()
        .map_or_else(|| "file".into(), |n| n.to_string_lossy().into_owned());
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    dir.join(format!(".{name}.tmp-{}-{n}", std::process::id()))
}

#[cfg(test)]
mod tests {
    use towers_testing::{assert_error_names, report};

    use super::*;

    /// Missing parents are made too, an existing directory is no error, and a file in the
    /// way is. (That each new directory's parent is synced is seen by no test: only a lost
    /// power supply would tell.)
    #[test]
    fn directories_are_made_with_their_parents() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/b/c");
        create_dir_durably(&dir).unwrap();
        assert!(dir.is_dir());
        create_dir_durably(&dir).unwrap();
        fs::write(tmp.path().join("file"), b"").unwrap();
        assert!(create_dir_durably(&tmp.path().join("file/d")).is_err());
    }

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn writes_the_whole_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.bin");
        write_atomic(&path, |w| w.write_all(b"hello")).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"hello");
        write_atomic(&path, |w| w.write_all(b"bye")).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"bye");
        assert_eq!(entries(dir.path()), ["a.bin"]);
    }

    #[test]
    fn a_failed_write_leaves_no_partial_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ckpt");
        let fail = |w: &mut AtomicFile| {
            // More than the buffer, so part of it reaches the temporary file first.
            w.write_all(&vec![7u8; 1 << 20])?;
            Err(io::Error::other("disk full"))
        };
        let err = write_atomic(&path, fail).unwrap_err();
        assert_error_names(&report(&err), &["disk full"]);
        assert!(entries(dir.path()).is_empty(), "{:?}", entries(dir.path()));

        // Over an existing file: the old content stays.
        fs::write(&path, b"old").unwrap();
        write_atomic(&path, fail).unwrap_err();
        assert_eq!(fs::read(&path).unwrap(), b"old");
        assert_eq!(entries(dir.path()), ["ckpt"]);
    }

    #[test]
    fn a_panicking_writer_leaves_no_partial_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ckpt");
        let result = std::panic::catch_unwind(|| {
            write_atomic(&path, |w| {
                w.write_all(&[1u8; 100_000])?;
                panic!("serializer bug")
            })
        });
        assert!(result.is_err());
        assert!(entries(dir.path()).is_empty());
    }

    #[test]
    fn a_missing_directory_is_not_found() {
        let err = write_atomic(Path::new("/no/such/dir/x"), |_| Ok(())).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound, "{err}");
    }

    #[test]
    fn an_uncommitted_file_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut file = AtomicFile::create(&dir.path().join("shard")).unwrap();
        file.write_all(b"half a shard").unwrap();
        drop(file);
        assert!(entries(dir.path()).is_empty());
    }

    #[test]
    fn stale_temporary_files_of_a_dead_process_are_passed_by() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model.ckpt-5");
        let next = COUNTER.load(Ordering::SeqCst);
        let pid = std::process::id();
        for n in next..next + 20 {
            fs::write(
                dir.path().join(format!(".model.ckpt-5.tmp-{pid}-{n}")),
                b"stale",
            )
            .unwrap();
        }
        write_atomic(&path, |w| w.write_all(b"new")).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"new");
        assert_eq!(
            entries(dir.path()).len(),
            21,
            "the stale files are not ours to delete"
        );
    }
}
