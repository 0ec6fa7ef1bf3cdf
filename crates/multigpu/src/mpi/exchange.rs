//! One exchange among all ranks: non-blocking MPI requests, polled against a deadline.
//!
//! Bucket `k + 1` is read from the device while bucket `k` travels, and each bucket is handed
//! back as soon as it arrives. Every rank first tells every other rank that it has reached the
//! exchange and what it is about to post (its [`Header`]: the exchange's number, its buckets'
//! count and values, their collectives), and posts nothing before every other rank's header has
//! arrived and matched its own: ranks that disagree (another exchange, other buckets) are named
//! before any collective could pair one rank's tensors with another's, and a rank that times out
//! can name the ranks it waited for. A blocking MPI call would wait forever for a rank that
//! hangs; MPI has no way to cancel a collective, so a timed-out or mismatched exchange ends the
//! job (`MPI_Abort`) on every rank.

use std::thread;
use std::time::{Duration, Instant};

use mpi::collective::SystemOperation;
use mpi::request::{Request, Scope, scope};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;

use crate::error::panic_message;
use crate::stderr_line::eprint_line;
use crate::wire_format::Wire;

/// The tag of the "I have reached this exchange" messages.
const ARRIVED: mpi::Tag = 0x70_77;

/// The tag of the "I have posted all my buckets" messages: what tells a rank still computing
/// (under an overlapped exchange it reaches the exchange before its backward pass) from a
/// network failure when an exchange times out.
const POSTED: mpi::Tag = 0x70_78;

/// The exit code of a job ended by a timed-out exchange.
const TIMED_OUT: i32 = 75;

/// The exit code of a job whose ranks posted different exchanges.
const MISMATCHED: i32 = 76;

/// The exit code of a job one of whose ranks panicked making a bucket or taking a result.
const PANICKED: i32 = 70;

/// What a rank is about to post, sent to every other rank before it posts: the exchange's
/// number, its buckets' count and total values, and a digest of each bucket's size and
/// collective. Integers, exact whatever their size.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Header([u64; 4]);

impl Header {
    fn of(number: u64, sizes: &[usize], collective: impl Fn(usize) -> Collective) -> Self {
        let digest = (sizes.iter().enumerate()).fold(0u64, |digest, (k, &size)| {
            let kind = match collective(k) {
                Collective::Sum(wire) => wire as u64,
                Collective::BroadcastFromZero => 0xB,
            };
            (digest.wrapping_mul(0x100_0000_01B3) ^ size as u64).wrapping_mul(31) ^ kind
        });
        let values = sizes.iter().sum::<usize>() as u64;
        Self([number, sizes.len() as u64, values, digest])
    }

    /// How `theirs` differs from this rank's header, in words.
    fn difference(&self, theirs: &Header) -> String {
        let [number, buckets, values, _] = self.0;
        let [their_number, their_buckets, their_values, _] = theirs.0;
        if number != their_number {
            format!("it is at exchange {their_number}: the ranks are out of step")
        } else if (buckets, values) != (their_buckets, their_values) {
            format!(
                "it posts {their_buckets} buckets of {their_values} values, this rank \
                 {buckets} of {values}: the ranks' bucket sizes or models differ"
            )
        } else {
            "its buckets are sized or sent otherwise (another bucket size or wire format)".into()
        }
    }
}

/// What happens to each bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Collective {
    /// Summed over the ranks: in f32 by `MPI_Iallreduce`; in a 16-bit [`Wire`] format by a
    /// reduce-scatter (`MPI_Ialltoall` of the rounded bucket, each rank summing its part in
    /// f32) and an all-gather of the rounded sums (`MPI_Iallgather`), since MPI has no sum of
    /// bf16 and a reduction of our own would need a user-defined `MPI_Op`.
    Sum(Wire),
    /// Rank 0's bucket on every rank (`MPI_Ibcast`); only rank 0 reads.
    BroadcastFromZero,
}

