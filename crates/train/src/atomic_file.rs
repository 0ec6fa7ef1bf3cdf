//! Files that appear whole or not at all: written to a temporary file beside the target,
//! flushed to disk, then renamed over it.
//!
//! A crash (or an error, or a panic) during the write leaves the previous version of the
//! file, if any, untouched, and no partial file under the target's name. The rename is atomic
//! on POSIX file systems when source and target are in one directory, which is why the
//! temporary file is created there.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};

/// Writes `path` atomically with `write`, which gets a buffered writer on the temporary
/// file. On any failure the temporary file is removed and `path` is as it was.
pub fn write_atomic(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>,
) -> Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let temp = TempFile(temp_path(dir, path));
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temp.0)
        .map_err(Error::io(&temp.0))?;
    let mut writer = BufWriter::new(file);
    write(&mut writer).map_err(Error::io(path))?;
    let file = writer.into_inner().map_err(|e| Error::Io {
        path: path.to_path_buf(),
        source: e.into_error(),
    })?;
    // Data on disk before the name points at it, or a crash could leave an empty file.
    file.sync_all().map_err(Error::io(path))?;
    drop(file);
    fs::rename(&temp.0, path).map_err(Error::io(path))?;
    std::mem::forget(temp);
    // The rename itself reaches the disk with the directory. Not every platform can open a
    // directory to sync it; the file is complete either way.
    if let Ok(dir) = File::open(dir) {
        let _ = dir.sync_all();
    }
    Ok(())
}

/// `.NAME.tmp-PID-N` beside the target: hidden, and unique within and across processes.
fn temp_path(dir: &Path, target: &Path) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let name = target
        .file_name()
        .map_or_else(|| "file".into(), |n| n.to_string_lossy().into_owned());
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    dir.join(format!(".{name}.tmp-{}-{n}", std::process::id()))
}

/// Removes the temporary file unless the write completed (then it is forgotten).
struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

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
        let fail = |w: &mut BufWriter<File>| {
            // More than the buffer, so part of it reaches the temporary file first.
            w.write_all(&vec![7u8; 1 << 20])?;
            Err(io::Error::other("disk full"))
        };
        let err = write_atomic(&path, fail).unwrap_err();
        assert!(err.to_string().contains("disk full"), "{err}");
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
    fn a_missing_directory_is_an_error_naming_it() {
        let err = write_atomic(Path::new("/no/such/dir/x"), |_| Ok(())).unwrap_err();
        assert!(err.to_string().contains("/no/such/dir"), "{err}");
    }
}
