//! [`RecordSource`]: the file an indexed dataset file's records are read from: the file itself,
//! or the decompressed copy of a compressed one, made again when it was let go.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use crate::error::{Error, Result};
use crate::format::Compression;
use crate::format::compressed::DecompressedCopy;

/// Where the records of an [`IndexedFile`](crate::IndexedFile) are read from.
#[derive(Debug)]
pub struct RecordSource(Source);

#[derive(Debug)]
enum Source {
    /// The dataset file itself.
    Plain(PathBuf),
    /// A compressed file's decompressed copy.
    Copy(CompressedFile),
}

/// A compressed dataset file and its decompressed copy, when one is kept.
#[derive(Debug)]
struct CompressedFile {
    original: PathBuf,
    compression: Compression,
    /// The copy's size, which a copy made again must have.
    len: u64,
    copy: Mutex<Option<Arc<DecompressedCopy>>>,
}

impl RecordSource {
    /// The file at `path`.
    pub(crate) fn plain(path: &Path) -> Self {
        Self(Source::Plain(path.to_path_buf()))
    }

    /// `copy`, the decompressed contents of `original`.
    pub(crate) fn copy(original: &Path, compression: Compression, copy: DecompressedCopy) -> Self {
        Self(Source::Copy(CompressedFile {
            original: original.to_path_buf(),
            compression,
            len: copy.len(),
            copy: Mutex::new(Some(Arc::new(copy))),
        }))
    }

    /// The file's compression, when its records are read from a decompressed copy.
    pub fn compression(&self) -> Option<Compression> {
        match &self.0 {
            Source::Plain(_) => None,
            Source::Copy(compressed) => Some(compressed.compression),
        }
    }

    /// Opens the file the records are read from. A decompressed copy that was let go
    /// ([`release`](Self::release)) is made again first (blocking the caller, and any other
    /// opener of this file, while it decompresses); it stays on disk while the reader lives.
    pub fn open(&self) -> Result<RecordReader> {
        let (path, copy) = match &self.0 {
            Source::Plain(path) => (path.clone(), None),
            Source::Copy(compressed) => {
                let copy = compressed.copy()?;
                (copy.path().to_path_buf(), Some(copy))
            }
        };
        let file = File::open(&path).map_err(|error| Error::Io { path, error })?;
        Ok(RecordReader { file, _copy: copy })
    }

    /// Lets the decompressed copy go: its file is deleted once no [`RecordReader`] holds it,
    /// and [`open`](Self::open) makes it again. Nothing for an uncompressed file.
    pub fn release(&self) {
        if let Source::Copy(compressed) = &self.0 {
            let mut copy = compressed
                .copy
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            *copy = None;
        }
    }
}

impl CompressedFile {
    /// The kept copy, or a new one. A new copy whose size differs from the first's means the
    /// file changed since it was indexed: an error naming it.
    fn copy(&self) -> Result<Arc<DecompressedCopy>> {
        let mut kept = self.copy.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(copy) = kept.as_ref() {
            return Ok(Arc::clone(copy));
        }
        // A copy that ended in corrupt data the first time ends there again: its records
        // before the break were indexed, and only those are read.
        let (copy, _) = DecompressedCopy::new(&self.original, self.compression)?;
        if copy.len() != self.len {
            return Err(Error::File {
                path: self.original.clone(),
                reason: format!(
                    "changed since it was indexed: {} decompressed bytes then, {} now",
                    self.len,
                    copy.len()
                ),
            });
        }
        Ok(Arc::clone(kept.insert(Arc::new(copy))))
    }
}

/// An open file of records: a dataset file, or a decompressed copy kept on disk while this
/// lives.
#[derive(Debug)]
pub struct RecordReader {
    file: File,
    /// Held, never read: the copy `file` is, kept from deletion.
    _copy: Option<Arc<DecompressedCopy>>,
}

impl RecordReader {
    /// The open file.
    pub fn file(&mut self) -> &mut File {
        &mut self.file
    }
}
