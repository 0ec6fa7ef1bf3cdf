//! One of our checkpoint files (`model.ckpt-N`), as `load_weights`, `classify` and the
//! evaluations read one (`open_weights`): its CRC32C trailer, its JSON header, its burnpack
//! sections (burn-store's reader: every tensor's name, dtype, shape and bytes) and every tensor
//! as f32 values.
//!
//! Input: a flags byte (bit 0: set the trailer's CRC to match the rest, so that mutated bytes
//! reach the parsers beneath; bit 1: read the moving averages' section), then the file, written
//! to a file in memory (the reader takes a path).

#![no_main]

use libfuzzer_sys::fuzz_target;
use towers_fuzz::{fix_checkpoint_crc, flags_and_fixed, scratch};
use towers_models::Cifar10Net;
use towers_train::open_weights;

fuzz_target!(|data: &[u8]| {
    let (flags, file) = flags_and_fixed(data, fix_checkpoint_crc);
    let path = scratch("model.ckpt-1");
    std::fs::write(&path, &file).unwrap();
    // A checkpoint of ours is read by module path: any model type reads it alike.
    let _ = open_weights::<Cifar10Net>(&path, flags & 2 == 2);
});
