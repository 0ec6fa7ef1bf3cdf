//! Towers in several processes: one process (rank) per machine, each with towers of its own,
//! the way Horovod trains (hierarchical: towers first, then ranks).
//!
//! Every rank takes its own share of each global batch, its towers reduce it to the local
//! mean gradient as usual, and then the ranks exchange those means, weighted by the examples
//! each rank saw, so every rank applies the same update: the mean gradient of the global batch.
//! Batch-norm statistics are averaged across ranks the same way, after the towers' own
//! [`BatchNormSync`](crate::BatchNormSync). At the start, every rank takes rank 0's weights.
//!
//! [`CrossProcess`] is the exchange this needs, on flat tensors; the `mpi` feature implements it
//! over the system's MPI (`mpi/`). This file keeps the towers free of any transport.

use std::sync::Arc;

use burn::module::{Module, ModuleVisitor, Param};
use burn::optim::GradientsParams;
use burn::tensor::{Device, Tensor};

use crate::buckets;
use crate::error::{Error, ErrorChain, Result};
use crate::reduce::{Layout, presence};
use crate::running_state::{self, RunningStats, Selection};
use crate::stderr_line::eprint_line;

/// The processes (ranks) of one data-parallel job, and their two collectives.
///
/// Every rank calls the collectives in the same order with lists of the same lengths and sizes.
/// An exchange that fails or times out ends the whole job, on every rank, with an error that
/// names the rank it waited for when known: after a collective failed on one rank the others
/// cannot go on (MPI's default, "errors are fatal"), so the collectives return no error.
pub trait CrossProcess: Send + Sync {
    /// This process's rank, from 0.
    fn rank(&self) -> usize;

    /// How many ranks the job has.
    fn size(&self) -> usize;

    /// `sum_r weight_r * tensors_r / sum_r weight_r` over the ranks, element-wise, on `device`.
    /// `what` names the exchange in errors (e.g. "gradients").
    fn weighted_mean(
        &self,
        what: &str,
        tensors: Vec<Tensor<1>>,
        weight: f64,
        device: &Device,
    ) -> Vec<Tensor<1>>;

    /// [`weighted_mean`](Self::weighted_mean) of gradients, which a transport may send in
    /// fewer bits (over MPI, as `MpiConfig::wire` says); the weights stay
    /// exact.
    fn weighted_mean_of_gradients(
        &self,
        tensors: Vec<Tensor<1>>,
        weight: f64,
        device: &Device,
    ) -> Vec<Tensor<1>> {
        self.weighted_mean("gradients", tensors, weight, device)
    }

    /// Rank 0's `tensors`, on every rank, on `device`.
    fn broadcast(&self, what: &str, tensors: Vec<Tensor<1>>, device: &Device) -> Vec<Tensor<1>>;

    /// Sums buckets of values over the ranks, element-wise, as this rank's become ready: the
    /// exchange that overlaps backward. Bucket `k` has `sizes[k]` values. `ready(k)` returns
    /// this rank's bucket `k` once it is complete and `None` until then (it may wait a little
    /// before saying so; it is asked again), and is asked for bucket `k` only after bucket
    /// `k - 1` was handed over. `done(k, sums)` takes each bucket's sum as soon as it has
    /// arrived, in any order.
    fn sum_buckets(
        &self,
        what: &str,
        sizes: &[usize],
        ready: &mut dyn FnMut(usize) -> Option<Vec<f32>>,
        done: &mut dyn FnMut(usize, &[f32]),
    );

    /// [`sum_buckets`](Self::sum_buckets) of gradients, bucket 0 being the ranks' weights:
    /// the other buckets may travel in fewer bits, as in
    /// [`weighted_mean_of_gradients`](Self::weighted_mean_of_gradients).
    fn sum_gradient_buckets(
        &self,
        sizes: &[usize],
        ready: &mut dyn FnMut(usize) -> Option<Vec<f32>>,
        done: &mut dyn FnMut(usize, &[f32]),
    ) {
        self.sum_buckets("gradients", sizes, ready, done);
    }

