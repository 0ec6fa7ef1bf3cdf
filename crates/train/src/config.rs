//! The configuration of a training run, as a serde struct: the defaults of the TF trainers
//! ([`TrainConfig::cifar10`], [`TrainConfig::inception`]), overridden by a JSON or TOML file
//! ([`TrainConfig::merge_file`]) and then by command-line flags ([`crate::TrainArgs`]).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use towers_data::CorruptRecords;
use towers_kernels::Precision;
use towers_multigpu::{BatchNormSync, LossScaling, Reduce, TowersConfig, Wire};

use crate::error::{Error, Result};
use crate::optim::LrScheduleConfig;
use crate::optim::OptimizerConfig;
use crate::summary::SummaryConfig;
use towers_multigpu::Cause;

/// Everything a training run needs to know.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct TrainConfig {
    /// Tower devices as a list: `flex`, `flex,flex`, `cuda:0,cuda:1` (see
    /// [`towers_multigpu::parse_devices`]), remote ones (`ws://host:port/0`) included.
    pub devices: String,
    /// Where the model (TF's variables) lives and the optimizer updates it, as one device list
    /// entry; absent: the first tower's device. Keep it local when the towers are remote: a
    /// server that goes away then takes no weights with it.
    #[serde(default)]
    pub parameter_device: Option<String>,
    /// Examples per step over all towers, split across them (the global batch).
    pub batch_size: usize,
    /// Input reader threads; absent: 4 per tower, as TF's Inception trainer.
    pub reader_threads: Option<usize>,
    /// Updates to run; a resumed run stops at the same total.
    pub max_steps: u64,
    /// How updates are computed.
    pub optimizer: OptimizerConfig,
    /// The learning rate over steps.
    pub learning_rate: LrScheduleConfig,
    /// L2 weight decay of the model's decayed weights, added to its loss (the model applies it).
    pub weight_decay: f64,
    /// Keep a moving average of the weights (saved in checkpoints, used by evaluation).
    pub moving_average: bool,
    /// Decay of that average.
    pub moving_average_decay: f64,
    /// Updates between checkpoints (a checkpoint is also written at the end).
    pub checkpoint_every: u64,
    /// Checkpoints kept (TF's `max_to_keep`).
    pub keep_checkpoints: usize,
    /// Updates between log lines.
    pub log_every: u64,
    /// Where checkpoints, the JSON log and the plot go.
    pub train_dir: PathBuf,
    /// Seed of the model's initialization, the input order and distortions, and dropout.
    pub seed: u64,
    /// Examples per epoch, for schedules given in epochs; absent: counted from the input files.
    pub examples_per_epoch: Option<u64>,
    /// Continue from the newest checkpoint in `train_dir`.
    pub resume: bool,
    /// Mix examples in a shuffle queue of 10 batches (TF's `shuffle_batch`); `false`: a FIFO
    /// queue, examples in their record order (each epoch's files still shuffled).
    #[serde(default = "yes")]
    pub shuffle_queue: bool,
    /// How the towers reduce gradients and keep batch-norm statistics in step.
    pub towers: TowersSection,
    /// Skip training records that fail to decode (bad CRC, corrupt image, bad label) with a
    /// warning each, as tf.data's `ignore_errors()`, until more than this fraction of the
    /// records read were skipped (e.g. 0.01); absent: the first one stops the run.
    #[serde(default)]
    pub skip_corrupt_records: Option<f64>,
    /// What goes to TensorBoard's event file in `train_dir`, and when.
    #[serde(default)]
    pub summaries: SummaryConfig,
    /// Where to write a Chrome trace of every step's phases (input, each tower's forward,
    /// backward and reduction, the exchange across ranks, the update, checkpoints), for
    /// `chrome://tracing` or Perfetto; under MPI each rank writes its own, `-rankN` before the
    /// extension. None by default.
    #[serde(default)]
    pub timeline: Option<PathBuf>,
    /// What the models' convolutions and dense layers compute in (see
    /// [`towers_kernels::Precision`]): weights, optimizer state, batch norm and the loss stay
    /// f32. f32 by default.
    #[serde(default)]
    pub precision: Precision,
}

