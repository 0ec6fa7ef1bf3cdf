//! Fixed-size values from a tensor's bytes ([`each`]): the readers of TF checkpoints, Keras
//! files, PyTorch files and safetensors files decode their floats alike, each in its file's
//! byte order.

/// `bytes` as values of `N` bytes each, each made by `value` (a last chunk short of `N` bytes
/// is left out: the readers check sizes before).
pub(crate) fn each<const N: usize, T>(bytes: &[u8], value: impl Fn([u8; N]) -> T) -> Vec<T> {
    let chunk = |c: &[u8]| value(c.try_into().expect("exact chunks"));
    bytes.chunks_exact(N).map(chunk).collect()
}
