//! What exchanging gradients across MPI ranks costs, measured on the ranks themselves.
//!
//! `mpirun --mca btl tcp,self --mca btl_tcp_if_include lo -np 2 target/release/bench_mpi [REPS]`
//! (with `--features mpi`; as root add `--allow-run-as-root`; on fewer cores than ranks add
//! `--oversubscribe`). Rank 0 prints; REPS (default 5) timed exchanges or steps per row;
//! `-x TOWERS_BUCKET_MB=N` sets the bucket size (default 25 MB), `-x TOWERS_WIRE=bf16` (or
//! `f16`) the format gradients travel in (default `f32`; the trainer's `--allreduce-dtype`).
//!
//! - The gradient exchange of the TF CIFAR-10 net and of Inception v3 (their trainable
//!   parameters, as flat tensors on flex): time per exchange against copying the same bytes
//!   once in memory, and the bytes on the wire per rank per exchange as a multiple of the
//!   gradient, from the loopback interface's counters (`/proc/net/dev`: every byte the ranks
//!   send each other, TCP/IP headers included, and anything else on loopback meanwhile; Open
//!   MPI must use TCP on `lo`, as the command above says, for the counters to see the bytes).
//!   Exchanged as the trainer exchanges gradients, in the `TOWERS_WIRE` format. Beside it, the
//!   CPU time a rank's process spends per exchange (every thread, kernel time included).
//! - A training step (momentum SGD, one flex tower per rank) of the CIFAR-10 net (batch 128 per
//!   rank) and of Inception v3 (299x299, batch `TOWERS_BENCH_INCEPTION_BATCH` per rank, default
//!   4): alone, and as one rank of the job with the exchange after backward and overlapped with
//!   it. Every rank computes at once in all three, so they share the cores alike. The exposed
//!   communication fraction is (the step as a rank - the step alone) / the exchange's own time:
//!   1 when the whole exchange adds to the step, 0 when backward hides all of it. The scaling
//!   efficiency is the ranks' examples per second over the rank count times one rank's alone
//!   with the same share of the cores (the step alone / the step as a rank). Where the ranks
//!   share one machine whose cores their backward passes fill, the exchange's CPU time can
//!   only come out of the steps: the ranks' CPU time over the cores, over the exchange's own
//!   time, is the least fraction any overlap can reach there, printed beside F.
//!
//! `bench/scripts/mpi-link RATE [REPS]` runs it on a loopback shaped to a link's rate (`tc`,
//! as root), restoring it on every exit. `-x TOWERS_TIMELINE=DIR` records each rank's
//! steps (each tower's phases and each bucket on the wire) in `DIR/rank-R-VARIANT.json` (`alone`,
//! `after`, `overlapped`; the last net's steps, Inception v3's), for
//! `chrome://tracing` or Perfetto.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use towers_bench::cifar_net::CifarNet;
use towers_bench::input_stages::process_cpu_time;
use towers_bench::{cifar_batch, median, momentum_sgd, reps};

use burn::module::{Module, ModuleVisitor, Param};
use burn::tensor::{Device, Distribution, Int, Tensor};
use towers_data::{HostBatch, image_loss};
use towers_models::{ImageClassifier, InceptionV3, InceptionV3Config};
use towers_multigpu::mpi::{Mpi, MpiConfig};
use towers_multigpu::{CrossProcess, Timeline, Towers, TowersConfig, Wire, parse_devices};

