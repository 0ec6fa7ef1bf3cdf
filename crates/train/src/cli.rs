//! The command-line flags the examples share, in the TF trainers' spirit.

use std::path::PathBuf;

use clap::{Arg, ArgAction, Parser};

use crate::config::TrainConfig;
use crate::error::{Error, Result};
use crate::eval::evaluate;
use crate::inception_data::InceptionData;
use crate::pretrained::LoadOptions;
use crate::train_dir::{TrainDirLock, is_builtin, mark_builtin};
use crate::trainer::LOG_FILE;
use towers_kernels::Precision;
use towers_models::ImageClassifier;
use towers_multigpu::Wire;

/// Flags shared by the training examples (`#[command(flatten)]` them). Each flag given
/// overrides the `--config` file, which overrides the example's defaults.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TrainArgs {
    /// Dataset directory; the built-in synthetic data when absent.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Where checkpoints, the JSON log and the plot go.
    #[arg(long)]
    pub train_dir: Option<PathBuf>,
    /// Tower devices, e.g. `flex`, `flex,flex`, `cuda:0,cuda:1`.
    #[arg(long)]
    pub devices: Option<String>,
    /// The device that holds the model and runs the update (default: the first tower's), e.g.
    /// `flex` when the towers are remote.
    #[arg(long)]
    pub parameter_device: Option<String>,
    /// Examples per step over all towers (split across them).
    #[arg(long)]
    pub batch_size: Option<usize>,
    /// Updates to run (in total, counting those before a resume).
    #[arg(long)]
    pub max_steps: Option<u64>,
    /// Seed of initialization, input order, distortions and dropout.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Updates between log lines.
    #[arg(long)]
    pub log_every: Option<u64>,
    /// Updates between checkpoints.
    #[arg(long)]
    pub checkpoint_every: Option<u64>,
    /// Input reader threads (default: 4 per tower).
    #[arg(long)]
    pub reader_threads: Option<usize>,
    /// Continue from the newest valid checkpoint in the train directory; in one a TF 1.x
    /// trainer left (its `checkpoint` state file, none of ours), from TF's newest (weights,
    /// optimizer slots, moving averages, `global_step`).
    #[arg(long)]
    pub resume: bool,
    /// Checkpoints kept in the train directory, the newest (TF's `max_to_keep`; default 5).
    #[arg(long)]
    pub keep_checkpoints: Option<usize>,
    /// Skip training records that fail to decode, with a warning each, until more than
    /// FRACTION of the records read were (default 0.01); without it the first stops the run.
    #[arg(long, value_name = "FRACTION", num_args = 0..=1, default_missing_value = "0.01")]
    pub skip_corrupt_records: Option<f64>,
    /// Write no TensorBoard event file.
    #[arg(long)]
    pub no_summaries: bool,
    /// Write a Chrome trace of every step's phases to PATH (`chrome://tracing`, Perfetto).
    #[arg(long, value_name = "PATH")]
    pub timeline: Option<PathBuf>,
    /// Products of convolutions and dense layers in f32, bf16 (fast on CPUs with AMX or
    /// AVX-512 BF16) or f16 (GPUs); weights, optimizer, batch norm and loss stay f32.
    #[arg(long)]
    pub precision: Option<Precision>,
    /// Under MPI: the number format gradients travel in between ranks, f32, bf16 or f16 (half
    /// the bytes, summed in f32, rounded twice).
    #[arg(long)]
    pub allreduce_dtype: Option<Wire>,
    /// Updates between scalar summaries (loss, learning rate, examples/sec, queue fill).
    #[arg(long)]
    pub summary_every: Option<u64>,
    /// Updates between histograms of the weights and gradients.
    #[arg(long)]
    pub histogram_every: Option<u64>,
    /// Updates between summaries of input images.
    #[arg(long)]
    pub image_every: Option<u64>,
    /// A JSON (`.json`) or TOML file of settings (see `TrainConfig`).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Weights to start from: a TF checkpoint (prefix, `.index`, or a directory with a
    /// `checkpoint` file), a SavedModel's folder, a Keras file (`.h5`, `.keras`), a torchvision
    /// state dict (`.pth`), one of ours, or a `.safetensors` export. Classifier layers of
    /// another class count are re-initialized. Not applied when resuming.
    #[arg(long, value_name = "PATH")]
    pub pretrained: Option<PathBuf>,
    /// Train only these scopes, comma-separated module paths or TF names (e.g.
    /// `InceptionV3/Logits,InceptionV3/AuxLogits`); the other weights stay frozen.
    #[arg(long, value_delimiter = ',', value_name = "SCOPES")]
    pub trainable_scopes: Vec<String>,
    /// Also write the trained weights to this `.safetensors` file at the end.
    #[arg(long, value_name = "PATH")]
    pub export: Option<PathBuf>,
    /// Load the GPU kernels' tuning from this bundle (written by `--save-tuning`, on a machine
    /// with the same GPU and versions) instead of tuning them; kernels it lacks are tuned. A
    /// bundle tuned on another GPU than the run's is refused.
    #[arg(long, value_name = "FILE")]
    pub load_tuning: Option<PathBuf>,
    /// At the end, write the GPU kernels' tuning (this run's and what it loaded) to this bundle,
    /// recording the GPUs the run's towers ran on.
    #[arg(long, value_name = "FILE")]
    pub save_tuning: Option<PathBuf>,
}

