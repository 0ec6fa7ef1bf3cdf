//! [`RecordSlices`]: some records of each file of another format (TFDS's `train[:80%]`).

use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::format::{Compression, Example, PartialIndex, Prepared, RecordFormat, RecordSpan};
use crate::rng::Rng;
use crate::transforms::Transform;

/// The records of a range of each file, of a format that reads whole files: for each file
/// named, its records `range` (in the file's order), none of the others; a file not named, all
/// of its records. Decoding errors name the record by its number in the file, as the format
/// reading the whole file does; a file that holds fewer records than its range reaches is an
/// error when indexed. Compressed files are refused, saying to decompress them: their records
/// are indexed in a decompressed copy, which the ranges do not name.
pub struct RecordSlices {
    format: Arc<dyn RecordFormat>,
    ranges: HashMap<PathBuf, Range<usize>>,
}

impl std::fmt::Debug for RecordSlices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordSlices")
            .field("ranges", &self.ranges)
            .finish_non_exhaustive()
    }
}

impl RecordSlices {
    /// The records `range` of each file of `ranges`, read by `format`.
    pub fn new(
        format: Arc<dyn RecordFormat>,
        ranges: impl IntoIterator<Item = (PathBuf, Range<usize>)>,
    ) -> Self {
        Self {
            format,
            ranges: ranges.into_iter().collect(),
        }
    }

    /// The range of `path`'s records read; `None` where it is not named (all of them).
    fn range(&self, path: &Path) -> Option<&Range<usize>> {
        self.ranges.get(path)
    }

    /// Where `path`'s record `record` of the slice is in the file.
    fn in_file(&self, path: &Path, record: usize) -> usize {
        self.range(path).map_or(0, |range| range.start) + record
    }

    /// `spans`, records of `path` from its first, cut to its range.
    fn within(&self, path: &Path, spans: Vec<RecordSpan>) -> Vec<RecordSpan> {
        let Some(range) = self.range(path) else {
            return spans;
        };
        let end = range.end.min(spans.len());
        spans[range.start.min(end)..end].to_vec()
    }
}

impl RecordFormat for RecordSlices {
    fn index(&self, path: &Path) -> Result<Vec<RecordSpan>> {
        let spans = self
            .format
            .index(path)
            .map_err(|error| compressed(path).unwrap_or(error))?;
        if let Some(range) = self.range(path).filter(|range| range.end > spans.len()) {
            return Err(Error::File {
                path: path.to_path_buf(),
                reason: format!(
                    "holds {} records, where its slice reads records {}..{} (a copy cut short?)",
                    spans.len(),
                    range.start,
                    range.end
                ),
            });
        }
        Ok(self.within(path, spans))
    }

    /// A break past the slice's end is none of its business: its records are all whole.
    fn index_partial(&self, path: &Path) -> Result<PartialIndex> {
        let partial = self.format.index_partial(path);
        let PartialIndex { spans, broken } =
            partial.map_err(|error| compressed(path).unwrap_or(error))?;
        let before_end = self.range(path).is_none_or(|range| spans.len() < range.end);
        Ok(PartialIndex {
            broken: broken.filter(|_| before_end),
            spans: self.within(path, spans),
        })
    }

    /// `false`: a range names records of the file, not of a decompressed copy.
    fn reads_compressed_files(&self) -> bool {
        false
    }

    fn decode(&self, path: &Path, record: usize, bytes: &[u8]) -> Result<Example> {
        self.format.decode(path, self.in_file(path, record), bytes)
    }

    fn prepare(
        &self,
        path: &Path,
        record: usize,
        bytes: &[u8],
        transform: &dyn Transform,
        rng: &mut Rng,
    ) -> Result<Prepared> {
        let record = self.in_file(path, record);
        self.format.prepare(path, record, bytes, transform, rng)
    }
}

/// Why `path` cannot be sliced, where it is compressed (its format fails on its bytes as they
/// are).
fn compressed(path: &Path) -> Option<Error> {
    let compression = Compression::of_file(path).ok()??;
    Some(Error::File {
        path: path.to_path_buf(),
        reason: format!(
            "{} data: a slice of its records is taken of the file as it is; decompress it \
             first",
            compression.name()
        ),
    })
}
