//! The checkpoints of one train directory: `model.ckpt-STEP` files (TF's names), the newest
//! few kept.

use std::path::{Path, PathBuf};

use crate::checkpoint::Checkpoint;
use crate::error::{Error, Result};

const PREFIX: &str = "model.ckpt-";

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
    /// interrupted write are not checkpoints.
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
            let step = name
                .to_str()
                .and_then(|n| n.strip_prefix(PREFIX))
                .and_then(|s| s.parse::<u64>().ok());
            if let Some(step) = step {
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

    /// Writes `checkpoint` (atomically) and deletes all but the newest `keep`.
    pub fn save(&self, checkpoint: Checkpoint) -> Result<PathBuf> {
        std::fs::create_dir_all(&self.dir).map_err(Error::io(&self.dir))?;
        let path = self.path(checkpoint.step);
        checkpoint.save(&path)?;
        let all = self.list()?;
        for (_, old) in &all[..all.len().saturating_sub(self.keep)] {
            std::fs::remove_file(old).map_err(Error::io(old))?;
        }
        Ok(path)
    }
}

#[cfg(test)]
mod tests {
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
            config: serde_json::Value::Null,
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
}