impl TrainArgs {
    /// The [`Trainer::with_prepare`](crate::Trainer::with_prepare) hook of `--pretrained` and
    /// `--trainable-scopes` (see [`fine_tuning`](crate::fine_tuning)).
    pub fn fine_tuning<
        M: burn::module::Module
            + towers_models::weights::TfNamed
            + towers_models::weights::TorchNamed
            + 'static,
    >(
        &self,
    ) -> impl Fn(M, bool) -> Result<M> + Send + Sync + 'static {
        crate::pretrained::fine_tuning(self.pretrained.clone(), self.trainable_scopes.clone())
    }

    /// [`config`](Self::config) for a run on built-in data. Unless `--resume` is given, a
    /// previous run on built-in data in the defaults' train directory (one with its log,
    /// [`LOG_FILE`], and the mark of such a run,
    /// [`BUILTIN_MARK`](crate::train_dir::BUILTIN_MARK)) is removed first, as TF's
    /// `cifar10_train.py` empties its train_dir, so that the demo commands start over each
    /// time; a new directory gets the mark. A directory named by a flag or the config file is
    /// never removed, nor one without the mark (a run on real data in the same default
    /// directory keeps its checkpoints: an error says so), nor one a run is training in (an
    /// error says so).
    pub fn builtin_config(&self, defaults: TrainConfig) -> Result<TrainConfig> {
        let own_dir = defaults.train_dir.clone();
        let named = self.names_train_dir(&defaults)?;
        let c = self.config(defaults)?;
        if named || c.resume {
            return Ok(c);
        }
        if own_dir.join(LOG_FILE).exists() {
            if !is_builtin(&own_dir) {
                return Err(Error::Config(format!(
                    "{} holds a run that is not on built-in data (it lacks the mark {}): it is \
                     kept; pass --train-dir to train elsewhere, or --resume to continue it",
                    own_dir.display(),
                    crate::train_dir::BUILTIN_MARK
                )));
            }
            let _training_here = TrainDirLock::take(&own_dir)?;
            std::fs::remove_dir_all(&own_dir).map_err(Error::io(&own_dir))?;
            println!(
                "built-in data: starting over in {} (--resume continues the last run)",
                own_dir.display()
            );
        }
        if !own_dir.exists() {
            mark_builtin(&own_dir)?;
        }
        Ok(c)
    }

    /// Whether `--train-dir` or the `--config` file names the train directory (the defaults'
    /// own included: such a run keeps its checkpoints).
    fn names_train_dir(&self, defaults: &TrainConfig) -> Result<bool> {
        if self.train_dir.is_some() {
            return Ok(true);
        }
        let Some(file) = &self.config else {
            return Ok(false);
        };
        // A directory no file names (a NUL byte is in no path), which the file's replaces.
        let unnamed = PathBuf::from("\0");
        let merged = defaults
            .clone()
            .with_train_dir(unnamed.clone())
            .merge_file(file)?;
        Ok(merged.train_dir != unnamed)
    }

    /// What every trainer prints at the end: [`report`](Self::report), then
    /// [`end_tuning`](Self::end_tuning). A program that evaluates after training calls the two
    /// itself, the evaluation between them.
    pub fn finish<M: burn::module::Module>(
        &self,
        trained: &crate::trainer::Trained<M>,
    ) -> Result<()> {
        self.report(trained)?;
        self.end_tuning()
    }

    /// `trained`'s report, and the weights written to `--export` when asked: the ones its
    /// evaluation used (the moving averages when the run keeps them, as TF exports a model for
    /// serving), so that evaluating the file gives the run's own figure.
    pub fn report<M: burn::module::Module>(
        &self,
        trained: &crate::trainer::Trained<M>,
    ) -> Result<()> {
        println!("{}", trained.report);
        if let Some(path) = &self.export {
            let (model, which) = trained.eval_weights();
            crate::pretrained::export_safetensors(model, path)?;
            println!("weights:     {} ({which})", path.display());
        }
        Ok(())
    }

    /// `--load-tuning`: mounts the bundle before the run uses `devices` (a device list), after
    /// checking that it was tuned on their GPUs.
    #[cfg_attr(not(feature = "fusion"), allow(unused_variables))]
    fn load_tuning(&self, devices: &str) -> Result<()> {
        let Some(file) = &self.load_tuning else {
            return Ok(());
        };
        #[cfg(feature = "fusion")]
        return Ok(towers_multigpu::tuning::load_tuning_bundle_for(
            file,
            &towers_multigpu::parse_devices(devices).unwrap_or_default(),
        )?);
        #[cfg(not(feature = "fusion"))]
        Err(Error::Config(format!(
            "--load-tuning {}: this build has no kernel tuning (the `fusion` feature)",
            file.display()
        )))
    }

    /// At the end of a run on a GPU: what it tuned (or that it tuned nothing), and the bundle
    /// `--save-tuning` asks for, recording the GPUs towers ran on in this process
    /// (`towers_multigpu::tuning::devices_run_on`), however the program named them. Call it
    /// last, after any evaluation: the kernels an evaluation tunes then count, and go into the
    /// bundle, so that a run that loads it tunes nothing.
    pub fn end_tuning(&self) -> Result<()> {
        #[cfg(feature = "fusion")]
        {
            use towers_multigpu::tuning;
            let devices = tuning::devices_run_on();
            if let Some(report) = tuning::TuningReport::now()
                && tuning::tunes(&devices)
            {
                towers_multigpu::eprint_line(&report.to_string());
            }
            if let Some(file) = &self.save_tuning {
                tuning::save_tuning_bundle_for(file, &devices)?;
                println!("tuning bundle: {}", file.display());
            }
            Ok(())
        }
        #[cfg(not(feature = "fusion"))]
        match &self.save_tuning {
            None => Ok(()),
            Some(file) => Err(Error::Config(format!(
                "--save-tuning {}: this build has no kernel tuning (the `fusion` feature)",
                file.display()
            ))),
        }
    }

    /// These flags alone, read from the command line (with `--list-devices`, see
    /// [`parse_args`]): for a program that adds none of its own.
    pub fn from_command_line() -> Self {
        #[derive(Parser)]
        struct Only {
            #[command(flatten)]
            train: TrainArgs,
        }
        parse_args::<Only>().train
    }

    /// `defaults`, with the `--config` file over them, then the flags over that; `--load-tuning`'s
    /// bundle mounted, once checked against the resulting devices' GPUs.
    pub fn config(&self, defaults: TrainConfig) -> Result<TrainConfig> {
        let mut c = match &self.config {
            Some(path) => defaults.merge_file(path)?,
            None => defaults,
        };
        if let Some(v) = &self.train_dir {
            c.train_dir = v.clone();
        }
        if let Some(v) = &self.devices {
            c.devices = v.clone();
        }
        if let Some(v) = &self.parameter_device {
            c.parameter_device = Some(v.clone());
        }
        if let Some(v) = self.batch_size {
            c.batch_size = v;
        }
        if let Some(v) = self.max_steps {
            c.max_steps = v;
        }
        if let Some(v) = self.seed {
            c.seed = v;
        }
        if let Some(v) = self.log_every {
            c.log_every = v;
        }
        if let Some(v) = self.checkpoint_every {
            c.checkpoint_every = v;
        }
        if let Some(v) = self.reader_threads {
            c.reader_threads = Some(v);
        }
        if let Some(v) = &self.timeline {
            c.timeline = Some(v.clone());
        }
        if let Some(v) = self.precision {
            c.precision = v;
        }
        if let Some(v) = self.allreduce_dtype {
            c.towers.allreduce_dtype = v;
        }
        if let Some(v) = self.keep_checkpoints {
            c.keep_checkpoints = v;
        }
        if let Some(v) = self.skip_corrupt_records {
            c.skip_corrupt_records = Some(v);
        }
        c.resume |= self.resume;
        self.apply_summary_flags(&mut c);
        c.validate()?;
        self.load_tuning(&c.devices)?;
        Ok(c)
    }
}

