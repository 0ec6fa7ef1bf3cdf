//! [`Layout`]: what the record cursor walks, files of records, whatever they are made of.
//!
//! Dataset files ([`FileLayout`]) are indexed once each, the first time the cursor enters
//! them. A Burn `Dataset` is laid out as one single-record "file" per item
//! ([`ItemLayout`](super::dataset::ItemLayout)), so that the cursor's per-epoch file shuffle is a
//! full permutation of the items and its resume logic applies unchanged.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use super::corrupt_records::CorruptTally;
use crate::error::{Error, Result};
use crate::format::{RecordFormat, RecordSpan, record_error};

/// Files of records, as the record cursor sees them.
pub(crate) trait Layout: Send + Sync {
    /// How many files there are.
    fn files(&self) -> usize;

    /// The records of file `file`; an error names the file.
    fn spans(&self, file: usize) -> Result<Arc<Vec<RecordSpan>>>;

    /// Whether a chunk of records must come from one file (it is read in one go); otherwise
    /// the cursor fills chunks across files.
    fn chunk_within_file(&self) -> bool;

    /// What is wrong with record `record` of file `file`.
    fn record_error(&self, file: usize, record: usize, reason: String) -> Error;
}

/// Dataset files in a [`RecordFormat`], each indexed once.
pub(crate) struct FileLayout {
    files: Vec<PathBuf>,
    format: Arc<dyn RecordFormat>,
    /// Where a file's broken framing is counted when corrupt records are skipped.
    tally: Arc<CorruptTally>,
    indexes: Mutex<HashMap<usize, Arc<Vec<RecordSpan>>>>,
}

impl FileLayout {
    /// `files` in `format`.
    pub(super) fn new(
        files: Vec<PathBuf>,
        format: Arc<dyn RecordFormat>,
        tally: Arc<CorruptTally>,
    ) -> Self {
        Self {
            files,
            format,
            tally,
            indexes: Mutex::default(),
        }
    }

    /// The path of file `file`.
    pub(super) fn path(&self, file: usize) -> &PathBuf {
        &self.files[file]
    }

    /// The format the files are in.
    pub(super) fn format(&self) -> &dyn RecordFormat {
        self.format.as_ref()
    }

    /// Indexes file `file`. When corrupt records are skipped, a file whose framing breaks (cut
    /// short, a bad length CRC) keeps the records before the break, and the break counts as
    /// one skipped record.
    fn index(&self, file: usize) -> Result<Vec<RecordSpan>> {
        let path = &self.files[file];
        if !self.tally.skips() {
            return self.format.index(path);
        }
        let index = self.format.index_partial(path)?;
        if let Some(broken) = index.broken {
            self.tally.record::<()>(Err(broken))?;
        }
        Ok(index.spans)
    }
}

impl Layout for FileLayout {
    fn files(&self) -> usize {
        self.files.len()
    }

    fn spans(&self, file: usize) -> Result<Arc<Vec<RecordSpan>>> {
        let mut indexes = self.indexes.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(spans) = indexes.get(&file) {
            return Ok(Arc::clone(spans));
        }
        let spans = Arc::new(self.index(file)?);
        indexes.insert(file, Arc::clone(&spans));
        Ok(spans)
    }

    fn chunk_within_file(&self) -> bool {
        true
    }

    fn record_error(&self, file: usize, record: usize, reason: String) -> Error {
        record_error(&self.files[file], record, reason)
    }
}
