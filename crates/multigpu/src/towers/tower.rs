//! One tower's part of a step, on its worker thread: forward and loss of its part of the
//! batch (the loss function uploads it), backward, then keep, gather or all-reduce its
//! gradients. Failures are named by tower.

use std::any::Any;
use std::collections::HashMap;

use burn::module::{Module, ParamId};
use burn::optim::{GradientsParams, ModuleOptimizer};
use burn::tensor::Device;

use crate::devices::{TowerDevice, in_host_memory, read_hands_over};
use crate::error::{Cause, Error, Result, While, panic_message};
use crate::gradient_tap::Tap;
use crate::host_syncs;
use crate::loss::{IntoTowerLoss, LossValues, TowerLoss};
use crate::loss_scale;
use crate::reduce::{AllReduceLink, Layout, PeerGone};
use crate::running_state::{self, RunningStats, Selection};
use crate::timeline::{Timeline, Track};
use crate::tower_index::on_tower;
use crate::weight_decay::DecayInUpdate;

use super::workers::{Patience, Work, Workers};

/// Forward, loss and backward of one part of the batch; the loss values not yet read.
pub(super) struct Pass {
    /// The gradients; `None` when a tap took them.
    pub(super) grads: Option<GradientsParams>,
    /// The loss and what it reports beside it, still on the device: read once, when the
    /// tower's work is queued ([`TowerLoss::read_values`]).
    pub(super) out: TowerLoss,
}

/// With a tap, each gradient goes to it as soon as backward has finished it (see
/// `gradient_tap.rs`), and none is returned. A loss function that returned its own gradients
/// ([`TowerLoss::with_gradients`](crate::TowerLoss::with_gradients)) has run backward
/// already: its gradients are scaled as the loss would have been.
pub(super) fn backward_pass<M, P, F, L>(
    (model, layout): (&M, &Layout),
    part: P,
    device: &Device,
    loss_scale: Option<f64>,
    tap: Option<(&Tap, &HashMap<ParamId, usize>)>,
    (timeline, track): (&Timeline, Track),
    loss_fn: &F,
) -> Result<Pass, Cause>
where
    M: Module,
    F: Fn(&M, P, &Device) -> L,
    L: IntoTowerLoss,
{
    let tapped = tap.map(|(tap, slots)| tap.attach(model, slots));
    let forward = timeline.span("forward", track);
    let mut out = loss_fn(tapped.as_ref().unwrap_or(model), part, device).into_tower_loss()?;
    drop(forward);
    let _backward = timeline.span("backward", track);
    out.checked_shapes()?;
    let grads = match (out.gradients.take(), tapped) {
        (Some(_), Some(_)) => {
            return Err(
                "the loss function returned its own gradients, but the exchange \
                        across ranks overlaps backward (TowersConfig::overlap), which needs \
                        the towers' own backward pass"
                    .into(),
            );
        }
        (Some(grads), None) => Some(match loss_scale {
            Some(scale) => layout.scale(grads, scale),
            None => grads,
        }),
        (None, tapped) => {
            let loss = match loss_scale {
                Some(scale) => out.loss.clone().mul_scalar(scale),
                None => out.loss.clone(),
            };
            let grads = match (tap, &tapped) {
                (Some((tap, _)), Some(_)) => tap.probed(loss).backward(),
                _ => loss.backward(),
            };
            tapped
                .is_none()
                .then(|| GradientsParams::from_grads(grads, model))
        }
    };
    Ok(Pass { grads, out })
}

/// One tower's share of a step.
pub(super) struct Job<M, P> {
    pub(super) replica: M,
    /// Where the part starts in the batch.
    pub(super) first_example: usize,
    /// The gradients of the cycle's earlier micro-batches.
    pub(super) sum: Option<GradientsParams>,
    pub(super) part: P,
    pub(super) device: Device,
    /// Where the batch-norm statistics are combined: the model's device. The tower moves its
    /// own there, so that every read from its device (a remote one that can go away included)
    /// happens on its thread, where a failure is caught and named.
    pub(super) stats_device: Device,
    pub(super) loss_scale: Option<f64>,
    /// Where the gradients go as backward finishes them, when the exchange overlaps it.
    pub(super) tap: Option<Tap>,
    pub(super) finish: Finish,
    /// Whether the loss values are left unread, for the step to read at its end: tower 0
    /// on the calling thread (see "Threads" in the module docs).
    pub(super) read_at_end: bool,
}

