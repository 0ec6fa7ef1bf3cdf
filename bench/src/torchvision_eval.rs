//! CPU time per image of torchvision's evaluation preprocessing (`TorchvisionEval`: JPEG decode,
//! Pillow's resize of the shorter side to 256, the central 224 square, normalization) on one
//! thread, against torchvision and Pillow themselves (`bench/peers/torchvision_eval.py`, run in
//! the same sitting on the same file).

use std::path::Path;
use std::time::Instant;

use rand::SeedableRng;

use burn_towers::data::transforms::{Rng, TorchvisionEval, Transform};

/// Timed rounds; the median is printed.
const ROUNDS: usize = 5;
/// Images per round.
const IMAGES: usize = 200;

/// Prints the median time per image of `TorchvisionEval::new(224)` on the encoded `file`.
pub fn print(file: &Path) -> anyhow::Result<()> {
    let encoded = std::fs::read(file)?;
    let eval = TorchvisionEval::new(224);
    let mut rng = Rng::seed_from_u64(0);
    let mut times = Vec::new();
    for _ in 0..=ROUNDS {
        let started = Instant::now();
        for _ in 0..IMAGES {
            let planes = eval
                .apply_encoded(&encoded, &[], &mut rng)
                .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
            std::hint::black_box(planes);
        }
        times.push(started.elapsed().as_secs_f64() / IMAGES as f64);
    }
    // The first round warms the buffers and caches.
    times.remove(0);
    times.sort_by(f64::total_cmp);
    println!(
        "torchvision's evaluation preprocessing of {} (decode, resize, crop 224, normalize), one thread, median of {ROUNDS} rounds of {IMAGES}: {:.3} ms/image",
        file.display(),
        times[ROUNDS / 2] * 1e3
    );
    Ok(())
}
