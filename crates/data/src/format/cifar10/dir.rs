//! A CIFAR-10 folder of either layout, found by its files: the folder itself, or the
//! `cifar-10-batches-bin` or `cifar-10-batches-py` folder inside it (TF's tutorial takes the
//! folder holding `cifar-10-batches-bin` as its `--data_dir`, torchvision's `CIFAR10` the one
//! holding `cifar-10-batches-py` as its `root`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{
    Cifar10Format, Cifar10PythonFormat, PYTHON_TEST_FILE, PYTHON_TRAIN_FILES, TEST_FILE,
    TRAIN_FILES,
};
use crate::error::{Error, Result};
use crate::format::RecordFormat;

/// The layouts CIFAR-10 is published in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Layout {
    /// `cifar-10-batches-bin`: `data_batch_1.bin` ... `test_batch.bin`, read by
    /// [`Cifar10Format`].
    Binary,
    /// `cifar-10-batches-py`: `data_batch_1` ... `test_batch`, pickles read by
    /// [`Cifar10PythonFormat`].
    Python,
}

impl Layout {
    /// The folder name the layout is published under.
    pub fn folder_name(self) -> &'static str {
        match self {
            Layout::Binary => "cifar-10-batches-bin",
            Layout::Python => "cifar-10-batches-py",
        }
    }

    fn train_names(self) -> &'static [&'static str] {
        match self {
            Layout::Binary => &TRAIN_FILES,
            Layout::Python => &PYTHON_TRAIN_FILES,
        }
    }

    fn test_name(self) -> &'static str {
        match self {
            Layout::Binary => TEST_FILE,
            Layout::Python => PYTHON_TEST_FILE,
        }
    }

    /// Whether `dir` holds any of this layout's files.
    fn is_in(self, dir: &Path) -> bool {
        let test = [self.test_name()];
        let mut names = self.train_names().iter().chain(&test);
        names.any(|name| dir.join(name).is_file())
    }
}

/// A folder of CIFAR-10 files in one of its [`Layout`]s.
///
/// ```no_run
/// # use std::{path::Path, sync::Arc};
/// use towers_data::{RecordDataset, cifar10::Cifar10Dir};
/// # fn main() -> towers_data::Result<()> {
/// // torchvision's root (holding cifar-10-batches-py) or TF's data_dir, or the folder itself.
/// let cifar = Cifar10Dir::find(Path::new("data"))?;
/// let train = RecordDataset::open(cifar.format(), cifar.train_files()?)?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Cifar10Dir {
    dir: PathBuf,
    layout: Layout,
}

impl Cifar10Dir {
    /// The CIFAR-10 files in `dir`, or else in its `cifar-10-batches-bin` or
    /// `cifar-10-batches-py` folder: the first folder holding a file of either layout, the
    /// binary layout first where one folder holds both. An error names `dir` and the files it
    /// looked for when there are none.
    pub fn find(dir: &Path) -> Result<Self> {
        if !dir.is_dir() {
            return Err(Error::File {
                path: dir.to_path_buf(),
                reason: "no such directory (expected a CIFAR-10 folder: cifar-10-batches-bin \
                         or cifar-10-batches-py, or the folder holding one)"
                    .into(),
            });
        }
        let layouts = [Layout::Binary, Layout::Python];
        let places = [dir.to_path_buf()]
            .into_iter()
            .chain(layouts.iter().map(|layout| dir.join(layout.folder_name())));
        for place in places {
            if let Some(&layout) = layouts.iter().find(|layout| layout.is_in(&place)) {
                return Ok(Self { dir: place, layout });
            }
        }
        Err(Error::File {
            path: dir.to_path_buf(),
            reason: "no CIFAR-10 files here or in its cifar-10-batches-bin or \
                     cifar-10-batches-py folder (expected data_batch_1.bin ... test_batch.bin, \
                     or data_batch_1 ... test_batch)"
                .into(),
        })
    }

    /// The folder holding the files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The layout of the files.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// The format that reads the files.
    pub fn format(&self) -> Arc<dyn RecordFormat> {
        match self.layout {
            Layout::Binary => Arc::new(Cifar10Format),
            Layout::Python => Arc::new(Cifar10PythonFormat::default()),
        }
    }

    /// The five training files, checked to exist.
    pub fn train_files(&self) -> Result<Vec<PathBuf>> {
        existing_files(&self.dir, self.layout, self.layout.train_names())
    }

    /// The test file, checked to exist.
    pub fn test_files(&self) -> Result<Vec<PathBuf>> {
        existing_files(&self.dir, self.layout, &[self.layout.test_name()])
    }
}

/// The five training files of `dir`, a `cifar-10-batches-bin` folder, checked to exist. For
/// either layout: [`Cifar10Dir`].
pub fn train_files(dir: &Path) -> Result<Vec<PathBuf>> {
    binary_dir(dir)?.train_files()
}

/// The test file of `dir`, a `cifar-10-batches-bin` folder, checked to exist. For either
/// layout: [`Cifar10Dir`].
pub fn test_files(dir: &Path) -> Result<Vec<PathBuf>> {
    binary_dir(dir)?.test_files()
}

fn binary_dir(dir: &Path) -> Result<Cifar10Dir> {
    if !dir.is_dir() {
        return Err(Error::File {
            path: dir.to_path_buf(),
            reason: "no such directory (expected the cifar-10-batches-bin folder)".into(),
        });
    }
    Ok(Cifar10Dir {
        dir: dir.to_path_buf(),
        layout: Layout::Binary,
    })
}

fn existing_files(dir: &Path, layout: Layout, names: &[&str]) -> Result<Vec<PathBuf>> {
    let other = match layout {
        Layout::Binary => Layout::Python,
        Layout::Python => Layout::Binary,
    };
    names
        .iter()
        .map(|name| {
            let path = dir.join(name);
            if path.is_file() {
                return Ok(path);
            }
            let reason = if other.is_in(dir) {
                format!(
                    "missing: the folder holds {}'s files (open it with Cifar10Dir::find)",
                    other.folder_name()
                )
            } else {
                format!("missing: not the {} layout", layout.folder_name())
            };
            Err(Error::File { path, reason })
        })
        .collect()
}