/// The `with_*` setters of Burn's configs, one per field.
impl TrainConfig {
    /// Sets [`devices`](Self::devices).
    pub fn with_devices(mut self, devices: String) -> Self {
        self.devices = devices;
        self
    }

    /// Sets [`parameter_device`](Self::parameter_device).
    pub fn with_parameter_device(mut self, parameter_device: Option<String>) -> Self {
        self.parameter_device = parameter_device;
        self
    }

    /// Sets [`batch_size`](Self::batch_size).
    pub fn with_batch_size(mut self, batch_size: usize) -> Self {
        self.batch_size = batch_size;
        self
    }

    /// Sets [`reader_threads`](Self::reader_threads).
    pub fn with_reader_threads(mut self, reader_threads: Option<usize>) -> Self {
        self.reader_threads = reader_threads;
        self
    }

    /// Sets [`max_steps`](Self::max_steps).
    pub fn with_max_steps(mut self, max_steps: u64) -> Self {
        self.max_steps = max_steps;
        self
    }

    /// Sets [`optimizer`](Self::optimizer).
    pub fn with_optimizer(mut self, optimizer: OptimizerConfig) -> Self {
        self.optimizer = optimizer;
        self
    }

    /// Sets [`learning_rate`](Self::learning_rate).
    pub fn with_learning_rate(mut self, learning_rate: LrScheduleConfig) -> Self {
        self.learning_rate = learning_rate;
        self
    }

    /// Sets [`weight_decay`](Self::weight_decay).
    pub fn with_weight_decay(mut self, weight_decay: f64) -> Self {
        self.weight_decay = weight_decay;
        self
    }

    /// Sets [`moving_average`](Self::moving_average).
    pub fn with_moving_average(mut self, moving_average: bool) -> Self {
        self.moving_average = moving_average;
        self
    }

    /// Sets [`moving_average_decay`](Self::moving_average_decay).
    pub fn with_moving_average_decay(mut self, moving_average_decay: f64) -> Self {
        self.moving_average_decay = moving_average_decay;
        self
    }

    /// Sets [`checkpoint_every`](Self::checkpoint_every).
    pub fn with_checkpoint_every(mut self, checkpoint_every: u64) -> Self {
        self.checkpoint_every = checkpoint_every;
        self
    }

    /// Sets [`keep_checkpoints`](Self::keep_checkpoints).
    pub fn with_keep_checkpoints(mut self, keep_checkpoints: usize) -> Self {
        self.keep_checkpoints = keep_checkpoints;
        self
    }

    /// Sets [`log_every`](Self::log_every).
    pub fn with_log_every(mut self, log_every: u64) -> Self {
        self.log_every = log_every;
        self
    }

    /// Sets [`train_dir`](Self::train_dir).
    pub fn with_train_dir(mut self, train_dir: PathBuf) -> Self {
        self.train_dir = train_dir;
        self
    }

    /// Sets [`seed`](Self::seed).
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Sets [`examples_per_epoch`](Self::examples_per_epoch).
    pub fn with_examples_per_epoch(mut self, examples_per_epoch: Option<u64>) -> Self {
        self.examples_per_epoch = examples_per_epoch;
        self
    }

    /// Sets [`resume`](Self::resume).
    pub fn with_resume(mut self, resume: bool) -> Self {
        self.resume = resume;
        self
    }

    /// Sets [`shuffle_queue`](Self::shuffle_queue).
    pub fn with_shuffle_queue(mut self, shuffle_queue: bool) -> Self {
        self.shuffle_queue = shuffle_queue;
        self
    }

    /// Sets [`towers`](Self::towers).
    pub fn with_towers(mut self, towers: TowersSection) -> Self {
        self.towers = towers;
        self
    }

