//! Tensors already named by module path and in the model's layout (a safetensors export, a
//! checkpoint of ours), as a [`WeightSource`].

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::error::Result;
use super::restore::{SourceTensor, WeightSource};

/// Shapes and values keyed by module path, read from the file at [`WeightSource::path`].
#[derive(Debug, Clone)]
pub struct ByPath {
    path: PathBuf,
    tensors: BTreeMap<String, (Vec<usize>, Vec<f32>)>,
    used: BTreeSet<String>,
}

impl ByPath {
    /// The tensors read from `path`.
    pub fn new(path: &Path, tensors: BTreeMap<String, (Vec<usize>, Vec<f32>)>) -> Self {
        Self {
            path: path.to_path_buf(),
            tensors,
            used: BTreeSet::new(),
        }
    }
}

impl WeightSource for ByPath {
    fn path(&self) -> &Path {
        &self.path
    }

    fn tensor(&mut self, path: &str) -> Result<Option<SourceTensor>> {
        let Some((shape, values)) = self.tensors.get(path) else {
            return Ok(None);
        };
        self.used.insert(path.to_string());
        Ok(Some(SourceTensor {
            name: path.to_string(),
            shape: shape.clone(),
            values: values.clone(),
        }))
    }

    fn unused(&self) -> Vec<String> {
        let names = self.tensors.keys();
        names.filter(|n| !self.used.contains(*n)).cloned().collect()
    }
}
