//! The gradient exchange across ranks, overlapped with backward.
//!
//! ```text
//! tower threads:   forward ── backward: layer L ─ L-1 ─ ... ─ 1 ──┐
//!                             │ taps report each finished gradient │
//! exchange thread:            └─► bucket 1 full ─► all-reduce      │   (ranks)
//!                                      bucket 2 full ─► all-reduce  │
//!                                                   ...  last bucket ─► wait ─► update
//! ```
//!
//! Before the towers start, [`OverlappedExchange::start`] gives each tower a [`Tap`] and starts
//! one thread. The taps report each parameter's gradient as soon as backward has finished it
//! (see `gradient_tap.rs`); the thread reads it to the host and packs it into its bucket. The
//! buckets hold the slots of the model's [`Layout`] in reverse, the order in which backward
//! finishes them, about [`CrossProcess::bucket_bytes`] each. A bucket goes to the ranks'
//! exchange ([`CrossProcess::sum_buckets`]) as soon as every tower has reported all of it, so
//! the exchange of the last layers' gradients travels while backward computes the first ones'.
//! Every rank posts the same buckets in the same order, as MPI requires.
//!
//! What travels: each tower's gradient of its loss scaled by its part's weight, summed over the
//! towers (in tower order, so the sum does not depend on timing) and over the micro-batches of
//! an accumulation cycle; the rank's weight travels first, as a bucket of one value. Dividing
//! each summed bucket by the summed weights gives the mean gradient over every rank's
//! examples, with no second round. A last bucket says which gradients the rank had (a 1 per
//! slot, else 0): one that no rank had stays absent, as on one device (see
//! `Layout::unflatten_where`).

use std::cell::Cell;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use burn::optim::GradientsParams;
use burn::tensor::{Device, Tensor};

use crate::buckets;
#[cfg(doc)]
use crate::cross_process::CrossProcess;
use crate::cross_process::Processes;
use crate::error::{Cause, While};
use crate::gradient_tap::{Tap, TapSchedule, Tapped};
use crate::reduce::{Layout, presence};
use crate::timeline::{Timeline, Track};

/// How long the exchange thread waits for the next report before polling the exchange again.
/// MPI moves a posted all-reduce only inside those polls, and each poll takes a core from
/// backward: on 2 cores shared by 2 ranks, 0.2 ms cost Inception v3 a step 12% longer than
/// 20 ms did (`bench_mpi`, 2026-11-25).
const PATIENCE: Duration = Duration::from_millis(1);

/// The same before backward's first gradient: the forward pass, with nothing to exchange yet.
const FORWARD_PATIENCE: Duration = Duration::from_millis(20);

/// An exchange under way: started before backward, finished after it.
pub(crate) struct OverlappedExchange {
    thread: JoinHandle<Result<Vec<Vec<f32>>, Cause>>,
    buckets: Vec<Vec<usize>>,
    sizes: Vec<usize>,
    processes: Processes,
}

impl OverlappedExchange {
    /// Starts the exchange of one update's gradients among `processes`: returns it and one tap
    /// per tower (`towers` of them). `kept[i]` are tower `i`'s gradients from the cycle's
    /// earlier micro-batches, flattened in slot order, and whether it had each (none without
    /// accumulation); `weight` is this rank's weight for the update; `schedule` places the
    /// taps.
    pub(crate) fn start(
        processes: Processes,
        layout: &Layout,
        (towers, schedule): (usize, &TapSchedule),
        kept: Vec<(Vec<Tensor<1>>, Vec<bool>)>,
        weight: f64,
        timeline: Timeline,
    ) -> std::io::Result<(Self, Vec<Tap>)> {
        let sizes = layout.sizes();
        let mut present = vec![false; sizes.len()];
        for (_, had) in &kept {
            (present.iter_mut().zip(had)).for_each(|(any, &had)| *any |= had);
        }
        let kept = kept.into_iter().map(|(grads, _)| grads).collect();
        let buckets = buckets::in_backward_order(&sizes, processes.bucket_bytes());
        let (sender, receiver) = mpsc::channel();
        let taps = (0..towers)
            .map(|i| Tap::new(i, sender.clone(), schedule.clone()))
            .collect();
        drop(sender);
        let gathering = Gathering {
            receiver,
            finished: vec![false; towers],
            reported: false,
            parts: vec![vec![None; towers]; sizes.len()],
            kept,
            present,
            error: None,
        };
        let (plan, thread_sizes) = (buckets.clone(), sizes.clone());
        let thread_processes = processes.clone();
        let thread = thread::Builder::new()
            .name("towers-exchange".into())
            .spawn(move || {
                exchange(
                    &*thread_processes,
                    gathering,
                    &plan,
                    &thread_sizes,
                    weight,
                    &timeline,
                )
            })?;
        let exchange = Self {
            thread,
            buckets,
            sizes,
            processes,
        };
        Ok((exchange, taps))
    }

