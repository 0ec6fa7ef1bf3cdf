//! The ring all-reduce of [`Reduce::AllReduce`](super::Reduce::AllReduce), on flat buckets.
//!
//! The gradients are packed, last parameter first (the order backward finishes them), into
//! flat buckets of about [`RingLink`]'s `bucket_bytes` (25 MB by default, as PyTorch DDP), and
//! each bucket is cut into `N` chunks. In `N - 1` reduce-scatter rounds every tower sends one
//! chunk of every bucket to the next tower, which adds it to its own; afterwards tower `r`
//! holds the full sum of chunk `r + 1`. In `N - 1` all-gather rounds the summed chunks go round
//! once more, so every tower ends with the same, bitwise identical, sums. A round thus moves
//! one tensor per bucket instead of one per parameter: on a GPU, a few large copies and adds
//! instead of hundreds of small ones. Each gradient is then a view of its bucket, as in DDP's
//! `gradient_as_bucket_view`.
//!
//! Sends never block (the channels are unbounded), so a tower's send overlaps its receive and
//! the ring cannot deadlock; a tower that stops drops its ends and its neighbours get
//! [`PeerGone`] instead of waiting forever.

use std::sync::mpsc::{self, Receiver, Sender};

use burn::optim::GradientsParams;
use burn::tensor::{Device, Tensor, TensorData};

use super::Layout;
use super::packing::Packed;
use crate::host_syncs;

/// A bucket size for rings whose caller names none: PyTorch DDP's default.
pub(crate) const DEFAULT_BUCKET_BYTES: usize = 25 << 20;

/// A ring neighbour stopped (its tower failed) before the all-reduce finished.
#[derive(Debug)]
pub(crate) struct PeerGone;

/// One chunk of a bucket on its way from a tower to the next.
enum Chunk {
    /// The tensor itself; the receiver moves it with `to_device`. Boxed: with every backend
    /// compiled in, a `Tensor` is several times the size of a `TensorData`.
    Tensor(Box<Tensor<1>>),
    /// Its values, read on the sender's thread; the receiver uploads them.
    Host(TensorData),
}

impl Chunk {
    fn into_device(self, device: &Device) -> Tensor<1> {
        match self {
            Chunk::Tensor(t) => t.to_device(device),
            Chunk::Host(data) => Tensor::from_data(data, device),
        }
    }
}

/// What a tower sends the next one in a round: one chunk of every bucket (`None` where a
/// bucket has fewer values than towers), and which parameters have a gradient on any tower
/// the sender has heard of (after `N - 1` rounds, on any tower at all).
struct Message {
    chunks: Vec<Option<Chunk>>,
    present: Vec<bool>,
}

/// One tower's place in a ring: a channel to the next tower and one from the previous.
pub(crate) struct RingLink {
    rank: usize,
    size: usize,
    /// Send chunks as host values rather than as tensors. Burn 0.22.1's remote backend moves a
    /// tensor between two remote devices server to server, and that transfer intermittently
    /// loses the tensor ("Should have handle for tensor" on the server, then the client waits
    /// forever). Reading on the sender's thread also puts a failing server's error on the thread
    /// of the tower that uses it. Burn's fusion backend loses tensors handed between threads
    /// the same way, so towers on it send host values too (`TowerDevice::is_fused`).
    through_host: bool,
    /// The buckets' size; 0: one tensor per bucket.
    bucket_bytes: usize,
    next: Sender<Message>,
    prev: Receiver<Message>,
}

/// The links of a ring of `size` towers, in rank order; `through_host` and `bucket_bytes` as
/// in [`RingLink`].
pub(crate) fn ring(size: usize, through_host: bool, bucket_bytes: usize) -> Vec<RingLink> {
    // Channel r carries tower r's messages to tower r + 1.
    let (senders, mut receivers): (Vec<_>, Vec<_>) = (0..size).map(|_| mpsc::channel()).unzip();
    receivers.rotate_right(1);
    senders
        .into_iter()
        .zip(receivers)
        .enumerate()
        .map(|(rank, (next, prev))| RingLink {
            rank,
            size,
            through_host,
            bucket_bytes,
            next,
            prev,
        })
        .collect()
}