    /// Sets [`skip_corrupt_records`](Self::skip_corrupt_records).
    pub fn with_skip_corrupt_records(mut self, skip_corrupt_records: Option<f64>) -> Self {
        self.skip_corrupt_records = skip_corrupt_records;
        self
    }

    /// Sets [`summaries`](Self::summaries).
    pub fn with_summaries(mut self, summaries: SummaryConfig) -> Self {
        self.summaries = summaries;
        self
    }

    /// Sets [`timeline`](Self::timeline).
    pub fn with_timeline(mut self, timeline: Option<PathBuf>) -> Self {
        self.timeline = timeline;
        self
    }

    /// Sets [`precision`](Self::precision).
    pub fn with_precision(mut self, precision: Precision) -> Self {
        self.precision = precision;
        self
    }
}

/// [`TrainConfig::towers`]: the settings of [`towers_multigpu::TowersConfig`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct TowersSection {
    /// `parameter_device` (gather, one update, broadcast: the TF design) or `all_reduce` (see
    /// [`Reduce`]).
    pub reduce: Reduce,
    /// `average` (the towers' statistics, weighted) or `first_tower` (what TF's Inception did;
    /// see [`BatchNormSync`]).
    pub batch_norm: BatchNormSync,
    /// Micro-batches of `batch_size` per update.
    pub accumulation: usize,
    /// Across MPI ranks: exchange gradient buckets while backward runs, rather than after it
    /// (see [`TowersConfig::overlap`]); on unless set to `false`.
    #[serde(default = "overlap_by_default")]
    pub overlap_exchange: bool,
    /// Across MPI ranks: the number format gradients travel in, `f32`, `bf16` or `f16` (half
    /// the bytes; see [`Wire`]). f32 by default.
    #[serde(default)]
    pub allreduce_dtype: Wire,
    /// Under `all_reduce`: compare the replicas every this many updates, 0 never (see
    /// [`TowersConfig::replica_check`]).
    #[serde(default = "default_replica_check")]
    pub replica_check: usize,
}

/// The `with_*` setters of Burn's configs, one per field.
impl TowersSection {
    /// Sets [`reduce`](Self::reduce).
    pub fn with_reduce(mut self, reduce: Reduce) -> Self {
        self.reduce = reduce;
        self
    }

    /// Sets [`batch_norm`](Self::batch_norm).
    pub fn with_batch_norm(mut self, batch_norm: BatchNormSync) -> Self {
        self.batch_norm = batch_norm;
        self
    }

    /// Sets [`accumulation`](Self::accumulation).
    pub fn with_accumulation(mut self, accumulation: usize) -> Self {
        self.accumulation = accumulation;
        self
    }

    /// Sets [`overlap_exchange`](Self::overlap_exchange).
    pub fn with_overlap_exchange(mut self, overlap_exchange: bool) -> Self {
        self.overlap_exchange = overlap_exchange;
        self
    }

    /// Sets [`allreduce_dtype`](Self::allreduce_dtype).
    pub fn with_allreduce_dtype(mut self, allreduce_dtype: Wire) -> Self {
        self.allreduce_dtype = allreduce_dtype;
        self
    }

    /// Sets [`replica_check`](Self::replica_check).
    pub fn with_replica_check(mut self, replica_check: usize) -> Self {
        self.replica_check = replica_check;
        self
    }
}

fn default_replica_check() -> usize {
    TowersConfig::default().replica_check
}

/// [`TowersSection::overlap_exchange`]'s default: [`TowersConfig::overlap`]'s.
fn overlap_by_default() -> bool {
    TowersConfig::default().overlap
}

impl Default for TowersSection {
    fn default() -> Self {
        Self {
            reduce: Reduce::ParameterDevice,
            batch_norm: BatchNormSync::Average,
            accumulation: 1,
            overlap_exchange: overlap_by_default(),
            allreduce_dtype: Wire::F32,
            replica_check: default_replica_check(),
        }
    }
}