impl TrainArgs {
    fn apply_summary_flags(&self, c: &mut TrainConfig) {
        let s = &mut c.summaries;
        s.enabled &= !self.no_summaries;
        if let Some(v) = self.summary_every {
            s.scalars_every = v;
        }
        if let Some(v) = self.histogram_every {
            s.histograms_every = v;
        }
        if let Some(v) = self.image_every {
            s.images_every = v;
        }
    }
}

/// Flags of the ImageNet-style evaluations (`inception_eval`, `resnet_eval`): the data, the
/// classes, and how the data is read.
#[derive(Debug, Clone, clap::Args)]
#[non_exhaustive]
pub struct EvalArgs {
    /// `validation-XXXXX-of-YYYYY` shards, a dataset TFDS prepared (its `validation`, else
    /// `test`, split) or an image folder; the built-in held-out images (the training example's)
    /// when absent.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// The records of a dataset TFDS prepared to evaluate, as a TFDS split spec
    /// (`train[80%:]`), instead of its validation or test split.
    #[arg(long, value_name = "SPEC")]
    pub tfds_split: Option<String>,
    /// Outputs of the logits; the data's when absent.
    #[arg(long)]
    pub num_classes: Option<usize>,
    /// Examples per batch.
    #[arg(long, default_value_t = 32)]
    pub batch_size: usize,
    /// Input reader threads.
    #[arg(long, default_value_t = 4)]
    pub reader_threads: usize,
}