fn main() -> anyhow::Result<()> {
    let mut config = MpiConfig::default();
    if let Ok(mb) = std::env::var("TOWERS_BUCKET_MB") {
        config = config.with_bucket_bytes(mb.parse::<usize>()? << 20);
    }
    let wire = match std::env::var("TOWERS_WIRE") {
        Ok(name) => name.parse::<Wire>().map_err(anyhow::Error::msg)?,
        Err(_) => Wire::F32,
    };
    config = config.with_wire(wire);
    let mpi = Arc::new(Mpi::init(config)?);
    let reps = reps(5);
    let device = Device::flex().autodiff();
    let say = |line: String| {
        if mpi.rank() == 0 {
            println!("{line}");
        }
    };
    say(format!(
        "{} ranks, {reps} repetitions per row, gradients as {wire:?} on the wire",
        mpi.size()
    ));
    say(
        "| gradient | MB | exchange ms | CPU ms/rank | copy ms | × copy | wire MB/rank | × gradient |"
            .into(),
    );
    say("|---|---:|---:|---:|---:|---:|---:|---:|".into());
    let cifar = || CifarNet::new(&device);
    let inception = || InceptionV3Config::new(1001).init(&device);
    let exchange_cifar = exchange_row(&*mpi, "TF CIFAR-10 net", trainable(&cifar()), reps);
    let exchange_inception = exchange_row(&*mpi, "Inception v3", trainable(&inception()), reps);
    say(exchange_cifar.0);
    say(exchange_inception.0);
    say("".into());
    say("| step, batch per rank | alone ms | exchange after backward ms | overlapped ms |".into());
    say("|---|---:|---:|---:|".into());
    let cifar_steps = step_times(
        &mpi,
        cifar,
        cifar_batch(128, &Device::flex()),
        reps,
        |m, x, y| m.loss(x, y),
    )?;
    say(step_row("CIFAR-10 net, 128", cifar_steps));
    let n = std::env::var("TOWERS_BENCH_INCEPTION_BATCH").map_or(Ok(4), |s| s.parse())?;
    let images = image_batch(n, [3, 299, 299]);
    let inception_steps = step_times(&mpi, inception, images, reps, |m: &InceptionV3, x, y| {
        m.loss(x, y).loss
    })?;
    say(step_row(&format!("Inception v3, {n}"), inception_steps));
    say("".into());
    for (name, [alone, after, overlapped], exchange) in [
        ("CIFAR-10 net", cifar_steps, exchange_cifar.1),
        ("Inception v3", inception_steps, exchange_inception.1),
    ] {
        let exposed = |joined: f64| (joined - alone) / exchange.wall;
        say(format!(
            "{name}: exposed communication fraction: {:.2} (after backward: {:.2}; exchange {:.1} ms)",
            exposed(overlapped),
            exposed(after),
            exchange.wall * 1e3
        ));
        // Where every core already runs some rank's backward, each rank's exchange CPU time
        // comes out of the cores' time: the ranks' steps grow by it, however well overlapped.
        say(format!(
            "{name}: exchange CPU time per rank {:.1} ms: the least F where the ranks' backward \
             passes fill every core ({:.2})",
            exchange.cpu * 1e3,
            exchange.cpu * mpi.size() as f64 / (cores() * exchange.wall)
        ));
        // The ranks' examples per second over the ranks' count times one rank's alone, with
        // the same share of the cores: alone / joined.
        say(format!(
            "{name}: scaling efficiency: {:.0}% overlapped, {:.0}% after backward",
            100.0 * alone / overlapped,
            100.0 * alone / after
        ));
    }
    Ok(())
}

/// The median step of a model from `make`, on `batch`: alone, as a rank exchanging after
/// backward, as a rank overlapping the exchange with backward. The three take turns, a step
/// each, so that whatever else the machine does at the time weighs on all three alike.
fn step_times<M: Module>(
    mpi: &Arc<Mpi>,
    make: impl Fn() -> M,
    batch: HostBatch,
    reps: usize,
    loss: impl Fn(&M, Tensor<4>, Tensor<1, Int>) -> Tensor<1> + Sync + Copy,
) -> anyhow::Result<[f64; 3]> {
    let devices = parse_devices("flex")?;
    // Each variant's towers, recording a timeline when asked to.
    let towers = |overlap: bool, variant: &str| -> anyhow::Result<Towers<M>> {
        let config = TowersConfig::default().with_overlap(overlap);
        let towers = Towers::new(make(), momentum_sgd(), &devices, config)?;
        let Ok(dir) = std::env::var("TOWERS_TIMELINE") else {
            return Ok(towers);
        };
        let path = Path::new(&dir).join(format!("rank-{}-{variant}.json", mpi.rank()));
        Ok(towers.with_timeline(Timeline::recording(mpi.rank(), &path)?))
    };
    let mut variants = [
        towers(true, "alone")?,
        towers(false, "after")?.across_processes(mpi.clone())?,
        towers(true, "overlapped")?.across_processes(mpi.clone())?,
    ];
    let mut times: [Vec<Duration>; 3] = Default::default();
    // One untimed step each first.
    for rep in 0..=reps {
        for (towers, times) in variants.iter_mut().zip(&mut times) {
            let started = Instant::now();
            towers.step(&batch, 0.01, image_loss(&loss))?;
            if rep > 0 {
                times.push(started.elapsed());
            }
        }
    }
    Ok(times.map(median))
}

