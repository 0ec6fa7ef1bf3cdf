//! The checkpoints of one train directory: `model.ckpt-STEP` files (TF's names), the newest
//! few kept (TF Saver's `max_to_keep`), resumed from the newest that passes its checksum.

use std::path::{Path, PathBuf};

use towers_data::atomic_file::create_dir_durably;
use towers_models::weights::is_v1_checkpoint;
use towers_multigpu::eprint_line;

use super::file::Checkpoint;
use crate::error::{Error, Result};

const PREFIX: &str = "model.ckpt-";
/// Appended to the name of a checkpoint found corrupt, so that it is neither listed nor
/// deleted: it stays for inspection.
const CORRUPT_SUFFIX: &str = ".corrupt";

/// The checkpoint a run resumes from, and what was passed over to find it.
#[derive(Debug)]
pub struct Restored {
    /// The newest valid checkpoint.
    pub checkpoint: Checkpoint,
    /// Its file.
    pub path: PathBuf,
    /// The newer checkpoints that failed to load, each renamed with a `.corrupt` suffix:
    /// (the error naming the file, the new name).
    pub skipped: Vec<(Error, PathBuf)>,
}

impl Restored {
    /// What a log should say about this resume, one line each (nothing when the newest
    /// checkpoint was valid).
    pub fn notes(&self) -> Vec<String> {
        let mut notes: Vec<String> = self
            .skipped
            .iter()
            .map(|(error, renamed)| {
                let error = towers_data::ErrorChain(error);
                format!("skipped {error}; renamed to {}", renamed.display())
            })
            .collect();
        if !self.skipped.is_empty() {
            notes.push(format!(
                "resuming from the newest valid checkpoint, {}",
                self.path.display()
            ));
        }
        notes
    }
}

/// A train directory's checkpoints.
#[derive(Debug, Clone)]
pub struct CheckpointDir {
    dir: PathBuf,
    keep: usize,
}

impl CheckpointDir {
    /// The checkpoints in `dir`, of which [`save`](Self::save) keeps the `keep` newest (at
    /// least 1; TF's `max_to_keep` is 5).
    pub fn new(dir: impl Into<PathBuf>, keep: usize) -> Self {
        Self {
            dir: dir.into(),
            keep: keep.max(1),
        }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the checkpoint of `step` goes.
    pub fn path(&self, step: u64) -> PathBuf {
        self.dir.join(format!("{PREFIX}{step}"))
    }

    /// Every checkpoint, oldest first. A missing directory has none; temporary files of an
    /// interrupted write, checkpoints set aside as corrupt, directories and TF's V1 checkpoints
    /// (TF 1's `Saver(write_version=V1)` names them as ours are named) are not checkpoints.
    pub fn list(&self) -> Result<Vec<(u64, PathBuf)>> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(Error::io(&self.dir)(e)),
        };
        let mut found = Vec::new();
        for entry in entries {
            let entry = entry.map_err(Error::io(&self.dir))?;
            let name = entry.file_name();
            // `model.ckpt-20.corrupt` and temporary files do not parse as steps.
            let step = name
                .to_str()
                .and_then(|n| n.strip_prefix(PREFIX))
                .and_then(|s| s.parse::<u64>().ok());
            let is_file = entry.file_type().is_ok_and(|t| t.is_file());
            if let Some(step) = step.filter(|_| is_file && !is_v1_checkpoint(&entry.path())) {
                found.push((step, entry.path()));
            }
        }
        found.sort();
        Ok(found)
    }

    /// The newest checkpoint, if any.
    pub fn latest(&self) -> Result<Option<(u64, PathBuf)>> {
        Ok(self.list()?.pop())
    }

    /// Writes `checkpoint` (atomically) and then deletes all but the newest `keep`, never
    /// the one just written: a failed write deletes nothing, and a complete new checkpoint
    /// always remains. An old checkpoint that cannot be deleted is a warning on stderr, not
    /// an error: the new one is whole, and the run goes on.
    pub fn save(&self, checkpoint: Checkpoint) -> Result<PathBuf> {
        self.save_deleting_by(checkpoint, |old| std::fs::remove_file(old))
    }

    /// [`save`](Self::save), deleting old checkpoints with `delete`.
    fn save_deleting_by(
        &self,
        checkpoint: Checkpoint,
        delete: impl Fn(&Path) -> std::io::Result<()>,
    ) -> Result<PathBuf> {
        create_dir_durably(&self.dir).map_err(Error::io(&self.dir))?;
        let path = self.path(checkpoint.step);
        checkpoint.save(&path)?;
        let all = self.list()?;
        for (_, old) in &all[..all.len().saturating_sub(self.keep)] {
            if *old == path {
                continue;
            }
            if let Err(error) = delete(old) {
                eprint_line(&format!(
                    "warning: {}: cannot delete this old checkpoint ({error}); it is kept",
                    old.display()
                ));
            }
        }
        Ok(path)
    }

    /// The newest checkpoint that loads and passes its checksum, `None` when there is no
    /// checkpoint at all. Each newer one that failed is then renamed `model.ckpt-STEP.corrupt`
    /// (so that later runs and the retention of [`save`](Self::save) pass it by) and reported
    /// in [`Restored::skipped`]. Checkpoints but no valid one is an error listing each
    /// failure, and renames nothing.
    ///
    /// Only a checkpoint whose bytes are wrong (format, truncation, checksum) counts as
    /// corrupt: one that cannot be read at all (an I/O error: permission denied, a failing
    /// disk or network file system) is the error of this call, naming the file, which is left
    /// as it is; the resume then fails rather than falling back past a checkpoint that may be
    /// whole.
    pub fn load_newest_valid(&self) -> Result<Option<Restored>> {
        self.load_newest_valid_by(Checkpoint::load)
    }

    /// [`load_newest_valid`](Self::load_newest_valid), each file read by `load`.
    fn load_newest_valid_by(
        &self,
        load: impl Fn(&Path) -> Result<Checkpoint>,
    ) -> Result<Option<Restored>> {
        let all = self.list()?;
        if all.is_empty() {
            return Ok(None);
        }
        let mut failed: Vec<(Error, PathBuf)> = Vec::new();
        for (_, path) in all.into_iter().rev() {
            match load(&path) {
                Ok(checkpoint) => {
                    let skipped = failed
                        .into_iter()
                        .map(|(error, path)| Ok((error, set_aside(&path)?)))
                        .collect::<Result<_>>()?;
                    return Ok(Some(Restored {
                        checkpoint,
                        path,
                        skipped,
                    }));
                }
                Err(error @ Error::Io { .. }) => return Err(error),
                Err(error) => failed.push((error, path)),
            }
        }
        let reasons: Vec<String> = failed
            .iter()
            .map(|(e, _)| towers_data::ErrorChain(e).to_string())
            .collect();
        Err(Error::Checkpoint {
            path: self.dir.clone(),
            reason: format!("no valid checkpoint to resume from: {}", reasons.join("; ")),
            error: None,
        })
    }
}