    /// Every rank's `bytes`, in rank order, on every rank (e.g. each rank's input position, for
    /// rank 0's checkpoint). Small messages: built on [`sum_buckets`](Self::sum_buckets), as
    /// floats (a byte is exact in `f32`): each rank's length (as its four bytes), then each
    /// rank's bytes in its own stretch of zeros. It depends on no setting of the transport, so
    /// ranks can compare their settings with it.
    fn all_gather(&self, what: &str, bytes: &[u8]) -> Vec<Vec<u8>> {
        let (rank, ranks) = (self.rank(), self.size());
        let sum = |values: Vec<f32>| {
            let mut out = Vec::new();
            let mut values = Some(values);
            let sizes = [values.as_ref().map_or(0, Vec::len)];
            self.sum_buckets(what, &sizes, &mut |_| values.take(), &mut |_, sums| {
                out = sums.to_vec()
            });
            out
        };
        let length = u32::try_from(bytes.len()).expect("an all-gather of under 4 GB per rank");
        let mut lengths = vec![0.0; 4 * ranks];
        for (slot, byte) in lengths[4 * rank..].iter_mut().zip(length.to_le_bytes()) {
            *slot = f32::from(byte);
        }
        let lengths: Vec<usize> = (sum(lengths).chunks_exact(4))
            .map(|b| u32::from_le_bytes([b[0] as u8, b[1] as u8, b[2] as u8, b[3] as u8]) as usize)
            .collect();
        let start: usize = lengths[..rank].iter().sum();
        let mut all = vec![0.0; lengths.iter().sum()];
        for (slot, byte) in all[start..].iter_mut().zip(bytes) {
            *slot = f32::from(*byte);
        }
        let all = sum(all);
        let mut offset = 0;
        (lengths.iter())
            .map(|&len| {
                let part = all[offset..offset + len].iter().map(|&b| b as u8).collect();
                offset += len;
                part
            })
            .collect()
    }

    /// The transport's settings that every rank must share for their exchanges to pair up, as
    /// (name, value): compared when the ranks join ([`Towers::across_processes`]), so that ranks
    /// that differ are told so at once, naming the setting, rather than posting different
    /// collectives. None unless the transport has such settings.
    ///
    /// [`Towers::across_processes`]: crate::Towers::across_processes
    fn settings(&self) -> Vec<(&'static str, String)> {
        Vec::new()
    }

    /// How long an exchange waits for the slowest rank before ending the job, if it has such a
    /// deadline.
    fn deadline(&self) -> Option<std::time::Duration> {
        None
    }

    /// The size in bytes of one gradient bucket of [`sum_buckets`](Self::sum_buckets): about
    /// this many bytes of gradients travel as one message. 25 MB, PyTorch DDP's default,
    /// unless the transport says otherwise.
    fn bucket_bytes(&self) -> usize {
        25 << 20
    }

    /// Whether gradients travel in fewer bits than they are computed in, so that their sums
    /// can overflow on the way (MPI's 16-bit wire formats): the towers then check the result
    /// and skip an update whose gradient is not finite. False unless the transport says so.
    fn gradients_may_overflow(&self) -> bool {
        false
    }

    /// Whether `flag` is set on any rank (e.g. a stop asked for on one rank, so that all stop
    /// after the same step).
    fn any(&self, what: &str, flag: bool) -> bool;

    /// Ends the job on every rank after printing `message` (e.g. this rank's error), rather
    /// than leaving the others waiting in an exchange this rank will never reach. No destructor
    /// runs: an implementation removes this process's listed temporary files first
    /// (`towers_multigpu::remove_scratch`).
    fn abort(&self, message: &str) -> !;
}

/// A shared handle on the job's processes, as [`Towers`](crate::Towers) holds it.
pub type Processes = Arc<dyn CrossProcess>;

/// Whether an MPI launcher (`mpirun`, `mpiexec`, `srun` with PMI/PMIx) started this process,
/// as one rank of a job; otherwise it runs alone.
pub fn launched_by_mpi() -> bool {
    [
        "OMPI_COMM_WORLD_SIZE",
        "PMI_SIZE",
        "PMIX_RANK",
        "MPI_LOCALNRANKS",
    ]
    .iter()
    .any(|name| std::env::var_os(name).is_some())
}

/// The mean gradient of the global batch, from this rank's mean gradient over a batch of
/// `weight` (its examples, or what the loss is averaged over); `None`, the same on every rank,
/// when it travelled in fewer bits and is not finite (see [`skipped_not_finite`]).
pub(crate) fn mean_gradients(
    processes: Option<&dyn CrossProcess>,
    layout: &Layout,
    grads: GradientsParams,
    weight: f64,
    device: &Device,
) -> Option<GradientsParams> {
    match processes {
        Some(p) if p.size() > 1 => {
            // Plain tensors, as backward's gradients are: see `OverlappedExchange::finish`.
            let device = &device.clone().inner();
            // Which gradients the rank had travels with them, as one more tensor (see
            // `Layout::unflatten_where`).
            let (mut flat, present) = layout.flatten_present(grads, device);
            flat.push(Tensor::from_floats(presence(&present).as_slice(), device));
            let mut mean = p.weighted_mean_of_gradients(flat, weight, device);
            let had = mean.pop().expect("the presence, last").into_data();
            let had = had
                .convert::<f32>()
                .try_into_vec::<f32>()
                .expect("converted to f32");
            let finite = || {
                buckets::joined(mean.clone())
                    .is_finite()
                    .all()
                    .into_scalar()
            };
            match !p.gradients_may_overflow() || finite() {
                true => Some(layout.unflatten_where(mean, &had)),
                false => skipped_not_finite(p),
            }
        }
        _ => Some(grads),
    }
}

