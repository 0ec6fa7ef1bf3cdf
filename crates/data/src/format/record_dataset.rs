//! [`RecordDataset`]: dataset files of any [`RecordFormat`] as a Burn `Dataset` of decoded
//! [`Example`]s, for Burn's own `DataLoaderBuilder` (or our
//! [`DatasetPipeline`](crate::DatasetPipeline)).
//!
//! The files are indexed once, when the dataset is opened; `get(i)` reads record `i`'s bytes
//! and decodes them, no transform applied. A file TF wrote compressed is read from its
//! decompressed copy ([`IndexedFile`]), kept while the dataset lives. CIFAR-10 images come out
//! HWC with values 0..=255, TFRecord `tf.train.Example` images RGB in [0, 1], image folders as
//! their codec decodes them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use burn::data::dataset::{Dataset, DatasetError};

use crate::error::{Error, Result};
use crate::format::image_folder::ImageFolder;
use crate::format::{Example, IndexedFile, RecordFormat, RecordSpan, read_records};

/// The records of dataset files, in file order, as a Burn `Dataset<Example>`.
///
/// ```no_run
/// # use std::{path::Path, sync::Arc};
/// use towers_data::{RecordDataset, cifar10, inception};
/// # fn main() -> towers_data::Result<()> {
/// let dir = Path::new("cifar-10-batches-bin");
/// let cifar = RecordDataset::open(Arc::new(cifar10::Cifar10Format), cifar10::train_files(dir)?)?;
/// let shards = inception::train_files(Path::new("imagenet-tfrecords"))?;
/// let imagenet = RecordDataset::open(Arc::new(inception::TfExampleFormat::new(1001)), shards)?;
/// let folder = RecordDataset::image_folder(Path::new("flowers"))?;
/// # Ok(()) }
/// ```
pub struct RecordDataset {
    format: Arc<dyn RecordFormat>,
    files: Vec<PathBuf>,
    /// Each file's records and where to read them.
    indexed: Vec<IndexedFile>,
    /// The dataset index of each file's first record.
    starts: Vec<usize>,
    len: usize,
}

impl std::fmt::Debug for RecordDataset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordDataset")
            .field("files", &self.files)
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

impl RecordDataset {
    /// Indexes `files` in `format`. A file whose framing is wrong is an error naming it (and
    /// the record, where it applies).
    pub fn open(format: Arc<dyn RecordFormat>, files: Vec<PathBuf>) -> Result<Self> {
        let indexed = files
            .iter()
            .map(|path| IndexedFile::open(format.as_ref(), path))
            .collect::<Result<Vec<_>>>()?;
        let starts = indexed
            .iter()
            .map(|file| &file.spans)
            .scan(0, |next, file| {
                let start = *next;
                *next += file.len();
                Some(start)
            })
            .collect();
        Ok(Self {
            len: indexed.iter().map(|file| file.spans.len()).sum(),
            format,
            files,
            indexed,
            starts,
        })
    }

    /// The images under `root/<class>/`, labelled by class folder in sorted order (see
    /// [`ImageFolder::scan`]).
    pub fn image_folder(root: &Path) -> Result<Self> {
        let folder = ImageFolder::scan(root)?;
        Self::open(Arc::new(folder.format()), folder.files().to_vec())
    }

    /// Record `index`, read and decoded; an error names its file and record.
    pub fn try_get(&self, index: usize) -> Result<Example> {
        let (file, record, span) = self.locate(index)?;
        let path = &self.files[file];
        let mut reader = self.indexed[file].source.open()?;
        let mut bytes = Vec::new();
        read_records(reader.file(), path, &[(record, span)], &mut bytes)?;
        self.format.decode(path, record, &bytes)
    }

    /// The file number, the index in it and the span of record `index`.
    fn locate(&self, index: usize) -> Result<(usize, usize, RecordSpan)> {
        if index >= self.len {
            return Err(Error::Config(format!(
                "record {index} of a dataset of {} records",
                self.len
            )));
        }
        // The last file starting at or before `index` (an empty file shares its start with
        // the file after it).
        let file = self.starts.partition_point(|start| *start <= index) - 1;
        let record = index - self.starts[file];
        Ok((file, record, self.indexed[file].spans[record]))
    }
}

impl Dataset<Example> for RecordDataset {
    fn get(&self, index: usize) -> std::result::Result<Example, DatasetError> {
        self.try_get(index).map_err(DatasetError::new)
    }

    fn len(&self) -> usize {
        self.len
    }
}