/// Renames a corrupt checkpoint `NAME.corrupt`; returns the new name.
fn set_aside(path: &Path) -> Result<PathBuf> {
    let mut renamed = path.as_os_str().to_owned();
    renamed.push(CORRUPT_SUFFIX);
    let renamed = PathBuf::from(renamed);
    std::fs::rename(path, &renamed).map_err(Error::io(path))?;
    Ok(renamed)
}

#[cfg(test)]
mod tests {
    use towers_testing::{assert_error_names, report};

    use super::*;
    use burn::module::Module;
    use burn::nn::LinearConfig;
    use burn::tensor::Device;

    fn checkpoint(step: u64) -> Checkpoint {
        Checkpoint {
            step,
            model: LinearConfig::new(2, 2).init(&Device::flex()).into_record(),
            optimizer: burn::optim::SgdConfig::new().init().to_record(),
            averages: None,
            input: None,
            config: serde_json::Value::Null,
            loss_scale: None,
        }
    }

    #[test]
    fn keeps_the_newest_and_finds_the_latest_by_step() {
        let dir = tempfile::tempdir().unwrap();
        let ckpts = CheckpointDir::new(dir.path().join("train"), 2);
        assert!(ckpts.latest().unwrap().is_none());
        for step in [5, 10, 100, 20] {
            ckpts.save(checkpoint(step)).unwrap();
        }
        // 100 sorts before 20 as text; by step it is the newest.
        std::fs::write(dir.path().join("train/.model.ckpt-200.tmp-1-0"), b"partial").unwrap();
        let steps: Vec<u64> = ckpts.list().unwrap().iter().map(|(s, _)| *s).collect();
        assert_eq!(steps, [20, 100]);
        assert_eq!(ckpts.latest().unwrap().unwrap().1, ckpts.path(100));
    }

    fn corrupt(path: &Path) {
        let mut bytes = std::fs::read(path).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0x10;
        std::fs::write(path, bytes).unwrap();
    }