impl RingLink {
    /// Sends chunk `send` of every bucket to the next tower and returns what the previous one
    /// sent.
    fn exchange(
        &self,
        chunks: &[Vec<Option<Tensor<1>>>],
        send: usize,
        present: &[bool],
    ) -> Result<Message, PeerGone> {
        let message = Message {
            chunks: (chunks.iter())
                .map(|parts| {
                    parts[send].clone().map(|t| match self.through_host {
                        true => {
                            host_syncs::note_read();
                            Chunk::Host(t.into_data())
                        }
                        false => Chunk::Tensor(Box::new(t)),
                    })
                })
                .collect(),
            present: present.to_vec(),
        };
        // The next tower reads these tensors on its thread: hand what this thread queued for
        // them over first (lazy backends queue work per thread). A failing device shows when
        // the receiver reads.
        if let Some(Some(Chunk::Tensor(t))) = message.chunks.iter().find(|c| c.is_some()) {
            host_syncs::note_flush();
            let _ = t.device().flush();
        }
        self.next.send(message).map_err(|_| PeerGone)?;
        self.prev.recv().map_err(|_| PeerGone)
    }
}

impl Layout {
    /// This tower's part of a ring all-reduce (see the module docs): returns the sum of every
    /// tower's `grads`, on `device`. All towers of the ring must call it with the same layout.
    /// A parameter without a gradient on some tower counts as zero there; one without a
    /// gradient on any tower has none in the sum.
    pub(crate) fn ring_all_reduce(
        &self,
        link: &RingLink,
        grads: GradientsParams,
        device: &Device,
    ) -> Result<GradientsParams, PeerGone> {
        let n = link.size;
        if n == 1 {
            return Ok(grads);
        }
        let Packed {
            buckets,
            tensors,
            mut present,
        } = self.packed(grads, link.bucket_bytes, device);
        // chunks[bucket][c]: chunk c of that bucket; None when empty.
        let mut chunks: Vec<Vec<Option<Tensor<1>>>> =
            tensors.into_iter().map(|t| chunked(t, n)).collect();
        let r = link.rank;
        for round in 0..n - 1 {
            let incoming = link.exchange(&chunks, (r + n - round) % n, &present)?;
            let c = (r + 2 * n - round - 1) % n;
            for (parts, theirs) in chunks.iter_mut().zip(incoming.chunks) {
                let theirs = theirs.map(|t| t.into_device(device));
                parts[c] = match (parts[c].take(), theirs) {
                    (Some(mine), Some(theirs)) => Some(mine + theirs),
                    (mine, theirs) => mine.or(theirs),
                };
            }
            present = (present.iter().zip(incoming.present))
                .map(|(a, b)| *a || b)
                .collect();
        }
        for round in 0..n - 1 {
            let incoming = link.exchange(&chunks, (r + 1 + n - round) % n, &present)?;
            let c = (r + n - round) % n;
            for (parts, theirs) in chunks.iter_mut().zip(incoming.chunks) {
                parts[c] = theirs.map(|t| t.into_device(device));
            }
        }
        // Each bucket's chunks joined into a tensor of this tower's own, and each gradient a
        // view of it. Views of the chunks themselves, which the neighbours may still be
        // reading, came out wrong on wgpu (lavapipe): by up to 2e-3 after 100 updates, and
        // differently every run, most likely the update's in-place kernels writing into a
        // buffer another thread's stream still reads.
        let tensors = (chunks.into_iter())
            .map(|parts| Tensor::cat(parts.into_iter().flatten().collect(), 0))
            .collect();
        let packed = Packed {
            buckets,
            tensors,
            present,
        };
        Ok(self.unpacked(packed))
    }
}

/// `bucket` cut into `n` chunks of (nearly) equal length; `None` for empty ones. Joined in
/// order, they are the bucket again.
fn chunked(bucket: Tensor<1>, n: usize) -> Vec<Option<Tensor<1>>> {
    let len = bucket.dims()[0];
    (0..n)
        .map(|c| {
            let (start, end) = (c * len / n, (c + 1) * len / n);
            (end > start).then(|| bucket.clone().narrow(0, start, end - start))
        })
        .collect()
}