/// Says, on rank 0, that the gradient summed across ranks is not finite and the update is
/// skipped on every rank (each rank sees the same sums, so each skips); `None`.
pub(crate) fn skipped_not_finite<T>(processes: &dyn CrossProcess) -> Option<T> {
    if processes.rank() == 0 {
        eprint_line(
            "warning: the gradient summed across ranks is not finite (a 16-bit wire format \
             overflows beyond its range: f16 at 65,504); this update is skipped on every rank",
        );
    }
    None
}

/// `outcome`, this rank's step so far, made the same on every rank: when any rank's step
/// failed (a tower, or its part of the exchange), every rank's step fails, so that no rank
/// updates without the others. The failing rank keeps its own error; the others get one
/// naming the failed ranks and their errors. One small exchange per step (a flag per rank),
/// and one more only when a step failed.
pub(crate) fn agreed<T>(processes: Option<&dyn CrossProcess>, outcome: Result<T>) -> Result<T> {
    let Some(p) = processes.filter(|p| p.size() > 1) else {
        return outcome;
    };
    let mut failed = vec![0.0; p.size()];
    failed[p.rank()] = f32::from(u8::from(outcome.is_err()));
    let mut sums = Vec::new();
    let mut flags = Some(failed);
    let what = "whether each rank's step failed";
    p.sum_buckets(
        what,
        &[p.size()],
        &mut |_| flags.take(),
        &mut |_, values| sums = values.to_vec(),
    );
    if sums.iter().all(|&f| f == 0.0) {
        return outcome;
    }
    let mine = outcome.as_ref().err().map(|e| ErrorChain(e).to_string());
    let errors = p.all_gather(
        "the failed ranks' errors",
        mine.unwrap_or_default().as_bytes(),
    );
    outcome?;
    let failed: Vec<String> = (errors.iter().enumerate())
        .filter(|(r, _)| sums[*r] != 0.0)
        .map(|(r, e)| format!("rank {r}: {}", String::from_utf8_lossy(e)))
        .collect();
    Err(Error::Processes(format!(
        "another rank's step failed, so no rank updated: {}",
        failed.join("; ")
    )))
}

/// `model` with its running state (`selection`) averaged across ranks, weighted by each rank's
/// `weight`.
pub(crate) fn mean_running_stats<M: Module>(
    processes: Option<&dyn CrossProcess>,
    model: M,
    selection: &Selection,
    weight: f64,
    device: &Device,
) -> M {
    match processes {
        Some(p) if p.size() > 1 => {
            let stats = running_state::read(&model, selection);
            let values = stats.clone().into_device(device).into_values();
            let mean = p.weighted_mean("batch-norm statistics", values, weight, device);
            running_state::write(model, &stats.with_values(mean))
        }
        _ => model,
    }
}

/// `model` with rank 0's weights and statistics, after checking that every rank holds a model
/// of the same shapes and the same `settings` (name, value: those of the towers that decide
/// which exchanges a step makes, and the transport's own, [`CrossProcess::settings`]).
///
/// The check comes first and exchanges through [`CrossProcess::all_gather`], which no setting
/// changes: every rank sees every rank's card, so every rank returns the same error.
pub(crate) fn from_rank_zero<M: Module>(
    processes: &dyn CrossProcess,
    model: M,
    settings: Vec<(&'static str, String)>,
    device: &Device,
) -> Result<M> {
    let tensors: RunningStats = running_state::read_all(&model).into_device(device);
    let mut card = settings;
    card.extend(processes.settings());
    card.push(("model", shapes_of(&model)));
    let what = "the ranks' settings";
    same_settings(processes, what, &card).map_err(|difference| {
        Error::Processes(format!(
            "the ranks disagree, so their exchanges cannot pair up: {difference}"
        ))
    })?;
    let values = processes.broadcast("the model's weights", tensors.clone().into_values(), device);
    Ok(running_state::write(model, &tensors.with_values(values)))
}

/// Checks that every rank holds the same `settings` (name, value), exchanged as `what`
/// through [`CrossProcess::all_gather`], which no setting changes: every rank sees every
/// rank's, so every rank returns the same `Err`, which lists each setting whose value differs
/// with every rank's value (`wire format: rank 0 F32, rank 1 F16`). A trainer checks its own
/// settings so (its schedule, its optimizer), beside those of the towers
/// ([`Towers::across_processes`](crate::Towers::across_processes)).
pub fn same_settings(
    processes: &dyn CrossProcess,
    what: &str,
    settings: &[(&str, String)],
) -> std::result::Result<(), String> {
    let text: String = settings
        .iter()
        .map(|(k, v)| format!("{k}\t{v}\n"))
        .collect();
    let cards = processes.all_gather(what, text.as_bytes());
    let cards: Vec<String> = (cards.iter())
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect();
    disagreement(&cards).map_or(Ok(()), Err)
}

/// Each float tensor's shape, in the module's order: `64x3x3x3 64 ...`.
fn shapes_of<M: Module>(model: &M) -> String {
    struct Shapes(Vec<String>);
    impl ModuleVisitor for Shapes {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            let dims = param.val().dims().map(|d| d.to_string());
            self.0.push(dims.join("x"));
        }
    }
    let mut shapes = Shapes(Vec::new());
    model.visit(&mut shapes);
    shapes.0.join(" ")
}

