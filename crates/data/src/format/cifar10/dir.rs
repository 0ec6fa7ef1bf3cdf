//! A CIFAR-10 folder of any layout, found by its files: the folder itself, or the
//! `cifar-10-batches-bin` or `cifar-10-batches-py` folder inside it (TF's tutorial takes the
//! folder holding `cifar-10-batches-bin` as its `--data_dir`, torchvision's `CIFAR10` the one
//! holding `cifar-10-batches-py` as its `root`), or TFDS's `cifar10` dataset there (the
//! `data_dir` of `tfds.load`, holding `cifar10/<version>/`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::tfds::TFDS_NAME;
use super::{
    Cifar10Format, Cifar10PythonFormat, Cifar10TfdsFormat, PYTHON_TEST_FILE, PYTHON_TRAIN_FILES,
    TEST_FILE, TRAIN_FILES,
};
use crate::error::{Error, Result};
use crate::format::RecordFormat;
use crate::format::tfds::TfdsDataset;

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
    /// TFDS's `cifar10/<version>`: the shards `dataset_info.json` lists, read by
    /// [`Cifar10TfdsFormat`].
    Tfds,
}

impl Layout {
    /// The folder name the layout is published under.
    pub fn folder_name(self) -> &'static str {
        match self {
            Layout::Binary => "cifar-10-batches-bin",
            Layout::Python => "cifar-10-batches-py",
            Layout::Tfds => TFDS_NAME,
        }
    }

    /// The training files' and the test file's names; none for TFDS's, which its
    /// `dataset_info.json` lists.
    fn file_names(self) -> (&'static [&'static str], &'static [&'static str]) {
        match self {
            Layout::Binary => (&TRAIN_FILES, &[TEST_FILE]),
            Layout::Python => (&PYTHON_TRAIN_FILES, &[PYTHON_TEST_FILE]),
            Layout::Tfds => (&[], &[]),
        }
    }

    /// The published layout this one is not.
    fn other(self) -> Layout {
        match self {
            Layout::Binary => Layout::Python,
            Layout::Python | Layout::Tfds => Layout::Binary,
        }
    }

    /// Whether `dir` holds any of this layout's named files.
    fn is_in(self, dir: &Path) -> bool {
        let (train, test) = self.file_names();
        train
            .iter()
            .chain(test)
            .any(|name| dir.join(name).is_file())
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
    /// The dataset and its format, for [`Layout::Tfds`].
    tfds: Option<(TfdsDataset, Cifar10TfdsFormat)>,
}

impl Cifar10Dir {
    /// The CIFAR-10 files in `dir`, or else in its `cifar-10-batches-bin` or
    /// `cifar-10-batches-py` folder: the first folder (in that order) holding every file of a
    /// layout, the binary layout first where one folder holds both; failing that, the first
    /// holding any (whose missing files its `train_files` or `test_files` then name); failing
    /// that, TFDS's `cifar10` in `dir` (`tfds.load`'s `data_dir`, its newest version) or `dir`
    /// itself (`cifar10` or its version folder). An error names `dir` and the files it looked
    /// for when there are none.
    pub fn find(dir: &Path) -> Result<Self> {
        if !dir.is_dir() {
            let what = match dir.exists() {
                true => "a file, not a folder (a download to extract first?)",
                false => "no such directory",
            };
            return Err(Error::File {
                path: dir.to_path_buf(),
                reason: format!(
                    "{what}: expected a CIFAR-10 folder (cifar-10-batches-bin or \
                     cifar-10-batches-py, or the folder holding one)"
                ),
            });
        }
        let layouts = [Layout::Binary, Layout::Python];
        let places = [dir.to_path_buf()]
            .into_iter()
            .chain(layouts.iter().map(|layout| dir.join(layout.folder_name())));
        let found: Vec<Self> = places
            .flat_map(|place| {
                layouts.map(|layout| Self {
                    dir: place.clone(),
                    layout,
                    tfds: None,
                })
            })
            .filter(|found| found.layout.is_in(&found.dir))
            .collect();
        let complete = found.iter().position(Self::is_complete);
        if let Some(first) = complete.or((!found.is_empty()).then_some(0)) {
            return Ok(found[first].clone());
        }
        if let Some(tfds) = Self::find_tfds(dir)? {
            return Ok(tfds);
        }
        Err(Error::File {
            path: dir.to_path_buf(),
            reason: "no CIFAR-10 files here or in its cifar-10-batches-bin or \
                     cifar-10-batches-py folder (expected data_batch_1.bin ... test_batch.bin, \
                     or data_batch_1 ... test_batch), and no TFDS cifar10 dataset"
                .into(),
        })
    }

    /// TFDS's `cifar10` in `dir`, TFDS's `data_dir` (holding `cifar10/<version>`), or `dir`
    /// itself: its version folder or `cifar10` folder. `None` where `dir` is none of these.
    fn find_tfds(dir: &Path) -> Result<Option<Self>> {
        let below = dir.join(TFDS_NAME);
        let place = if below.is_dir() { &below } else { dir };
        let Some(dataset) = TfdsDataset::find(place)? else {
            return Ok(None);
        };
        let format = Cifar10TfdsFormat::new(&dataset)?;
        Ok(Some(Self {
            dir: dataset.dir().to_path_buf(),
            layout: Layout::Tfds,
            tfds: Some((dataset, format)),
        }))
    }

