//! A run as one rank of a multi-process job ([`towers_multigpu::CrossProcess`], e.g. MPI under
//! `mpirun`): every rank trains its own towers on its own share of the input files, the towers
//! exchange gradients across ranks, and rank 0 alone writes (checkpoints, log, summaries,
//! plot). Ranks stop together: a stop asked for on any rank stops all after the same step, and
//! a rank that fails ends the job on every rank.

use burn::module::Module;
use burn::tensor::{Device, Tensor, TensorData};
use towers_data::Share;
use towers_multigpu::{CrossProcess, Processes, Towers, launched_by_mpi, same_settings};

use super::Trainer;
use crate::config::TrainConfig;
use crate::error::{Error, Result};
use crate::step::TrainStep;
use crate::summary::SummaryConfig;
use crate::train_input::TrainInput;

impl<M: Module + 'static, S: TrainStep<M>> Trainer<M, S> {
    /// Trains as one rank of `processes` (none: alone). Every rank runs the same configuration
    /// with its own `devices`; the global batch is the ranks' batches together.
    pub fn with_processes(mut self, processes: Option<Processes>) -> Self {
        self.processes = processes;
        self
    }

    /// This process's rank (0 alone).
    pub(super) fn rank(&self) -> usize {
        self.processes.as_ref().map_or(0, |p| p.rank())
    }

    /// The ranks of the job: 1 when alone.
    pub(super) fn ranks(&self) -> usize {
        self.processes.as_ref().map_or(1, |p| p.size())
    }

    /// Fails on every rank, naming each setting and every rank's value, unless every rank runs
    /// the same training: the settings that shape each update or decide which exchanges a
    /// step makes (a rank on another schedule or optimizer would drift from the others in
    /// silence; one with another `resume` or `max_steps` would make other exchanges). Each
    /// rank's own devices, paths and reader threads may differ.
    pub(super) fn same_training_on_every_rank(&self) -> Result<()> {
        let c = &self.config;
        let settings = [
            ("batch_size", c.batch_size.to_string()),
            ("max_steps", c.max_steps.to_string()),
            ("optimizer", format!("{:?}", c.optimizer)),
            ("learning_rate", format!("{:?}", c.learning_rate)),
            ("weight_decay", c.weight_decay.to_string()),
            ("moving_average", c.moving_average.to_string()),
            ("moving_average_decay", c.moving_average_decay.to_string()),
            ("checkpoint_every", c.checkpoint_every.to_string()),
            ("log_every", c.log_every.to_string()),
            ("seed", c.seed.to_string()),
            ("examples_per_epoch", format!("{:?}", c.examples_per_epoch)),
            ("resume", c.resume.to_string()),
            (
                "skip_corrupt_records",
                format!("{:?}", c.skip_corrupt_records),
            ),
            ("precision", format!("{:?}", c.precision)),
        ];
        self.same_on_every_rank("the ranks' training settings", &settings)
    }

    /// Fails on every rank unless every rank counted the same `examples_per_epoch` in its
    /// input (the epoch the learning-rate schedule follows): a rank with a partial copy of the
    /// data would follow another schedule.
    pub(super) fn same_epoch_on_every_rank(&self, examples_per_epoch: u64) -> Result<()> {
        let counted = [("examples per epoch", examples_per_epoch.to_string())];
        self.same_on_every_rank("the examples the ranks counted", &counted)
    }

    /// Fails on every rank unless every rank holds the same `settings`, exchanged as `what`.
    fn same_on_every_rank(&self, what: &str, settings: &[(&str, String)]) -> Result<()> {
        let Some(processes) = self.processes.as_ref().filter(|p| p.size() > 1) else {
            return Ok(());
        };
        same_settings(processes.as_ref(), what, settings)
            .map_err(|difference| Error::Config(format!("the ranks disagree: {difference}")))
    }

    /// Whether this process writes files: when alone, or as rank 0.
    pub(super) fn writes(&self) -> bool {
        self.processes.as_ref().is_none_or(|p| p.rank() == 0)
    }

    /// The summaries this rank writes: none but rank 0's.
    pub(super) fn summaries(&self) -> SummaryConfig {
        SummaryConfig {
            enabled: self.config.summaries.enabled && self.writes(),
            ..self.config.summaries.clone()
        }
    }

    /// Examples per update over all ranks.
    pub(super) fn global_examples_per_step(&self) -> u64 {
        self.config.examples_per_step() * self.ranks() as u64
    }

    /// What the log says about the job and this rank's share of the input; `None` alone.
    pub(super) fn job_note<I: TrainInput>(&self, input: &I) -> Option<String> {
        let p = self.processes.as_ref()?;
        let share = input.share_note(Share::new(p.rank(), p.size()));
        Some(format!(
            "rank {} of {}: global batch {} = {} ranks x {} per rank; {share}",
            p.rank(),
            p.size(),
            self.global_examples_per_step(),
            p.size(),
            self.config.examples_per_step(),
        ))
    }

    /// `towers` joined to the other ranks (taking rank 0's weights), after checking that
    /// every rank starts from rank 0's `step` (a resumed rank must see rank 0's checkpoint).
    pub(super) fn join_ranks(&self, towers: Towers<M>, step: u64) -> Result<Towers<M>> {
        let Some(p) = &self.processes else {
            return Ok(towers);
        };
        let device = &towers.model().devices()[0];
        let [rank_zero] = rank_zero_numbers(&**p, "the first step", [step], device);
        if rank_zero != step {
            return Err(Error::Config(format!(
                "rank {} starts at step {step}, rank 0 at step {rank_zero}: to resume, every \
                 rank must see rank 0's checkpoints (a --train-dir on a shared filesystem)",
                p.rank()
            )));
        }
        Ok(towers.across_processes(p.clone())?)
    }

    /// Rank 0's choice of the checkpoint to resume from, on every rank: `mine` is this rank's
    /// (what rank 0 passes is what every rank gets back).
    pub(super) fn agreed_checkpoint(&self, mine: Choice, device: &Device) -> Choice {
        let Some(p) = self.processes.as_ref().filter(|p| p.size() > 1) else {
            return mine;
        };
        let mine = match mine {
            Choice::Fresh => [0, 0],
            Choice::Step(step) => [1, step],
            Choice::Failed => [2, 0],
        };
        match rank_zero_numbers(&**p, "the checkpoint to resume from", mine, device) {
            [0, _] => Choice::Fresh,
            [1, step] => Choice::Step(step),
            _ => Choice::Failed,
        }
    }

    /// `path` for this rank: itself when alone, else with `-rankN` before its extension.
    pub(super) fn rank_file(&self, path: &std::path::Path) -> std::path::PathBuf {
        if self.ranks() == 1 {
            return path.to_path_buf();
        }
        let stem = path.file_stem().unwrap_or_default().to_string_lossy();
        let name = match path.extension() {
            Some(ext) => format!("{stem}-rank{}.{}", self.rank(), ext.to_string_lossy()),
            None => format!("{stem}-rank{}", self.rank()),
        };
        path.with_file_name(name)
    }

    /// Whether a stop was asked for, here or on any other rank.
    pub(super) fn stop_requested(&self) -> bool {
        let here = self.stop.is_requested();
        match &self.processes {
            Some(p) => p.any("the stop flag", here),
            None => here,
        }
    }

    /// Waits for every rank, rank 0 past its last checkpoint: a rank that returns from the run
    /// and reads that checkpoint (to evaluate it, or to resume) finds it written. A rank whose
    /// save failed ends the job instead ([`Self::or_end_job`]), so none waits here forever.
    pub(super) fn last_checkpoint_written(&self) {
        if let Some(p) = self.processes.as_ref().filter(|p| p.size() > 1) {
            p.any("the last checkpoint", false);
        }
    }

    /// `result`, after ending the job on every rank if it is an error here: the other ranks
    /// would otherwise wait for this one in their next exchange.
    pub(super) fn or_end_job<T>(&self, result: Result<T>) -> Result<T> {
        match (&self.processes, result) {
            (Some(p), Err(error)) if p.size() > 1 => {
                p.abort(&towers_data::ErrorChain(&error).to_string())
            }
            (_, result) => result,
        }
    }
}

