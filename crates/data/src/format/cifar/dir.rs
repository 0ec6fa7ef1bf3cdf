//! A CIFAR folder of any layout, found by its files: the folder itself, or the layout's folder
//! inside it (`cifar-10-batches-bin`, `cifar-10-batches-py`, `cifar-100-binary`,
//! `cifar-100-python`: TF's tutorial takes the folder holding `cifar-10-batches-bin` as its
//! `--data_dir`, torchvision's `CIFAR10` and `CIFAR100` the one holding the python folder as
//! their `root`), or TFDS's `cifar10` or `cifar100` dataset there (the `data_dir` of
//! `tfds.load`, holding `cifar10/<version>/`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{
    Cifar, Cifar10Format, Cifar10PythonFormat, Cifar10TfdsFormat, Cifar100Format, Cifar100Labels,
    Cifar100PythonFormat, Cifar100TfdsFormat,
};
use crate::error::{Error, Result};
use crate::format::RecordFormat;
use crate::format::tfds::TfdsDataset;

/// The accessors of both folder types, by the [`Folder`] they hold as `files`.
macro_rules! folder_accessors {
    () => {
        /// The folder holding the files.
        pub fn dir(&self) -> &Path {
            &self.files.dir
        }

        /// The layout of the files.
        pub fn layout(&self) -> Layout {
            self.files.layout
        }

        /// The format that reads the files.
        pub fn format(&self) -> Arc<dyn RecordFormat> {
            self.files.format()
        }

        /// The training files (CIFAR-10's five, CIFAR-100's one, TFDS's `train` shards),
        /// checked to exist.
        pub fn train_files(&self) -> Result<Vec<PathBuf>> {
            self.files.train_files()
        }

        /// The test file (TFDS's `test` shards), checked to exist.
        pub fn test_files(&self) -> Result<Vec<PathBuf>> {
            self.files.test_files()
        }
    };
}

/// The layouts CIFAR is published in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Layout {
    /// `cifar-10-batches-bin` (`data_batch_1.bin` ... `test_batch.bin`, read by
    /// [`Cifar10Format`]) or `cifar-100-binary` (`train.bin`, `test.bin`, [`Cifar100Format`]).
    Binary,
    /// `cifar-10-batches-py` (`data_batch_1` ... `test_batch`, pickles read by
    /// [`Cifar10PythonFormat`]) or `cifar-100-python` (`train`, `test`,
    /// [`Cifar100PythonFormat`]).
    Python,
    /// TFDS's `cifar10/<version>` or `cifar100/<version>`: the shards `dataset_info.json`
    /// lists, read by [`Cifar10TfdsFormat`] or [`Cifar100TfdsFormat`].
    Tfds,
}

impl Layout {
    /// The folder CIFAR-10 is published under in this layout (TFDS's: the dataset's folder in
    /// its `data_dir`).
    pub fn folder_name(self) -> &'static str {
        Cifar::Ten.folder_name(self)
    }

    /// The published layout this one is not.
    fn other(self) -> Layout {
        match self {
            Layout::Binary => Layout::Python,
            Layout::Python | Layout::Tfds => Layout::Binary,
        }
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
    files: Folder,
}

/// A folder of CIFAR-100 files in one of its [`Layout`]s, read with the labels it was found
/// with; as [`Cifar10Dir`].
#[derive(Debug, Clone)]
pub struct Cifar100Dir {
    files: Folder,
    labels: Cifar100Labels,
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
        Folder::find(Cifar::Ten, dir).map(|files| Self { files })
    }

    folder_accessors!();
}

impl Cifar100Dir {
    /// The CIFAR-100 files in `dir`, read with `labels`: as [`Cifar10Dir::find`], in
    /// `cifar-100-binary`, `cifar-100-python` or TFDS's `cifar100`.
    pub fn find(dir: &Path, labels: Cifar100Labels) -> Result<Self> {
        let files = Folder::find(Cifar::Hundred(labels), dir)?;
        Ok(Self { files, labels })
    }

    /// The labels its format takes.
    pub fn labels(&self) -> Cifar100Labels {
        self.labels
    }

    folder_accessors!();
}

/// The files of a CIFAR dataset in one layout: what both folders are.
#[derive(Clone)]
struct Folder {
    cifar: Cifar,
    dir: PathBuf,
    layout: Layout,
    /// The dataset and its format, for [`Layout::Tfds`].
    tfds: Option<(TfdsDataset, Arc<dyn RecordFormat>)>,
}

impl std::fmt::Debug for Folder {
    /// The dataset, not its format (the same for every folder of the dataset and layout).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Folder")
            .field("cifar", &self.cifar)
            .field("dir", &self.dir)
            .field("layout", &self.layout)
            .field("tfds", &self.tfds.as_ref().map(|(dataset, _)| dataset))
            .finish()
    }
}

impl Folder {
    /// `cifar`'s files in `dir`, as [`Cifar10Dir::find`] says.
    fn find(cifar: Cifar, dir: &Path) -> Result<Self> {
        let name = cifar.name();
        let [binary, python] = [Layout::Binary, Layout::Python].map(|l| cifar.folder_name(l));
        if !dir.is_dir() {
            let what = match dir.exists() {
                true => "a file, not a folder (a download to extract first?)",
                false => "no such directory",
            };
            return Err(Error::File {
                path: dir.to_path_buf(),
                reason: format!(
                    "{what}: expected a {name} folder ({binary} or {python}, or the folder \
                     holding one)"
                ),
            });
        }
        let layouts = [Layout::Binary, Layout::Python];
        let places = [dir.to_path_buf()].into_iter().chain(
            layouts
                .iter()
                .map(|&layout| dir.join(cifar.folder_name(layout))),
        );
        let found: Vec<Self> = places
            .flat_map(|place| layouts.map(|layout| Self::of_files(cifar, &place, layout)))
            .filter(Self::holds_any)
            .collect();
        let complete = found.iter().position(Self::is_complete);
        if let Some(first) = complete.or((!found.is_empty()).then_some(0)) {
            return Ok(found[first].clone());
        }
        if let Some(tfds) = Self::find_tfds(cifar, dir)? {
            return Ok(tfds);
        }
        let [train, test] = [Layout::Binary, Layout::Python].map(|l| cifar.file_names(l));
        Err(Error::File {
            path: dir.to_path_buf(),
            reason: format!(
                "no {name} files here or in its {binary} or {python} folder (expected {} ... \
                 {}, or {} ... {}), and no TFDS {} dataset",
                train.0[0],
                train.1[0],
                test.0[0],
                test.1[0],
                cifar.tfds().0
            ),
        })
    }

