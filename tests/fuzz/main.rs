//! Fuzzing of every parser of untrusted bytes: mutation-based, seeded with real files, on
//! proptest (stable Rust, shrinking to a minimal failing input, one `cargo test` away; libFuzzer
//! through cargo-fuzz needs a nightly toolchain, which CI does not have).
//!
//! Each target takes real files (TFRecords and images written by TensorFlow, checkpoints and
//! configs written by this project), applies a few random edits (bit flips, interesting values
//! such as a length of 2^60, insertions, deletions, truncation, copies of spans) and, where a
//! checksum guards the content, sometimes fixes the checksum so the parser beneath is reached.
//! A target fails on a panic or a broken property; errors are the expected outcome of most
//! inputs. Runs are deterministic: `FUZZ_SEED` varies them.
//!
//! ```text
//! cargo test --test fuzz                                       # 10,000 inputs per target
//! FUZZ_CASES=1000000 cargo test --release --test fuzz -- --nocapture --test-threads 1
//! ```

mod mutate;
mod targets;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use proptest::strategy::Strategy;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

/// Inputs per target: `FUZZ_CASES`, else 10,000 (a second or less per target in a test build).
fn cases() -> u32 {
    std::env::var("FUZZ_CASES").map_or(10_000, |v| v.parse().expect("FUZZ_CASES is a number"))
}

/// Runs `target` on `cases()` inputs drawn from `inputs`; `target` says whether it accepted
/// the input (parsed it) or rejected it with an error. Panics, with the smallest failing input
/// proptest finds, when `target` panics.
pub fn fuzz<T: std::fmt::Debug>(
    name: &str,
    inputs: impl Strategy<Value = T>,
    target: impl Fn(T) -> bool,
) {
    let cases = cases();
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    let seed: u64 = std::env::var("FUZZ_SEED").map_or(0, |v| v.parse().expect("FUZZ_SEED"));
    let mut seed_bytes = [0u8; 32];
    seed_bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes);
    let mut runner = TestRunner::new_with_rng(config, rng);
    let (tried, accepted) = (AtomicU64::new(0), AtomicU64::new(0));
    let slowest = std::sync::Mutex::new(Duration::ZERO);
    let started = Instant::now();
    let result = runner.run(&inputs, |input| {
        let one = Instant::now();
        tried.fetch_add(1, Ordering::Relaxed);
        if target(input) {
            accepted.fetch_add(1, Ordering::Relaxed);
        }
        let took = one.elapsed();
        let mut slowest = slowest.lock().unwrap();
        *slowest = (*slowest).max(took);
        Ok(())
    });
    println!(
        "fuzz {name}: {} inputs, {} accepted, {:.1} s, slowest input {:.1} ms",
        tried.load(Ordering::Relaxed),
        accepted.load(Ordering::Relaxed),
        started.elapsed().as_secs_f64(),
        slowest.lock().unwrap().as_secs_f64() * 1e3
    );
    if let Err(e) = result {
        panic!("fuzz {name}: {e}");
    }
}
