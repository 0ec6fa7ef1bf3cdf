//! towers-multigpu: TensorFlow-style tower training for Burn.
//!
//! N devices train exactly like one device with an N-times larger batch: each step splits one
//! host batch into one slice per device ([`TowerDevice`], parsed from text by
//! [`parse_devices`]), runs forward and backward on all of them at once, and **averages** the
//! gradients, weighted by slice size, into the full-batch gradient before one update
//! ([`Towers`]). Burn's own burn-train `MultiDevice` strategy instead gives every device its own
//! data loader and **sums** the gradients; here there is one input pipeline and the learning
//! rate of a single device carries over.
//!
//! - [`Reduce`]: gather on the parameter device (the TF design) or ring all-reduce, on any
//!   backends, mixed ones included.
//! - [`BatchNormSync`]: batch-norm running statistics averaged over the towers after each
//!   update, or tower 0's.
//! - [`TowersConfig::accumulation`]: k micro-batches per update, weighed like one batch.
//! - Failures: a tower that panics or errors ends the step with an [`Error`] naming its device,
//!   after every tower thread has stopped, and without changing the model.
//! - Devices: `wgpu:N` is the N-th adapter the graphics API lists, `wgpu:discrete:1` the
//!   second discrete GPU ([`adapters`]); [`list_devices`] is what `--list-devices` prints.
//! - Remote devices (`remote` feature): `iroh://ID@host:port/index` (authenticated, encrypted)
//!   and `ws://host:port/index` entries reach the devices a Burn `RemoteServer` (the
//!   `towers-serve` binary of `burn-towers`) serves on another machine ([`remote`]).
//! - Several processes ([`CrossProcess`], [`Towers::across_processes`]): one rank per machine
//!   with towers of its own, gradients all-reduced across ranks after the towers' own
//!   reduction; over MPI with the `mpi` feature (`mpi::Mpi`).
//!
//! ```no_run
//! use burn::optim::SgdConfig;
//! # use burn::{module::Module, nn::{Linear, LinearConfig, loss::CrossEntropyLossConfig}, tensor::{Device, Int, Tensor}};
//! # #[derive(Module, Debug)] struct Net { fc: Linear }
//! # impl Net { fn loss(&self, x: Tensor<4>, y: Tensor<1, Int>) -> Tensor<1> {
//! #     let logits = self.fc.forward(x.flatten::<2>(1, 3));
//! #     CrossEntropyLossConfig::new().init(&logits.device()).forward(logits, y) } }
//! # fn main() -> Result<(), towers_multigpu::Error> {
//! # let device = Device::flex().autodiff();
//! # let model = Net { fc: LinearConfig::new(3 * 32 * 32, 10).init(&device) };
//! # let batch = towers_data::HostBatch::new(vec![0.0; 2 * 3 * 32 * 32], vec![0, 1], [3, 32, 32]);
//! use towers_multigpu::{Towers, TowersConfig, parse_devices};
//!
//! let devices = parse_devices("flex,flex")?;
//! let mut towers = Towers::new(model, SgdConfig::new().init(), &devices, TowersConfig::default())?;
//! let out = towers.step(&batch, 0.01, |m, x, y| m.loss(x, y))?;
//! println!("loss {:.4}", out.loss);
//! # Ok(()) }
//! ```

pub mod adapters;
mod batch_norm_sync;
mod cross_process;
mod devices;
mod error;
mod listing;
mod loss;
#[cfg(feature = "mpi")]
pub mod mpi;
mod reduce;
pub mod remote;
mod tower_index;
pub mod towers;

pub use batch_norm_sync::BatchNormSync;
pub use cross_process::{CrossProcess, Processes, launched_by_mpi};
pub use devices::{TowerDevice, parse_devices};
pub use error::{Error, Result};
pub use listing::{BackendListing, Listed, ListedDevice, list_devices};
pub use loss::{IntoTowerLoss, TowerLoss};
pub use reduce::{Reduce, all_reduce, reduce_to_device};
pub use remote::remote_token;
pub use tower_index::current_tower;
pub use towers::{StepOutput, Towers, TowersConfig};
