//! Our JPEG decoding gives TensorFlow's pixels bit for bit: `tf.io.decode_jpeg(jpeg,
//! channels=3)` with its default `dct_method` and with `"INTEGER_ACCURATE"`, on JPEGs written by
//! TF and by Pillow (tests/data/tf_jpeg, from scripts/tf_fixtures/jpeg_decode.py).
//!
//! Whatever the build: libjpeg-turbo's C code alone (no NASM when it was built) and with its
//! SIMD code (NASM found, the `jpeg-simd` feature) both give these pixels; `cargo test -p
//! towers-data --test integration tf_jpeg`, and `--no-default-features` for the C code alone.

use std::path::{Path, PathBuf};

use towers_data::Rgb8;
use towers_data::codec::{DctMethod, decode_rgb8, decode_rgb8_with, jpeg_simd};
use towers_testing::{assert_error_names, report};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/tf_jpeg")
}

/// `(name, width, height)` of every case in the manifest.
fn cases() -> Vec<(String, usize, usize)> {
    let manifest = std::fs::read_to_string(fixtures().join("manifest.txt")).unwrap();
    manifest
        .lines()
        .map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let [name, width, height] = fields[..] else {
                panic!("manifest line {line:?}");
            };
            (
                name.to_owned(),
                width.parse().unwrap(),
                height.parse().unwrap(),
            )
        })
        .collect()
}

