//! CIFAR's python layouts. CIFAR-10's (`cifar-10-batches-py`, what torchvision's `CIFAR10`
//! downloads): each file a pickled dict (Python 2's, protocol 2) whose `data` is a numpy array
//! of N rows of 3072 bytes, each image's R, G and B planes as in the binary layout, and whose
//! `labels` is a list of N class ids. CIFAR-100's (`cifar-100-python`, torchvision's
//! `CIFAR100`): the same, with `fine_labels` and `coarse_labels` for `labels`. Files re-saved
//! by Python 3 (protocols 3 to 5, numpy 1 or 2, labels a list or an integer array) read the
//! same.
//!
//! A record is an image's 3072 bytes where the array lies in the file; its label comes from the
//! file's list, read once when the file is indexed (or first decoded) and kept.

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use super::{Cifar, Cifar100Labels, IMAGE_BYTES, IMAGE_SIZE, example};
use crate::error::{Error, Result};
use crate::format::pickle::{
    NdArray, Pickle, ScalarKind, Value, ValueId, integer_scalar, read_pickle,
};
use crate::format::{Example, RecordFormat, RecordSpan, record_error};

/// Reads CIFAR-10's python batches; images come out 32x32x3 with values 0..=255, as
/// [`Cifar10Format`](super::Cifar10Format)'s. Each file's labels are read when it is indexed
/// (or first decoded) and kept by path while the format lives: a file rewritten meanwhile is
/// read anew when indexed again.
#[derive(Debug, Default)]
pub struct Cifar10PythonFormat {
    batches: Batches,
}

/// Reads CIFAR-100's python batches (`train`, `test`), taking their `fine_labels` or
/// `coarse_labels`; otherwise as [`Cifar10PythonFormat`].
#[derive(Debug, Default)]
pub struct Cifar100PythonFormat {
    batches: Batches,
}

impl Cifar100PythonFormat {
    /// Batches read with their `labels`.
    pub fn new(labels: Cifar100Labels) -> Self {
        Self {
            batches: Batches::of(Cifar::Hundred(labels)),
        }
    }
}

impl Cifar10PythonFormat {
    fn batches(&self) -> &Batches {
        &self.batches
    }
}

impl Cifar100PythonFormat {
    fn batches(&self) -> &Batches {
        &self.batches
    }
}

record_format_by!(Cifar10PythonFormat, batches);
record_format_by!(Cifar100PythonFormat, batches);

/// The python batches of a CIFAR dataset: the reader both formats are.
struct Batches {
    cifar: Cifar,
    /// Each file's labels, read when it was indexed.
    labels: Mutex<HashMap<PathBuf, Arc<[i64]>>>,
}

impl Default for Batches {
    fn default() -> Self {
        Self::of(Cifar::Ten)
    }
}

impl std::fmt::Debug for Batches {
    /// The files whose labels it keeps, not the labels (60,000 of them).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let files: Vec<PathBuf> = self.labels_by_file().keys().cloned().collect();
        f.debug_struct("Batches")
            .field("cifar", &self.cifar)
            .field("files", &files)
            .finish()
    }
}

impl RecordFormat for Batches {
    fn index(&self, path: &Path) -> Result<Vec<RecordSpan>> {
        let batch = Batch::read(self.cifar, path)?;
        let spans = (0..batch.labels.len() as u64)
            .map(|i| RecordSpan {
                offset: batch.images_at + i * IMAGE_BYTES as u64,
                len: IMAGE_BYTES,
            })
            .collect();
        self.labels_by_file()
            .insert(path.to_path_buf(), batch.labels);
        Ok(spans)
    }

    /// `false`: pickle's `load` reads no compressed file (a GZIP'd batch is named as one).
    fn reads_compressed_files(&self) -> bool {
        false
    }

    fn decode(&self, path: &Path, record: usize, bytes: &[u8]) -> Result<Example> {
        if bytes.len() != IMAGE_BYTES {
            let reason = format!("{} bytes, expected {IMAGE_BYTES}", bytes.len());
            return Err(record_error(path, record, reason));
        }
        let labels = self.labels_of(path)?;
        let Some(&label) = labels.get(record) else {
            let reason = format!("the file holds {} records", labels.len());
            return Err(record_error(path, record, reason));
        };
        example(self.cifar, path, record, label, bytes)
    }
}

impl Batches {
    fn of(cifar: Cifar) -> Self {
        Self {
            cifar,
            labels: Mutex::default(),
        }
    }