impl EvalArgs {
    /// `data` with the records of `--tfds-split` where it is given
    /// ([`InceptionData::with_tfds_split`]).
    pub fn split_of(&self, data: InceptionData) -> Result<InceptionData> {
        data.with_tfds_split_given(self.tfds_split.as_deref())
    }

    /// The model's classes: `--num-classes`, else the data's.
    pub fn num_classes(&self, data: &InceptionData) -> usize {
        self.num_classes.unwrap_or(data.num_classes)
    }

    /// Evaluates `model` on every example of `data` and prints its precision line.
    pub fn evaluate<M: ImageClassifier>(&self, model: &M, data: &InceptionData) -> Result<()> {
        let precision = evaluate(model, &data.input, self.batch_size, self.reader_threads)?;
        println!("{precision}");
        Ok(())
    }
}

/// Flags of the examples that use trained weights (`cifar10_eval`, `inception_eval`,
/// `resnet_eval`, `classify`): where to run and which weights to read.
#[derive(Debug, Clone, clap::Args)]
pub struct WeightsArgs {
    /// The device to run on (the first of the list).
    #[arg(long, default_value = "flex")]
    pub devices: String,
    /// Use the trained weights, not their moving averages.
    #[arg(long)]
    pub raw_weights: bool,
}

impl WeightsArgs {
    /// The first device of `--devices`; on a GPU, the tuning database opened for it as
    /// towers open it (`towers_multigpu::tuning::open_tuning_database`), since an evaluation
    /// often runs beside the training run that shares the database.
    pub fn device(&self) -> Result<burn::tensor::Device> {
        let first = towers_multigpu::parse_devices(&self.devices)?.swap_remove(0);
        #[cfg(feature = "fusion")]
        if towers_multigpu::tuning::tunes(std::slice::from_ref(&first)) {
            towers_multigpu::tuning::open_tuning_database();
        }
        Ok(first.device().clone())
    }

