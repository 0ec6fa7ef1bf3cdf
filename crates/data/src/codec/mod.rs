//! Image decoding (JPEG, PNG, BMP, PPM/PGM, TIFF, WebP: every format torchvision's
//! `ImageFolder` takes) to 8-bit RGB ([`Rgb8`]) or to `f32` [`Image`]s in [0, 1], and JPEG and
//! PNG encoding.
//!
//! JPEGs decode into a buffer the caller keeps, to TensorFlow's pixels bit for bit
//! (`tf.io.decode_jpeg(channels=3)`, by libjpeg-turbo's decoder with TF's settings:
//! `tf_jpeg.rs`); `decode_jpeg` is the one place that calls it. [`DctMethod`],
//! [`decode_image_with`] and [`decode_rgb8_with`] choose TF's `dct_method`.
//!
//! The other formats go through the `image` crate. Greyscale, CMYK and alpha images all come
//! out as 3-channel RGB, as TF's `channels=3` does (alpha dropped, not blended).

mod tf_jpeg;

use std::io::Cursor;

use image::{DynamicImage, ImageFormat, ImageReader, RgbImage};

use crate::error::{Cause, While};
use crate::image::{Image, Rgb8};
pub use tf_jpeg::{DctMethod, simd as jpeg_simd};

use tf_jpeg::CmykToRgb;

/// Decodes an image (recognized by content, not by name) to RGB values in [0, 1]
/// (TF's `convert_image_dtype` to float). JPEGs: see [`decode_rgb8`].
pub fn decode_image(bytes: &[u8]) -> Result<Image, Cause> {
    let mut rgb = Rgb8::default();
    decode_rgb8(bytes, &mut rgb)?;
    Ok(rgb.to_image())
}

/// [`decode_image`] with JPEGs' inverse DCT chosen as TF's `dct_method`.
pub fn decode_image_with(bytes: &[u8], dct: DctMethod) -> Result<Image, Cause> {
    let mut rgb = Rgb8::default();
    decode_rgb8_with(bytes, dct, &mut rgb)?;
    Ok(rgb.to_image())
}

/// Decodes an image (recognized by content) into `out`, reusing its buffer. JPEGs go to
/// `decode_jpeg`: TF's pixels bit for bit, with TF's default `dct_method`.
pub fn decode_rgb8(bytes: &[u8], out: &mut Rgb8) -> Result<(), Cause> {
    decode_rgb8_by(bytes, out, decode_jpeg, DynamicImage::into_rgb8)
}

/// [`decode_rgb8`] with JPEGs' inverse DCT chosen as TF's `dct_method`.
pub fn decode_rgb8_with(bytes: &[u8], dct: DctMethod, out: &mut Rgb8) -> Result<(), Cause> {
    let jpeg = |bytes: &[u8], out: &mut Rgb8| {
        tf_jpeg::decode(bytes, dct, CmykToRgb::Tf, max_decoded_bytes(bytes), out)
    };
    decode_rgb8_by(bytes, out, jpeg, DynamicImage::into_rgb8)
}

/// Decodes an image (recognized by content) into `out` as Pillow's
/// `Image.open(f).convert("RGB")` does, which torchvision's datasets call: JPEGs by the same
/// libjpeg with its accurate integer DCT and its fancy upsampling, CMYK JPEGs made RGB by
/// Pillow's formula (every one taken as Adobe's, inverted); 16-bit samples as Pillow opens
/// them (`pillow_rgb8`); the rest as [`decode_rgb8`].
pub fn decode_rgb8_as_pillow(bytes: &[u8], out: &mut Rgb8) -> Result<(), Cause> {
    let jpeg = |bytes: &[u8], out: &mut Rgb8| {
        let dct = DctMethod::IntegerAccurate;
        tf_jpeg::decode(bytes, dct, CmykToRgb::Pillow, max_decoded_bytes(bytes), out)
    };
    decode_rgb8_by(bytes, out, jpeg, pillow_rgb8)
}