    /// Waits for the exchange to end: the mean gradient over every rank's examples, on
    /// `device` without autodiff; `None`, the same on every rank, when it travelled in fewer
    /// bits and is not finite. Every tap must be dropped first (the thread waits for them).
    pub(crate) fn finish(
        self,
        layout: &Layout,
        device: &Device,
    ) -> Result<Option<GradientsParams>, Cause> {
        let mut sums = match self.thread.join() {
            Ok(sums) => sums?,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        let had = sums.pop().expect("the last bucket says which were had");
        let p = &*self.processes;
        if p.gradients_may_overflow() && sums.iter().flatten().any(|v| !v.is_finite()) {
            return Ok(crate::cross_process::skipped_not_finite(p));
        }
        let mut flat: Vec<Option<Tensor<1>>> = vec![None; self.sizes.len()];
        // Plain tensors, as backward's gradients are (`GradientsParams::from_grads`), not on
        // the model's autodiff device: the fused optimizer updates take only those (Inception
        // v3's update took 32-38 ms a step through Burn's ops, 21-27 through them;
        // `bench_mpi`'s timelines, 2026-11-29).
        let device = device.clone().inner();
        for (slots, values) in self.buckets.iter().zip(sums.drain(1..)) {
            buckets::unpack(
                &mut flat,
                slots.iter().copied(),
                &self.sizes,
                values,
                &device,
            );
        }
        let flat = flat
            .into_iter()
            .map(|t| t.expect("every slot is in a bucket"));
        Ok(Some(layout.unflatten_where(flat.collect(), &had)))
    }
}

/// The exchange thread: the weight, then each bucket as the towers complete it, then which
/// gradients the rank had. Returns the summed buckets divided by the summed weights (the mean
/// gradient), the weights' sum first, the ranks' (weighted) counts of each gradient last.
fn exchange(
    processes: &dyn crate::cross_process::CrossProcess,
    mut gathering: Gathering,
    buckets: &[Vec<usize>],
    sizes: &[usize],
    weight: f64,
    timeline: &Timeline,
) -> Result<Vec<Vec<f32>>, Cause> {
    let values: Vec<usize> = buckets
        .iter()
        .map(|slots| slots.iter().map(|&s| sizes[s]).sum())
        .collect();
    let all: Vec<usize> = std::iter::once(1)
        .chain(values)
        .chain([sizes.len()])
        .collect();
    let mut sums = vec![Vec::new(); all.len()];
    // The summed weights, once bucket 0 has arrived: later buckets are divided by it as they
    // are copied out of MPI's buffers (one pass instead of two); any that came before it are
    // divided when it comes.
    let mut total = None;
    // When each bucket went to the ranks, for the timeline.
    let posted = vec![Cell::new(Instant::now()); all.len()];
    let mut ready = |k: usize| {
        let bucket = match k {
            0 => Some(vec![weight as f32]),
            // Asked for after every other bucket was complete: every gradient is in.
            k if k > buckets.len() => Some(presence(&gathering.present)),
            k => gathering.bucket(&buckets[k - 1], sizes),
        };
        if bucket.is_some() {
            posted[k].set(Instant::now());
        }
        bucket
    };
    let mut done = |k: usize, values: &[f32]| {
        match (k, total) {
            (0, _) => {
                let weights = values[0];
                for early in sums.iter_mut().skip(1) {
                    early.iter_mut().for_each(|v| *v /= weights);
                }
                total = Some(weights);
            }
            (_, Some(total)) => sums[k] = values.iter().map(|v| v / total).collect(),
            (_, None) => sums[k] = values.to_vec(),
        }
        let name = format!("bucket {k} across ranks");
        timeline.record(name, Track::Exchange, posted[k].get(), Instant::now());
    };
    processes.sum_gradient_buckets(&all, &mut ready, &mut done);
    match gathering.error {
        Some(error) => Err(error),
        None => Ok(sums),
    }
}

/// What the taps reported so far.
struct Gathering {
    receiver: Receiver<Tapped>,
    /// The towers whose backward pass is over.
    finished: Vec<bool>,
    /// Whether any gradient was reported yet (backward has begun).
    reported: bool,
    /// `parts[slot][tower]`: the tower's gradient for the slot, once reported.
    parts: Vec<Vec<Option<Vec<f32>>>>,
    /// `kept[tower][slot]`: the cycle's earlier micro-batches (empty without accumulation).
    kept: Vec<Vec<Tensor<1>>>,
    /// `present[slot]`: whether any tower had the slot's gradient, in this micro-batch or a
    /// kept one.
    present: Vec<bool>,
    /// The first gradient that could not be read. The exchange goes on with zeros in its
    /// place, as every rank must finish it, and the step then fails.
    error: Option<Cause>,
}

impl Gathering {
    /// The bucket of `slots`, once every tower has reported them; `None` if it is not
    /// complete after waiting up to [`PATIENCE`] for more reports.
    fn bucket(&mut self, slots: &[usize], sizes: &[usize]) -> Option<Vec<f32>> {
        loop {
            while let Ok(report) = self.receiver.try_recv() {
                self.take(report);
            }
            if self.complete(slots) {
                return Some(self.sum(slots, sizes));
            }
            // Until backward reports its first gradient (through the forward pass), nothing
            // of this rank's is on its way: no need to poll MPI often, taking cores from it.
            let patience = if self.reported {
                PATIENCE
            } else {
                FORWARD_PATIENCE
            };
            match self.receiver.recv_timeout(patience) {
                Ok(report) => self.take(report),
                Err(RecvTimeoutError::Timeout) => return None,
                // Every tap is gone, so every tower has finished.
                Err(RecvTimeoutError::Disconnected) => self.finished.fill(true),
            }
        }
    }