impl TowersSection {
    /// The towers' own configuration.
    pub fn to_towers_config(&self) -> TowersConfig {
        TowersConfig::default()
            .with_reduce(self.reduce)
            .with_batch_norm(self.batch_norm)
            .with_accumulation(self.accumulation)
            .with_overlap(self.overlap_exchange)
            .with_replica_check(self.replica_check)
    }
}

impl TrainConfig {
    /// The towers' configuration: [`TrainConfig::towers`], with dynamic loss scaling when the
    /// products are in f16.
    pub fn towers_config(&self) -> TowersConfig {
        let scaling = (self.precision == Precision::F16).then(LossScaling::default);
        self.towers.to_towers_config().with_loss_scaling(scaling)
    }

    /// `cifar10_multi_gpu_train.py`: batch 128, plain SGD at 0.1 decayed tenfold every 350
    /// epochs (staircase), weight decay 0.004, averages at 0.9999, a checkpoint every 1000
    /// steps, 1,000,000 steps.
    pub fn cifar10() -> Self {
        Self {
            devices: "flex".into(),
            parameter_device: None,
            batch_size: 128,
            reader_threads: None,
            max_steps: 1_000_000,
            optimizer: OptimizerConfig::Sgd,
            learning_rate: LrScheduleConfig::ExponentialDecay {
                initial: 0.1,
                decay_rate: 0.1,
                decay_epochs: 350.0,
                staircase: true,
            },
            weight_decay: 0.004,
            moving_average: true,
            moving_average_decay: 0.9999,
            checkpoint_every: 1000,
            keep_checkpoints: 5,
            log_every: 10,
            train_dir: std::env::temp_dir().join("cifar10_train"),
            seed: 0,
            examples_per_epoch: None,
            resume: false,
            shuffle_queue: true,
            towers: TowersSection::default(),
            skip_corrupt_records: None,
            summaries: SummaryConfig::default(),
            timeline: None,
            precision: Precision::F32,
        }
    }

    /// `inception_train.py`: batch 32, RMSProp (0.9, 0.9, 1.0) at 0.1 decayed by 0.16 every
    /// 30 epochs (staircase), weight decay 0.00004, averages at 0.9999, batch-norm statistics
    /// of the first tower, a checkpoint every 5000 steps, 10,000,000 steps.
    pub fn inception() -> Self {
        Self {
            batch_size: 32,
            max_steps: 10_000_000,
            optimizer: OptimizerConfig::inception_rmsprop(),
            learning_rate: LrScheduleConfig::ExponentialDecay {
                initial: 0.1,
                decay_rate: 0.16,
                decay_epochs: 30.0,
                staircase: true,
            },
            weight_decay: 0.00004,
            checkpoint_every: 5000,
            train_dir: std::env::temp_dir().join("imagenet_train"),
            towers: TowersSection::default().with_batch_norm(BatchNormSync::FirstTower),
            ..Self::cifar10()
        }
    }

    /// [`inception`](Self::inception) cut to a run that learns the built-in data in about a
    /// minute on a 2-core CPU: batch 16, 120 steps, a log line every 10, one checkpoint at
    /// the end, no weight decay (its term, about 3.4 at TF's 0.00004, would hide the
    /// cross-entropy's fall from 1.6 in the logged loss), and Adam at a constant 0.001 in place
    /// of TF's RMSProp. Measured on the built-in data (bench/HISTORY.md, "Training"): Adam's mean
    /// loss falls from 1.49 to 0.81 and held-out precision reaches 0.96; TF's RMSProp (epsilon 1.0)
    /// at 0.002 stays at 1.46-1.53 (precision 0.58), and momentum 0.9 at 0.01 and 0.03 swings
    /// up to 3.3 and 8.4.
    pub fn inception_builtin() -> Self {
        Self {
            batch_size: 16,
            max_steps: 120,
            log_every: 10,
            checkpoint_every: 120,
            weight_decay: 0.0,
            optimizer: OptimizerConfig::Adam {
                beta1: 0.9,
                beta2: 0.999,
                epsilon: 1e-8,
            },
            learning_rate: LrScheduleConfig::Constant { value: 0.001 },
            ..Self::inception()
        }
    }

