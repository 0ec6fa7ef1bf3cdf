//! [`Layout`]: what the record cursor walks, files of records, whatever they are made of.
//!
//! Dataset files ([`FileLayout`]) are indexed once each, the first time the cursor enters
//! them; a compressed file is read from a decompressed copy, of which a few are kept. A Burn
//! `Dataset` is laid out as one single-record "file" per item
//! ([`ItemLayout`](super::dataset::ItemLayout)), so that the cursor's per-epoch file shuffle is a
//! full permutation of the items and its resume logic applies unchanged.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use super::corrupt_records::CorruptTally;
use crate::error::{Error, Result};
use crate::format::{
    IndexedFile, RecordFormat, RecordReader, RecordSource, RecordSpan, record_error,
};

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

/// How many compressed files keep their decompressed copies on disk for the readers: the cursor
/// hands out one file's records at a time and readers trail it by a few chunks, so the copies
/// of a few files serve them, and the disk holds a few files' decompressed sizes, not the
/// dataset's. A file let go is decompressed again when read again (the next epoch).
const KEPT_COPIES: usize = 3;

/// Dataset files in a [`RecordFormat`], each indexed once.
pub(crate) struct FileLayout {
    files: Vec<PathBuf>,
    format: Arc<dyn RecordFormat>,
    /// Where a file's broken framing is counted when corrupt records are skipped.
    tally: Arc<CorruptTally>,
    indexed: Mutex<Indexed>,
}

/// An indexed file's records and where to read them.
type FileIndex = (Arc<Vec<RecordSpan>>, Arc<RecordSource>);

/// The files indexed so far.
#[derive(Default)]
struct Indexed {
    /// Each indexed file's records and where to read them.
    files: HashMap<usize, FileIndex>,
    /// The compressed files whose copies are kept, the one read last at the back.
    kept_copies: VecDeque<usize>,
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
            indexed: Mutex::default(),
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

    /// Opens file `file` (indexed by the cursor before its records are handed out) for reading
    /// its records: the file, or its decompressed copy (made again if it was let go).
    pub(super) fn open(&self, file: usize) -> Result<RecordReader> {
        let (_, source) = self.indexed(file)?;
        source.open()
    }

    /// File `file`'s records and where to read them, indexing it the first time.
    fn indexed(&self, file: usize) -> Result<FileIndex> {
        let mut indexed = self.indexed.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = match indexed.files.get(&file) {
            Some(entry) => entry.clone(),
            None => {
                let entry = self.index(file)?;
                indexed.files.insert(file, entry.clone());
                entry
            }
        };
        if entry.1.compression().is_some() {
            indexed.keep_copy(file);
        }
        Ok(entry)
    }

    /// Indexes file `file`. When corrupt records are skipped, a file whose framing breaks (cut
    /// short, a bad length CRC) keeps the records before the break, and the break counts as
    /// one skipped record.
    fn index(&self, file: usize) -> Result<FileIndex> {
        let path = &self.files[file];
        let format = self.format.as_ref();
        let indexed = if self.tally.skips() {
            IndexedFile::open_partial(format, path)?
        } else {
            IndexedFile::open(format, path)?
        };
        if let Some(broken) = indexed.broken {
            self.tally.record::<()>(Err(broken))?;
        }
        Ok((Arc::new(indexed.spans), Arc::new(indexed.source)))
    }
}

impl Indexed {
    /// Marks compressed file `file` as read last, letting go of the copy of the file read
    /// longest ago when more than [`KEPT_COPIES`] are kept.
    fn keep_copy(&mut self, file: usize) {
        self.kept_copies.retain(|kept| *kept != file);
        self.kept_copies.push_back(file);
        if self.kept_copies.len() > KEPT_COPIES {
            let oldest = self.kept_copies.pop_front().expect("more than kept");
            self.files[&oldest].1.release();
        }
    }
}

impl Layout for FileLayout {
    fn files(&self) -> usize {
        self.files.len()
    }

    fn spans(&self, file: usize) -> Result<Arc<Vec<RecordSpan>>> {
        Ok(self.indexed(file)?.0)
    }

    fn chunk_within_file(&self) -> bool {
        true
    }

    fn record_error(&self, file: usize, record: usize, reason: String) -> Error {
        record_error(&self.files[file], record, reason)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::os::unix::fs::MetadataExt;

    use flate2::write::GzEncoder;

    use super::*;
    use crate::format::inception::TfExampleFormat;
    use crate::format::tfrecord::TfRecordWriter;
    use crate::pipeline::CorruptRecords;

    /// The decompressed copies alive whose contents are among `contents`: named in the
    /// temporary directory, or (on Linux) without a name, held by this process's descriptors
    /// (counted once per file, however many descriptors hold it).
    fn copies_alive(contents: &[Vec<u8>]) -> usize {
        let paths = std::fs::read_dir(std::env::temp_dir()).unwrap();
        let named = paths.map(|entry| entry.unwrap().path());
        let held = std::fs::read_dir("/proc/self/fd").into_iter().flatten();
        let held = held.filter_map(|fd| Some(fd.ok()?.path()));
        let mut files = std::collections::HashSet::new();
        for path in named.chain(held) {
            // Regular files only: reading a pipe or a socket could block.
            let Ok(metadata) = std::fs::metadata(&path) else {
                continue;
            };
            let ours = metadata.is_file()
                && (metadata.len() as usize) == contents[0].len()
                && std::fs::read(&path).is_ok_and(|bytes| contents.contains(&bytes));
            if ours {
                files.insert((metadata.dev(), metadata.ino()));
            }
        }
        files.len()
    }

    /// Five GZIP-compressed files read in turn: the copies of the last three stay on disk, a
    /// file let go is decompressed again when opened, and a reader keeps its copy until it
    /// drops.
    #[test]
    fn only_the_copies_of_the_files_read_last_stay_on_disk() {
        let dir = tempfile::tempdir().unwrap();
        // Records no other test writes, so that its copies are told apart by their contents.
        let contents: Vec<Vec<u8>> = (0..5u8)
            .map(|i| {
                let mut records = TfRecordWriter::new(Vec::new());
                records.write(&[0xa0 + i; 100]).unwrap();
                records.into_inner().unwrap()
            })
            .collect();
        let files: Vec<PathBuf> = (contents.iter().enumerate())
            .map(|(i, records)| {
                let mut gzip = GzEncoder::new(Vec::new(), flate2::Compression::default());
                gzip.write_all(records).unwrap();
                let path = dir.path().join(format!("kept-copies-{i}"));
                std::fs::write(&path, gzip.finish().unwrap()).unwrap();
                path
            })
            .collect();
        let tally = Arc::new(CorruptTally::new(CorruptRecords::Fail));
        let layout = FileLayout::new(files, Arc::new(TfExampleFormat::new(2)), tally);
        let on_disk = || copies_alive(&contents);
        for file in 0..5 {
            assert_eq!(layout.spans(file).unwrap().len(), 1);
            assert_eq!(on_disk(), (file + 1).min(KEPT_COPIES), "after file {file}");
        }
        let reader = layout.open(2).unwrap();
        for file in [0, 1, 3] {
            let mut reader = layout.open(file).unwrap();
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(reader.file(), &mut bytes).unwrap();
            assert_eq!(bytes[12], 0xa0 + file as u8, "file {file}, made again");
        }
        assert_eq!(on_disk(), KEPT_COPIES + 1, "file 2's, held by its reader");
        drop(reader);
        assert_eq!(on_disk(), KEPT_COPIES);
    }
}