    fn take(&mut self, report: Tapped) {
        match report {
            Tapped::Gradient { tower, slot, read } => {
                self.reported = true;
                match read() {
                    Ok(values) => self.parts[slot][tower] = Some(values),
                    Err(error) => {
                        (self.error).get_or_insert(While::doing(format!("tower {tower}"))(error));
                    }
                }
            }
            Tapped::Finished { tower } => self.finished[tower] = true,
        }
    }

    /// Whether every tower reported `slots`, or finished without a gradient for them.
    fn complete(&self, slots: &[usize]) -> bool {
        slots.iter().all(|&slot| {
            (self.parts[slot].iter().zip(&self.finished))
                .all(|(part, done)| part.is_some() || *done)
        })
    }

    /// The bucket of `slots`: each slot's gradients summed over the towers in tower order,
    /// earlier micro-batches included. A gradient never reported counts as zeros.
    fn sum(&mut self, slots: &[usize], sizes: &[usize]) -> Vec<f32> {
        let mut bucket = Vec::with_capacity(slots.iter().map(|&s| sizes[s]).sum());
        for &slot in slots {
            self.present[slot] |= self.parts[slot].iter().any(Option::is_some);
            let start = bucket.len();
            // Tower by tower, each tower's kept gradient before its new one.
            let mut terms = Vec::new();
            for tower in 0..self.parts[slot].len() {
                if let Some(kept) = self.kept.get(tower) {
                    terms.push(read_kept(&kept[slot]));
                }
                terms.extend(self.parts[slot][tower].take());
            }
            let mut terms = terms.into_iter();
            match terms.next() {
                Some(first) => bucket.extend_from_slice(&first),
                None => bucket.resize(start + sizes[slot], 0.0),
            }
            for term in terms {
                add(&mut bucket[start..], &term);
            }
        }
        bucket
    }
}

fn add(out: &mut [f32], values: &[f32]) {
    out.iter_mut().zip(values).for_each(|(o, v)| *o += v);
}

fn read_kept(kept: &Tensor<1>) -> Vec<f32> {
    kept.to_data()
        .convert::<f32>()
        .try_into_vec::<f32>()
        .expect("converted to f32")
}
