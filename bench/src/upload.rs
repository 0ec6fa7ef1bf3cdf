//! Host time of handing a batch to a device, per upload: `BatchSlice::to_tensors`, which gives
//! the tensor a view of the batch's buffer, against a copy of the slice made first (how it
//! uploaded before 2026-11-30), taking turns in one process. "Host" is the caller's time; "done"
//! adds the device's queued work (`Device::sync`): on a GPU, the transfer.

use std::time::Instant;

use burn::tensor::{Device, Int, Tensor, TensorData};
use burn_towers::data::{BatchSlice, HostBatch};

/// Uploads per round; the tensors of a round are kept until it ends, as a step keeps its
/// inputs, and the batch's buffer stays the same, as a pipeline's pool keeps it.
const UPLOADS: usize = 20;

/// Prints both ways' median round for the CIFAR-10 and Inception v3 batches on `device`.
pub fn print(entry: &str, device: &Device) {
    println!("upload to {entry}, ms per upload (median of 5 rounds of {UPLOADS}): host / done");
    for (name, n, size) in [
        ("CIFAR-10, 128 x 3x24x24", 128, 24),
        ("Inception v3, 32 x 3x299x299", 32, 299),
    ] {
        let len = n * 3 * size * size;
        let images = (0..len).map(|i| (i % 251) as f32 / 251.0).collect();
        let batch = HostBatch::new(images, vec![0; n], [3, size, size]);
        let slice = batch.as_slice();
        let [mut view, mut copy] = [Vec::new(), Vec::new()];
        for round in 0..6 {
            let timed = [
                round_of(|| slice.to_tensors(device), device),
                round_of(|| copied(&slice, [3, size, size], device), device),
            ];
            if round > 0 {
                view.push(timed[0]);
                copy.push(timed[1]);
            }
        }
        let [view, copy] = [median(view), median(copy)];
        println!(
            "  {name}: a view {:.3} / {:.3}, a copy {:.3} / {:.3}; the view saves {:.3} ms of host time",
            view[0],
            view[1],
            copy[0],
            copy[1],
            copy[0] - view[0]
        );
    }
}

/// The slice copied on the host first, then made a tensor (the upload before the view).
fn copied(
    slice: &BatchSlice<'_>,
    [c, h, w]: [usize; 3],
    device: &Device,
) -> (Tensor<4>, Tensor<1, Int>) {
    let images = TensorData::new(slice.images().to_vec(), [slice.len(), c, h, w]);
    let labels = TensorData::new(slice.labels().to_vec(), [slice.len()]);
    (
        Tensor::from_data(images, device),
        Tensor::from_data(labels, device),
    )
}

/// `[host, done]` ms per upload over one round of [`UPLOADS`].
fn round_of(upload: impl Fn() -> (Tensor<4>, Tensor<1, Int>), device: &Device) -> [f64; 2] {
    let start = Instant::now();
    let kept: Vec<_> = (0..UPLOADS).map(|_| upload()).collect();
    let host = start.elapsed().as_secs_f64();
    device.sync().expect("the device's queued uploads");
    let done = start.elapsed().as_secs_f64();
    drop(kept);
    [host, done].map(|s| s * 1e3 / UPLOADS as f64)
}

/// The middle `[host, done]` by host time.
fn median(mut rounds: Vec<[f64; 2]>) -> [f64; 2] {
    rounds.sort_by(|a, b| a[0].total_cmp(&b[0]));
    rounds[rounds.len() / 2]
}
