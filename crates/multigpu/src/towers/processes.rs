//! Towers as one rank of a multi-process job (see [`crate::CrossProcess`]): the hierarchical
//! reduction, towers first, then ranks. The exchanges themselves are in `cross_process.rs`;
//! the step's phases call them from one line each.

use burn::module::Module;

use super::state::{PRESENT, State};
use super::{Towers, broadcast};
use crate::cross_process::{self, Processes};
use crate::error::{Error, Result};

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
    /// device); [`Error::Processes`] when the ranks' models differ in shape.
    pub fn across_processes(mut self, processes: Processes) -> Result<Self> {
        let p = &*processes;
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
                    &self.main,
                )?),
                optim,
            },
            State::ParameterDevice { master, optim, .. } => {
                let master = cross_process::from_rank_zero(p, master.expect(PRESENT), &self.main)?;
                State::ParameterDevice {
                    replicas: broadcast(&master, &self.towers),
                    master: Some(master),
                    optim,
                }
            }
        };
        self.processes = Some(processes);
        Ok(self)
    }

    /// The other ranks of the job, if these towers are one rank of several.
    pub fn processes(&self) -> Option<&Processes> {
        self.processes.as_ref()
    }

    /// `model` with its batch-norm statistics averaged across ranks (weighted by the
    /// `examples` of this rank's update), when it has any and there are ranks.
    pub(super) fn stats_across_processes(&self, model: M, examples: usize) -> M {
        if !self.has_running_stats {
            return model;
        }
        let processes = self.processes.as_deref();
        cross_process::mean_running_stats(processes, model, &self.running, examples, &self.main)
    }
}
