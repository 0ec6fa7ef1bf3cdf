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
use towers_testing::assert_error_names;

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
