//! towers-testing: what the tests of burn-towers share (a dev-dependency only).
//!
//! - [`nets`]: tiny models with and without batch norm or dropout, and SGD with TF/PyTorch
//!   momentum.
//! - [`batches`]: deterministic synthetic host batches.
//! - [`assert_error_names`]: that an error's message names its file, record or tensor.
//! - [`compare`]: parameters as flat vectors and comparisons with a stated tolerance.
//! - [`losses`]: `towers_kernels::softmax_cross_entropy` against Burn's loss on a device.
//! - [`reference`](mod@reference): plain single-device Burn steps, the independent computation
//!   towers must equal.
//! - [`towers`]: towers trained and checked against the reference.
//! - `training` (feature `train`): short CIFAR-10 training runs. Off by default, so that the
//!   crates below the trainer test without building it.
//! - [`child`]: a test that runs itself again in a child process (signals, file-size limits).
//! - [`mpirun`]: tests across processes, launched by `mpirun` on loopback.
//! - [`processes`]: a job's other ranks in process, holding this rank's values.
//! - [`layers`]: the check that a crate's modules import only from their own layer and those
//!   below it.
//! - [`fixture_lines`]: single layers' PyTorch fixtures (input, loss weights, output, input
//!   gradient per case).
//! - [`torchvision`]: torchvision's key lists as weight sources, f32 files, logits compared.
//! - [`norms`]: `towers_kernels`' batch norms against Burn's.
//! - [`gpu`]: the GPU tests' device (wgpu, or `TOWERS_GPU_DEVICE`), skipped loudly where there is
//!   none (never in CI).
//! - [`crc_fixups`] and [`weight_reads`]: for the fuzz targets, checksums fixed up after a
//!   mutation, and what every tensor a weight reader accepted must hold.

pub mod batches;
pub mod child;
pub mod compare;
pub mod crc_fixups;
mod errors;
pub mod fixture_lines;
pub mod gpu;
pub mod layers;
pub mod losses;
pub mod mpirun;
pub mod nets;
pub mod norms;
pub mod processes;
pub mod reference;
pub mod torchvision;
pub mod towers;
#[cfg(feature = "train")]
pub mod training;
pub mod weight_reads;

pub use errors::{assert_error_names, report};

/// The name libtest gives test `name` of the module this is written in (`module::name`, the
/// crate left out): what `--exact` needs to run it alone, as [`child`] and [`mpirun`] do.
#[macro_export]
macro_rules! test_name {
    ($name:expr) => {
        $crate::test_path(module_path!(), $name)
    };
}

/// `name` in module `module` (a `module_path!()`) as libtest names it: without the crate.
pub fn test_path(module: &str, name: &str) -> String {
    match module.split_once("::") {
        Some((_crate, path)) => format!("{path}::{name}"),
        None => name.to_string(),
    }
}

/// Runs `f` on a thread of its own and fails the test if it takes longer than `seconds`.
pub fn within<T: Send + 'static>(seconds: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(f()));
    rx.recv_timeout(std::time::Duration::from_secs(seconds))
        .expect("the step hung")
}
