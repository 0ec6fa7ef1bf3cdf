//! Fixed-size values from a tensor's bytes ([`each`]): the readers of TF checkpoints, Keras
//! files, PyTorch files and safetensors files decode their floats alike, each in its file's
//! byte order.

/// `bytes` as values of `N` bytes each, each made by `value` (a last chunk short of `N` bytes
/// is left out: the readers check sizes before).
pub(crate) fn each<const N: usize, T>(bytes: &[u8], value: impl Fn([u8; N]) -> T) -> Vec<T> {
    let chunk = |c: &[u8]| value(c.try_into().expect("exact chunks"));
    bytes.chunks_exact(N).map(chunk).collect()
}

/// How many bytes a weights file of `len` bytes may decode to: 16 times the file, and 64 MiB
/// at least. Keras and PyTorch write every weight in full and uncompressed, and Keras's
/// `.keras` archives stored; a file compressed afterwards (`h5repack -f GZIP`, a zip deflated)
/// shrinks float weights by far less than 16 times. A hostile file claims far more: an HDF5
/// dataset's shape is the file's claim, and chunks the file never wrote read as the fill value
/// (a 4 KB file claims a gigabyte); a deflated zip entry decompresses up to a thousandfold; a
/// PyTorch tensor may be a broadcast view of one value (stride 0) over any shape.
pub(crate) fn decoded_limit(len: u64) -> u64 {
    len.saturating_mul(16).max(64 << 20)
}