fn read(name: &str) -> Vec<u8> {
    std::fs::read(fixtures().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Decodes every fixture with `dct` and compares with TF's pixels in `NAME.{suffix}.rgb`.
fn assert_tfs_pixels(dct: DctMethod, suffix: &str) {
    let cases = cases();
    assert!(cases.len() >= 15, "{} cases", cases.len());
    println!("libjpeg-turbo's SIMD code in this build: {}", jpeg_simd());
    let mut out = Rgb8::default();
    for (name, width, height) in cases {
        decode_rgb8_with(&read(&format!("{name}.jpg")), dct, &mut out)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!((out.width, out.height), (width, height), "{name}");
        let expected = read(&format!("{name}.{suffix}.rgb"));
        let differing = out
            .pixels
            .iter()
            .zip(&expected)
            .filter(|(a, b)| a != b)
            .count();
        let worst = out
            .pixels
            .iter()
            .zip(&expected)
            .map(|(&a, &b)| a.abs_diff(b))
            .max();
        assert!(
            out.pixels == expected,
            "{name} ({dct:?}): {differing} of {} values differ from TF's, by up to {worst:?}",
            expected.len()
        );
    }
}

#[test]
fn tfs_default_dct_method_gives_tfs_pixels() {
    assert_tfs_pixels(DctMethod::IntegerFast, "fast");
}

#[test]
fn integer_accurate_gives_tfs_pixels() {
    assert_tfs_pixels(DctMethod::IntegerAccurate, "accurate");
}

#[test]
fn the_default_decoding_is_tfs_default() {
    let mut out = Rgb8::default();
    decode_rgb8(&read("pil_420.jpg"), &mut out).unwrap();
    assert_eq!(out.pixels, read("pil_420.fast.rgb"));
}

/// TF refuses these same bytes ("Invalid JPEG data", `try_recover_truncated=false`), as the
/// fixture script checks: cut in the header, and in the scan. Without only its end marker too:
/// TF 2.21 stops at row 14 of 24 on both cuts ("Premature end of JPEG data. Stopped at line
/// 14/24"), as libjpeg must see the marker to finish the last MCU row.
#[test]
fn a_truncated_jpeg_is_an_error_as_in_tf() {
    let jpeg = read("tf_420.jpg");
    let mut out = Rgb8::default();
    let message = decode_rgb8(&jpeg[..jpeg.len() / 2], &mut out).unwrap_err();
    assert_error_names(&message, &["corrupt image"]);
    for cut in [50, 2] {
        let message = decode_rgb8(&jpeg[..jpeg.len() - cut], &mut out).unwrap_err();
        assert_error_names(&message, &["Premature end", "row 14 of 24"]);
    }
    // The decoder that failed decodes the next JPEG as if nothing had happened.
    decode_rgb8(&jpeg, &mut out).unwrap();
    assert_eq!(out.pixels, read("tf_420.fast.rgb"));
}

/// A progressive JPEG built byte by byte: `components` components of `width` x `height`
/// (4:4:4), each given `scans_per_component` AC scans that are nothing but end-of-band runs
/// over all of its blocks (a dozen bytes a scan, whatever the size), then padded with a comment
/// to at least `min_len` bytes. libjpeg decodes it to flat grey, with warnings (AC scans
/// without a DC scan), which keep the image as in TF.
fn crafted_progressive(
    width: u16,
    height: u16,
    components: u8,
    scans_per_component: usize,
    min_len: usize,
) -> Vec<u8> {
    let mut jpeg = vec![0xFF, 0xD8];
    let segment = |jpeg: &mut Vec<u8>, marker: u8, body: &[u8]| {
        jpeg.extend([0xFF, marker]);
        jpeg.extend((body.len() as u16 + 2).to_be_bytes());
        jpeg.extend(body);
    };
    let mut dqt = vec![0];
    dqt.extend([1; 64]);
    segment(&mut jpeg, 0xDB, &dqt);
    let mut sof = vec![8];
    sof.extend(height.to_be_bytes());
    sof.extend(width.to_be_bytes());
    sof.push(components);
    for id in 1..=components {
        sof.extend([id, 0x11, 0]);
    }
    segment(&mut jpeg, 0xC2, &sof);
    // AC table 0: the 15 end-of-band symbols EOB0..EOB14 (0x00, 0x10, .., 0xE0), 4-bit codes.
    let mut dht = vec![0x10];
    dht.extend([0, 0, 0, 15, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    dht.extend((0..15).map(|r| r << 4));
    segment(&mut jpeg, 0xC4, &dht);
    let blocks = usize::from(width.div_ceil(8)) * usize::from(height.div_ceil(8));
    let data = eob_runs(blocks);
    for _ in 0..scans_per_component {
        for id in 1..=components {
            segment(&mut jpeg, 0xDA, &[1, id, 0x00, 1, 63, 0x00]);
            jpeg.extend(&data);
        }
    }
    let padding = min_len.saturating_sub(jpeg.len() + 2 + 4);
    if padding > 0 {
        segment(&mut jpeg, 0xFE, &vec![b'x'; padding]);
    }
    jpeg.extend([0xFF, 0xD9]);
    jpeg
}

/// Entropy-coded data of one AC scan over `blocks` blocks: end-of-band runs (EOBr: 2^r + r
/// extra bits) with the 4-bit codes of [`crafted_progressive`]'s table (EOBr's code is r).
fn eob_runs(mut blocks: usize) -> Vec<u8> {
    let mut bits = Vec::new();
    let mut put = |value: usize, count: u32| {
        bits.extend((0..count).rev().map(|i| (value >> i) & 1 == 1));
    };
    while blocks > 0 {
        let run = blocks.min(32767);
        let r = run.ilog2();
        put(r as usize, 4);
        put(run - (1 << r), r);
        blocks -= run;
    }
    bits.resize(bits.len().div_ceil(8) * 8, true);
    let mut bytes = Vec::new();
    for byte in bits.chunks(8) {
        let byte = byte.iter().fold(0u8, |acc, &bit| acc << 1 | u8::from(bit));
        bytes.push(byte);
        if byte == 0xFF {
            bytes.push(0); // byte stuffing
        }
    }
    bytes
}

/// A JPEG of many empty scans: each scan costs a walk over all of the image's blocks, so 10,000
/// scans of a 2048 x 2048 image (a 130 kB file, well inside the size bound) would keep a reader
/// busy for seconds. Scan 101 is refused with djpeg's `-maxscans` message, before its data is
/// read; 100 scans still decode.
#[test]
fn a_jpeg_of_too_many_scans_is_refused_at_the_first_scan_past_the_cap() {
    let mut out = Rgb8::default();
    let many = crafted_progressive(2048, 2048, 1, 10_000, 0);
    let start = std::time::Instant::now();
    let message = decode_rgb8(&many, &mut out).unwrap_err();
    let elapsed = start.elapsed();
    assert_error_names(
        &message,
        &[
            "corrupt image",
            "Scan number 101 exceeds maximum scans (100)",
        ],
    );
    println!("{} bytes, 10,000 scans: refused in {elapsed:?}", many.len());

    let at_cap = crafted_progressive(64, 48, 1, 100, 0);
    decode_rgb8(&at_cap, &mut out).unwrap();
    assert_eq!((out.width, out.height), (64, 48));
    assert!(out.pixels.iter().all(|&v| v == 128), "flat grey");
    let past_cap = crafted_progressive(64, 48, 1, 101, 0);
    let message = decode_rgb8(&past_cap, &mut out).unwrap_err();
    assert_error_names(&message, &["Scan number 101 exceeds maximum scans (100)"]);
}

/// A progressive colour JPEG's whole-image coefficient buffers take 6 bytes a pixel, twice its
/// decoded RGB: a 400-byte file may claim a 640 x 640 image (1.2 MB decoded, inside the bound of
/// 4096 decoded bytes per input byte), but not libjpeg's 2.4 MB of buffers for it. The same
/// image from a larger file decodes.
#[test]
fn libjpegs_memory_is_capped_by_the_input_size_bound() {
    let mut out = Rgb8::default();
    let small = crafted_progressive(640, 640, 3, 1, 400);
    assert!(small.len() <= 410, "{} bytes", small.len());
    let message = decode_rgb8(&small, &mut out).unwrap_err();
    assert_error_names(
        &message,
        &[
            "corrupt image",
            "multi-scan JPEG needs more than",
            "memory limit of 1638400 bytes",
        ],
    );
    let large = crafted_progressive(640, 640, 3, 1, 1000);
    decode_rgb8(&large, &mut out).unwrap();
    assert_eq!((out.width, out.height), (640, 640));
}

/// The format that read the record names its file and record around libjpeg's refusal.
#[test]
fn a_refused_jpeg_names_its_file_and_record() {
    use towers_data::RecordFormat;
    use towers_data::inception::TfExampleFormat;
    use towers_data::tf_example::ImageRecord;
    use towers_data::tfrecord::TfRecordWriter;

    let record = ImageRecord {
        encoded: crafted_progressive(64, 48, 1, 101, 0),
        label: 1,
        ..ImageRecord::default()
    };
    let mut writer = TfRecordWriter::new(Vec::new());
    writer.write(&record.encode()).unwrap();
    // A record's span, as the reader hands it over: its data and data CRC, after the 12-byte
    // length header.
    let framed = writer.into_inner().unwrap().split_off(12);
    let path = Path::new("/data/train-00003-of-00008");
    let error = TfExampleFormat::new(10)
        .decode(path, 7, &framed)
        .unwrap_err();
    assert_error_names(
        &report(&error),
        &[
            "train-00003-of-00008, record 7",
            "exceeds maximum scans (100)",
        ],
    );
}