    /// torchvision's ResNet reference recipe (`references/classification`: SGD with momentum
    /// 0.9 at 0.1 for 8 GPUs of 32 images, decayed by 0.1 every 30 epochs, weight decay 0.0001)
    /// at a batch of 32 in all: the rate scaled to it linearly, 0.0125 (set `batch_size` 256 and
    /// `learning_rate` 0.1 for the recipe's own); no moving averages, a checkpoint every 5000
    /// steps.
    pub fn resnet() -> Self {
        Self {
            optimizer: OptimizerConfig::Momentum {
                momentum: 0.9,
                nesterov: false,
            },
            learning_rate: LrScheduleConfig::ExponentialDecay {
                initial: 0.0125,
                decay_rate: 0.1,
                decay_epochs: 30.0,
                staircase: true,
            },
            weight_decay: 0.0001,
            moving_average: false,
            train_dir: std::env::temp_dir().join("resnet_train"),
            towers: TowersSection::default(),
            ..Self::inception()
        }
    }

    /// The ResNet example's run on the built-in data:
    /// [`inception_builtin`](Self::inception_builtin)'s
    /// (batch 16, 120 steps, Adam at a constant 0.001, no weight decay) with
    /// [`resnet`](Self::resnet)'s averages, towers and train directory.
    pub fn resnet_builtin() -> Self {
        Self {
            moving_average: false,
            train_dir: std::env::temp_dir().join("resnet_train"),
            towers: TowersSection::default(),
            ..Self::inception_builtin()
        }
    }

    /// A starting point for a model of your own (see [`crate::TrainStep`]): batch 32, Adam at a
    /// constant 0.001, no weight decay and no moving averages, 1,000 steps, a log line every
    /// 10 and a checkpoint every 1,000, in `train_dir`.
    pub fn new(train_dir: impl Into<PathBuf>) -> Self {
        Self {
            batch_size: 32,
            max_steps: 1000,
            optimizer: OptimizerConfig::Adam {
                beta1: 0.9,
                beta2: 0.999,
                epsilon: 1e-8,
            },
            learning_rate: LrScheduleConfig::Constant { value: 0.001 },
            weight_decay: 0.0,
            moving_average: false,
            train_dir: train_dir.into(),
            ..Self::cifar10()
        }
    }

    /// [`cifar10`](Self::cifar10) for the built-in data, which is learnt in 1,000 steps rather
    /// than TF's 1,000,000.
    pub fn cifar10_builtin() -> Self {
        Self {
            max_steps: 1000,
            ..Self::cifar10()
        }
    }

    /// This configuration with the settings of a JSON (`.json`) or TOML (any other name) file
    /// laid over it: the file names only what it changes, nested sections merge key by key,
    /// and a section whose `kind` changes (another optimizer) is replaced whole.
    pub fn merge_file(&self, path: &Path) -> Result<Self> {
        let text = read_config_text(path)?;
        let json = path.extension().is_some_and(|e| e == "json");
        self.merge_text(&text, json)
            .map_err(|error| Error::ConfigFile {
                path: path.to_path_buf(),
                error,
            })
    }

    /// [`merge_file`](Self::merge_file) on the text of a file, JSON when `json`, else TOML;
    /// an error (the parser's: `serde_json::Error` or `toml::de::Error`) says what is wrong, the
    /// caller says where.
    pub fn merge_text(&self, text: &str, json: bool) -> std::result::Result<Self, Cause> {
        let file: serde_json::Value = if json {
            serde_json::from_str(text)?
        } else {
            toml::from_str(text)?
        };
        let mut merged = serde_json::to_value(self).expect("a config always serializes");
        merge(&mut merged, file);
        let config: Self = serde_json::from_value(merged.clone())?;
        // serde drops every other key of a unit variant's section (`sgd` with a `momentum`)
        // even under `deny_unknown_fields`: what the config does not hold again was ignored.
        let held = serde_json::to_value(&config).expect("a config always serializes");
        match ignored_key(&merged, &held, "") {
            Some(key) => Err(format!("unknown key `{key}`: this setting takes no such key").into()),
            None => Ok(config),
        }
    }

