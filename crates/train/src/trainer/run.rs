//! The phases of a run after its start: begin (towers, pipeline, log), one training step
//! (micro-batches to one update), what follows a step (averages, summaries, log, checkpoint),
//! and the end (last checkpoint, pipeline joined, plot).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use burn::module::Module;
use towers_kernels::{Bf16Kernel, Precision, bf16_kernel};
use towers_multigpu::{Timeline, TowerDevice, Towers, Track, eprint_line};

use super::checkpointed_input::JobInput;
use super::frozen::with_frozen;
use super::input_start::{next_batch, seeded_step};
use super::report::{Metrics, TrainReport};
use super::start::{Start, mix, seed_devices};
use super::watchdog::Watchdog;
use super::{LOG_FILE, PLOT_FILE, Trained, Trainer};
use crate::checkpoint::Checkpoint;
use crate::checkpoint::CheckpointDir;
use crate::error::{Error, Result};
use crate::interval::Interval;
use crate::log::{LogEntry, TrainLog, read_log};
use crate::optim::LrSchedule;
use crate::optim::MovingAverage;
use crate::plot::plot_log;
use crate::step::TrainStep;
use crate::summary::{StepScalars, TrainSummaries};
use crate::train_input::{BatchSource, TrainInput};

/// A run in progress: what the loop reads and updates step after step.
pub(super) struct Run<M, P> {
    pub(super) towers: Towers<M>,
    pub(super) averages: Option<MovingAverage<M>>,
    pub(super) pipeline: P,
    pub(super) schedule: LrSchedule,
    pub(super) log: TrainLog,
    pub(super) summaries: TrainSummaries,
    /// Updates applied so far.
    pub(super) step: u64,
    /// Examples trained on so far, over all ranks: what the learning rate follows, so that a
    /// job resumed with another global batch goes on with the same schedule.
    pub(super) examples: u64,
    pub(super) first_step: u64,
    /// The newest checkpoint, and the step it holds.
    pub(super) checkpoint: Option<PathBuf>,
    pub(super) saved_step: Option<u64>,
    pub(super) interval: Interval,
    pub(super) total: Interval,
    pub(super) last_loss: Option<f64>,
    pub(super) interrupted: bool,
    /// Every step's phases, when the config asks for a timeline (under MPI, at least the
    /// current one, for the watchdog).
    pub(super) timeline: Timeline,
    /// Under MPI, what says where this rank is stuck (see `watchdog.rs`).
    pub(super) _watchdog: Option<Watchdog>,
}

/// One update's figures.
pub(super) struct Update {
    loss: f64,
    lr: f64,
    took: Duration,
    examples: usize,
    /// The loss function's metrics (and `accuracy` when it gave predictions), as means over
    /// the update's batches.
    metrics: Metrics,
}

