//! The train directory's own files, beside the checkpoints and the log: the lock a run holds
//! while it trains there, so that a second run (a command started twice) cannot write into it
//! too, and the mark of a run on built-in data, whose directory the demo commands empty
//! ([`TrainArgs::builtin_config`](crate::TrainArgs::builtin_config)).

use std::fs::{File, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::Path;

use towers_data::atomic_file::create_dir_durably;

use crate::error::{Error, Result};

/// The file a training run holds locked in its train directory (not hidden: files whose names
/// start with a dot there are the temporary files of writes under way).
pub const LOCK_FILE: &str = "train.lock";

/// The file that marks a train directory as a run's on built-in data: only such a directory
/// is emptied when the demo starts over.
pub const BUILTIN_MARK: &str = "BUILT-IN-DATA";

/// A train directory this process trains in: an exclusive lock on its [`LOCK_FILE`]
/// (`flock`), released when this drops and, however the process ends, by the kernel.
#[derive(Debug)]
pub struct TrainDirLock {
    _file: File,
}

impl TrainDirLock {
    /// Creates `dir` if need be and locks it, without waiting: a directory another process
    /// holds is an error naming it and that process's id.
    pub fn take(dir: &Path) -> Result<Self> {
        create_dir_durably(dir).map_err(Error::io(dir))?;
        let path = dir.join(LOCK_FILE);
        let io = |error| Error::io(&path)(error);
        let mut file = (File::options().read(true).write(true).create(true))
            .truncate(false)
            .open(&path)
            .map_err(&io)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut holder = String::new();
                // A holder that has not written its id yet leaves the text empty.
                let _ = file.read_to_string(&mut holder);
                return Err(Error::Config(format!(
                    "{} is in use: another run (process {}) trains in it; wait for it to end, \
                     or choose another --train-dir",
                    dir.display(),
                    holder.trim()
                )));
            }
            Err(TryLockError::Error(error)) => return Err(io(error)),
        }
        file.set_len(0).map_err(&io)?;
        file.rewind().map_err(&io)?;
        write!(file, "{}", std::process::id()).map_err(&io)?;
        Ok(Self { _file: file })
    }
}

/// Marks `dir`, which it creates, as a run's on built-in data.
pub(crate) fn mark_builtin(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(Error::io(dir))?;
    let mark = dir.join(BUILTIN_MARK);
    let text = "A burn-towers run on built-in data trains here: the demo commands empty this \
                directory when they start over (unless --resume is given).\n";
    std::fs::write(&mark, text).map_err(Error::io(&mark))
}

/// Whether `dir` is marked as a run's on built-in data.
pub(crate) fn is_builtin(dir: &Path) -> bool {
    dir.join(BUILTIN_MARK).is_file()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_locked_directory_is_refused_naming_its_holder_until_let_go() {
        let dir = tempfile::tempdir().unwrap();
        let train_dir = dir.path().join("train");
        let held = TrainDirLock::take(&train_dir).unwrap();
        let error = TrainDirLock::take(&train_dir).unwrap_err().to_string();
        let holder = format!("process {}", std::process::id());
        assert!(
            error.contains("is in use") && error.contains(&holder),
            "{error}"
        );
        drop(held);
        TrainDirLock::take(&train_dir).expect("let go");
    }

    #[test]
    fn only_a_marked_directory_is_builtin() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!is_builtin(dir.path()));
        mark_builtin(&dir.path().join("train")).unwrap();
        assert!(is_builtin(&dir.path().join("train")));
    }
}