/// What a tower does with its gradients.
pub(super) enum Finish {
    /// Keeps them for the next micro-batch.
    Keep,
    /// Sends them to the parameter device, in buckets of `.1` bytes.
    Gather(Device, usize),
    /// Nothing: the tap has them.
    Tapped,
    /// All-reduce, then its own update (skipped when a gradient overflowed under
    /// `loss_scale`: the sums, and so the decision, are the same on every tower).
    AllReduce {
        link: AllReduceLink,
        optim: ModuleOptimizer,
        lr: f64,
        grad_scale: Option<f64>,
        loss_scale: Option<f64>,
    },
}

pub(super) struct Done<M> {
    pub(super) replica: M,
    /// Kept or gathered gradients; `None` after an all-reduce update.
    pub(super) grads: Option<GradientsParams>,
    /// The optimizer after an all-reduce update.
    pub(super) optim: Option<ModuleOptimizer>,
    /// Whether the all-reduce update was skipped (see [`Finish::AllReduce`]).
    pub(super) skipped: bool,
    /// Batch-norm statistics, read when the cycle ends.
    pub(super) stats: Option<RunningStats>,
}

/// A tower's loss values: read on its thread once its work is queued, or left unread for the
/// step to read at its end ([`Job::read_at_end`]).
pub(super) enum Values {
    Read(LossValues),
    /// Boxed: a `TowerLoss` holds several tensors, each large.
    Unread(Box<TowerLoss>),
}

impl Values {
    /// The names of the metrics reported beside the loss, in order.
    pub(super) fn metric_names(&self) -> Vec<String> {
        match self {
            Values::Read(values) => values.metrics.iter().map(|(n, _)| n.clone()).collect(),
            Values::Unread(out) => out.metrics.iter().map(|(n, _)| n.clone()).collect(),
        }
    }

    /// The values, read now when they were left unread.
    pub(super) fn read(self) -> Result<LossValues, Cause> {
        match self {
            Values::Read(values) => Ok(values),
            Values::Unread(out) => out.read_values(),
        }
    }
}

/// Hands over what a tower's thread queued before the thread ends (see "Threads" in the
/// module docs): on its device, unless the read that just came from it did
/// ([`read_hands_over`]), and on the model's, where it moved its statistics and gathered its
/// gradients, unless that is the same device or computes in host memory (nothing queued).
fn hand_over(device: &Device, stats_device: &Device) -> Result<(), Cause> {
    let tower_device = (!read_hands_over(device)).then_some(device);
    let model_device =
        (stats_device != device && !in_host_memory(stats_device)).then_some(stats_device);
    for device in tower_device.into_iter().chain(model_device) {
        host_syncs::note_flush();
        device
            .flush()
            .map_err(While::doing("flushing the queued work"))?;
    }
    Ok(())
}

enum Failure {
    /// The loss function's error, or a malformed loss.
    Failed(Cause),
    /// Another tower of the all-reduce failed: a consequence, not a cause.
    PeerGone,
}

/// What a tower's task ends with.
type Outcome<M> = Result<(Done<M>, Values), Failure>;