/// A decoded image made 8-bit RGB as Pillow's `convert("RGB")` makes it. Pillow opens 16-bit
/// colour (and grey with alpha) at 8 bits, by the high byte (`RGB;16B`, `LA;16B`: truncated,
/// where the `image` crate rounds), and 16-bit grey as `I;16`, whose conversion clips at 255:
/// such an image comes out nearly white, in torchvision as here.
fn pillow_rgb8(image: DynamicImage) -> RgbImage {
    let each_sample = |image: DynamicImage, to_u8: fn(u16) -> u8| {
        let rgb = image.into_rgb16();
        let bytes = rgb.as_raw().iter().map(|&v| to_u8(v)).collect();
        RgbImage::from_raw(rgb.width(), rgb.height(), bytes).expect("3 samples per pixel")
    };
    match image {
        DynamicImage::ImageLuma16(_) => each_sample(image, |v| v.min(255) as u8),
        DynamicImage::ImageLumaA16(_)
        | DynamicImage::ImageRgb16(_)
        | DynamicImage::ImageRgba16(_) => each_sample(image, |v| (v >> 8) as u8),
        other => other.into_rgb8(),
    }
}

/// The formats besides JPEG that decode, by content: torchvision's `IMG_EXTENSIONS`, and GIF,
/// which Pillow opens whatever the file's name (a GIF named `.jpg` is common in images
/// gathered from the web) and TF's `decode_image` decodes (its first frame, as here).
const DECODED_BY_THE_IMAGE_CRATE: [ImageFormat; 6] = [
    ImageFormat::Png,
    ImageFormat::Bmp,
    ImageFormat::Pnm,
    ImageFormat::Tiff,
    ImageFormat::WebP,
    ImageFormat::Gif,
];

/// Decodes a JPEG by `jpeg`, or another image by the `image` crate and `to_rgb8`, into `out`.
fn decode_rgb8_by(
    bytes: &[u8],
    out: &mut Rgb8,
    jpeg: impl FnOnce(&[u8], &mut Rgb8) -> Result<(), Cause>,
    to_rgb8: fn(DynamicImage) -> RgbImage,
) -> Result<(), Cause> {
    if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        return jpeg(bytes, out);
    }
    check_png_palette(bytes)?;
    let mut reader = ImageReader::new(Cursor::new(bytes))
        .with_guessed_format()
        .map_err(While::doing("cannot read the image"))?;
    reader.limits(limits_for(bytes.len()));
    const DECODED: &str = "JPEG, PNG, BMP, PPM/PGM, TIFF, WebP and GIF are";
    match reader.format() {
        Some(format) if DECODED_BY_THE_IMAGE_CRATE.contains(&format) => {}
        Some(other) => return Err(format!("unsupported image format {other:?} ({DECODED})").into()),
        None => return Err(format!("not an image of a known format ({DECODED})").into()),
    }
    let decoded = reader.decode().map_err(While::doing("corrupt image"))?;
    let rgb = to_rgb8(decoded);
    (out.width, out.height) = (rgb.width() as usize, rgb.height() as usize);
    out.pixels.clear();
    out.pixels.extend_from_slice(rgb.as_raw());
    Ok(())
}

/// Refuses a PNG whose palette (`PLTE`) is not whole RGB triples, before the `image` crate
/// sees it: png 0.18.1 accepts one of 4 to 767 bytes and then panics expanding it
/// (image-rs/image-png#694; found by the cargo-fuzz target `image`). Walks the chunks up to the
/// first `IDAT`, as the palette must come before it; anything else is left to the decoder.
fn check_png_palette(bytes: &[u8]) -> Result<(), Cause> {
    const SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";
    let Some(mut rest) = bytes.strip_prefix(SIGNATURE) else {
        return Ok(());
    };
    while let Some((header, body)) = rest.split_first_chunk::<8>() {
        let len = u32::from_be_bytes(header[..4].try_into().expect("4 bytes")) as usize;
        match &header[4..] {
            b"PLTE" if !len.is_multiple_of(3) => {
                return Err(format!(
                    "corrupt image: a PNG palette (PLTE) of {len} bytes, not whole RGB triples"
                )
                .into());
            }
            b"IDAT" | b"IEND" => return Ok(()),
            _ => {}
        }
        // The chunk's data and CRC; a length past the input is the decoder's to report.
        let Some(next) = len.checked_add(4).and_then(|skip| body.get(skip..)) else {
            return Ok(());
        };
        rest = next;
    }
    Ok(())
}