    /// Moving averages unless `--raw-weights`; classifier shapes must match.
    pub fn load_options(&self) -> LoadOptions {
        LoadOptions::new().with_moving_averages(!self.raw_weights)
    }
}

/// Parses the command line into `A`, adding `--list-devices` to it: that flag prints every
/// backend and the devices it sees ([`towers_multigpu::list_devices`]), then exits, whatever
/// else the command requires. The examples of the bundled nets, `own_model` (through
/// [`TrainArgs::from_command_line`]) and `towers-serve` parse their flags with it; `learner`,
/// `queues`, `folder_to_shards` and `sequence_tagging` do not.
pub fn parse_args<A: Parser>() -> A {
    // Before any device is used: a cold run's tuning shows on stderr.
    #[cfg(feature = "fusion")]
    towers_multigpu::tuning::show_tuning();
    if std::env::args().skip(1).any(|a| a == "--list-devices") {
        print_devices();
        std::process::exit(0);
    }
    let command = A::command().arg(
        Arg::new("list-devices")
            .long("list-devices")
            .action(ArgAction::SetTrue)
            .help("Print the backends and devices this build can use, then exit"),
    );
    A::from_arg_matches(&command.get_matches()).unwrap_or_else(|e| e.exit())
}

/// Prints what `--list-devices` shows.
pub fn print_devices() {
    println!("Backends and devices (`--devices` takes the entries of the middle column):");
    for backend in towers_multigpu::list_devices() {
        println!("{backend}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train_dir::BUILTIN_MARK;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        train: TrainArgs,
    }

    #[test]
    fn flags_override_the_file_which_overrides_the_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.toml");
        std::fs::write(&file, "batch_size = 64\nmax_steps = 10\nseed = 3\n").unwrap();
        let cli = Cli::parse_from([
            "x",
            "--config",
            file.to_str().unwrap(),
            "--max-steps",
            "20",
            "--devices",
            "flex,flex",
            "--resume",
        ]);
        let c = cli.train.config(TrainConfig::cifar10()).unwrap();
        assert_eq!((c.batch_size, c.max_steps, c.seed), (64, 20, 3));
        assert_eq!(c.devices, "flex,flex");
        assert!(c.resume);
        assert_eq!(c.skip_corrupt_records, None);
        let skip = |args: &[&str]| {
            let cli = Cli::parse_from([&["x"], args].concat());
            cli.train
                .config(TrainConfig::cifar10())
                .unwrap()
                .skip_corrupt_records
        };
        assert_eq!(skip(&["--skip-corrupt-records"]), Some(0.01));
        assert_eq!(skip(&["--skip-corrupt-records", "0.05"]), Some(0.05));
        assert_eq!(skip(&["--keep-checkpoints", "2"]), None);
        assert_eq!(c.log_every, TrainConfig::cifar10().log_every);
    }

    /// A run on built-in data starts over in the defaults' train directory, unless a flag or
    /// the config file names that directory: then it keeps the checkpoints there (and the
    /// trainer asks for `--resume`). Nor is a run on real data in that directory (without
    /// the built-in mark) removed, nor a directory a run trains in.
    #[test]
    fn only_a_builtin_runs_own_directory_is_emptied() {
        let dir = tempfile::tempdir().unwrap();
        let train_dir = dir.path().join("train");
        let config = dir.path().join("c.toml");
        let names = format!("train_dir = {:?}\n", train_dir.to_str().unwrap());
        std::fs::write(&config, names).unwrap();
        let defaults = || TrainConfig::cifar10_builtin().with_train_dir(train_dir.clone());
        let builtin_config = |args: &[&str]| {
            let cli = Cli::parse_from([&["x"], args].concat());
            cli.train.builtin_config(defaults())
        };
        let run = |args: &[&str], marked: bool| {
            std::fs::create_dir_all(&train_dir).unwrap();
            std::fs::write(train_dir.join(LOG_FILE), "a run's log").unwrap();
            match marked {
                true => mark_builtin(&train_dir).unwrap(),
                false => std::fs::remove_file(train_dir.join(BUILTIN_MARK)).unwrap(),
            }
            builtin_config(args).map(|_| train_dir.join(LOG_FILE).exists())
        };
        let flag = ["--train-dir", train_dir.to_str().unwrap()];
        assert!(run(&flag, true).unwrap(), "named by the flag");
        let file = ["--config", config.to_str().unwrap()];
        assert!(run(&file, true).unwrap(), "named by the file");
        let said = run(&[], false).unwrap_err().to_string();
        assert!(said.contains("not on built-in data"), "{said}");
        assert!(train_dir.join(LOG_FILE).exists(), "a run on real data kept");
        assert!(
            !run(&[], true).unwrap(),
            "the defaults' own, unnamed: started over"
        );
        assert!(is_builtin(&train_dir), "the new directory marked");

        std::fs::write(train_dir.join(LOG_FILE), "a live run's log").unwrap();
        let _training = TrainDirLock::take(&train_dir).unwrap();
        let error = builtin_config(&[]).unwrap_err().to_string();
        assert!(error.contains("is in use"), "{error}");
        assert!(
            train_dir.join(LOG_FILE).exists(),
            "a live run's directory kept"
        );
    }

    /// `--export` writes what the run's evaluation used: the moving averages, when kept.
    #[test]
    fn the_export_holds_the_moving_averages_when_the_run_kept_them() {
        use burn::module::Module;
        use burn::nn::{Linear, LinearConfig};
        let device = burn::tensor::Device::flex();
        let weights =
            |m: &Linear| -> Vec<f32> { m.weight.val().into_data().try_into_vec::<f32>().unwrap() };
        let model: Linear = LinearConfig::new(3, 2).init(&device);
        let averages = model.clone().map(&mut Halved);
        assert_ne!(weights(&model), weights(&averages));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.safetensors");
        let report = crate::trainer::TrainReport {
            first_step: 0,
            step: 1,
            last_loss: None,
            interrupted: false,
            examples_per_sec: 0.0,
            checkpoint: None,
            checkpoint_dir: dir.path().into(),
            log: dir.path().join("log"),
            plot: dir.path().join("plot"),
            records: Default::default(),
            events: None,
        };
        let trained = crate::trainer::Trained {
            model,
            averages: Some(averages.clone()),
            report,
        };
        let cli = Cli::parse_from(["x", "--export", path.to_str().unwrap()]);
        cli.train.finish(&trained).unwrap();
        use towers_models::weights::{WeightSource, read_safetensors};
        let exported = read_safetensors(&path).unwrap().tensor("weight").unwrap();
        assert_eq!(exported.unwrap().values, weights(&averages));
    }

    /// Every float tensor halved: a stand-in for a run's moving averages.
    struct Halved;

    impl burn::module::ModuleMapper for Halved {
        fn map_float<const D: usize>(
            &mut self,
            param: burn::module::Param<burn::tensor::Tensor<D>>,
        ) -> burn::module::Param<burn::tensor::Tensor<D>> {
            param.map(|t| t.mul_scalar(0.5))
        }
    }

    #[test]
    fn summary_flags_set_the_summaries_section() {
        let cli = Cli::parse_from(["x", "--summary-every", "1", "--image-every", "7"]);
        let c = cli.train.config(TrainConfig::cifar10()).unwrap();
        assert!(c.summaries.enabled);
        assert_eq!(
            (c.summaries.scalars_every, c.summaries.images_every),
            (1, 7)
        );
        assert_eq!(c.summaries.histograms_every, 100);
        let cli = Cli::parse_from(["x", "--no-summaries"]);
        assert!(
            !cli.train
                .config(TrainConfig::cifar10())
                .unwrap()
                .summaries
                .enabled
        );
        let cli = Cli::parse_from(["x", "--histogram-every", "0"]);
        assert!(cli.train.config(TrainConfig::cifar10()).is_err());
    }

    #[test]
    fn invalid_values_are_refused() {
        let cli = Cli::parse_from(["x", "--batch-size", "0"]);
        assert!(cli.train.config(TrainConfig::cifar10()).is_err());
    }
}