    /// Checks what can be checked before anything starts.
    pub fn validate(&self) -> Result<()> {
        let fail = |m: &str| Err(Error::Config(m.into()));
        if self.batch_size == 0 {
            return fail("batch_size must be at least 1");
        }
        if self.batch_size > MOST_EXAMPLES_PER_BATCH {
            return fail("batch_size must be at most 16,777,216 (2^24)");
        }
        if self.reader_threads == Some(0) || self.reader_threads > Some(MOST_READER_THREADS) {
            return fail("reader_threads must be from 1 to 1024");
        }
        if self.log_every == 0 || self.checkpoint_every == 0 {
            return fail("log_every and checkpoint_every must be at least 1");
        }
        if self
            .skip_corrupt_records
            .is_some_and(|f| !(0.0..=1.0).contains(&f))
        {
            return fail("skip_corrupt_records must be a fraction in [0, 1]");
        }
        if self.keep_checkpoints == 0 {
            return fail("keep_checkpoints must be at least 1");
        }
        if self.towers.accumulation == 0 {
            return fail("towers.accumulation must be at least 1");
        }
        if self
            .batch_size
            .checked_mul(self.towers.accumulation)
            .is_none()
        {
            return fail("batch_size × towers.accumulation (examples per update) overflows");
        }
        if !(0.0..1.0).contains(&self.moving_average_decay) {
            return fail("moving_average_decay must be in [0, 1)");
        }
        if self
            .parameter_device
            .as_deref()
            .is_some_and(|d| d.contains('*'))
        {
            return fail(
                "parameter_device takes no share (`*N`): shares split the batch between the \
                 towers' devices; the parameter device holds the model",
            );
        }
        if !(self.weight_decay.is_finite() && self.weight_decay >= 0.0) {
            return fail("weight_decay must be a finite number, 0 or more");
        }
        self.optimizer.check().map_err(Error::Config)?;
        self.learning_rate.check().map_err(Error::Config)?;
        self.summaries.validate()
    }

    /// What the training input does with records that fail to decode.
    pub fn corrupt_records(&self) -> CorruptRecords {
        match self.skip_corrupt_records {
            Some(max_fraction) => CorruptRecords::Skip { max_fraction },
            None => CorruptRecords::Fail,
        }
    }

    /// Examples consumed by one update.
    pub fn examples_per_step(&self) -> u64 {
        (self.batch_size * self.towers.accumulation) as u64
    }
}

/// The most examples a batch may hold: its queues are allocated for ten or more batches.
const MOST_EXAMPLES_PER_BATCH: usize = 1 << 24;
/// The most reader threads a pipeline may start.
const MOST_READER_THREADS: usize = 1024;
/// The largest config file read (a config is a few hundred bytes; `/dev/zero` never ends).
const MOST_CONFIG_BYTES: u64 = 1 << 20;

/// The text of the config file at `path`, refused past [`MOST_CONFIG_BYTES`].
fn read_config_text(path: &Path) -> Result<String> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(Error::io(path))?;
    let mut text = String::new();
    (file.take(MOST_CONFIG_BYTES + 1))
        .read_to_string(&mut text)
        .map_err(Error::io(path))?;
    if text.len() as u64 > MOST_CONFIG_BYTES {
        return Err(Error::ConfigFile {
            path: path.to_path_buf(),
            error: "larger than 1 MiB: not a config file".into(),
        });
    }
    Ok(text)
}