impl<M: Module + 'static, S: TrainStep<M>> Trainer<M, S> {
    /// Begin: the towers, the learning-rate schedule, the input pipeline (from a resumed
    /// run's input position), the log and the summaries.
    pub(super) fn begin<I>(
        &self,
        start: Start<M>,
        devices: &[TowerDevice],
        input: &I,
    ) -> Result<Run<M, I::Source>>
    where
        I: TrainInput<Source: BatchSource<Batch = S::Batch>>,
    {
        let c = &self.config;
        let step = start.step;
        let mut towers = Towers::new(start.model, start.optimizer, devices, c.towers_config())?;
        let mut notes = start.notes;
        match (start.loss_scale, towers.loss_scale()) {
            (Some(state), Some(_)) => towers.restore_loss_scale(state),
            (None, Some(initial)) if start.checkpoint.is_some() => notes.push(format!(
                "the checkpoint keeps no loss scale (written before it was kept, or by a run \
                 without loss scaling): starting at the initial scale {initial}"
            )),
            _ => {}
        }
        notes.extend(slow_cpu_bf16(c.precision, bf16_kernel(), devices));
        // Under MPI the rank's watchdog follows the phases even when no timeline is written.
        let deadline =
            (self.processes.as_ref()).and_then(|p| p.deadline().filter(|_| p.size() > 1));
        let timeline = match (&c.timeline, deadline) {
            (Some(path), _) => {
                let path = self.rank_file(path);
                Timeline::recording(self.rank(), &path).map_err(Error::io(&path))?
            }
            (None, Some(_)) => Timeline::following(self.rank()),
            (None, None) => Timeline::default(),
        };
        let watchdog = deadline.map(|d| Watchdog::start(self.rank(), timeline.clone(), d / 2));
        let towers = self
            .join_ranks(towers, step)?
            .with_timeline(timeline.clone());
        let examples_per_epoch = match c.examples_per_epoch {
            Some(n) => n,
            None => input.count_examples()?,
        };
        self.same_epoch_on_every_rank(examples_per_epoch)?;
        let schedule = (c.learning_rate).resolve(
            examples_per_epoch,
            self.global_examples_per_step(),
            c.max_steps,
        )?;
        let job_note = self.job_note(input);
        let saved = match &start.checkpoint {
            Some(_) => Some(JobInput::from_checkpoint(start.input, step)?),
            None => None,
        };
        let log = if self.writes() {
            TrainLog::open(&c.train_dir.join(LOG_FILE), step, c.max_steps)?
        } else {
            TrainLog::silent()
        };
        log.println(&self.banner(devices, examples_per_epoch, &schedule, step));
        for note in notes.iter().chain(&job_note) {
            log.println(note);
        }
        let readers = c.reader_threads.unwrap_or(4 * devices.len());
        let resumed = saved.as_ref().map(|saved| (saved, step));
        let pipeline = self.start_input(input, readers, resumed, devices.len(), &log)?;
        let summaries = TrainSummaries::open(&self.summaries(), &c.train_dir, step, c.max_steps)?;
        Ok(Run {
            towers,
            averages: start.averages,
            pipeline,
            schedule,
            log,
            summaries,
            step,
            // A fresh run's step is 0; a TF run's, continued, counts its batches of this size
            // (the schedule reads the step from the examples, as TF's from `global_step`).
            examples: saved.map_or(step * self.global_examples_per_step(), |saved| {
                saved.examples
            }),
            first_step: step,
            saved_step: start.checkpoint.is_some().then_some(step),
            checkpoint: start.checkpoint,
            interval: Interval::default(),
            total: Interval::default(),
            last_loss: None,
            interrupted: false,
            timeline,
            _watchdog: watchdog,
        })
    }

    /// One training step: a batch per micro-batch through the towers until one update is
    /// applied. A loss that is not finite ends the run with [`Error::Diverged`].
    pub(super) fn train_step<P>(&self, run: &mut Run<M, P>) -> Result<Update>
    where
        P: BatchSource<Batch = S::Batch>,
    {
        let c = &self.config;
        let started = Instant::now();
        // The schedule's steps are updates of this job's global batch.
        let lr = (run.schedule).at(run.examples / self.global_examples_per_step());
        let timeline = run.timeline.clone();
        // Devices' generators are shared by concurrent runs (tests): this may wait.
        let seeding = timeline.span("seed", Track::Main);
        seed_devices(run.towers.devices(), mix(c.seed, run.step));
        drop(seeding);
        let (mut loss_sum, mut weight, mut examples) = (0.0, 0.0, 0usize);
        let mut metrics = Metrics::default();
        let loss_scale = run.towers.loss_scale();
        let mut skipped = false;
        for micro in 0.. {
            let input = timeline.span("input", Track::Main);
            let batch = next_batch(&mut run.pipeline)?;
            drop(input);
            let images = P::images(&batch);
            let summaries = timeline.span("summaries", Track::Main);
            run.summaries
                .before_batch(run.step + 1, images, &mut run.towers)?;
            drop(summaries);
            let seed = mix(mix(c.seed, run.step), micro);
            let towers = timeline.span("towers", Track::Main);
            let loss = seeded_step(&self.step, seed, self.rank(), c.precision);
            let out = (run.towers).step(&batch, lr, loss)?;
            drop(towers);
            let summaries = timeline.span("summaries", Track::Main);
            run.summaries.add(&out);
            drop(summaries);
            loss_sum += out.loss * out.weight;
            weight += out.weight;
            examples += out.examples;
            metrics.add(&out);
            if out.updated {
                skipped = out.skipped;
                break;
            }
        }
        let loss = loss_sum / weight;
        run.step += 1;
        run.examples += self.global_examples_per_step();
        if skipped {
            let (before, now) = (
                loss_scale.unwrap_or(1.0),
                run.towers.loss_scale().unwrap_or(1.0),
            );
            run.log.println(&format!(
                "step {}: a gradient overflowed at loss scale {before}: update skipped, the \
                 scale is now {now}",
                run.step
            ));
        }
        // An overflow under loss scaling (in f16) skips its update; that is not divergence.
        if !loss.is_finite() && !skipped {
            run.log.finish();
            return Err(Error::Diverged {
                step: run.step,
                loss,
                last_checkpoint: (run.checkpoint.as_ref())
                    .map_or("none".into(), |p| p.display().to_string()),
            });
        }
        Ok(Update {
            loss,
            lr,
            took: started.elapsed(),
            examples,
            metrics,
        })
    }

    /// After a step: the moving averages, the summaries, a log line every `log_every` steps
    /// and a checkpoint every `checkpoint_every`.
    pub(super) fn after_step<P: BatchSource>(
        &self,
        run: &mut Run<M, P>,
        update: &Update,
        ckpts: &CheckpointDir,
    ) -> Result<()> {
        let c = &self.config;
        let step = run.step;
        let timeline = run.timeline.clone();
        let _after = timeline.span("after step", Track::Main);
        if let Some(averages) = &mut run.averages {
            averages.update(run.towers.model(), step);
        }
        run.last_loss = Some(update.loss);
        run.interval.add(update.took, update.examples, update.loss);
        run.total.add(update.took, update.examples, update.loss);
        let fill = run.pipeline.fill();
        let scalars = StepScalars {
            step,
            loss: update.loss,
            lr: update.lr,
            took: update.took,
            examples: update.examples,
            queue_fill: fill.examples,
            metrics: update.metrics.means(),
        };
        run.summaries.after_step(&scalars, &mut run.towers)?;
        run.log.progress(step);
        if step.is_multiple_of(c.log_every) || step == c.max_steps {
            run.log.record(&LogEntry {
                step,
                loss: update.loss,
                mean_loss: Some(run.interval.mean_loss()),
                lr: update.lr,
                examples_per_sec: run.interval.examples_per_sec(),
                sec_per_batch: run.interval.sec_per_step(),
                input_queue_fill: fill.examples,
                batch_queue_fill: fill.batches,
                corrupt_records_skipped: run.pipeline.record_count().skipped,
                metrics: scalars.metrics.iter().cloned().collect(),
            })?;
            run.interval = Interval::default();
        }
        if step.is_multiple_of(c.checkpoint_every) && step < c.max_steps {
            self.checkpoint(run, ckpts)?;
        }
        Ok(())
    }

    /// The end: a checkpoint of the last step, the pipeline's threads joined, the summaries
    /// closed, the plot drawn.
    pub(super) fn finish<P: BatchSource>(
        &self,
        mut run: Run<M, P>,
        ckpts: &CheckpointDir,
    ) -> Result<Trained<M>> {
        let c = &self.config;
        // A run stopped before its first step trained nothing: a checkpoint of its start
        // (step 0 of a fresh run) would only make the next run ask for --resume.
        if run.saved_step != Some(run.step) && run.step > run.first_step {
            self.checkpoint(&mut run, ckpts)?;
        }
        self.last_checkpoint_written();
        if let Some(path) = &c.timeline {
            let path = self.rank_file(path);
            run.timeline.finish().map_err(Error::io(&path))?;
        }
        let records = run.pipeline.record_count();
        run.pipeline.stop()?;
        let events = run.summaries.close()?;
        run.log.finish();
        let log_path = c.train_dir.join(LOG_FILE);
        let plot_path = c.train_dir.join(PLOT_FILE);
        if self.writes() {
            plot_log(&read_log(&log_path)?, &plot_path)?;
        }
        Ok(Trained {
            model: run.towers.into_model(),
            averages: run.averages.map(|a| a.averages().clone()),
            report: TrainReport {
                first_step: run.first_step,
                step: run.step,
                last_loss: run.last_loss,
                interrupted: run.interrupted,
                examples_per_sec: run.total.examples_per_sec(),
                checkpoint: run.checkpoint,
                checkpoint_dir: c.train_dir.clone(),
                log: log_path,
                plot: plot_path,
                records,
                events,
            },
        })
    }

    /// Saves the model, optimizer, averages and input position of the current step.
    fn checkpoint<P: BatchSource>(&self, run: &mut Run<M, P>, ckpts: &CheckpointDir) -> Result<()> {
        let timeline = run.timeline.clone();
        let _checkpoint = timeline.span("checkpoint", Track::Main);
        // Every rank's position, gathered (every rank checkpoints at the same steps).
        let towers = run.towers.devices().len();
        let input = self.checkpoint_input(run.pipeline.position(), towers, run.examples);
        // Every rank, rank 0's checkpoint written or not: at the end, ranks that disagree on
        // it would make different exchanges.
        run.saved_step = Some(run.step);
        if !self.writes() {
            return Ok(());
        }
        // A checkpoint keeps replica 0: make sure every replica holds the same weights.
        if let Some(check) = run.towers.try_check_replicas()?.filter(|c| c.rebroadcast) {
            eprint_line(&format!(
                "step {}: replicas differed from replica 0 by up to {:.3e} (a parameter's sum); \
                 they now hold its weights",
                run.step, check.max_difference
            ));
        }
        let path = ckpts.save(Checkpoint {
            step: run.step,
            model: run.towers.model().clone().into_record(),
            optimizer: run.towers.optimizer().to_record(),
            averages: (run.averages.as_ref()).map(|a| a.averages().clone().into_record()),
            input: Some(input),
            config: with_frozen(
                serde_json::to_value(&self.config).expect("a config always serializes"),
                run.towers.model(),
            ),
            loss_scale: run.towers.loss_scale_state(),
        })?;
        run.checkpoint = Some(path);
        Ok(())
    }

    fn banner(
        &self,
        towers: &[TowerDevice],
        examples_per_epoch: u64,
        schedule: &LrSchedule,
        step: u64,
    ) -> String {
        let c = &self.config;
        let names: Vec<&str> = towers.iter().map(TowerDevice::name).collect();
        let parameters = match &c.parameter_device {
            Some(entry) => format!(", model on {entry}"),
            None => String::new(),
        };
        let precision = match c.precision {
            Precision::F32 => String::new(),
            Precision::Bf16 => match bf16_kernel() {
                Bf16Kernel::F32Gemm => ", products in bf16".into(),
                kernel => format!(", products in bf16 ({kernel} on flex)"),
            },
            Precision::F16 => ", products in f16 with loss scaling".into(),
            other => format!(", products in {other}"),
        };
        format!(
            "training on {} tower{} ({}){parameters}{precision}, batch {} per step, {} examples per epoch, steps {step}..{}, \
             {:?}, learning rate {schedule:?}, train dir {}",
            towers.len(),
            if towers.len() == 1 { "" } else { "s" },
            names.join(", "),
            c.examples_per_step(),
            examples_per_epoch,
            c.max_steps,
            c.optimizer,
            c.train_dir.display()
        )
    }
}

