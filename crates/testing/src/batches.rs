//! Deterministic synthetic host batches of `[3, 8, 8]` images, for the tiny nets.

use towers_data::HostBatch;
use towers_multigpu::TowerBatch;

/// The shape of one image.
pub const IMAGE: [usize; 3] = [3, 8, 8];

/// `n` images that differ per `seed`, with channel means of about 0, 1 and 2, and labels spread
/// over 5 classes.
pub fn batch(n: usize, seed: usize) -> HostBatch {
    let images = (0..n * 192)
        .map(|i| {
            let channel = (i / 64) % 3;
            let noise = ((i * 7919 + seed * 104_729) % 1009) as f32 / 504.5 - 1.0;
            channel as f32 + noise * (1.0 + channel as f32)
        })
        .collect();
    let labels = (0..n).map(|i| ((i * 3 + seed) % 5) as i64).collect();
    HostBatch::new(images, labels, IMAGE)
}

/// The batches one after the other, as one batch.
pub fn concat(batches: &[HostBatch]) -> HostBatch {
    HostBatch::new(
        batches.iter().flat_map(|b| b.images().to_vec()).collect(),
        batches.iter().flat_map(|b| b.labels().to_vec()).collect(),
        IMAGE,
    )
}

/// `b` cut into batches of `sizes` examples.
pub fn split(b: &HostBatch, sizes: &[usize]) -> Vec<HostBatch> {
    b.split(sizes)
        .iter()
        .map(|s| HostBatch::new(s.images().to_vec(), s.labels().to_vec(), IMAGE))
        .collect()
}

/// Two updates of three micro-batches of unequal sizes (4, 6, 4 and 6, 4, 4): under
/// accumulation each example must weigh the same, whatever its micro-batch.
pub fn unequal_micro_batches() -> Vec<Vec<HostBatch>> {
    vec![
        vec![batch(4, 5), batch(6, 6), batch(4, 7)],
        vec![batch(6, 8), batch(4, 9), batch(4, 10)],
    ]
}
