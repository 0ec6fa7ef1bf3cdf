//! [`IndexedFile`]: a dataset file's records, as its format indexed them, and where to read
//! them: the file itself or, for a file TF wrote compressed, its decompressed copy.

use std::path::Path;

use towers_multigpu::eprint_line;

use crate::error::{Error, Result, While};
use crate::format::compressed::{DecompressedCopy, Ending};
use crate::format::{Compression, PartialIndex, RecordFormat, RecordSource, RecordSpan};

/// The error for a dataset file that is a FIFO, socket, device or folder: a FIFO would hang
/// its reader (opening it waits for a writer; TF's and torchvision's readers wait so), and the
/// others hold no records.
pub(crate) fn not_a_file(path: &Path) -> Error {
    Error::File {
        path: path.to_path_buf(),
        reason: "not a regular file (a FIFO, socket, device or folder): opening a FIFO waits \
                 for a writer, forever; move it out"
            .into(),
    }
}

/// The records of one dataset file, as its [`RecordFormat`] indexed them.
///
/// A file that fails to index as it is and begins with a GZIP or ZLIB header is decompressed
/// into a temporary file (see [`Compression`]) and indexed there: TF reads such files when
/// told their `compression_type`, this reads them without being told. As TF does, data cut
/// short (the file ends inside the compressed stream or its checksum) is read to the cut,
/// where the format's framing judges it: its whole records are read (with a warning on
/// stderr), a record cut in two is a break. Corrupt data is a break. The copy needs the
/// decompressed size free under `std::env::temp_dir()` (`TMPDIR`); it is deleted when its
/// [`RecordSource`] lets it go or drops and no reader holds it, and on Linux, where it has no
/// name, also when the process ends without dropping it (a kill).
#[derive(Debug)]
#[non_exhaustive]
pub struct IndexedFile {
    /// The records before any break in the framing (all of them when there is none).
    pub spans: Vec<RecordSpan>,
    /// The break that ended the walk: the file is cut short or corrupt there. Only
    /// [`open_partial`](Self::open_partial) keeps records before one.
    pub broken: Option<Error>,
    /// Where the spans point.
    pub source: RecordSource,
}

impl IndexedFile {
    /// Every record of `path`, or an error naming the file and the record where its framing
    /// breaks ([`RecordFormat::index`]), or that it is not a regular file (a FIFO would hang
    /// its reader).
    pub fn open(format: &dyn RecordFormat, path: &Path) -> Result<Self> {
        let decompress = format.reads_compressed_files();
        Self::walk(path, false, decompress, |path: &Path| {
            Ok(PartialIndex {
                spans: format.index(path)?,
                broken: None,
            })
        })
    }

    /// The records of `path` before any break in its framing, and the break
    /// ([`RecordFormat::index_partial`]): compressed data that is corrupt is such a break
    /// too, after the records decompressed before it.
    pub fn open_partial(format: &dyn RecordFormat, path: &Path) -> Result<Self> {
        let decompress = format.reads_compressed_files();
        Self::walk(path, true, decompress, |path: &Path| {
            format.index_partial(path)
        })
    }

    /// Indexes `path` with `walk`; if that fails, breaks or finds nothing but a few stray
    /// bytes, and the file begins as compressed data, indexes its decompressed copy instead.
    /// `keep_before_break`: whether compressed data that is corrupt keeps the records before
    /// it; `decompress`: whether the format reads compressed files at all.
    fn walk(
        path: &Path,
        keep_before_break: bool,
        decompress: bool,
        walk: impl Fn(&Path) -> Result<PartialIndex>,
    ) -> Result<Self> {
        if std::fs::metadata(path).is_ok_and(|meta| !meta.is_file()) {
            return Err(not_a_file(path));
        }
        let plain = |index: PartialIndex| Self {
            spans: index.spans,
            broken: index.broken,
            source: RecordSource::plain(path),
        };
        let as_is = walk(path);
        let held = as_is.as_ref().is_ok_and(|index| index.broken.is_none());
        let had_records = as_is.as_ref().is_ok_and(|index| !index.spans.is_empty());
        if (held && had_records) || !decompress {
            return as_is.map(plain);
        }
        // A file that cannot be read keeps the error that says so.
        let Ok(Some(compression)) = Compression::of_file(path) else {
            return as_is.map(plain);
        };
        // A file whose framing held for some records, or held with none (a few bytes too few
        // for a record), is taken as it is when it does not decompress: its first bytes only
        // happened to look like a header. Data cut short is a compressed file's only when it
        // had no records as it is.
        match DecompressedCopy::new(path, compression) {
            Ok((_, Ending::CutShort(_) | Ending::Corrupt(_))) | Err(_) if had_records => {
                as_is.map(plain)
            }
            Ok((_, Ending::Corrupt(_))) if held => as_is.map(plain),
            Ok((_, Ending::Corrupt(corrupt))) if !keep_before_break => Err(corrupt),
            decompressed => {
                let (copy, ending) = decompressed?;
                Self::walk_copy(path, compression, copy, ending, walk)
            }
        }
    }

    /// Indexes `copy`, the decompressed data of `path`, with `walk`, its errors naming `path`.
    fn walk_copy(
        path: &Path,
        compression: Compression,
        copy: DecompressedCopy,
        ending: Ending,
        walk: impl Fn(&Path) -> Result<PartialIndex>,
    ) -> Result<Self> {
        let mut within = format!("in its {}-decompressed data", compression.name());
        let (cut, corrupt) = match ending {
            Ending::Whole => (None, None),
            Ending::CutShort(cut) => (Some(cut), None),
            Ending::Corrupt(corrupt) => (None, Some(corrupt)),
        };
        if cut.is_some() {
            within += &format!(", cut short after {} bytes", copy.len());
        }
        let index = walk(copy.path()).map_err(|e| named_as(e, path, &within))?;
        if let (Some(cut), None) = (&cut, &index.broken) {
            warn_read_to_the_cut(cut, index.spans.len());
        }
        Ok(Self {
            spans: index.spans,
            broken: index.broken.map(|e| named_as(e, path, &within)).or(corrupt),
            source: RecordSource::copy(path, compression, copy),
        })
    }
}

/// Says on stderr that a file's compressed data was `cut` short and that its `records`
/// decompressed before the cut are read: tf.data reads them without a word.
fn warn_read_to_the_cut(cut: &Error, records: usize) {
    eprint_line(&format!(
        "warning: {cut}: the {records} whole records before the cut are read, as tf.data \
         reads them"
    ));
}

/// `error`, which names a decompressed copy, naming the compressed file `original` instead and
/// saying, `within`, that the fault lies in its decompressed data.
fn named_as(error: Error, original: &Path, within: &str) -> Error {
    match error {
        Error::Record { record, error, .. } => Error::Record {
            path: original.to_path_buf(),
            record,
            error: While::doing(within.to_string())(error),
        },
        Error::File { reason, .. } => Error::File {
            path: original.to_path_buf(),
            reason: format!("{within}: {reason}"),
        },
        other => other,
    }
}
