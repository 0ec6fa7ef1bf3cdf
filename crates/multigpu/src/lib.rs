//! towers-multigpu: TensorFlow-style tower training for Burn.
//!
//! N devices train exactly like one device with an N-times larger batch: each step splits one
//! batch of any type ([`TowerBatch`]: a `Vec` of Burn dataset items, the user's own batch
//! struct, image batches) into one part per device ([`TowerDevice`], parsed from text by
//! [`parse_devices`]), runs forward and backward on all of them at once, and **averages** the
//! gradients, weighted by each part's examples (or tokens, or whatever the loss is averaged
//! over), into the full-batch gradient before one update ([`Towers`]). Burn's own burn-train `MultiDevice` strategy instead gives every device its own
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
//! # use burn::{module::Module, nn::{Linear, LinearConfig, loss::MseLoss, loss::Reduction}, tensor::{Device, Tensor, TensorData}};
//! # #[derive(Module, Debug)] struct Net { fc: Linear }
//! # fn main() -> Result<(), towers_multigpu::Error> {
//! # let device = Device::flex().autodiff();
//! # let model = Net { fc: LinearConfig::new(2, 1).init(&device) };
//! use towers_multigpu::{Towers, TowersConfig, parse_devices};
//!
//! /// One example: two inputs and a target.
//! #[derive(Clone)]
//! struct Item { x: [f32; 2], y: f32 }
//! let batch: Vec<Item> = (0..8).map(|i| Item { x: [i as f32, 1.0], y: 2.0 * i as f32 }).collect();
//!
//! let devices = parse_devices("flex,flex")?;
//! let mut towers = Towers::new(model, SgdConfig::new().init(), &devices, TowersConfig::default())?;
//! // Each tower gets its items and its device, and makes its tensors there.
//! let out = towers.step(&batch, 0.01, |m: &Net, items: &[Item], device: &Device| {
//!     let x: Vec<f32> = items.iter().flat_map(|i| i.x).collect();
//!     let y: Vec<f32> = items.iter().map(|i| i.y).collect();
//!     let x = Tensor::<2>::from_data(TensorData::new(x, [items.len(), 2]), device);
//!     let y = Tensor::<2>::from_data(TensorData::new(y, [items.len(), 1]), device);
//!     MseLoss::new().forward(m.fc.forward(x), y, Reduction::Mean).reshape([1])
//! })?;
//! println!("loss {:.4}", out.loss);
//! # Ok(()) }
//! ```

pub mod adapters;
mod batch;
mod buckets;
mod cross_process;
mod devices;
mod error;
mod gradient_tap;
pub mod host_syncs;
mod listing;
mod loss;
mod loss_scale;
#[cfg(feature = "mpi")]
pub mod mpi;
mod overlap;
mod reduce;
pub mod remote;
mod running_state;
mod scratch;
mod stderr_line;
pub mod timeline;
mod tower_index;
pub mod towers;
#[cfg(feature = "fusion")]
pub mod tuning;
mod weight_decay;
mod wire_format;

pub use batch::{TowerBatch, split_sizes, split_slice};
pub use cross_process::{CrossProcess, Processes, launched_by_mpi, same_settings};
pub use devices::{TowerDevice, parse_devices};
pub use error::{Cause, Error, ErrorChain, Result, While};
pub use host_syncs::{HostSyncs, host_syncs};
pub use listing::{BackendListing, Listed, ListedDevice, list_devices};
pub use loss::{IntoTowerLoss, TowerLoss};
pub use loss_scale::{LARGEST_LOSS_SCALE, LEAST_LOSS_SCALE, LossScaleState, LossScaling};
pub use reduce::{Reduce, all_reduce, all_reduce_in_buckets, reduce_to_device};
pub use remote::{Tokens, remote_token, remote_tokens};
pub use running_state::{BatchNormSync, RunningStates};
pub use scratch::{ScratchPath, exit_now, list_scratch, remove_scratch};
pub use stderr_line::eprint_line;
pub use timeline::{Timeline, Track};
pub use tower_index::{current_first_example, current_tower};
pub use towers::{HUNG_TOWER_EXIT_CODE, ReplicaCheck, StepOutput, Towers, TowersConfig};
pub use wire_format::Wire;
