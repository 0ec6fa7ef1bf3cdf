//! towers-train: the training loop of burn-towers, tying the input pipeline
//! ([`towers_data`]), the models ([`towers_models`]) and the towers ([`towers_multigpu`])
//! together in the shape of TF 1.x's multi-GPU CIFAR-10 and Inception trainers.
//!
//! - [`TrainConfig`]: a serde struct with the TF trainers' defaults, read from JSON or TOML
//!   and overridden by [`TrainArgs`] flags.
//! - [`OptimizerConfig`]: SGD and momentum ([`FusedSgd`]), TF's RMSProp ([`TfRmsProp`]), Adam ([`FusedAdam`]), as Burn
//!   optimizers, with weight decay added in each decayed parameter's step ([`Decayed`]);
//!   [`LrScheduleConfig`]: exponential (staircase), polynomial, piecewise constant.
//! - [`MovingAverage`]: TF's exponential moving average of the weights.
//! - [`Checkpoint`], [`CheckpointDir`]: model, optimizer state, averages and step in one
//!   checksummed file written atomically ([`write_atomic`]); resume from the newest valid one.
//! - [`TrainLog`], [`plot_log`]: TF's log line, a progress bar, JSON lines and an SVG plot.
//! - [`load_weights`]: TF checkpoints, torchvision state dicts, ours or safetensors into a model, for fine-tuning
//!   ([`train_only`]), evaluation and [`classify`]; [`export_safetensors`].
//! - [`summary`]: TensorBoard event files of scalars, histograms and images.
//! - [`Trainer`]: the loop, for any model through a [`TrainStep`] (the loss of a tower's part
//!   of a batch) on any [`TrainInput`] (image files through [`Input`], a Burn `Dataset`);
//!   [`StopFlag`]: Ctrl-C and SIGTERM; [`evaluate`]: precision@1 and @5.
//! - The examples' flags: [`TrainArgs`], [`EvalArgs`], [`WeightsArgs`], and [`NetworkArgs`],
//!   which chooses an ImageNet-style network and its preprocessing.

mod burn_dataset;
mod checkpoint;
mod classify;
mod cli;
mod config;
mod error;
mod eval;
mod inception_data;
mod interval;
mod log;
mod network_args;
mod optim;
mod plot;
mod preprocessing;
mod pretrained;
mod record_files;
mod step;
mod stop;
pub mod summary;
mod tf_run;
mod train_dir;
mod train_input;
mod trainer;

pub use burn_dataset::DatasetInput;
pub use checkpoint::{Checkpoint, CheckpointDir, Restored};
pub use classify::{CifarImage, Prediction, classify, parse_labels, read_labels};
pub use cli::{EvalArgs, TrainArgs, WeightsArgs, parse_args, print_devices};
pub use config::{TowersSection, TrainConfig};
pub use error::{Error, Result};
pub use eval::{Precision, evaluate, evaluate_first, evaluate_first_until};
pub use inception_data::{BUILTIN_CLASSES, InceptionData, Split, inception_image_size};
pub use log::{LogEntry, MeanLoss, TrainLog, read_log};
pub use network_args::{NetworkArgs, NetworkUser};
pub use optim::{
    Decayed, FusedAdam, FusedSgd, FusedSgdState, LrSchedule, LrScheduleConfig, MovingAverage,
    OptimizerConfig, TfRmsProp, TfRmsPropState, with_weight_decays,
};
pub use plot::{plot_log, render as render_plot};
pub use preprocessing::Preprocessing;
pub use pretrained::{
    LoadOptions, classes_in_weights, efficientnet_for_weights, export_safetensors, fine_tuning,
    holds_keras_weights, is_keras_file, is_pytorch_file, load_weights, mobilenet_v3_for_weights,
    open_weights, resnet_layout_for, train_only,
};
pub use record_files::{Input, builtin_cifar10};
pub use step::{ClassifierStep, LossFn, TrainStep};
pub use stop::StopFlag;
pub use summary::SummaryConfig;
pub use tf_run::{ContinuedRun, TfRun};
pub use towers_data::atomic_file::write_atomic;
pub use train_dir::{BUILTIN_MARK, LOCK_FILE, TrainDirLock};
pub use train_input::{BatchSource, TrainInput};
pub use trainer::{
    LOG_FILE, PLOT_FILE, PrepareFn, TrainReport, Trained, Trainer, init_holding_generators,
    load_into, lock_device_generators, mpi_job,
};