/// The JPEG decoder, chosen here and nowhere else: libjpeg-turbo's with TF's settings and TF's
/// default `dct_method` (INTEGER_FAST): TF's pixels bit for bit.
fn decode_jpeg(bytes: &[u8], out: &mut Rgb8) -> Result<(), Cause> {
    let dct = DctMethod::default();
    tf_jpeg::decode(bytes, dct, CmykToRgb::Tf, max_decoded_bytes(bytes), out)
}

/// The decoded size a JPEG of `bytes` may claim: [`MAX_EXPANSION`] bytes per input byte.
fn max_decoded_bytes(bytes: &[u8]) -> u64 {
    (bytes.len() as u64).saturating_mul(MAX_EXPANSION)
}

/// Decoded bytes allowed per byte of input. Real images stay far below (a photo's JPEG
/// decodes to about 10 times its size, a flat colour to a few hundred times, a flat PNG to
/// about 1000); a corrupt header that claims a huge image is refused before the decoder
/// allocates for it, so memory follows the input's size, not its header.
const MAX_EXPANSION: u64 = 4096;

/// The image crate's limits (512 MiB at most) narrowed to [`MAX_EXPANSION`] times the input.
fn limits_for(input_len: usize) -> image::Limits {
    let mut limits = image::Limits::default();
    let bound = (input_len as u64).saturating_mul(MAX_EXPANSION);
    limits.max_alloc = Some(limits.max_alloc.map_or(bound, |default| default.min(bound)));
    limits
}

/// Encodes an RGB image with values in [0, 1] as a JPEG of the given quality (1..=100).
pub fn encode_jpeg(image: &Image, quality: u8) -> Vec<u8> {
    let mut out = Vec::new();
    write_rgb8(
        image,
        image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, quality),
    );
    out
}

/// Encodes an RGB image with values in [0, 1] as a PNG (lossless).
pub fn encode_png(image: &Image) -> Vec<u8> {
    let mut out = Vec::new();
    write_rgb8(image, image::codecs::png::PngEncoder::new(&mut out));
    out
}

/// Writes `image` as 8-bit RGB through `encoder` (into memory).
fn write_rgb8(image: &Image, encoder: impl image::ImageEncoder) {
    assert_eq!(image.channels(), 3, "only RGB images are encoded");
    let pixels = image.to_bytes();
    let (width, height) = (image.width() as u32, image.height() as u32);
    encoder
        .write_image(&pixels, width, height, image::ExtendedColorType::Rgb8)
        .expect("encoding to memory cannot fail");
}

#[cfg(test)]
mod tests {
    use super::*;
    use image::ImageEncoder;

    fn checker() -> Image {
        // 2x2: red, green / blue, white
        let data = [1., 0., 0., 0., 1., 0., 0., 0., 1., 1., 1., 1.].to_vec();
        Image::from_hwc(data, 2, 2, 3)
    }

    #[test]
    fn png_round_trip_is_exact() {
        let img = checker();
        assert_eq!(decode_image(&encode_png(&img)).unwrap(), img);
    }

