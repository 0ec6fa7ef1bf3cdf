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

use burn::module::Module;
use burn::optim::GradientsParams;
use burn::tensor::{Device, Tensor, TensorData};

use crate::error::{Error, Result};
use crate::reduce::Layout;
use crate::running_state::{self, RunningStats, Selection};

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
    /// floats (a byte is exact in `f32`): each rank's length, then each rank's bytes in its
    /// own stretch of zeros.
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
        let mut lengths = vec![0.0; ranks];
        lengths[rank] = bytes.len() as f32;
        let lengths: Vec<usize> = sum(lengths).into_iter().map(|l| l as usize).collect();
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

    /// Whether `flag` is set on any rank (e.g. a stop asked for on one rank, so that all stop
    /// after the same step).
    fn any(&self, what: &str, flag: bool) -> bool;

    /// Ends the job on every rank after printing `message` (e.g. this rank's error), rather
    /// than leaving the others waiting in an exchange this rank will never reach.
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
/// `weight` (its examples, or what the loss is averaged over).
pub(crate) fn mean_gradients(
    processes: Option<&dyn CrossProcess>,
    layout: &Layout,
    grads: GradientsParams,
    weight: f64,
    device: &Device,
) -> GradientsParams {
    match processes {
        Some(p) if p.size() > 1 => {
            let flat = layout.flatten(grads, device);
            layout.unflatten(p.weighted_mean_of_gradients(flat, weight, device))
        }
        _ => grads,
    }
}

/// `model` with its running state (`selection`) averaged across ranks, weighted by
/// `examples`.
pub(crate) fn mean_running_stats<M: Module>(
    processes: Option<&dyn CrossProcess>,
    model: M,
    selection: &Selection,
    examples: usize,
    device: &Device,
) -> M {
    match processes {
        Some(p) if p.size() > 1 => {
            let stats = running_state::read(&model, selection);
            let values = stats.clone().into_device(device).into_values();
            let mean = p.weighted_mean("batch-norm statistics", values, examples as f64, device);
            running_state::write(model, &stats.with_values(mean))
        }
        _ => model,
    }
}

/// `model` with rank 0's weights and statistics, after checking that every rank holds a model
/// of the same sizes (the exchanges would otherwise mix up tensors).
pub(crate) fn from_rank_zero<M: Module>(
    processes: &dyn CrossProcess,
    model: M,
    device: &Device,
) -> Result<M> {
    let tensors: RunningStats = running_state::read_all(&model).into_device(device);
    let values = tensors.clone().into_values();
    let mine = shape_summary(&values);
    let summary = Tensor::<1>::from_data(TensorData::new(mine.to_vec(), [3]), device);
    let theirs = processes.broadcast("the model's sizes", vec![summary], device);
    let theirs: Vec<f32> = theirs[0].to_data().iter::<f32>().collect();
    if theirs != mine {
        let total = |s: &[f32]| s[1] as u64 * (1 << 24) + s[2] as u64;
        return Err(Error::Processes(format!(
            "rank {}'s model has {} tensors of {} values, rank 0's {} of {}: \
             every rank must build the same model",
            processes.rank(),
            mine[0],
            total(&mine),
            theirs[0],
            total(&theirs)
        )));
    }
    let values = processes.broadcast("the model's weights", values, device);
    Ok(running_state::write(model, &tensors.with_values(values)))
}

/// The number of tensors and of values (as two 24-bit halves), exact in `f32`.
fn shape_summary(tensors: &[Tensor<1>]) -> [f32; 3] {
    let total: usize = tensors.iter().map(|t| t.dims()[0]).sum();
    [
        tensors.len() as f32,
        (total >> 24) as f32,
        (total & 0xFF_FFFF) as f32,
    ]
}