fn step_row(name: &str, [alone, after, overlapped]: [f64; 3]) -> String {
    format!(
        "| {name} | {:.1} | {:.1} | {:.1} |",
        alone * 1e3,
        after * 1e3,
        overlapped * 1e3
    )
}

/// `n` random images of `shape` (uniform in [-1, 1]) with labels cycling over 10 classes.
fn image_batch(n: usize, shape: [usize; 3]) -> HostBatch {
    let values = n * shape.iter().product::<usize>();
    let images = Tensor::<1>::random([values], Distribution::Uniform(-1.0, 1.0), &Device::flex())
        .into_data()
        .try_to_vec()
        .expect("f32 images");
    HostBatch::new(images, (0..n).map(|i| (i % 10) as i64).collect(), shape)
}

/// The trainable parameters of `model`, flattened: the shapes of its gradient.
fn trainable<M: Module>(model: &M) -> Vec<Tensor<1>> {
    struct Collect(Vec<Tensor<1>>);
    impl ModuleVisitor for Collect {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            let value = param.val();
            if value.is_require_grad() {
                self.0.push(value.detach().flatten(0, D - 1));
            }
        }
    }
    let mut collect = Collect(Vec::new());
    model.visit(&mut collect);
    collect.0
}

/// What one exchange of a net's gradient takes a rank, in seconds.
struct Exchange {
    /// The median wall time.
    wall: f64,
    /// The mean CPU time of the rank's process, every thread, kernel time included: its TCP
    /// copies, and the loopback's receive path, which Linux runs in the sender's context
    /// (less what `ksoftirqd` and the qdisc's timer take up elsewhere).
    cpu: f64,
}

/// One table row: the exchange of `tensors` against one copy of their bytes; and what the
/// exchange takes a rank.
fn exchange_row(
    mpi: &dyn CrossProcess,
    name: &str,
    tensors: Vec<Tensor<1>>,
    reps: usize,
) -> (String, Exchange) {
    let device = tensors[0].device();
    let floats: usize = tensors.iter().map(|t| t.dims()[0]).sum();
    let bytes = 4 * floats;
    mpi.weighted_mean_of_gradients(tensors.clone(), 1.0, &device);
    // Every rank reads the counters between the same two exchanges.
    mpi.any("the counters' start", false);
    let wire_before = loopback_bytes();
    let cpu_before = process_cpu_time();
    let exchanges: Vec<Duration> = (0..reps)
        .map(|_| {
            let started = Instant::now();
            mpi.weighted_mean_of_gradients(tensors.clone(), 1.0, &device);
            started.elapsed()
        })
        .collect();
    let cpu = (process_cpu_time() - cpu_before).as_secs_f64() / reps as f64;
    mpi.any("the counters' end", false);
    let wire = (loopback_bytes() - wire_before) as f64 / (reps * mpi.size()) as f64;
    let host = vec![1.0f32; floats];
    let mut target = vec![0.0f32; floats];
    target.copy_from_slice(&host); // touches the pages, so that no copy pays for mapping them
    let copies: Vec<Duration> = (0..reps)
        .map(|_| {
            let started = Instant::now();
            target.copy_from_slice(&host);
            started.elapsed()
        })
        .collect();
    let (exchange, copy) = (median(exchanges), median(copies));
    let row = format!(
        "| {name} | {:.2} | {:.1} | {:.1} | {:.2} | {:.0} | {:.2} | {:.2} |",
        bytes as f64 / 1e6,
        exchange * 1e3,
        cpu * 1e3,
        copy * 1e3,
        exchange / copy,
        wire / 1e6,
        wire / bytes as f64
    );
    (
        row,
        Exchange {
            wall: exchange,
            cpu,
        },
    )
}

/// The cores this machine has online (the ranks share them: one machine runs every rank).
/// Not `available_parallelism`: mpirun binds each of 2 ranks to a core of its own.
fn cores() -> f64 {
    // SAFETY: sysconf reads a system setting; the name is a constant of Linux.
    let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    online.max(1) as f64
}

/// Bytes sent on the loopback interface since boot, by every process.
fn loopback_bytes() -> u64 {
    let table = std::fs::read_to_string("/proc/net/dev").unwrap_or_default();
    table
        .lines()
        .find_map(|line| line.trim_start().strip_prefix("lo:"))
        // Receive: bytes packets errs drop fifo frame compressed multicast; then transmit bytes.
        .and_then(|fields| fields.split_whitespace().nth(8)?.parse().ok())
        .unwrap_or(0)
}