    /// `cifar`'s files of `layout` in `dir`, whether there or not.
    fn of_files(cifar: Cifar, dir: &Path, layout: Layout) -> Self {
        Self {
            cifar,
            dir: dir.to_path_buf(),
            layout,
            tfds: None,
        }
    }

    /// TFDS's dataset of `cifar` in `dir`, TFDS's `data_dir` (holding `cifar10/<version>`), or
    /// `dir` itself: its version folder or dataset folder. `None` where `dir` is none of these.
    fn find_tfds(cifar: Cifar, dir: &Path) -> Result<Option<Self>> {
        let below = dir.join(cifar.tfds().0);
        let place = if below.is_dir() { &below } else { dir };
        let Some(dataset) = TfdsDataset::find_dataset(place)? else {
            return Ok(None);
        };
        let format: Arc<dyn RecordFormat> = match cifar {
            Cifar::Ten => Arc::new(Cifar10TfdsFormat::new(&dataset)?),
            Cifar::Hundred(labels) => Arc::new(Cifar100TfdsFormat::new(&dataset, labels)?),
        };
        Ok(Some(Self {
            dir: dataset.dir().to_path_buf(),
            tfds: Some((dataset, format)),
            ..Self::of_files(cifar, dir, Layout::Tfds)
        }))
    }

    /// Whether the folder holds any of its layout's named files.
    fn holds_any(&self) -> bool {
        let (train, test) = self.cifar.file_names(self.layout);
        let mut names = train.iter().chain(test);
        names.any(|name| self.dir.join(name).is_file())
    }

    /// Whether every training file and the test file are there.
    fn is_complete(&self) -> bool {
        self.train_files().is_ok() && self.test_files().is_ok()
    }

    fn format(&self) -> Arc<dyn RecordFormat> {
        match (self.cifar, self.layout, &self.tfds) {
            (_, _, Some((_, format))) => Arc::clone(format),
            (Cifar::Ten, Layout::Python, _) => Arc::new(Cifar10PythonFormat::default()),
            (Cifar::Hundred(labels), Layout::Python, _) => {
                Arc::new(Cifar100PythonFormat::new(labels))
            }
            (Cifar::Ten, _, _) => Arc::new(Cifar10Format),
            (Cifar::Hundred(labels), _, _) => Arc::new(Cifar100Format::new(labels)),
        }
    }

    fn train_files(&self) -> Result<Vec<PathBuf>> {
        match &self.tfds {
            Some((dataset, _)) => dataset.split_files("train"),
            None => self.existing_files(self.cifar.file_names(self.layout).0),
        }
    }

    fn test_files(&self) -> Result<Vec<PathBuf>> {
        match &self.tfds {
            Some((dataset, _)) => dataset.split_files("test"),
            None => self.existing_files(self.cifar.file_names(self.layout).1),
        }
    }

    /// The files `names` of the folder, checked to exist: a missing one is an error naming it,
    /// and the other layout where the folder holds that one's files.
    fn existing_files(&self, names: &[&str]) -> Result<Vec<PathBuf>> {
        let other = Self::of_files(self.cifar, &self.dir, self.layout.other());
        let folder_of = |layout| self.cifar.folder_name(layout);
        names
            .iter()
            .map(|name| {
                let path = self.dir.join(name);
                if path.is_file() {
                    return Ok(path);
                }
                let reason = match other.holds_any() {
                    true => format!(
                        "missing: the folder holds {}'s files instead (find takes either)",
                        folder_of(other.layout)
                    ),
                    false => format!(
                        "missing from this folder of the {} layout",
                        folder_of(self.layout)
                    ),
                };
                Err(Error::File { path, reason })
            })
            .collect()
    }
}

/// The five training files of `dir`, a `cifar-10-batches-bin` folder, checked to exist. For
/// any layout: [`Cifar10Dir`].
pub fn train_files(dir: &Path) -> Result<Vec<PathBuf>> {
    binary_dir(dir)?.train_files()
}

/// The test file of `dir`, a `cifar-10-batches-bin` folder, checked to exist. For any
/// layout: [`Cifar10Dir`].
pub fn test_files(dir: &Path) -> Result<Vec<PathBuf>> {
    binary_dir(dir)?.test_files()
}

fn binary_dir(dir: &Path) -> Result<Folder> {
    if !dir.is_dir() {
        return Err(Error::File {
            path: dir.to_path_buf(),
            reason: "no such directory (expected the cifar-10-batches-bin folder)".into(),
        });
    }
    Ok(Folder::of_files(Cifar::Ten, dir, Layout::Binary))
}

#[cfg(test)]
mod tests {
    use towers_testing::{assert_error_names, report};

    use super::*;
    use crate::format::cifar::{PYTHON_TEST_FILE, PYTHON_TRAIN_FILES};

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
            &[
                "data_batch_1.bin",
                "cifar-10-batches-py",
                "find takes either",
            ],
        );
    }
}
