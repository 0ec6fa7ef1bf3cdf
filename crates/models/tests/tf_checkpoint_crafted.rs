//! Crafted TF checkpoint indexes of under 1 MB that would demand gigabytes of a reader that
//! trusts them: keys sharing long prefixes, index entries repeating one block handle, a string
//! tensor claiming 2^40 bytes. Each is opened (and its tensors read, as an evaluation does) in
//! a child process under a 3 GB address-space limit (`ulimit -v`), which must exit with one
//! error naming the file, never abort.

use std::path::Path;

use towers_models::weights::TfCheckpoint;
use towers_testing::child::{child, role};

/// Appends `value` as a protobuf / LevelDB varint.
fn varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// TF's CRC mask.
fn mask(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

/// A table block of `(shared, unshared key bytes, value)` entries, one restart point.
fn block(entries: &[(u64, &[u8], &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    for (shared, unshared, value) in entries {
        varint(&mut out, *shared);
        varint(&mut out, unshared.len() as u64);
        varint(&mut out, value.len() as u64);
        out.extend_from_slice(unshared);
        out.extend_from_slice(value);
    }
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&1u32.to_le_bytes());
    out
}

/// Appends `contents` with its trailer (uncompressed, masked CRC32C); returns its handle.
fn append_block(file: &mut Vec<u8>, contents: &[u8]) -> (u64, u64) {
    let handle = (file.len() as u64, contents.len() as u64);
    file.extend_from_slice(contents);
    let crc = crc32c::crc32c_append(crc32c::crc32c(contents), &[0]);
    file.push(0);
    file.extend_from_slice(&mask(crc).to_le_bytes());
    handle
}

/// A whole table: `data` blocks, then an index block whose entries (keys `k00000`, ...)
/// point at the handles `point(handles)` chooses, an empty metaindex and the footer.
fn table(data: &[Vec<u8>], point: impl Fn(&[(u64, u64)]) -> Vec<(u64, u64)>) -> Vec<u8> {
    let mut file = Vec::new();
    let handles: Vec<_> = data.iter().map(|b| append_block(&mut file, b)).collect();
    let encoded: Vec<(Vec<u8>, Vec<u8>)> = point(&handles)
        .iter()
        .enumerate()
        .map(|(i, &(offset, size))| {
            let mut value = Vec::new();
            varint(&mut value, offset);
            varint(&mut value, size);
            (format!("k{i:05}").into_bytes(), value)
        })
        .collect();
    let entries: Vec<_> = encoded
        .iter()
        .map(|(k, v)| (0, k.as_slice(), v.as_slice()))
        .collect();
    let index = append_block(&mut file, &block(&entries));
    let metaindex = append_block(&mut file, &block(&[]));
    let mut footer = Vec::new();
    for (offset, size) in [metaindex, index] {
        varint(&mut footer, offset);
        varint(&mut footer, size);
    }
    footer.resize(40, 0);
    footer.extend_from_slice(&0xdb47_7524_8b80_fb57u64.to_le_bytes());
    file.extend_from_slice(&footer);
    file
}

/// A `BundleHeaderProto` of one shard.
fn header() -> Vec<u8> {
    vec![0x08, 1]
}

/// A `BundleEntryProto`: a string tensor (DT_STRING) of shape [4] at bytes 0..+`size` of
/// shard 0.
fn string_entry(size: u64) -> Vec<u8> {
    let mut entry = vec![0x08, 7, 0x12, 4, 0x12, 2, 0x08, 4, 0x28];
    varint(&mut entry, size);
    entry
}

/// A length-delimited protobuf field: its key byte (`tag << 3 | 2`), its length and `body`.
fn field(key: u8, body: &[u8]) -> Vec<u8> {
    let mut out = vec![key];
    varint(&mut out, body.len() as u64);
    out.extend_from_slice(body);
    out
}

/// Writes `index` as `DIR/model.ckpt-1.index` and opens it in a child process limited to
/// 3 GB of address space; returns the index's path and the child's stderr after checking that
/// it exited with status 1 (an error), not a signal.
fn open_in_child(test: &str, index: &[u8], dir: &Path) -> (String, String) {
    open_file_in_child(test, index, &dir.join("model.ckpt-1.index"))
}

/// [`open_in_child`] of the checkpoint file `path`, holding `bytes`.
fn open_file_in_child(test: &str, bytes: &[u8], path: &Path) -> (String, String) {
    assert!(
        bytes.len() < 1 << 20,
        "{} bytes: not under 1 MB",
        bytes.len()
    );
    std::fs::write(path, bytes).unwrap();
    let path = path.to_str().unwrap().to_string();
    let output = child(test, &path, &[], "ulimit -v 3000000")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(
        output.status.code(),
        Some(1),
        "{:?}: {stderr}",
        output.status
    );
    (path, stderr)
}

/// The child's part: open the checkpoint at `index` and read every tensor; print the first
/// error and exit 1, or exit 0 if all went well.
fn play_child(index: &str) -> ! {
    let read_all = || -> Result<(), towers_models::weights::WeightsError> {
        let checkpoint = TfCheckpoint::open(Path::new(index))?;
        let names: Vec<String> = checkpoint.tensors().map(|(n, _)| n.to_string()).collect();
        for name in names {
            checkpoint.read(&name)?;
        }
        Ok(())
    };
    match read_all() {
        Ok(()) => std::process::exit(0),
        Err(error) => {
            eprintln!("error: {error}");
            std::process::exit(1);
        }
    }
}

/// The error lines the child printed: exactly one, naming `file` and saying `what`.
fn assert_one_error(stderr: &str, file: &str, what: &str) {
    let errors: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("error: "))
        .collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(
        errors[0].contains(file),
        "{} does not name {file}",
        errors[0]
    );
    assert!(
        errors[0].contains(what),
        "{} does not say {what}",
        errors[0]
    );
}

#[test]
fn keys_sharing_long_prefixes_hit_the_decoded_size_cap() {
    if let Some(index) = role() {
        play_child(&index);
    }
    // 64 KiB of key, then 110,000 entries of 8 bytes each repeating it with a 3-byte counter
    // (increasing keys): 944 KB of index, 7 GB of keys decoded in full.
    let prefix = vec![b'a'; 65_533];
    let counters: Vec<[u8; 3]> = (1u32..=110_000)
        .map(|i| i.to_be_bytes()[1..].try_into().unwrap())
        .collect();
    let mut entries: Vec<(u64, &[u8], &[u8])> = vec![(0, &prefix, &[])];
    entries.extend(counters.iter().map(|c| (65_533, c.as_slice(), &[][..])));
    let index = table(&[block(&entries)], |h| h.to_vec());
    let dir = tempfile::tempdir().unwrap();
    let test = towers_testing::test_name!("keys_sharing_long_prefixes_hit_the_decoded_size_cap");
    let (file, stderr) = open_in_child(&test, &index, dir.path());
    assert_one_error(&stderr, &file, "decode to more than 16 times the file's");
}

#[test]
fn index_entries_repeating_one_block_handle_are_refused() {
    if let Some(index) = role() {
        play_child(&index);
    }
    // One 600 KB block (the header's value padded), pointed at by 20,000 index entries:
    // 12 GB if each were decoded.
    let mut value = header();
    value.resize(600_000, 0);
    let data = block(&[(0, b"", &value)]);
    let index = table(&[data], |h| vec![h[0]; 20_000]);
    let dir = tempfile::tempdir().unwrap();
    let test = towers_testing::test_name!("index_entries_repeating_one_block_handle_are_refused");
    let (file, stderr) = open_in_child(&test, &index, dir.path());
    assert_one_error(&stderr, &file, "data block 1: starts at byte 0");
    assert_one_error(&stderr, &file, "blocks overlap or repeat");
}

#[test]
fn a_string_tensor_claiming_2_pow_40_bytes_is_refused_before_reading() {
    if let Some(index) = role() {
        play_child(&index);
    }
    let header = header();
    let entry = string_entry(1 << 40);
    let data = block(&[(0, b"", &header), (0, b"strings", &entry)]);
    let index = table(&[data], |h| h.to_vec());
    let dir = tempfile::tempdir().unwrap();
    let shard = dir.path().join("model.ckpt-1.data-00000-of-00001");
    std::fs::write(&shard, [0u8; 64]).unwrap();
    let test = towers_testing::test_name!(
        "a_string_tensor_claiming_2_pow_40_bytes_is_refused_before_reading"
    );
    let (_, stderr) = open_in_child(&test, &index, dir.path());
    let shard = shard.to_str().unwrap();
    assert_one_error(&stderr, shard, "tensor `strings`");
    assert_one_error(&stderr, shard, "past the end of this shard (64 bytes)");
}

/// A V2 index listing one float slice of 2^20 values 4096 times as the slices of a tensor of
/// 2^32 values (16 GiB), each listing finding the same slice's entry and so the same 4 MiB of
/// the data shard: refused at open, naming the tensor, before any slice is read.
#[test]
fn slices_sharing_their_bytes_are_refused() {
    if let Some(index) = role() {
        play_child(&index);
    }
    let length = 1u64 << 20;
    let shape = |n| {
        let mut dim = vec![0x08];
        varint(&mut dim, n);
        field(0x12, &field(0x12, &dim))
    };
    let mut extent = vec![0x10];
    varint(&mut extent, length);
    let slice = field(0x3a, &field(0x0a, &extent));
    let whole = [&[0x08, 1][..], &shape(length << 12), &slice.repeat(1 << 12)].concat();
    let zeros = vec![0u8; 4 * length as usize];
    let mut part = [&[0x08, 1][..], &shape(length), &[0x28]].concat();
    varint(&mut part, 4 * length);
    part.push(0x35);
    part.extend_from_slice(&mask(crc32c::crc32c(&zeros)).to_le_bytes());
    // TF's key for slice 0,2^20 of `w` (`EncodeTensorNameSlice`): 0, the name, its end, one
    // dimension, start 0 and length 2^20 in `OrderedCode`.
    let key = [
        0x00, b'w', 0x00, 0x01, 0x01, 0x01, 0x80, 0xf0, 0x10, 0x00, 0x00,
    ];
    let data = block(&[(0, b"", &header()), (0, &key, &part), (0, b"w", &whole)]);
    let index = table(&[data], |h| h.to_vec());
    let dir = tempfile::tempdir().unwrap();
    let shard = dir.path().join("model.ckpt-1.data-00000-of-00001");
    std::fs::write(&shard, zeros).unwrap();
    let test = towers_testing::test_name!("slices_sharing_their_bytes_are_refused");
    let (file, stderr) = open_in_child(&test, &index, dir.path());
    assert_one_error(&stderr, &file, "tensor `w`");
    assert_one_error(&stderr, &file, "same bytes of data shard 0");
}

/// A V1 checkpoint (one file) whose tensor list claims a float tensor of 2^40 values, of which
/// it holds one: an error naming the file and the tensor, nothing the size of the claim
/// allocated.
#[test]
fn a_v1_tensor_claiming_2_pow_40_values_is_refused() {
    if let Some(file) = role() {
        play_child(&file);
    }
    let mut dim = vec![0x08];
    varint(&mut dim, 1 << 40);
    let shape = field(0x12, &field(0x12, &dim));
    let listed = [&field(0x0a, b"w")[..], &shape, &[0x18, 1], &[0x22, 0]].concat();
    let meta = field(0x0a, &field(0x0a, &listed));
    let one_value = field(0x2a, &1.0f32.to_le_bytes());
    let saved = [&field(0x0a, b"w")[..], &[0x12, 0], &field(0x1a, &one_value)].concat();
    let data = field(0x12, &saved);
    let file = table(&[block(&[(0, b"", &meta), (0, b"w", &data)])], |h| {
        h.to_vec()
    });
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.ckpt");
    let test = towers_testing::test_name!("a_v1_tensor_claiming_2_pow_40_values_is_refused");
    let (_, stderr) = open_file_in_child(&test, &file, &path);
    let said = "1 values for a Float tensor of shape [1099511627776]";
    assert_one_error(&stderr, path.to_str().unwrap(), said);
}
