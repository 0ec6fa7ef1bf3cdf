//! [`CrossProcess`] over the system's MPI (the `mpi` feature): one rank per process, started by
//! `mpirun -np R ...` or SLURM's `srun`, the ranks finding each other through MPI alone.
//!
//! Each exchange packs the tensors into buckets ([`MpiConfig::bucket_bytes`]) and hands each
//! bucket to MPI as one non-blocking all-reduce (or broadcast), reading the next bucket from the
//! device while the last one travels and writing each result back as soon as it arrives. How
//! the bytes travel is MPI's choice: Open MPI's all-reduce of large messages is a ring or
//! Rabenseifner's algorithm, about `2 (R - 1) / R` times the bucket per rank each way.
//!
//! The weighted mean needs no second round: each rank multiplies its bucket by its weight on the
//! host, the weights travel as one more (first) bucket of one value, and each result is divided
//! by their sum when it is written back.

mod config;
mod exchange;

use std::collections::HashSet;
use std::ops::Range;
use std::sync::Mutex;

use burn::tensor::{Device, Tensor};
use mpi::Threading;
use mpi::environment::Universe;
use mpi::topology::SimpleCommunicator;
use mpi::traits::Communicator;

pub use config::MpiConfig;

use crate::buckets;
use crate::cross_process::CrossProcess;
use crate::error::{Error, Result};
use crate::stderr_line::eprint_line;
use crate::wire_format::Wire;
use exchange::{Collective, Exchange};

/// This process's place in an MPI job. Holding it keeps MPI initialized; dropping it finalizes
/// MPI, after which it cannot be initialized again in this process (dropping it while
/// panicking ends the whole job instead). A rank that returns an error, rather than panicking,
/// should end the job with [`CrossProcess::abort`], as the trainer does.
pub struct Mpi {
    /// A duplicate of the world for the all-gathers of 16-bit buckets (see `Exchange`). Before
    /// `universe`: fields drop in order, and the communicator must be freed before MPI is
    /// finalized.
    gathers: Gathers,
    universe: Universe,
    rank: usize,
    size: usize,
    config: MpiConfig,
    /// The number of exchanges so far and their receive buffers. The lock also keeps MPI calls
    /// to one thread at a time, as `Threading::Serialized` requires.
    exchanges: Mutex<Exchanges>,
}

/// How many times the timeout the first exchange of each kind may wait: it follows the first
/// step, whose first use of each kernel compiles and tunes it, minutes on a GPU, and maybe on
/// one rank only (the others found their kernels tuned in their cache), which the others then
/// wait for.
const FIRST_OF_A_KIND: u32 = 4;

/// What one exchange leaves the next.
#[derive(Default)]
struct Exchanges {
    number: u64,
    /// The kinds of exchange made so far (`gradients`, `the model's weights`, ...): the first
    /// of each kind waits [`FIRST_OF_A_KIND`] times the timeout.
    kinds: HashSet<String>,
    /// The last exchange's receive buffers: the next one with buckets of the same sizes (every
    /// gradient exchange after the first) writes into memory already touched, rather than
    /// zeroing and faulting in a new gradient's worth each time.
    buffers: Vec<Vec<f32>>,
}

/// A rank that panics ends the job rather than finalizing MPI: `MPI_Finalize` would wait for
/// the other ranks, which wait for this one in their next exchange.
impl Drop for Mpi {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.abort("panicked");
        }
    }
}

/// Ends the job on every rank with `code`. `MPI_Abort` runs no destructor, so this process's
/// listed temporary files are removed first (`crate::scratch`).
fn abort_job(world: &impl Communicator, code: i32) -> ! {
    crate::scratch::remove_scratch();
    world.abort(code)
}

/// The communicator of the 16-bit buckets' all-gathers.
struct Gathers(SimpleCommunicator);

// SAFETY: an MPI communicator is a handle valid in the whole process. `Mpi` makes every MPI
// call under its `exchanges` lock (`Threading::Serialized`), so no two threads use it at once.
unsafe impl Send for Gathers {}
// SAFETY: as for `Send`: every use of the communicator is under that lock.
unsafe impl Sync for Gathers {}