    /// Whether every training file and the test file are there.
    fn is_complete(&self) -> bool {
        self.train_files().is_ok() && self.test_files().is_ok()
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
        match (self.layout, &self.tfds) {
            (_, Some((_, format))) => Arc::new(format.clone()),
            (Layout::Python, _) => Arc::new(Cifar10PythonFormat::default()),
            _ => Arc::new(Cifar10Format),
        }
    }

    /// The five training files (TFDS's `train` shards), checked to exist.
    pub fn train_files(&self) -> Result<Vec<PathBuf>> {
        match &self.tfds {
            Some((dataset, _)) => dataset.split_files("train"),
            None => existing_files(&self.dir, self.layout, self.layout.file_names().0),
        }
    }

    /// The test file (TFDS's `test` shards), checked to exist.
    pub fn test_files(&self) -> Result<Vec<PathBuf>> {
        match &self.tfds {
            Some((dataset, _)) => dataset.split_files("test"),
            None => existing_files(&self.dir, self.layout, self.layout.file_names().1),
        }
    }
}

/// The five training files of `dir`, a `cifar-10-batches-bin` folder, checked to exist. For
/// any layout: [`Cifar10Dir`].
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
        tfds: None,
    })
}

fn existing_files(dir: &Path, layout: Layout, names: &[&str]) -> Result<Vec<PathBuf>> {
    let other = layout.other();
    names
        .iter()
        .map(|name| {
            let path = dir.join(name);
            if path.is_file() {
                return Ok(path);
            }
            let reason = if other.is_in(dir) {
                format!(
                    "missing: the folder holds {}'s files instead (Cifar10Dir::find takes either)",
                    other.folder_name()
                )
            } else {
                format!(
                    "missing from this folder of the {} layout",
                    layout.folder_name()
                )
            };
            Err(Error::File { path, reason })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use towers_testing::{assert_error_names, report};

    use super::*;

    /// A folder holding empty files of these names.
    fn folder_of(names: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for name in names {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, b"").unwrap();
        }
        dir
    }

    #[test]
    fn missing_directory_and_files_are_named() {
        let msg = report(&train_files(Path::new("/no/such/cifar")).unwrap_err());
        assert_error_names(&msg, &["/no/such/cifar", "no such directory"]);
        let dir = folder_of(&["data_batch_1.bin"]);
        let msg = report(&train_files(dir.path()).unwrap_err());
        assert_error_names(&msg, &["data_batch_2.bin", "missing"]);
        let dir = folder_of(&["data_batch_1"]);
        let found = Cifar10Dir::find(dir.path()).unwrap();
        let msg = report(&found.train_files().unwrap_err());
        assert_error_names(&msg, &["data_batch_2", "missing", "cifar-10-batches-py"]);
    }

    #[test]
    fn either_layout_is_found_in_its_folder_or_the_folder_above() {
        let py = folder_of(&[
            "cifar-10-batches-py/data_batch_1",
            "cifar-10-batches-py/test_batch",
        ]);
        let found = Cifar10Dir::find(py.path()).unwrap();
        assert_eq!(found.layout(), Layout::Python);
        assert_eq!(found.dir(), py.path().join("cifar-10-batches-py"));
        let test = found.test_files().unwrap();
        assert_eq!(test, [py.path().join("cifar-10-batches-py/test_batch")]);
        let found = Cifar10Dir::find(&py.path().join("cifar-10-batches-py")).unwrap();
        assert_eq!(found.layout(), Layout::Python);
        let bin = folder_of(&["test_batch.bin"]);
        assert_eq!(
            Cifar10Dir::find(bin.path()).unwrap().layout(),
            Layout::Binary
        );
        let both = folder_of(&[
            "cifar-10-batches-py/test_batch",
            "cifar-10-batches-bin/test_batch.bin",
        ]);
        let found = Cifar10Dir::find(both.path()).unwrap();
        assert_eq!(found.layout(), Layout::Binary);
        assert_eq!(found.dir(), both.path().join("cifar-10-batches-bin"));
    }

    #[test]
    fn a_whole_layout_below_is_taken_over_a_lone_file_above() {
        let mut names = vec!["test_batch.bin"];
        let py: Vec<String> = PYTHON_TRAIN_FILES
            .iter()
            .chain([&PYTHON_TEST_FILE])
            .map(|name| format!("cifar-10-batches-py/{name}"))
            .collect();
        names.extend(py.iter().map(String::as_str));
        let dir = folder_of(&names);
        let found = Cifar10Dir::find(dir.path()).unwrap();
        assert_eq!(found.layout(), Layout::Python);
        assert_eq!(found.train_files().unwrap().len(), 5);
    }

    #[test]
    fn a_folder_without_cifar_files_or_a_download_not_extracted_is_named() {
        let empty = folder_of(&["README"]);
        let msg = report(&Cifar10Dir::find(empty.path()).unwrap_err());
        assert_error_names(&msg, &["no CIFAR-10 files", "cifar-10-batches-py"]);
        let archive = folder_of(&["cifar-10-python.tar.gz"]);
        let path = archive.path().join("cifar-10-python.tar.gz");
        let msg = report(&Cifar10Dir::find(&path).unwrap_err());
        assert_error_names(&msg, &["cifar-10-python.tar.gz", "a file, not a folder"]);
    }

    #[test]
    fn the_binary_layouts_file_list_points_to_the_python_layout_it_finds() {
        let dir = folder_of(&["data_batch_1", "test_batch"]);
        let msg = report(&train_files(dir.path()).unwrap_err());
        assert_error_names(
            &msg,
            &["data_batch_1.bin", "cifar-10-batches-py", "Cifar10Dir"],
        );
    }
}
