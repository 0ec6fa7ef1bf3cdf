//! CPU time per image of the JPEG decoders on the Inception shards' images, in one run: ours,
//! libjpeg-turbo's decoder with TF's settings (TF's pixels bit for bit), `dct_method`
//! INTEGER_FAST (TF's default, ours) and INTEGER_ACCURATE, against zune-jpeg (the `image`
//! crate's decoder, which we used before; pixels a few levels from TF's). Our rows say whether
//! libjpeg-turbo has its SIMD code in this build (NASM on the PATH when it was built) or its C
//! code alone: build once without NASM on the PATH for the C figures.

use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::time::Duration;

use zune_jpeg::JpegDecoder;
use zune_jpeg::zune_core::bytestream::ZCursor;
use zune_jpeg::zune_core::colorspace::ColorSpace;
use zune_jpeg::zune_core::options::DecoderOptions;

use burn_towers::data::RecordFormat;
use burn_towers::data::Rgb8;
use burn_towers::data::codec::{DctMethod, decode_rgb8_with, jpeg_simd};
use burn_towers::data::inception::TfExampleFormat;
use burn_towers::data::tf_example::ImageRecord;
use burn_towers::data::tfrecord::record_data;

use super::cpu_time;

/// A decoder's name, and a closure decoding one JPEG with it.
type Decoder<'a> = (&'static str, &'a mut dyn FnMut(&[u8]));

/// Prints each decoder's best of 3 rounds over up to 256 of the shards' images, on this thread.
pub fn print(files: &[PathBuf]) -> anyhow::Result<()> {
    let images = first_images(files, 256)?;
    let mut zune_out = Vec::new();
    let pixels: usize = images
        .iter()
        .map(|jpeg| zune(jpeg, &mut zune_out) / 3)
        .sum();
    println!(
        "\nJPEG decoding, one thread, {} images of the shards ({:.0} pixels on average)",
        images.len(),
        pixels as f64 / images.len() as f64
    );
    println!("| decoder | ms/image |");
    println!("|---|---:|");
    let mut zune_row = |jpeg: &[u8]| {
        zune(jpeg, &mut zune_out);
    };
    let (mut fast, mut accurate) = (Rgb8::default(), Rgb8::default());
    let (mut fast_row, mut accurate_row) = (
        |jpeg: &[u8]| decode_rgb8_with(jpeg, DctMethod::IntegerFast, &mut fast).unwrap(),
        |jpeg: &[u8]| decode_rgb8_with(jpeg, DctMethod::IntegerAccurate, &mut accurate).unwrap(),
    );
    let (fast_name, accurate_name) = match jpeg_simd() {
        true => (
            "libjpeg-turbo SIMD, TF's INTEGER_FAST (ours, default)",
            "libjpeg-turbo SIMD, TF's INTEGER_ACCURATE",
        ),
        false => (
            "libjpeg-turbo C (no NASM at build), TF's INTEGER_FAST (ours, default)",
            "libjpeg-turbo C (no NASM at build), TF's INTEGER_ACCURATE",
        ),
    };
    let decoders: [Decoder; 3] = [
        (fast_name, &mut fast_row),
        (accurate_name, &mut accurate_row),
        (
            "zune-jpeg 0.5 (the image crate's; not TF's pixels)",
            &mut zune_row,
        ),
    ];
    for (name, decode) in decoders {
        let best = (0..3)
            .map(|_| {
                let start = cpu_time();
                images.iter().for_each(|jpeg| decode(jpeg));
                cpu_time() - start
            })
            .min()
            .unwrap_or(Duration::ZERO);
        let ms = best.as_secs_f64() * 1e3 / images.len() as f64;
        println!("| {name} | {ms:.3} |");
    }
    let (mut ours, mut theirs, mut differing, mut values, mut worst) =
        (Rgb8::default(), Vec::new(), 0, 0, 0);
    for jpeg in &images {
        decode_rgb8_with(jpeg, DctMethod::IntegerFast, &mut ours).unwrap();
        zune(jpeg, &mut theirs);
        for (&a, &b) in ours.pixels.iter().zip(&theirs) {
            differing += usize::from(a != b);
            worst = worst.max(a.abs_diff(b));
        }
        values += ours.pixels.len();
    }
    println!(
        "zune-jpeg against TF's pixels (ours): {:.1}% of the values differ, by up to {worst} levels",
        100.0 * differing as f64 / values as f64
    );
    Ok(())
}

/// Decodes `jpeg` with zune-jpeg into `out` (reused, as our decoding reuses its buffer), with
/// the `image` crate's settings; returns the decoded length.
fn zune(jpeg: &[u8], out: &mut Vec<u8>) -> usize {
    let options = DecoderOptions::default()
        .set_strict_mode(false)
        .jpeg_set_out_colorspace(ColorSpace::RGB);
    let mut decoder = JpegDecoder::new_with_options(ZCursor::new(jpeg), options);
    decoder.decode_headers().expect("the shards' JPEGs decode");
    out.resize(decoder.output_buffer_size().expect("headers decoded"), 0);
    decoder.decode_into(out).expect("the shards' JPEGs decode");
    out.len()
}

/// The encoded images of the shards' first `n` records.
fn first_images(files: &[PathBuf], n: usize) -> anyhow::Result<Vec<Vec<u8>>> {
    let mut images = Vec::new();
    for path in files {
        let mut file = std::fs::File::open(path)?;
        for span in TfExampleFormat::new(1001).index(path)? {
            let mut bytes = vec![0; span.len];
            file.seek(SeekFrom::Start(span.offset))?;
            file.read_exact(&mut bytes)?;
            let record =
                ImageRecord::parse(record_data(path, 0, &bytes)?).map_err(anyhow::Error::msg)?;
            images.push(record.encoded);
            if images.len() == n {
                return Ok(images);
            }
        }
    }
    Ok(images)
}