/// One exchange: its name in errors, its number and its deadline.
pub(super) struct Exchange<'a> {
    pub world: &'a SimpleCommunicator,
    /// A duplicate of `world` for the all-gathers of 16-bit buckets. Every rank must start the
    /// collectives of one communicator in the same order; a bucket's gather starts when its
    /// scatter ends, which is not the same moment everywhere, so the gathers go in bucket order
    /// on a communicator of their own.
    pub gathers: &'a SimpleCommunicator,
    pub what: &'a str,
    /// The exchange's number since the start, the same on every rank.
    pub number: u64,
    pub timeout: Duration,
}

impl Exchange<'_> {
    /// Runs `collective(k)` on bucket `k`, for buckets of `sizes` values. `ready(k)` gives this rank's bucket `k`,
    /// or `None` while it is not ready yet (it may wait a little; it is asked again); buckets
    /// are asked for in order, and the earlier ones travel meanwhile. `done(k, values)` takes
    /// bucket `k`'s result as soon as it has arrived, in any order. The receive buffers come
    /// from `buffers` where their sizes match, and are left there.
    pub(super) fn run(
        &self,
        collective: impl Fn(usize) -> Collective,
        sizes: &[usize],
        buffers: &mut Vec<Vec<f32>>,
        mut ready: impl FnMut(usize) -> Option<Vec<f32>>,
        mut done: impl FnMut(usize, &[f32]),
    ) {
        let mut ready = |k: usize| self.guarded("making", k, || ready(k));
        let mut done =
            |k: usize, values: &[f32]| self.guarded("taking the result of", k, || done(k, values));
        let world = self.world;
        let me = world.rank();
        let mut sends: Vec<Vec<f32>> = vec![Vec::new(); sizes.len()];
        let mut recvs = reused(std::mem::take(buffers), sizes);
        let header = Header::of(self.number, sizes, &collective);
        let mut arrived = vec![Header::default(); world.size() as usize];
        let mut posted = vec![0u64; world.size() as usize];
        let all_posted = [1u64];
        let ranks = world.size() as usize;
        let mut halves: Vec<Halves> = (sizes.iter().enumerate())
            .map(|(k, &size)| Halves::new(collective(k), size, ranks))
            .collect();
        // The time this rank waits on the others: while its own next bucket is not ready (its
        // forward and backward, under the overlapped exchange), the clock starts again.
        let mut deadline = Instant::now() + self.timeout;
        // Whether this rank said it has waited half the deadline (once per exchange).
        let mut warned = false;
        scope(|scope| {
            let mut waiting_for = Vec::new();
            let mut told = Vec::new();
            let mut posting = Vec::new();
            for (rank, slot) in (0..).zip(posted.iter_mut()).filter(|(r, _)| *r != me) {
                let peer = world.process_at_rank(rank);
                posting.push((
                    rank,
                    peer.immediate_receive_into_with_tag(scope, slot, POSTED),
                ));
            }
            for (rank, slot) in (0..).zip(arrived.iter_mut()).filter(|(r, _)| *r != me) {
                let peer = world.process_at_rank(rank);
                waiting_for.push((
                    rank,
                    peer.immediate_receive_into_with_tag(scope, &mut slot.0[..], ARRIVED),
                ));
                told.push((
                    rank,
                    peer.immediate_send_with_tag(scope, &header.0[..], ARRIVED),
                ));
            }
            let mut unposted = sends
                .iter_mut()
                .zip(recvs.iter_mut())
                .zip(halves.iter_mut())
                .enumerate()
                .peekable();
            let mut buckets = Vec::with_capacity(sizes.len());
            // 16-bit buckets: their parts being scattered, and each one's summed part and
            // result buffers, waiting for its gather.
            let mut scattering = Vec::new();
            let mut gathering = Vec::new();
            let mut to_gather: Vec<Option<(&mut Vec<u16>, &mut Vec<u16>)>> =
                (0..sizes.len()).map(|_| None).collect();
            let compressed: Vec<usize> = (0..sizes.len())
                .filter(|&k| matches!(collective(k), Collective::Sum(w) if w != Wire::F32))
                .collect();
            let mut summed = vec![false; sizes.len()];
            let mut next_gather = 0;
            let mut said_posted = false;
            let mut last_progress = Instant::now();
            loop {
                // The next bucket, if this rank has it ready and every rank's header matched.
                let mut asked = false;
                if let Some(&(k, _)) = unposted.peek().filter(|_| waiting_for.is_empty()) {
                    asked = true;
                    if let Some(values) = ready(k) {
                        if values.len() != sizes[k] {
                            self.wrong_length(k, values.len(), sizes[k]);
                        }
                        let (k, ((send, recv), half)) = unposted.next().expect("peeked");
                        let request = match collective(k) {
                            Collective::Sum(wire) if wire != Wire::F32 => {
                                let Halves {
                                    send,
                                    parts,
                                    mine,
                                    all,
                                } = half;
                                for (bits, value) in send.iter_mut().zip(values) {
                                    *bits = wire.encode(value);
                                }
                                let send: &Vec<u16> = send;
                                scattering.push((
                                    k,
                                    world.immediate_all_to_all_into(
                                        scope,
                                        &send[..],
                                        &mut parts[..],
                                    ),
                                ));
                                to_gather[k] = Some((mine, all));
                                last_progress = Instant::now();
                                continue;
                            }
                            Collective::Sum(_) => {
                                *send = values;
                                let send: &Vec<f32> = send;
                                world.immediate_all_reduce_into(
                                    scope,
                                    &send[..],
                                    &mut recv[..],
                                    SystemOperation::sum(),
                                )
                            }
                            Collective::BroadcastFromZero => {
                                if me == 0 {
                                    *recv = values;
                                }
                                world
                                    .process_at_rank(0)
                                    .immediate_broadcast_into(scope, &mut recv[..])
                            }
                        };
                        buckets.push((k, request));
                        last_progress = Instant::now();
                    } else {
                        deadline = Instant::now() + self.timeout;
                    }
                }
                let mut completed = poll(&mut waiting_for, |rank, theirs: &[u64]| {
                    let theirs = Header(theirs.try_into().expect("a header's four numbers"));
                    if theirs != header {
                        self.mismatched(rank, &header.difference(&theirs));
                    }
                });
                completed += poll(&mut told, |_, _| {});
                completed += poll(&mut posting, |_, _| {});
                if unposted.peek().is_none() && !said_posted {
                    for rank in (0..world.size()).filter(|&r| r != me) {
                        let peer = world.process_at_rank(rank);
                        let send = peer.immediate_send_with_tag(scope, &all_posted[..], POSTED);
                        told.push((rank, send));
                    }
                    said_posted = true;
                }
                completed += poll(&mut buckets, &mut done);
                completed += poll(&mut scattering, |k, parts: &[u16]| {
                    let (mine, _) = to_gather[k].as_mut().expect("scattered once");
                    sum_part(wire_of(collective(k)), parts, mine);
                    summed[k] = true;
                });
                while let Some(&k) = compressed.get(next_gather)
                    && summed[k]
                {
                    let (mine, all) = to_gather[k].take().expect("gathered once");
                    let mine: &Vec<u16> = mine;
                    let gather =
                        (self.gathers).immediate_all_gather_into(scope, &mine[..], &mut all[..]);
                    gathering.push((k, gather));
                    next_gather += 1;
                }
                completed += poll(&mut gathering, |k, all: &[u16]| {
                    let wire = wire_of(collective(k));
                    let sums: Vec<f32> = all[..sizes[k]].iter().map(|&b| wire.decode(b)).collect();
                    done(k, &sums);
                });
                let finished = unposted.peek().is_none()
                    && buckets.is_empty()
                    && scattering.is_empty()
                    && gathering.is_empty()
                    && waiting_for.is_empty()
                    && posting.is_empty()
                    && said_posted
                    && told.is_empty();
                if finished {
                    break;
                }
                let now = Instant::now();
                if now > deadline || (!warned && now + self.timeout / 2 > deadline) {
                    let late: Vec<i32> = waiting_for.iter().map(|(rank, _)| *rank).collect();
                    let computing: Vec<i32> = posting.iter().map(|(rank, _)| *rank).collect();
                    if now > deadline {
                        self.give_up(&late, &computing);
                    }
                    self.warn_waiting(&late, &computing);
                    warned = true;
                }
                if completed > 0 {
                    last_progress = Instant::now();
                }
                // `ready` paces the loop while this rank's buckets are still being made (it
                // waits a little for them, leaving the cores to backward).
                if asked {
                    continue;
                }
                pause(last_progress.elapsed());
            }
        });
        *buffers = recvs;
    }

    /// `f()`, `doing` bucket `k`; when it panics, the job ended on every rank after saying so.
    /// A panic unwinding out of the exchange would drop its MPI requests unfinished, which
    /// rsmpi answers with a second panic and an abort that buries the first.
    fn guarded<T>(&self, doing: &str, k: usize, f: impl FnOnce() -> T) -> T {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
            Ok(value) => value,
            Err(panic) => {
                eprint_line(&format!(
                    "error: rank {}: the exchange of {} (exchange {}) failed {doing} bucket {k}: \
                     {}; ending the job on every rank",
                    self.world.rank(),
                    self.what,
                    self.number,
                    panic_message(panic.as_ref())
                ));
                super::abort_job(self.world, PANICKED)
            }
        }
    }

    /// Ends the job on every rank, after saying how rank `other`'s exchange differs from this
    /// rank's (`difference`).
    fn mismatched(&self, other: i32, difference: &str) -> ! {
        let me = self.world.rank();
        eprint_line(&format!(
            "error: rank {me}: the exchange of {} (exchange {}) does not match rank {other}'s: \
             {difference}; ending the job on every rank",
            self.what, self.number
        ));
        super::abort_job(self.world, MISMATCHED)
    }

    /// Ends the job on every rank: this rank's bucket `k` holds `len` values where the
    /// exchange's sizes say `size` (its caller's bug). Posted, MPI would write its length into
    /// a receive buffer of `size` values.
    fn wrong_length(&self, k: usize, len: usize, size: usize) -> ! {
        let me = self.world.rank();
        eprint_line(&format!(
            "error: rank {me}: the exchange of {} (exchange {}): bucket {k} holds {len} values, \
             where its size is {size}; ending the job on every rank",
            self.what, self.number
        ));
        super::abort_job(self.world, MISMATCHED)
    }

    /// Says, half-way to the deadline, which ranks this one waits on (as Horovod's stall
    /// warnings do), so that a job about to end, or a rank that keeps the others waiting
    /// without ending it, shows before the deadline.
    fn warn_waiting(&self, late: &[i32], computing: &[i32]) {
        eprint_line(&format!(
            "warning: rank {}: the exchange of {} (exchange {}) has waited {:?}: {}; the job \
             ends if it waits {:?}",
            self.world.rank(),
            self.what,
            self.number,
            self.timeout / 2,
            waiting_on(late, computing, "has not reached it", "has not had"),
            self.timeout
        ));
    }

    /// Ends the job on every rank, after saying which ranks never reached this exchange
    /// (`late`), or reached it but never posted all their buckets (`computing`).
    fn give_up(&self, late: &[i32], computing: &[i32]) -> ! {
        let me = self.world.rank();
        let who = waiting_on(late, computing, "never reached it", "never had");
        eprint_line(&format!(
            "error: rank {me}: the exchange of {} (exchange {}) timed out after {:?}: {who}; \
             ending the job on every rank",
            self.what, self.number, self.timeout
        ));
        super::abort_job(self.world, TIMED_OUT)
    }
}