/// What differs between the ranks' `cards` (lines of `name\tvalue`), in words: every setting
/// whose value differs, with each rank's value, in rank 0's order; `None` when all agree.
fn disagreement(cards: &[String]) -> Option<String> {
    let parsed: Vec<Vec<(&str, &str)>> = (cards.iter())
        .map(|c| c.lines().filter_map(|l| l.split_once('\t')).collect())
        .collect();
    let value = |rank: usize, name: &str| {
        (parsed[rank].iter())
            .find(|(k, _)| *k == name)
            .map_or("(none)", |(_, v)| *v)
    };
    // Every rank's names, rank 0's first: a setting only another rank has (another version of
    // the program) differs too.
    let mut names: Vec<&str> = Vec::new();
    for (name, _) in parsed.iter().flatten() {
        if !names.contains(name) {
            names.push(name);
        }
    }
    let mut differences = Vec::new();
    for name in &names {
        let values: Vec<&str> = (0..cards.len()).map(|r| value(r, name)).collect();
        let Some(other) = values.iter().position(|v| *v != values[0]) else {
            continue;
        };
        differences.push(match *name {
            "model" => models_differ(other, values[other], values[0]),
            _ => {
                let each: Vec<String> = (values.iter().enumerate())
                    .map(|(r, v)| format!("rank {r} {v}"))
                    .collect();
                format!("{name}: {}", each.join(", "))
            }
        });
    }
    (!differences.is_empty()).then(|| differences.join("; "))
}

/// How rank `rank`'s model (its tensors' shapes, `theirs`) differs from rank 0's (`zeros`).
fn models_differ(rank: usize, theirs: &str, zeros: &str) -> String {
    let shapes = |s: &'_ str| {
        s.split(' ')
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let (theirs, zeros) = (shapes(theirs), shapes(zeros));
    let values = |shapes: &[String]| -> u64 {
        (shapes.iter())
            .map(|s| {
                s.split('x')
                    .map(|d| d.parse::<u64>().unwrap_or(0))
                    .product::<u64>()
            })
            .sum()
    };
    if theirs.len() != zeros.len() {
        return format!(
            "rank {rank}'s model has {} tensors of {} values, rank 0's {} of {}: every rank \
             must build the same model",
            theirs.len(),
            values(&theirs),
            zeros.len(),
            values(&zeros)
        );
    }
    let i = (0..theirs.len())
        .find(|&i| theirs[i] != zeros[i])
        .unwrap_or(0);
    format!(
        "rank {rank}'s model's tensor {i} is {}, rank 0's {}: every rank must build the same \
         model",
        theirs[i], zeros[i]
    )
}

#[cfg(test)]
mod tests {
    use super::{disagreement, models_differ};

    #[test]
    fn cards_that_differ_name_each_setting_and_rank() {
        let card =
            |wire: &str, model: &str| format!("overlap\ttrue\nwire\t{wire}\nmodel\t{model}\n");
        let same = [card("F32", "2x3 3"), card("F32", "2x3 3")];
        assert_eq!(disagreement(&same), None);
        let cards = [
            card("F32", "2x3 3"),
            card("F32", "2x3 3"),
            card("F16", "2x3 4"),
        ];
        assert_eq!(
            disagreement(&cards).unwrap(),
            "wire: rank 0 F32, rank 1 F32, rank 2 F16; rank 2's model's tensor 1 is 4, \
             rank 0's 3: every rank must build the same model"
        );
        // A setting only rank 1 has (another version of the program).
        let newer = format!("{}protocol\t2\n", card("F32", "2x3 3"));
        assert_eq!(
            disagreement(&[card("F32", "2x3 3"), newer]).unwrap(),
            "protocol: rank 0 (none), rank 1 2"
        );
        assert_eq!(
            models_differ(1, "2x3 3 5", "2x3 3"),
            "rank 1's model has 3 tensors of 14 values, rank 0's 2 of 9: every rank must \
             build the same model"
        );
    }
}
