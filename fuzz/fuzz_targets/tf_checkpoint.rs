//! A TensorFlow V2 checkpoint (`TfCheckpoint::open`, then every tensor read), as `--checkpoint`
//! and `classify` read one: the index (a LevelDB table: footer, block handles,
//! prefix-compressed keys, block CRCs, bundle protos) and its data shard (tensor bytes, string
//! lengths, a CRC32C per tensor).
//!
//! Input: a flags byte (bit 0: rewrite the index's block CRCs first), the index's length as a
//! little-endian u16, the index, then the data shard. Both go to files in memory, as the reader
//! takes a path.

#![no_main]

use libfuzzer_sys::fuzz_target;
use towers_fuzz::{fix_table_crcs, flags, scratch};
use towers_models::weights::{TfCheckpoint, TfValues};

fuzz_target!(|data: &[u8]| {
    let (flags, rest) = flags(data);
    let (index, shard) = split(rest);
    let mut index = index.to_vec();
    if flags & 1 == 1 {
        fix_table_crcs(&mut index);
    }
    std::fs::write(scratch("model.ckpt-7.index"), &index).unwrap();
    std::fs::write(scratch("model.ckpt-7.data-00000-of-00001"), shard).unwrap();
    let Ok(checkpoint) = TfCheckpoint::open(&scratch("model.ckpt-7")) else {
        return;
    };
    let tensors: Vec<(String, usize)> = checkpoint
        .tensors()
        .map(|(name, info)| (name.to_string(), info.shape.iter().product()))
        .collect();
    for (name, len) in tensors {
        // What reads is as long as its shape says.
        match checkpoint.read(&name) {
            Ok(TfValues::Float(values)) => assert_eq!(values.len(), len, "{name}"),
            Ok(TfValues::Int(values)) => assert_eq!(values.len(), len, "{name}"),
            Ok(TfValues::Bool(values)) => assert_eq!(values.len(), len, "{name}"),
            Ok(_) | Err(_) => {}
        }
    }
});

/// The index and the data shard: a u16 length, then the two.
fn split(rest: &[u8]) -> (&[u8], &[u8]) {
    let Some((len, rest)) = rest.split_first_chunk::<2>() else {
        return (rest, &[]);
    };
    rest.split_at(usize::from(u16::from_le_bytes(*len)).min(rest.len()))
}