/// Rank 0's `numbers` (each below 2^48), on every rank: sent as two 24-bit halves each, exact
/// in the `f32`s a broadcast carries.
fn rank_zero_numbers<const N: usize>(
    processes: &dyn CrossProcess,
    what: &str,
    numbers: [u64; N],
    device: &Device,
) -> [u64; N] {
    let halves: Vec<f32> = (numbers.iter())
        .flat_map(|&n| [(n >> 24) as f32, (n & 0xFF_FFFF) as f32])
        .collect();
    let mine = Tensor::<1>::from_data(TensorData::new(halves, [2 * N]), device);
    let theirs = processes.broadcast(what, vec![mine], device);
    let theirs: Vec<f32> = theirs[0].to_data().iter::<f32>().collect();
    std::array::from_fn(|i| theirs[2 * i] as u64 * (1 << 24) + theirs[2 * i + 1] as u64)
}

/// What a resumed job starts from, as rank 0 chose it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Choice {
    /// No checkpoint: a fresh start.
    Fresh,
    /// The checkpoint of this step.
    Step(u64),
    /// Rank 0 found checkpoints but could not load any (its error ends the job).
    Failed,
}

/// The job an MPI launcher (`mpirun`, `srun`) started this process into, joined with
/// `config`'s exchange settings (`towers.allreduce_dtype`); `None` when it runs alone.
///
/// # Errors
///
/// When MPI cannot start, or (without the `mpi` feature) when launched by MPI: each process
/// would train alone and all would write into one train directory.
pub fn mpi_job(config: &TrainConfig) -> Result<Option<Processes>> {
    if !launched_by_mpi() {
        return Ok(None);
    }
    #[cfg(feature = "mpi")]
    {
        use towers_multigpu::mpi::{Mpi, MpiConfig};
        let wire = config.towers.allreduce_dtype;
        let mpi: Processes = std::sync::Arc::new(Mpi::init(MpiConfig::default().with_wire(wire))?);
        Ok(Some(mpi))
    }
    #[cfg(not(feature = "mpi"))]
    {
        // Only an MPI job reads the exchange settings.
        let _ = config;
        Err(Error::Config(
            "started by an MPI launcher, but this build has no MPI: rebuild with `--features mpi`"
                .into(),
        ))
    }
}
