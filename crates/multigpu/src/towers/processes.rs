//! Towers as one rank of a multi-process job (see [`crate::CrossProcess`]): the hierarchical
//! reduction, towers first, then ranks. The exchanges themselves are in `cross_process.rs`;
//! the step's phases call them from one line each.

use burn::module::Module;

use super::between_steps::{PRESENT, State};
use super::{Towers, broadcast};
use crate::cross_process::{self, Processes};
use crate::error::{Error, Result};
use crate::timeline::{Span, Track};

impl<M: Module> Towers<M> {
    /// Makes these towers one rank of a multi-process job: every update then applies the mean
    /// gradient over all ranks' examples, batch-norm statistics are averaged across ranks too
    /// (after the towers' own [`BatchNormSync`](crate::BatchNormSync)), and the model takes
    /// rank 0's weights now. Every rank calls this, and then [`step`](Self::step), in step
    /// with the others.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] under [`Reduce::AllReduce`](crate::Reduce::AllReduce): each tower
    /// updates its own replica, so there is no one gradient to exchange (use the parameter
    /// device); [`Error::Processes`] on every rank when the ranks' models differ in shape, or
    /// their settings that decide a step's exchanges or updates differ (overlap, accumulation,
    /// running state, loss scaling, [weight decay](Self::with_weight_decay), and the transport's
    /// own, such as MPI's wire format and bucket size):
    /// the error names each setting with every rank's value.
    pub fn across_processes(mut self, processes: Processes) -> Result<Self> {
        let p = &*processes;
        let settings = self.settings_ranks_share();
        self.state = match self.state {
            State::AllReduce { .. } => {
                return Err(Error::Config(
                    "the ring all-reduce between towers cannot run across processes: use the \
                     parameter-device reduction"
                        .into(),
                ));
            }
            State::Single { model, optim } => State::Single {
                model: Some(cross_process::from_rank_zero(
                    p,
                    model.expect(PRESENT),
                    settings,
                    &self.main,
                )?),
                optim,
            },
            State::ParameterDevice { master, optim, .. } => {
                let master = master.expect(PRESENT);
                let master = cross_process::from_rank_zero(p, master, settings, &self.main)?;
                State::ParameterDevice {
                    replicas: broadcast(&master, &self.towers),
                    master: Some(master),
                    optim,
                }
            }
        };
        self.processes = Some(processes);
        // Rank 0's model came in on this thread: the next step hands it over.
        self.main_handed_over = false;
        Ok(self)
    }

    /// The settings that decide which exchanges across ranks a step makes, and with which
    /// tensors: every rank must have the same.
    fn settings_ranks_share(&self) -> Vec<(&'static str, String)> {
        let config = &self.config;
        vec![
            ("overlap", config.overlap.to_string()),
            ("accumulation", config.accumulation.to_string()),
            ("running states", format!("{:?}", config.running_states)),
            ("loss scaling", format!("{:?}", config.loss_scaling)),
            ("weight decay", self.decay.summary(&self.slots)),
        ]
    }

    /// `outcome`, this rank's step so far, failed on every rank if it failed on any (see
    /// [`cross_process::agreed`]).
    pub(super) fn agreed_by_ranks<T>(&self, outcome: Result<T>) -> Result<T> {
        let _agreeing = self.across_ranks_span("agreement across ranks");
        cross_process::agreed(self.processes.as_deref(), outcome)
    }

    /// A span of the timeline's main track named `name`, when there are other ranks.
    fn across_ranks_span(&self, name: &'static str) -> Option<Span<'_>> {
        let ranks = self.processes.as_ref().map_or(1, |p| p.size());
        (ranks > 1).then(|| self.timeline.span(name, Track::Main))
    }

    /// The other ranks of the job, if these towers are one rank of several.
    pub fn processes(&self) -> Option<&Processes> {
        self.processes.as_ref()
    }

    /// `model` with its running state averaged across ranks (weighted by this rank's update's
    /// `weight`: its examples unless its batches weigh them otherwise), when it has any and
    /// there are ranks.
    pub(super) fn stats_across_processes(&self, model: M, weight: f64) -> M {
        if !self.has_running_stats {
            return model;
        }
        let _averaging = self.across_ranks_span("running state across ranks");
        let processes = self.processes.as_deref();
        cross_process::mean_running_stats(processes, model, &self.running, weight, &self.main)
    }
}