impl std::fmt::Debug for Mpi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mpi")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Mpi {
    /// Initializes MPI and joins the job.
    ///
    /// # Errors
    ///
    /// [`Error::Processes`] when MPI was initialized before in this process, or does not allow
    /// calls from more than one thread (one at a time).
    pub fn init(config: MpiConfig) -> Result<Self> {
        let (universe, threading) = mpi::initialize_with_threading(Threading::Serialized)
            .ok_or_else(|| {
                Error::Processes("MPI was already initialized in this process".into())
            })?;
        if matches!(threading, Threading::Single | Threading::Funneled) {
            return Err(Error::Processes(format!(
                "this MPI offers threading level {threading:?}; the trainer needs Serialized \
                 (MPI calls from any thread, one at a time)"
            )));
        }
        let world = universe.world();
        let (rank, size) = (world.rank() as usize, world.size() as usize);
        let gathers = Gathers(world.duplicate());
        Ok(Self {
            universe,
            gathers,
            rank,
            size,
            config,
            exchanges: Mutex::new(Exchanges::default()),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &MpiConfig {
        &self.config
    }

    /// Runs one exchange of `sizes`-long buckets (see [`Exchange::run`]).
    fn exchange(
        &self,
        what: &str,
        collective: impl Fn(usize) -> Collective,
        sizes: &[usize],
        ready: impl FnMut(usize) -> Option<Vec<f32>>,
        done: impl FnMut(usize, &[f32]),
    ) {
        let mut state = self.exchanges.lock().unwrap_or_else(|e| e.into_inner());
        state.number += 1;
        let timeout = match state.kinds.insert(what.to_string()) {
            true => self.config.timeout * FIRST_OF_A_KIND,
            false => self.config.timeout,
        };
        let world = self.universe.world();
        let exchange = Exchange {
            world: &world,
            gathers: &self.gathers.0,
            what,
            number: state.number,
            timeout,
        };
        exchange.run(collective, sizes, &mut state.buffers, ready, done);
    }

    /// The weighted mean of `tensors` over the ranks, their values travelling as `wire` says
    /// (the weights always in f32).
    fn weighted_mean_in(
        &self,
        wire: Wire,
        what: &str,
        tensors: Vec<Tensor<1>>,
        weight: f64,
        device: &Device,
    ) -> Vec<Tensor<1>> {
        let (plan, bucket_sizes) = self.buckets(&tensors);
        let sizes: Vec<usize> = tensors.iter().map(|t| t.dims()[0]).collect();
        // Bucket 0 carries the weights; bucket k + 1 is the plan's bucket k.
        let all_sizes: Vec<usize> = std::iter::once(1).chain(bucket_sizes).collect();
        let mut out: Vec<Option<Tensor<1>>> = vec![None; tensors.len()];
        let mut total = None;
        // Buckets that arrive before the weights (MPI need not finish requests in order).
        let mut early: Vec<(usize, Vec<f32>)> = Vec::new();
        let read = |k: usize| match k {
            0 => Some(vec![weight as f32]),
            k => {
                let mut values = read_bucket(&tensors, plan[k - 1].clone());
                values.iter_mut().for_each(|v| *v *= weight as f32);
                Some(values)
            }
        };
        let done = |k: usize, values: &[f32]| {
            match (k, total) {
                (0, _) => total = Some(values[0]),
                // Divided while copied out of MPI's buffer: one pass over the bucket.
                (k, Some(total)) => {
                    let mean = values.iter().map(|v| v / total).collect();
                    buckets::unpack(&mut out, plan[k - 1].clone(), &sizes, mean, device);
                }
                (k, None) => early.push((k - 1, values.to_vec())),
            }
            if let Some(total) = total {
                for (b, values) in early.drain(..) {
                    let mean = values.into_iter().map(|v| v / total).collect();
                    buckets::unpack(&mut out, plan[b].clone(), &sizes, mean, device);
                }
            }
        };
        self.exchange(what, weights_then(wire), &all_sizes, read, done);
        out.into_iter()
            .map(|t| t.expect("every bucket was written back"))
            .collect()
    }

    /// The buckets of `tensors` and their sizes in values.
    fn buckets(&self, tensors: &[Tensor<1>]) -> (Vec<Range<usize>>, Vec<usize>) {
        let sizes: Vec<usize> = tensors.iter().map(|t| t.dims()[0]).collect();
        let values = (self.config.bucket_bytes / 4).max(1);
        let plan = buckets::plan(&sizes, values, values);
        let values = plan.iter().map(|r| sizes[r.clone()].iter().sum()).collect();
        (plan, values)
    }
}

/// Sums whose bucket 0 (the ranks' weights) travels exact and the others as `wire` says.
fn weights_then(wire: Wire) -> impl Fn(usize) -> Collective {
    move |k| Collective::Sum(if k == 0 { Wire::F32 } else { wire })
}

/// Bucket `range` of `tensors`, read from the device as one run of `f32`.
fn read_bucket(tensors: &[Tensor<1>], range: Range<usize>) -> Vec<f32> {
    buckets::joined(tensors[range].to_vec())
        .into_data()
        .convert::<f32>()
        .try_into_vec::<f32>()
        .expect("converted to f32")
}

impl CrossProcess for Mpi {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn weighted_mean(
        &self,
        what: &str,
        tensors: Vec<Tensor<1>>,
        weight: f64,
        device: &Device,
    ) -> Vec<Tensor<1>> {
        self.weighted_mean_in(Wire::F32, what, tensors, weight, device)
    }

    fn weighted_mean_of_gradients(
        &self,
        tensors: Vec<Tensor<1>>,
        weight: f64,
        device: &Device,
    ) -> Vec<Tensor<1>> {
        self.weighted_mean_in(self.config.wire, "gradients", tensors, weight, device)
    }

    fn any(&self, what: &str, flag: bool) -> bool {
        let mut sum = 0.0;
        let read = |_| Some(vec![f32::from(u8::from(flag))]);
        let f32_sum = |_| Collective::Sum(Wire::F32);
        self.exchange(what, f32_sum, &[1], read, |_, v| sum = v[0]);
        sum > 0.0
    }

    fn sum_buckets(
        &self,
        what: &str,
        sizes: &[usize],
        ready: &mut dyn FnMut(usize) -> Option<Vec<f32>>,
        done: &mut dyn FnMut(usize, &[f32]),
    ) {
        self.exchange(what, |_| Collective::Sum(Wire::F32), sizes, ready, done);
    }

    fn sum_gradient_buckets(
        &self,
        sizes: &[usize],
        ready: &mut dyn FnMut(usize) -> Option<Vec<f32>>,
        done: &mut dyn FnMut(usize, &[f32]),
    ) {
        let collective = weights_then(self.config.wire);
        self.exchange("gradients", collective, sizes, ready, done);
    }

    fn bucket_bytes(&self) -> usize {
        self.config.bucket_bytes
    }

    fn gradients_may_overflow(&self) -> bool {
        self.config.wire != Wire::F32
    }

    fn settings(&self) -> Vec<(&'static str, String)> {
        vec![
            ("wire format", format!("{:?}", self.config.wire)),
            ("bucket bytes", self.config.bucket_bytes.to_string()),
        ]
    }

    fn deadline(&self) -> Option<std::time::Duration> {
        Some(self.config.timeout)
    }

    fn abort(&self, message: &str) -> ! {
        eprint_line(&format!(
            "error: rank {}: {message}; ending the job on every rank",
            self.rank
        ));
        abort_job(&self.universe.world(), 1)
    }

    fn broadcast(&self, what: &str, tensors: Vec<Tensor<1>>, device: &Device) -> Vec<Tensor<1>> {
        let (plan, bucket_sizes) = self.buckets(&tensors);
        let sizes: Vec<usize> = tensors.iter().map(|t| t.dims()[0]).collect();
        let mut out: Vec<Option<Tensor<1>>> = vec![None; tensors.len()];
        let read = |k: usize| Some(read_bucket(&tensors, plan[k].clone()));
        let done = |k: usize, values: &[f32]| {
            buckets::unpack(&mut out, plan[k].clone(), &sizes, values.to_vec(), device);
        };
        self.exchange(
            what,
            |_| Collective::BroadcastFromZero,
            &bucket_sizes,
            read,
            done,
        );
        out.into_iter()
            .map(|t| t.expect("every bucket was written back"))
            .collect()
    }
}