/// The note for bf16 products on a `flex` tower (its device list entry) of a CPU with neither
/// AMX nor AVX-512 BF16: there they run on the f32 gemm with rounded operands, and the step is
/// slower than in f32 (bench/README.md, AVX2-only AMD EPYC).
fn slow_cpu_bf16(
    precision: Precision,
    kernel: Bf16Kernel,
    devices: &[TowerDevice],
) -> Option<String> {
    let cpu_tower = devices.iter().any(|device| device.name() == "flex");
    (precision == Precision::Bf16 && kernel == Bf16Kernel::F32Gemm && cpu_tower).then(|| {
        "bf16 on this CPU, which has neither AMX nor AVX-512 BF16: its products run on the f32 \
         gemm with rounded operands, and the step is slower than in f32 (0.53-0.91x of the f32 \
         step on an AVX2-only AMD EPYC, bench/README.md); --precision f32 trains faster here"
            .into()
    })
}

#[cfg(test)]
mod tests {
    use burn::tensor::Device;

    use super::*;

    #[test]
    fn bf16_on_the_f32_gemm_of_a_cpu_tower_is_noted_as_slower() {
        let flex = [TowerDevice::new("flex", Device::flex())];
        let note = slow_cpu_bf16(Precision::Bf16, Bf16Kernel::F32Gemm, &flex).unwrap();
        assert!(note.contains("--precision f32 trains faster"), "{note}");
        for (precision, kernel) in [
            (Precision::F32, Bf16Kernel::F32Gemm),
            (Precision::Bf16, Bf16Kernel::Avx512Bf16),
            (Precision::Bf16, Bf16Kernel::AmxTiles),
        ] {
            assert_eq!(
                slow_cpu_bf16(precision, kernel, &flex),
                None,
                "{precision} {kernel}"
            );
        }
        // Only the entry tells: a GPU's entry (on a CPU device here) takes no note.
        let gpu = [TowerDevice::new("wgpu", Device::flex())];
        assert_eq!(
            slow_cpu_bf16(Precision::Bf16, Bf16Kernel::F32Gemm, &gpu),
            None
        );
    }
}