    #[test]
    fn jpeg_round_trip_is_close() {
        // A smooth 16x16 gradient survives JPEG at quality 95 within a few levels.
        let data: Vec<f32> = (0..16 * 16 * 3)
            .map(|i| ((i / 3) % 16) as f32 / 15.0 * 0.5 + 0.25)
            .collect();
        let img = Image::from_hwc(data, 16, 16, 3);
        let back = decode_image(&encode_jpeg(&img, 95)).unwrap();
        assert_eq!(back.shape(), [16, 16, 3]);
        let worst = img
            .data()
            .iter()
            .zip(back.data())
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f32::max);
        assert!(worst < 0.05, "max error {worst}");
    }

    #[test]
    fn every_jpeg_colour_space_becomes_rgb_in_the_reused_buffer() {
        let data: Vec<f32> = (0..40 * 56 * 3)
            .map(|i| ((i * 7919) % 256) as f32 / 255.0)
            .collect();
        let colour = encode_jpeg(&Image::from_hwc(data, 40, 56, 3), 85);
        let mut grey = Vec::new();
        image::codecs::jpeg::JpegEncoder::new_with_quality(&mut grey, 90)
            .write_image(
                &[10, 200, 90, 30, 250, 0],
                3,
                2,
                image::ExtendedColorType::L8,
            )
            .unwrap();
        let cmyk = include_bytes!("../../tests/data/cmyk.jpg").as_slice();
        let mut out = Rgb8::default();
        for (bytes, size) in [(&colour[..], (40, 56)), (&grey, (2, 3)), (cmyk, (8, 8))] {
            decode_rgb8(bytes, &mut out).unwrap();
            assert_eq!((out.height, out.width), size);
            assert_eq!(out.pixels.len(), out.height * out.width * 3);
        }
        decode_rgb8(&grey, &mut out).unwrap();
        let grey_pixel = &out.pixels[..3];
        assert!(
            grey_pixel.iter().all(|&v| v == grey_pixel[0]),
            "{grey_pixel:?}"
        );
    }

    #[test]
    fn greyscale_png_becomes_rgb() {
        let mut out = Vec::new();
        image::codecs::png::PngEncoder::new(&mut out)
            .write_image(&[0, 255], 2, 1, image::ExtendedColorType::L8)
            .unwrap();
        let img = decode_image(&out).unwrap();
        assert_eq!(img.data(), &[0., 0., 0., 1., 1., 1.]);
    }

    #[test]
    fn cmyk_jpeg_becomes_rgb() {
        // 8x8 CMYK JPEG written by Pillow: left half cyan (C=100%), right half yellow (Y=100%);
        // Pillow decodes it to RGB (0, 255, 255) and (255, 255, 0).
        let img = decode_image(include_bytes!("../../tests/data/cmyk.jpg")).unwrap();
        assert_eq!(img.shape(), [8, 8, 3]);
        let px = |x| [img.get(4, x, 0), img.get(4, x, 1), img.get(4, x, 2)];
        let near = |a: [f32; 3], b: [f32; 3]| a.iter().zip(b).all(|(a, b)| (a - b).abs() < 0.06);
        assert!(near(px(1), [0.0, 1.0, 1.0]), "cyan: {:?}", px(1));
        assert!(near(px(6), [1.0, 1.0, 0.0]), "yellow: {:?}", px(6));
    }

    #[test]
    fn corrupt_and_foreign_bytes_are_errors() {
        let jpeg = encode_jpeg(&checker(), 90);
        assert!(
            decode_image(&jpeg[..jpeg.len() / 2]).is_err(),
            "truncated JPEG"
        );
        // A format the `image` crate knows that neither torchvision nor TF reads: farbfeld.
        assert!(
            decode_image(b"farbfeld\0\0\0\x01\0\0\0\x01\0\0\0\0\0\0\0\0")
                .unwrap_err()
                .to_string()
                .contains("unsupported")
        );
        assert!(
            decode_image(b"hello")
                .unwrap_err()
                .to_string()
                .contains("not an image of a known format")
        );
    }

    /// A PNG cut short is "corrupt image" whose `source()` is the image crate's own error, as a
    /// value: a caller can match it, and a report prints each message once.
    #[test]
    fn the_decoders_error_is_the_source_not_text() {
        let png = encode_png(&checker());
        let error = decode_image(&png[..png.len() - 20]).unwrap_err();
        assert_eq!(error.to_string(), "corrupt image");
        let source = error.source().expect("the decoder's error");
        assert!(
            source.downcast_ref::<image::ImageError>().is_some(),
            "{source:?}"
        );
        assert!(!error.to_string().contains(&source.to_string()));
    }

    /// Found by the cargo-fuzz target `image` (fuzz/): a PNG palette of 4 bytes made png
    /// 0.18.1 panic (image-rs/image-png#694). The input is checked in with its chunk CRCs
    /// recomputed (png skips them in fuzzing builds); it is an error now.
    #[test]
    fn a_png_palette_of_partial_triples_is_an_error_not_a_panic() {
        let crash = include_bytes!("../../tests/data/fuzz/png-palette-partial-triple");
        let message = decode_image(crash).unwrap_err().to_string();
        assert!(message.contains("PNG palette (PLTE) of"), "{message}");
    }

    /// A PNG whose header claims 10000 x 10000 pixels (300 MB of RGB, under the image crate's
    /// own 512 MiB limit) in a few dozen bytes: a limit error, before any allocation for it. A
    /// flat 2000 x 2000 PNG (12 MB decoded from a few kB) still decodes.
    #[test]
    fn a_huge_claimed_size_is_refused_by_the_input_size_bound() {
        let flat = Image::from_hwc(vec![0.5; 2000 * 2000 * 3], 2000, 2000, 3);
        let png = encode_png(&flat);
        assert!(
            (png.len() as u64) * MAX_EXPANSION > 2000 * 2000 * 4,
            "{} bytes",
            png.len()
        );
        assert_eq!(decode_image(&png).unwrap().shape(), [2000, 2000, 3]);

        let mut header = encode_png(&checker());
        header[16..20].copy_from_slice(&10_000u32.to_be_bytes());
        header[20..24].copy_from_slice(&10_000u32.to_be_bytes());
        let crc = crc32fast::hash(&header[12..29]);
        header[29..33].copy_from_slice(&crc.to_be_bytes());
        // The image crate's limit error, under "corrupt image".
        let msg = crate::error::ErrorChain(&*decode_image(&header).unwrap_err()).to_string();
        assert!(msg.to_lowercase().contains("limit"), "{msg}");
    }

    /// Headers of every other format claiming a huge image (100 to 300 MB, under the image
    /// crate's own limit) in a few dozen bytes: limit errors too, whichever decoder reads them.
    #[test]
    fn every_format_claiming_a_huge_size_is_refused() {
        let side: u32 = 10_000;
        let mut ppm = format!("P6\n{side} {side}\n255\n").into_bytes();
        ppm.resize(ppm.len() + 64, 7);
        let mut bmp = b"BM".to_vec();
        for field in [0u32, 0, 54, 40, side, side] {
            bmp.extend_from_slice(&field.to_le_bytes());
        }
        bmp.extend_from_slice(&[1, 0, 24, 0]); // planes 1, 24 bits per pixel
        bmp.resize(bmp.len() + 24, 0); // no compression, sizes and palette left to the reader
        bmp.resize(bmp.len() + 64, 7);
        let mut tiff = b"II*\0\x08\0\0\0\x08\0".to_vec(); // little-endian, 8 entries
        for (tag, kind, value) in [
            (256u16, 4u16, side), // width
            (257, 4, side),       // height
            (258, 3, 8),          // 8 bits per sample
            (259, 3, 1),          // no compression
            (262, 3, 1),          // black is zero
            (273, 4, 110),        // strip offset
            (278, 4, side),       // rows per strip
            (279, 4, side * side),
        ] {
            tiff.extend_from_slice(&tag.to_le_bytes());
            tiff.extend_from_slice(&kind.to_le_bytes());
            tiff.extend_from_slice(&1u32.to_le_bytes());
            tiff.extend_from_slice(&value.to_le_bytes());
        }
        tiff.resize(200, 7);
        // A lossless WebP (VP8L) of 10000 x 10000.
        let size_bits: u32 = (side - 1) | ((side - 1) << 14);
        let mut webp = b"RIFF\0\0\0\0WEBPVP8L\x40\0\0\0\x2f".to_vec();
        webp.extend_from_slice(&size_bits.to_le_bytes());
        webp.resize(20 + 0x40, 7);
        let riff_size = (webp.len() - 8) as u32;
        webp[4..8].copy_from_slice(&riff_size.to_le_bytes());
        for (name, bytes) in [("PPM", ppm), ("BMP", bmp), ("TIFF", tiff), ("WebP", webp)] {
            let error = decode_image(&bytes).expect_err(name);
            let msg = crate::error::ErrorChain(&*error).to_string();
            assert!(msg.to_lowercase().contains("limit"), "{name}: {msg}");
        }
    }
}