    #[test]
    fn resumes_from_the_newest_valid_and_sets_the_corrupt_ones_aside() {
        let dir = tempfile::tempdir().unwrap();
        let ckpts = CheckpointDir::new(dir.path(), 5);
        assert!(ckpts.load_newest_valid().unwrap().is_none());
        for step in [10, 20, 30] {
            ckpts.save(checkpoint(step)).unwrap();
        }
        corrupt(&ckpts.path(30));
        let bytes = std::fs::read(ckpts.path(20)).unwrap();
        std::fs::write(ckpts.path(20), &bytes[..bytes.len() - 100]).unwrap();

        let restored = ckpts.load_newest_valid().unwrap().unwrap();
        assert_eq!(restored.checkpoint.step, 10);
        assert_eq!(restored.path, ckpts.path(10));
        let skipped: Vec<(String, PathBuf)> = restored
            .skipped
            .iter()
            .map(|(e, p)| (report(e), p.clone()))
            .collect();
        assert_eq!(skipped.len(), 2);
        assert!(skipped[0].0.contains("model.ckpt-30") && skipped[0].0.contains("checksum"));
        assert!(skipped[1].0.contains("model.ckpt-20") && skipped[1].0.contains("truncated"));
        assert_eq!(skipped[0].1, dir.path().join("model.ckpt-30.corrupt"));
        assert!(skipped[1].1.is_file() && !ckpts.path(20).exists());
        let notes = restored.notes().join("\n");
        assert!(
            notes.contains("model.ckpt-30") && notes.contains("newest valid checkpoint"),
            "{notes}"
        );
        let steps: Vec<u64> = ckpts.list().unwrap().iter().map(|(s, _)| *s).collect();
        assert_eq!(steps, [10], "the corrupt ones are no longer listed");
    }

    /// The newest checkpoint unreadable (an I/O error, as permission denied gives), a corrupt
    /// one behind it: the resume fails naming the unreadable one, and neither is renamed.
    #[test]
    fn an_unreadable_checkpoint_fails_the_resume_and_is_not_set_aside() {
        let dir = tempfile::tempdir().unwrap();
        let ckpts = CheckpointDir::new(dir.path(), 5);
        for step in [10, 20, 30] {
            ckpts.save(checkpoint(step)).unwrap();
        }
        corrupt(&ckpts.path(20));
        let unreadable = ckpts.path(30);
        let load = |path: &Path| match path == unreadable {
            true => Err(Error::io(path)(std::io::ErrorKind::PermissionDenied.into())),
            false => Checkpoint::load(path),
        };
        let msg = report(&ckpts.load_newest_valid_by(load).unwrap_err());
        assert_error_names(&msg, &["model.ckpt-30", "permission denied"]);
        let steps: Vec<u64> = ckpts.list().unwrap().iter().map(|(s, _)| *s).collect();
        assert_eq!(steps, [10, 20, 30], "nothing set aside");
        // Readable again, the newest loads.
        let restored = ckpts.load_newest_valid().unwrap().unwrap();
        assert_eq!(restored.checkpoint.step, 30);
    }

    #[test]
    fn no_valid_checkpoint_is_an_error_naming_each_and_renames_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let ckpts = CheckpointDir::new(dir.path(), 5);
        for step in [1, 2] {
            ckpts.save(checkpoint(step)).unwrap();
            corrupt(&ckpts.path(step));
        }
        let msg = report(&ckpts.load_newest_valid().unwrap_err());
        assert_error_names(
            &msg,
            &["no valid checkpoint", "model.ckpt-1:", "model.ckpt-2:"],
        );
        assert_eq!(ckpts.list().unwrap().len(), 2);
    }

    /// A newer stray checkpoint (step 10) does not push out the one just written, and a write
    /// that fails deletes nothing.
    #[test]
    fn retention_keeps_what_was_just_written_and_a_failed_write_deletes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let ckpts = CheckpointDir::new(dir.path(), 1);
        ckpts.save(checkpoint(10)).unwrap();
        ckpts.save(checkpoint(5)).unwrap();
        ckpts.save(checkpoint(6)).unwrap();
        let steps: Vec<u64> = ckpts.list().unwrap().iter().map(|(s, _)| *s).collect();
        assert_eq!(steps, [6, 10]);

        // A directory in the way: the rename fails, as a full disk would fail the write.
        std::fs::create_dir_all(ckpts.path(7).join("in-the-way")).unwrap();
        let msg = report(&ckpts.save(checkpoint(7)).unwrap_err());
        assert_error_names(&msg, &["model.ckpt-7"]);
        let steps: Vec<u64> = ckpts.list().unwrap().iter().map(|(s, _)| *s).collect();
        assert_eq!(steps, [6, 10]);
        assert!(Checkpoint::load(&ckpts.path(6)).is_ok());
        let hidden = std::fs::read_dir(dir.path())
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with('.')
            })
            .count();
        assert_eq!(hidden, 0, "no temporary file left");
    }

    /// An old checkpoint that cannot be deleted (a network file system's refusal) is kept, and
    /// the new one is saved all the same.
    #[test]
    fn an_old_checkpoint_that_cannot_be_deleted_is_kept_with_a_warning() {
        let dir = tempfile::tempdir().unwrap();
        let ckpts = CheckpointDir::new(dir.path(), 1);
        ckpts.save(checkpoint(1)).unwrap();
        let refused = |_: &Path| Err(std::io::Error::other("refused"));
        let path = ckpts.save_deleting_by(checkpoint(5), refused).unwrap();
        assert!(Checkpoint::load(&path).is_ok());
        let steps: Vec<u64> = ckpts.list().unwrap().iter().map(|(s, _)| *s).collect();
        assert_eq!(steps, [1, 5], "the old one kept");
    }
}