/// The first key (its path, dotted) of `merged` that the config read from it does not hold
/// (`held`, the config written out again).
fn ignored_key(merged: &serde_json::Value, held: &serde_json::Value, path: &str) -> Option<String> {
    let (serde_json::Value::Object(merged), serde_json::Value::Object(held)) = (merged, held)
    else {
        return None;
    };
    merged.iter().find_map(|(key, value)| {
        let path = match path {
            "" => key.clone(),
            path => format!("{path}.{key}"),
        };
        match held.get(key) {
            None => Some(path),
            Some(held) => ignored_key(value, held, &path),
        }
    })
}

/// Lays `over` onto `base`: objects merge by key, anything else replaces. Objects with
/// different `kind`s (tagged enums) replace too, so no field of the old kind lingers.
fn merge(base: &mut serde_json::Value, over: serde_json::Value) {
    use serde_json::Value;
    match (base, over) {
        (Value::Object(base), Value::Object(over))
            if over.get("kind").is_none_or(|k| base.get("kind") == Some(k)) =>
        {
            for (key, value) in over {
                match base.get_mut(&key) {
                    Some(slot) => merge(slot, value),
                    None => {
                        base.insert(key, value);
                    }
                }
            }
        }
        (base, over) => *base = over,
    }
}

/// `true`, for serde defaults.
fn yes() -> bool {
    true
}

#[cfg(test)]
mod tests {
    use towers_testing::{assert_error_names, report};

    use super::*;

    fn file(name: &str, text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    #[test]
    fn toml_overrides_only_what_it_names() {
        let (_dir, path) = file(
            "run.toml",
            r#"
            batch_size = 64
            devices = "flex,flex"
            [learning_rate]
            decay_epochs = 100.0
            [optimizer]
            kind = "momentum"
            momentum = 0.9
            [towers]
            accumulation = 2
            allreduce_dtype = "bf16"
            "#,
        );
        let config = TrainConfig::cifar10().merge_file(&path).unwrap();
        let mut want = TrainConfig::cifar10();
        want.batch_size = 64;
        want.devices = "flex,flex".into();
        want.parameter_device = None;
        want.learning_rate = LrScheduleConfig::ExponentialDecay {
            initial: 0.1,
            decay_rate: 0.1,
            decay_epochs: 100.0,
            staircase: true,
        };
        want.optimizer = OptimizerConfig::Momentum {
            momentum: 0.9,
            nesterov: false,
        };
        want.towers = TowersSection::default()
            .with_accumulation(2)
            .with_allreduce_dtype(Wire::Bf16);
        assert_eq!(config, want);
    }

    #[test]
    fn json_replaces_a_schedule_of_another_kind() {
        let (_dir, path) = file(
            "run.json",
            r#"{"learning_rate": {"kind": "piecewise_constant", "boundaries": [10], "values": [0.1, 0.01]},
                "moving_average": false}"#,
        );
        let config = TrainConfig::inception().merge_file(&path).unwrap();
        assert_eq!(
            config.learning_rate,
            LrScheduleConfig::PiecewiseConstant {
                boundaries: vec![10],
                values: vec![0.1, 0.01]
            }
        );
        assert!(!config.moving_average);
        assert_eq!(config.optimizer, OptimizerConfig::inception_rmsprop());
    }

    #[test]
    fn unknown_keys_are_errors_naming_the_file() {
        let (_dir, path) = file("run.toml", "bach_size = 3\n");
        let msg = report(&TrainConfig::cifar10().merge_file(&path).unwrap_err());
        assert_error_names(&msg, &["run.toml", "bach_size"]);
    }

    #[test]
    fn keys_a_unit_setting_would_drop_are_errors() {
        // `sgd` takes no key: serde drops a unit variant's others, `deny_unknown_fields` or not.
        let (_dir, path) = file("run.toml", "[optimizer]\nmomentum = 0.9\n");
        let msg = report(&TrainConfig::cifar10().merge_file(&path).unwrap_err());
        assert_error_names(&msg, &["run.toml", "optimizer.momentum"]);
        let (_dir, path) = file(
            "run.json",
            r#"{"optimizer": {"kind": "sgd", "nesterov": true}}"#,
        );
        let msg = report(&TrainConfig::cifar10().merge_file(&path).unwrap_err());
        assert_error_names(&msg, &["run.json", "optimizer.nesterov"]);
    }