/// Which ranks an exchange waits on: those that `not_reached` it (`late`), else those that
/// reached it but `not_had` all their buckets ready (`computing`), else none.
fn waiting_on(late: &[i32], computing: &[i32], not_reached: &str, not_had: &str) -> String {
    let list = |ranks: &[i32]| {
        ranks
            .iter()
            .map(i32::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    };
    if !late.is_empty() {
        format!("rank {} {not_reached}", list(late))
    } else if !computing.is_empty() {
        format!(
            "rank {} reached it but {not_had} all its buckets ready (still in its step: its own \
             warning names the phase)",
            list(computing)
        )
    } else {
        "every rank reached it, but it did not finish (a network failure?)".to_string()
    }
}

/// A buffer of each of `sizes`, taken from `pool` where one has that size, else new.
fn reused(mut pool: Vec<Vec<f32>>, sizes: &[usize]) -> Vec<Vec<f32>> {
    (sizes.iter())
        .map(|&size| match pool.iter().position(|b| b.len() == size) {
            Some(i) => pool.swap_remove(i),
            None => vec![0.0; size],
        })
        .collect()
}

/// A 16-bit bucket's buffers: this rank's bucket rounded (padded with zeros to a part per
/// rank), the parts of it every rank sent this rank, this rank's summed part, and every rank's
/// summed part.
#[derive(Default)]
struct Halves {
    send: Vec<u16>,
    parts: Vec<u16>,
    mine: Vec<u16>,
    all: Vec<u16>,
}

impl Halves {
    /// The buffers of a bucket of `size` values under `collective` among `ranks` ranks: none
    /// unless it travels in 16 bits.
    fn new(collective: Collective, size: usize, ranks: usize) -> Self {
        match collective {
            Collective::Sum(wire) if wire != Wire::F32 => {
                let part = size.div_ceil(ranks);
                Self {
                    send: vec![0; part * ranks],
                    parts: vec![0; part * ranks],
                    mine: vec![0; part],
                    all: vec![0; part * ranks],
                }
            }
            _ => Self::default(),
        }
    }
}

/// The wire format of a bucket that is summed.
fn wire_of(collective: Collective) -> Wire {
    match collective {
        Collective::Sum(wire) => wire,
        Collective::BroadcastFromZero => unreachable!("only sums travel in 16 bits"),
    }
}

/// This rank's part of a 16-bit bucket: the ranks' `parts` (one after another) summed in f32,
/// in rank order, and rounded into `mine`.
fn sum_part(wire: Wire, parts: &[u16], mine: &mut [u16]) {
    let part = mine.len();
    for (i, out) in mine.iter_mut().enumerate() {
        let sum: f32 = (0..parts.len() / part.max(1))
            .map(|r| wire.decode(parts[r * part + i]))
            .sum();
        *out = wire.encode(sum);
    }
}

/// How long the exchange keeps polling MPI without pause after its last progress (a bucket
/// posted, a request completed), as MPI_Wait would: the messages of one collective follow
/// each other closely. 1 and 5 ms gave the same exchange times (`bench_mpi`, 2026-11-29);
/// the shorter spends less CPU time.
const SPIN: Duration = Duration::from_millis(1);

/// The pause between polls after that. MPI moves a non-blocking collective's data only inside
/// our tests, but the socket buffers hold more than a link carries in the pause: at 10 Gbit/s
/// Inception v3's exchange took the same time polling every 0.1 ms as polling without pause,
/// and a third of the CPU time (`bench_mpi`, 2026-11-29; bench/HISTORY.md).
const POLL_PAUSE: Duration = Duration::from_micros(100);

/// Waits before the next poll, `quiet` after the exchange's last progress: yields the core to
/// any thread that can run (another rank's backward, on a machine the ranks share) while
/// `quiet` is under [`SPIN`], then sleeps [`POLL_PAUSE`].
fn pause(quiet: Duration) {
    match quiet < SPIN {
        true => thread::yield_now(),
        false => thread::sleep(POLL_PAUSE),
    }
}

/// Tests every request once, hands the finished ones' data to `done` and keeps the others;
/// returns how many finished.
fn poll<'a, D: ?Sized, S: Scope<'a>, K: Copy>(
    requests: &mut Vec<(K, Request<'a, D, S>)>,
    mut done: impl FnMut(K, &'a D),
) -> usize {
    let before = requests.len();
    let mut pending = Vec::with_capacity(requests.len());
    for (key, request) in requests.drain(..) {
        match request.test_with_data() {
            Ok((_, data)) => done(key, data),
            Err(request) => pending.push((key, request)),
        }
    }
    *requests = pending;
    before - requests.len()
}