fn run_tower<M, P, F, L>(job: Job<M, P>, context: &Context<'_>, loss_fn: &F) -> Outcome<M>
where
    M: Module,
    F: Fn(&M, P, &Device) -> L,
    L: IntoTowerLoss,
{
    let Job {
        replica,
        first_example: _,
        sum,
        part,
        device,
        stats_device,
        loss_scale,
        tap,
        finish,
        read_at_end,
    } = job;
    let Context {
        layout,
        slots,
        running,
        has_running_stats,
        timeline,
        decay,
    } = *context;
    let track = Track::Tower(crate::tower_index::current_tower().unwrap_or(0));
    let tapped = tap.as_ref().map(|tap| (tap, slots));
    let pass = backward_pass(
        (&replica, layout),
        part,
        &device,
        loss_scale,
        tapped,
        (timeline, track),
        loss_fn,
    );
    // Tells the exchange that this tower's backward is over.
    drop(tap);
    let pass = pass.map_err(Failure::Failed)?;
    if has_running_stats {
        running_state::commit(&replica);
    }
    let grads = match (sum, pass.grads) {
        (Some(sum), Some(grads)) => layout.sum(vec![sum, grads], &device),
        (None, Some(grads)) => grads,
        (_, None) => GradientsParams::new(),
    };
    let _reduce = timeline.span("reduce", track);
    let stats = (has_running_stats && !matches!(finish, Finish::Keep))
        .then(|| running_state::read(&replica, running).into_device(&stats_device));
    let mut skipped = false;
    let (replica, grads, optim) = match finish {
        Finish::Keep => (replica, Some(grads), None),
        Finish::Tapped => (replica, None, None),
        Finish::Gather(main, bucket_bytes) => {
            let grads = layout.moved_in_buckets(grads, (&device, &main), bucket_bytes);
            (replica, Some(grads), None)
        }
        Finish::AllReduce {
            link,
            mut optim,
            lr,
            grad_scale,
            loss_scale,
        } => {
            let sum = layout
                .all_reduce(&link, grads, &device)
                .map_err(|PeerGone| Failure::PeerGone)?;
            let sum = match grad_scale {
                Some(factor) => layout.scale(sum, factor),
                None => sum,
            };
            let sum = match loss_scale {
                Some(scale) => loss_scale::unscaled(layout, sum, scale, &device),
                None => Some(sum),
            };
            skipped = sum.is_none();
            match sum {
                Some(sum) => {
                    let sum = decay.added(&replica, sum);
                    (optim.step(lr, replica, sum), None, Some(optim))
                }
                None => (replica, None, Some(optim)),
            }
        }
    };
    let values = match read_at_end {
        true => Values::Unread(Box::new(pass.out)),
        false => {
            // The tower's one read (see `host_syncs.rs`), once all its work is queued: where a
            // remote server that went away shows, on this thread.
            let values = pass.out.read_values().map_err(Failure::Failed)?;
            hand_over(&device, &stats_device).map_err(Failure::Failed)?;
            Values::Read(values)
        }
    };
    let done = Done {
        replica,
        grads,
        optim,
        skipped,
        stats,
    };
    Ok((done, values))
}

/// What every tower of a step shares.
#[derive(Clone, Copy)]
pub(super) struct Context<'a> {
    pub(super) layout: &'a Layout,
    /// Each trainable parameter's slot in `layout`, for taps.
    pub(super) slots: &'a HashMap<ParamId, usize>,
    /// Which tensors are running state.
    pub(super) running: &'a Selection,
    pub(super) has_running_stats: bool,
    pub(super) timeline: &'a Timeline,
    /// What each all-reduce update adds to the mean gradient.
    pub(super) decay: &'a DecayInUpdate,
}

/// Runs every job on its tower's worker (tower 0's on the calling thread with `first_here`)
/// and waits for all of them (see `workers.rs`).
pub(super) fn run_towers<M, P, F, L>(
    jobs: Vec<Job<M, P>>,
    (workers, towers): (&Workers, &[TowerDevice]),
    context: Context<'_>,
    (patience, first_here): (Patience, bool),
    loss_fn: &F,
) -> Result<Vec<(Done<M>, Values)>>
where
    M: Module,
    P: Send,
    F: Fn(&M, P, &Device) -> L + Sync,
    L: IntoTowerLoss,
{
    let context = &context;
    let tasks: Vec<Work<'_, Outcome<M>>> = (jobs.into_iter())
        .enumerate()
        .map(|(i, job)| {
            let first = job.first_example;
            Box::new(move || on_tower(i, first, || run_tower(job, context, loss_fn))) as Box<_>
        })
        .collect();
    let outcomes = workers.run(tasks, towers, patience, first_here);
    let mut done = Vec::with_capacity(outcomes.len());
    let mut all_reduce_broken = None;
    for (i, outcome) in outcomes.into_iter().enumerate() {
        let tower = &towers[i];
        match outcome {
            Ok(Ok(d)) => done.push(d),
            Ok(Err(Failure::PeerGone)) => all_reduce_broken = all_reduce_broken.or(Some(i)),
            Ok(Err(Failure::Failed(error))) => return Err(tower_failed(i, tower, error)),
            Err(panic) => return Err(tower_panicked(i, tower, panic)),
        }
    }
    match all_reduce_broken {
        // Only reachable if a tower left the all-reduce without failing, which is a bug here.
        Some(i) => Err(tower_failed(
            i,
            &towers[i],
            "the all-reduce broke off".into(),
        )),
        None => Ok(done),
    }
}

pub(super) fn tower_failed(tower: usize, device: &TowerDevice, error: Cause) -> Error {
    Error::TowerFailed {
        tower,
        device: device.name().to_string(),
        error,
    }
}

pub(super) fn tower_panicked(
    tower: usize,
    device: &TowerDevice,
    panic: Box<dyn Any + Send>,
) -> Error {
    Error::TowerPanicked {
        tower,
        device: device.name().to_string(),
        message: panic_message(&*panic),
    }
}