    fn labels_by_file(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, Arc<[i64]>>> {
        // The map is whole between statements: a panic elsewhere leaves nothing half-done.
        self.labels.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The labels of `path`, read now when it was not indexed before.
    fn labels_of(&self, path: &Path) -> Result<Arc<[i64]>> {
        if let Some(labels) = self.labels_by_file().get(path) {
            return Ok(Arc::clone(labels));
        }
        let labels = Batch::read(self.cifar, path)?.labels;
        self.labels_by_file()
            .insert(path.to_path_buf(), Arc::clone(&labels));
        Ok(labels)
    }
}

/// What a batch file holds: where its images start and their labels.
struct Batch {
    images_at: u64,
    labels: Arc<[i64]>,
}

impl Batch {
    fn read(cifar: Cifar, path: &Path) -> Result<Self> {
        let pickle = read_pickle(path)?;
        let bad = |reason: String| Error::File {
            path: path.to_path_buf(),
            reason,
        };
        let root = pickle.root();
        let entry = |key: &str| {
            pickle
                .get(root, key)
                .ok_or_else(|| bad(missing(cifar, &pickle, key)))
        };
        let images = NdArray::from_pickle(&pickle, entry("data")?)
            .map_err(|reason| bad(format!("its 'data': {reason}")))?;
        let rows = image_rows(&images).map_err(|reason| bad(format!("its 'data': {reason}")))?;
        let key = cifar.python_key();
        let labels = read_labels(path, &pickle, (key, entry(key)?), rows)?;
        Ok(Self {
            images_at: images.data.offset,
            labels: labels.into(),
        })
    }
}

/// Why a batch without `key` is not a batch of `cifar`, naming (some of) the keys it has.
fn missing(cifar: Cifar, pickle: &Pickle, key: &str) -> String {
    let root = pickle.root();
    let name = cifar.name();
    if !matches!(pickle.value(root), Value::Dict(_)) {
        return format!(
            "not a {name} python batch: the pickle holds {}, not a dict",
            pickle.type_name(root)
        );
    }
    let keys = pickle.keys(root);
    let hint = match cifar {
        Cifar::Ten if keys.contains(&"fine_labels") => " (a CIFAR-100 batch?)",
        Cifar::Hundred(_) if keys.contains(&"labels") => " (a CIFAR-10 batch?)",
        _ => "",
    };
    let shown: Vec<&str> = keys.iter().take(10).copied().collect();
    let more = keys.len().saturating_sub(shown.len());
    let more = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    format!("not a {name} python batch{hint}: its dict has no '{key}' (its keys: {shown:?}{more})")
}

/// The number of images in `data`: bytes, as `(N, 3072)` or `(N, 3, 32, 32)` rows in C order
/// (torchvision reshapes them to `(N, 3, 32, 32)`; other shapes would be other pixels).
fn image_rows(data: &NdArray) -> std::result::Result<u64, String> {
    let side = IMAGE_SIZE as u64;
    let rows = match data.shape[..] {
        [rows, bytes] if bytes == IMAGE_BYTES as u64 => rows,
        [rows, 3, h, w] if h == side && w == side => rows,
        _ => {
            return Err(format!(
                "a numpy array of shape {:?}, not (N, {IMAGE_BYTES}) or (N, 3, 32, 32)",
                data.shape
            ));
        }
    };
    if data.dtype.kind != ScalarKind::Unsigned || data.dtype.size != 1 {
        return Err(format!("an array of {}, not of bytes (uint8)", data.dtype));
    }
    // Column-major bytes are the same as row-major only when at most one dimension is over 1.
    if data.fortran && data.shape.iter().filter(|&&dim| dim > 1).count() > 1 {
        return Err("an array in column-major (Fortran) order: its rows are not images".into());
    }
    Ok(rows)
}

/// The `rows` class ids of the entry `key`, `labels`, in `path`: a list of ints (or numpy
/// integer scalars), or a numpy array of integers.
fn read_labels(
    path: &Path,
    pickle: &Pickle,
    (key, labels): (&str, ValueId),
    rows: u64,
) -> Result<Vec<i64>> {
    let bad = |reason: String| Error::File {
        path: path.to_path_buf(),
        reason: format!("its '{key}': {reason}"),
    };
    let count_error = |count: u64| {
        bad(format!(
            "{count} labels for the {rows} images of its 'data'"
        ))
    };
    if let Value::List(items) = pickle.value(labels) {
        if items.len() as u64 != rows {
            return Err(count_error(items.len() as u64));
        }
        let label = |(i, &item): (usize, &ValueId)| match pickle.value(item) {
            Value::Int(label) => Ok(*label),
            _ => integer_scalar(pickle, item).ok_or_else(|| {
                bad(format!(
                    "item {i} is {}, not an int",
                    pickle.type_name(item)
                ))
            }),
        };
        return items.iter().enumerate().map(label).collect();
    }
    let array = NdArray::from_pickle(pickle, labels).map_err(bad)?;
    let dtype = array.dtype;
    if !dtype.is_integer() {
        return Err(bad(format!("an array of {dtype}, not of integers")));
    }
    match array.shape[..] {
        [count] if count == rows => {}
        [count] => return Err(count_error(count)),
        _ => {
            return Err(bad(format!(
                "an array of shape {:?}, not a list",
                array.shape
            )));
        }
    }
    let bytes = read_span(path, array.data.offset, array.data.len).map_err(Error::io_at(path))?;
    let size = dtype.size as usize;
    Ok(bytes
        .chunks(size)
        .map(|element| dtype.integer(element))
        .collect())
}

/// `len` bytes of `path` from `offset` (within the file: the pickle reader checked).
fn read_span(path: &Path, offset: u64, len: u64) -> std::io::Result<Vec<u8>> {
    let mut file = File::open(path)?;
    file.seek(SeekFrom::Start(offset))?;
    let mut bytes = vec![0; len as usize];
    file.read_exact(&mut bytes)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use flate2::write::GzEncoder;
    use towers_testing::{assert_error_names, report};

    use super::*;
    use crate::format::IndexedFile;

    /// A batch as Python 2's cPickle wrote CIFAR-10's (protocol 2, strings as `str`): `labels`,
    /// and `pixels` as an array of `shape`.
    fn py2_array_batch(pixels: &[u8], shape: &[u32], labels: &[u8]) -> Vec<u8> {
        let mut out = b"\x80\x02}q\x01(U\x06labelsq\x02]q\x03(".to_vec();
        for &label in labels {
            out.extend([b'K', label]);
        }
        out.extend(b"eU\x04dataq\x04cnumpy.core.multiarray\n_reconstruct\nq\x05cnumpy\nndarray\n");
        out.extend(b"q\x06K\x00\x85U\x01b\x87Rq\x07(K\x01(");
        for dim in shape {
            out.push(b'J');
            out.extend(dim.to_le_bytes());
        }
        out.extend(b"tcnumpy\ndtype\nq\x08U\x02u1\x89\x88\x87Rq\t(K\x03U\x01|");
        out.extend(b"NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb\x89T");
        out.extend((pixels.len() as u32).to_le_bytes());
        out.extend(pixels);
        out.extend(b"tbu.");
        out
    }

    /// [`py2_array_batch`] of `rows` rows of an image each.
    fn py2_batch(pixels: &[u8], rows: u32, labels: &[u8]) -> Vec<u8> {
        py2_array_batch(pixels, &[rows, IMAGE_BYTES as u32], labels)
    }

    /// Image `i` of a test batch: every byte `i`.
    fn pixels(rows: u8) -> Vec<u8> {
        (0..rows).flat_map(|i| [i; IMAGE_BYTES]).collect()
    }

    fn write(dir: &tempfile::TempDir, bytes: &[u8]) -> PathBuf {
        let path = dir.path().join("data_batch_1");
        std::fs::write(&path, bytes).unwrap();
        path
    }

    /// Record `record` of a batch file of `bytes`, decoded before the file was indexed (its
    /// image bytes all 1).
    fn decode_first(bytes: &[u8], record: usize) -> Result<Example> {
        let dir = tempfile::tempdir().unwrap();
        let path = write(&dir, bytes);
        Cifar10PythonFormat::default().decode(&path, record, &[1; IMAGE_BYTES])
    }

    fn index_error(bytes: &[u8]) -> String {
        let dir = tempfile::tempdir().unwrap();
        let path = write(&dir, bytes);
        report(&Cifar10PythonFormat::default().index(&path).unwrap_err())
    }

    #[test]
    fn a_hand_built_batch_reads_image_by_image_with_its_labels() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(&dir, &py2_batch(&pixels(3), 3, &[4, 0, 9]));
        let format = Cifar10PythonFormat::default();
        let spans = format.index(&path).unwrap();
        assert_eq!(spans.len(), 3);
        let bytes = std::fs::read(&path).unwrap();
        for (i, span) in spans.iter().enumerate() {
            let start = span.offset as usize;
            let example = format
                .decode(&path, i, &bytes[start..start + span.len])
                .unwrap();
            assert_eq!(example.label, [4, 0, 9][i]);
            assert!(example.image.data().iter().all(|&v| v == i as f32));
        }
    }

    #[test]
    fn a_record_decoded_before_its_file_was_indexed_finds_its_label() {
        let example = decode_first(&py2_batch(&pixels(2), 2, &[7, 3]), 1).unwrap();
        assert_eq!(example.label, 3);
    }

    #[test]
    fn a_label_out_of_range_names_the_file_and_record() {
        let error = decode_first(&py2_batch(&pixels(2), 2, &[7, 10]), 1).unwrap_err();
        assert_error_names(&report(&error), &["data_batch_1", "record 1", "label 10"]);
    }

    #[test]
    fn images_and_labels_that_do_not_pair_up_are_refused() {
        let message = index_error(&py2_batch(&pixels(3), 3, &[1, 2]));
        assert_error_names(&message, &["data_batch_1", "2 labels for the 3 images"]);
    }

    #[test]
    fn data_whose_bytes_are_not_its_shape_is_refused() {
        let message = index_error(&py2_batch(&pixels(2), 3, &[1, 2, 3]));
        assert_error_names(
            &message,
            &["data_batch_1", "shape [3, 3072]", "holding 6144 bytes"],
        );
    }

    #[test]
    fn a_string_longer_than_the_file_is_refused_before_anything_is_read() {
        let mut bytes = py2_batch(&pixels(1), 1, &[1]);
        let data_at = bytes.len() - IMAGE_BYTES - 9;
        assert_eq!(bytes[data_at], b'T');
        bytes[data_at + 1..data_at + 5].copy_from_slice(&i32::MAX.to_le_bytes());
        let message = index_error(&bytes);
        assert_error_names(&message, &["data_batch_1", "2147483647 bytes", "cut short"]);
    }

    #[test]
    fn a_batch_cut_short_names_the_file_and_byte() {
        let bytes = py2_batch(&pixels(2), 2, &[1, 2]);
        for cut in [0, 1, 40, bytes.len() - 3000, bytes.len() - 1] {
            let message = index_error(&bytes[..cut]);
            let said = if cut == 0 { "empty" } else { "cut short" };
            assert_error_names(&message, &["data_batch_1", said]);
        }
    }

    #[test]
    fn images_stored_height_first_are_refused_not_misread() {
        let message = index_error(&py2_array_batch(&pixels(1), &[1, 32, 32, 3], &[1]));
        assert_error_names(&message, &["data_batch_1", "shape [1, 32, 32, 3]"]);
        let dir = tempfile::tempdir().unwrap();
        let path = write(&dir, &py2_array_batch(&pixels(1), &[1, 3, 32, 32], &[1]));
        assert_eq!(
            Cifar10PythonFormat::default().index(&path).unwrap().len(),
            1
        );
    }

    #[test]
    fn a_pickle_of_a_million_values_is_refused_to_bound_memory() {
        let mut bytes = b"\x80\x02](".to_vec();
        bytes.extend([b'K', 1].repeat(1 << 20));
        bytes.extend(b"e.");
        let message = index_error(&bytes);
        assert_error_names(&message, &["data_batch_1", "more than 1048576 values"]);
    }

    #[test]
    fn other_files_say_what_they_seem_to_be() {
        // `pickle.dumps({'data': 1}, protocol=0)`
        let message = index_error(b"(dp0\nVdata\np1\nI1\ns.");
        assert_error_names(&message, &["data_batch_1", "protocol 0 or 1", "0x28"]);
        let message = index_error(b"PK\x03\x04\x14\x00");
        assert_error_names(&message, &["data_batch_1", "zip archive"]);
        let message = index_error(&[0x1f, 0x8b, 8, 0]);
        assert_error_names(&message, &["data_batch_1", "GZIP", "extract it"]);
        let mut binary_record = vec![6u8];
        binary_record.extend([0; IMAGE_BYTES]);
        let message = index_error(&binary_record);
        assert_error_names(&message, &["data_batch_1", "not a pickle", "0x06"]);
        let mut cifar100 = py2_batch(&pixels(1), 1, &[1]);
        cifar100.splice(6..14, *b"U\x0bfine_labels");
        let message = index_error(&cifar100);
        assert_error_names(&message, &["CIFAR-100", "no 'labels'", "fine_labels"]);
    }

    #[test]
    fn a_batch_python_3_wrote_at_protocol_2_says_how_to_re_save_it() {
        let mut bytes = py2_batch(&pixels(1), 1, &[1]);
        let at = bytes.len() - IMAGE_BYTES - 9;
        // The array's bytes as `_codecs.encode(text, 'latin1')`, as Python 3 writes them.
        let mut encoded = b"c_codecs\nencode\nX".to_vec();
        encoded.extend(2u32.to_le_bytes());
        encoded.extend(b"\xc3\xbfX\x06\x00\x00\x00latin1\x86R");
        bytes.splice(at..bytes.len() - 4, encoded);
        let message = index_error(&bytes);
        assert_error_names(
            &message,
            &["data_batch_1", "latin-1 text", "protocol 3 or later"],
        );
    }

    #[test]
    fn labels_as_numpy_scalars_read_as_ints() {
        let mut bytes = py2_batch(&pixels(1), 1, &[]);
        let list = b"]q\x03(e";
        let at = bytes.windows(list.len()).position(|w| w == list).unwrap();
        // `[np.int64(7)]`: `scalar(dtype('i8'), b'\x07\0...')`.
        let mut scalar = b"]q\x03(cnumpy.core.multiarray\nscalar\ncnumpy\ndtype\nU\x02i8".to_vec();
        scalar.extend(b"\x89\x88\x87R(K\x03U\x01<NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb");
        scalar.extend(b"U\x08\x07\x00\x00\x00\x00\x00\x00\x00\x86Re");
        bytes.splice(at..at + list.len(), scalar);
        assert_eq!(decode_first(&bytes, 0).unwrap().label, 7);
    }

    #[test]
    fn a_labels_array_is_counted_before_it_is_read() {
        // 2^20 labels as one int8 array for one image: refused by its shape, not read.
        let dir = tempfile::tempdir().unwrap();
        let mut bytes = b"\x80\x02}(U\x06labelscnumpy.core.multiarray\n_reconstruct\n".to_vec();
        bytes.extend(b"cnumpy\nndarray\nK\x00\x85U\x01b\x87R(K\x01J\x00\x00\x10\x00\x85");
        bytes.extend(b"cnumpy\ndtype\nU\x02i1\x89\x88\x87R(K\x03U\x01|NNNJ\xff\xff\xff\xff");
        bytes.extend(b"J\xff\xff\xff\xffK\x00tb\x89T\x00\x00\x10\x00");
        bytes.extend(vec![0; 1 << 20]);
        bytes.extend(b"tbU\x04data");
        let data = py2_batch(&pixels(1), 1, &[]);
        let array_at = data.windows(5).position(|w| w == b"cnump").unwrap();
        bytes.extend(&data[array_at..data.len() - 2]);
        bytes.extend(b"u.");
        let path = write(&dir, &bytes);
        let message = report(&Cifar10PythonFormat::default().index(&path).unwrap_err());
        assert_error_names(
            &message,
            &["data_batch_1", "1048576 labels for the 1 images"],
        );
    }

    #[test]
    fn copies_of_a_long_name_count_against_the_strings_bound() {
        // One 200-byte module name, fetched from the memo and joined 100,000 times: 20 MB of
        // names from a file of 1 MB.
        let mut bytes = b"\x80\x04\x8c\xc8".to_vec();
        bytes.extend([b'm'; 200]);
        bytes.extend(b"\x94\x8c\x01n\x94");
        for _ in 0..100_000 {
            bytes.extend(b"h\x00h\x01\x930");
        }
        bytes.extend(b"N.");
        let message = index_error(&bytes);
        assert_error_names(&message, &["data_batch_1", "more than 16777216 bytes"]);
    }

    #[test]
    fn a_fortran_ordered_image_is_refused() {
        let mut bytes = py2_array_batch(&pixels(1), &[1, 3, 32, 32], &[1]);
        let flag = b"b\x89T";
        let at = bytes.windows(3).position(|w| w == flag).unwrap();
        bytes[at + 1] = 0x88;
        let message = index_error(&bytes);
        assert_error_names(&message, &["data_batch_1", "column-major"]);
    }

    #[test]
    fn a_gzipped_batch_is_named_not_read_from_a_decompressed_copy() {
        // pickle's `load` reads no GZIP file: the copies TF's formats are read from are not for it.
        let mut gzip = GzEncoder::new(Vec::new(), flate2::Compression::default());
        gzip.write_all(&py2_batch(&pixels(1), 1, &[1])).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = write(&dir, &gzip.finish().unwrap());
        let error = IndexedFile::open(&Cifar10PythonFormat::default(), &path).unwrap_err();
        assert_error_names(&report(&error), &["data_batch_1", "GZIP", "extract it"]);
    }

    #[test]
    fn a_list_holding_itself_is_read_without_looping() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(&dir, b"\x80\x02]q\x00h\x00a.");
        let pickle = read_pickle(&path).unwrap();
        assert_eq!(pickle.items(pickle.root()), Some(&[pickle.root()][..]));
    }
}