    #[test]
    fn a_config_file_past_a_mebibyte_is_refused_unread() {
        let (_dir, path) = file("run.toml", &" ".repeat((1 << 20) + 1));
        let msg = report(&TrainConfig::cifar10().merge_file(&path).unwrap_err());
        assert_error_names(&msg, &["run.toml", "larger than 1 MiB"]);
        let (_dir, path) = file("run.toml", &" ".repeat(1 << 20));
        TrainConfig::cifar10().merge_file(&path).unwrap();
    }

    #[test]
    fn settings_that_would_train_to_nan_or_exhaust_memory_are_refused() {
        let adam = |beta1, beta2| OptimizerConfig::Adam {
            beta1,
            beta2,
            epsilon: 1e-8,
        };
        let decay = |decay_rate| LrScheduleConfig::ExponentialDecay {
            initial: 0.1,
            decay_rate,
            decay_epochs: 1.0,
            staircase: false,
        };
        let polynomial = |power| LrScheduleConfig::Polynomial {
            initial: 0.1,
            end: 0.0,
            power,
            decay_steps: Some(10),
        };
        let cases = [
            (
                "beta1",
                TrainConfig::cifar10().with_optimizer(adam(1.0, 0.999)),
            ),
            // Rounds to 1 in f32, as the update takes it.
            (
                "beta1",
                TrainConfig::cifar10().with_optimizer(adam(0.99999999, 0.999)),
            ),
            (
                "beta2",
                TrainConfig::cifar10().with_optimizer(adam(0.9, 1.5)),
            ),
            (
                "decay_rate",
                TrainConfig::cifar10().with_learning_rate(decay(-0.5)),
            ),
            (
                "power",
                TrainConfig::cifar10().with_learning_rate(polynomial(-1.0)),
            ),
            (
                "value",
                TrainConfig::cifar10()
                    .with_learning_rate(LrScheduleConfig::Constant { value: -0.1 }),
            ),
            (
                "weight_decay",
                TrainConfig::cifar10().with_weight_decay(-1e-4),
            ),
            (
                "parameter_device",
                TrainConfig::cifar10().with_parameter_device(Some("flex*3".into())),
            ),
            (
                "batch_size",
                TrainConfig::cifar10().with_batch_size(1 << 25),
            ),
            (
                "reader_threads",
                TrainConfig::cifar10().with_reader_threads(Some(5000)),
            ),
            (
                "flush_secs",
                TrainConfig::cifar10()
                    .with_summaries(SummaryConfig::default().with_flush_secs(1e20)),
            ),
        ];
        for (named, config) in cases {
            let msg = report(&config.validate().unwrap_err());
            assert_error_names(&msg, &[named]);
        }
        TrainConfig::cifar10()
            .with_optimizer(adam(0.9, 0.999))
            .validate()
            .unwrap();
        TrainConfig::cifar10()
            .with_learning_rate(decay(0.5))
            .validate()
            .unwrap();
    }

    #[test]
    fn a_config_round_trips_through_toml() {
        let config = TrainConfig::inception();
        let text = toml::to_string(&config).unwrap();
        let (_dir, path) = file("all.toml", &text);
        assert_eq!(TrainConfig::cifar10().merge_file(&path).unwrap(), config);
    }

    #[test]
    fn examples_per_update_that_overflow_are_an_error() {
        let mut config = TrainConfig::cifar10();
        config.towers.accumulation = usize::MAX / 64;
        let msg = report(&config.validate().unwrap_err());
        assert_error_names(&msg, &["batch_size", "towers.accumulation", "overflows"]);
        config.towers.accumulation = 8;
        assert!(config.validate().is_ok());
    }
}
