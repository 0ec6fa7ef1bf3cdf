//! Image summaries as TF's `tf.summary.image` made them from float images
//! (`core/kernels/summary_image_op.cc`): each image scaled into 0..=255 on its own, then PNG.
//!
//! TF's scaling: when every finite value is non-negative, multiply by `255 / max`; otherwise
//! multiply by `127 / max(|min|, |max|)` and add 128. The result is truncated to `u8`; a pixel
//! with a NaN or infinite channel is painted red.

use image::ImageEncoder;
use image::codecs::png::PngEncoder;
use towers_data::Image;

use crate::summary::proto;

/// TF's colour for pixels that are not finite.
const BAD_COLOR: [u8; 4] = [255, 0, 0, 255];

/// The summary image of `image`: TF's scaling, PNG-encoded; `None` unless it has 1 (grey),
/// 3 (RGB) or 4 (RGBA) channels, the only ones TF and PNG show.
pub fn image_summary(image: &Image) -> Option<proto::Image> {
    let color = match image.channels() {
        1 => image::ExtendedColorType::L8,
        3 => image::ExtendedColorType::Rgb8,
        4 => image::ExtendedColorType::Rgba8,
        _ => return None,
    };
    let pixels = to_u8(image);
    let (width, height) = (image.width() as u32, image.height() as u32);
    let mut png = Vec::new();
    PngEncoder::new(&mut png)
        .write_image(&pixels, width, height, color)
        .expect("encoding to memory cannot fail");
    Some(proto::Image {
        height: height as i32,
        width: width as i32,
        colorspace: image.channels() as i32,
        encoded_image_string: png,
    })
}

/// TF's `NormalizeFloatImage`: HWC floats to HWC bytes.
pub fn to_u8(image: &Image) -> Vec<u8> {
    let channels = image.channels();
    let finite = |pixel: &[f32]| pixel.iter().all(|v| v.is_finite());
    let (min, max) = image
        .data()
        .chunks(channels)
        .filter(|p| finite(p))
        .flatten()
        .fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), &v| {
            (lo.min(v), hi.max(v))
        });
    const ZERO: f32 = 1e-6;
    let (scale, offset) = if min < 0.0 {
        let max_abs = min.abs().max(max.abs());
        (if max_abs < ZERO { 0.0 } else { 127.0 / max_abs }, 128.0)
    } else {
        (if max < ZERO { 0.0 } else { 255.0 / max }, 0.0)
    };
    let mut out = Vec::with_capacity(image.data().len());
    for pixel in image.data().chunks(channels) {
        if finite(pixel) {
            out.extend(pixel.iter().map(|v| (v * scale + offset) as u8));
        } else {
            out.extend_from_slice(&BAD_COLOR[..channels]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaling_follows_tf_on_both_branches() {
        // Non-negative: the largest value becomes 255.
        let image = Image::from_hwc(vec![0.0, 1.0, 2.0, 4.0, 3.0, 0.5], 1, 2, 3);
        assert_eq!(to_u8(&image), [0, 63, 127, 255, 191, 31]);
        // Signed: 0 becomes 128, the largest magnitude 127 away from it; a NaN pixel is red.
        let image = Image::from_hwc(vec![-2.0, 0.0, 1.0, 2.0, f32::NAN, 0.0], 1, 2, 3);
        assert_eq!(to_u8(&image), [1, 128, 191, 255, 0, 0]);
        // Flat zero: all black.
        assert_eq!(to_u8(&Image::from_hwc(vec![0.0; 3], 1, 1, 3)), [0, 0, 0]);
    }

    #[test]
    fn png_decodes_to_the_scaled_pixels() {
        let data: Vec<f32> = (0..4 * 5 * 3).map(|i| (i % 11) as f32 - 4.0).collect();
        let image = Image::from_hwc(data, 4, 5, 3);
        let summary = image_summary(&image).unwrap();
        assert_eq!(
            (summary.height, summary.width, summary.colorspace),
            (4, 5, 3)
        );
        let decoded = image::load_from_memory(&summary.encoded_image_string).unwrap();
        assert_eq!(decoded.to_rgb8().into_raw(), to_u8(&image));
        assert!(image_summary(&Image::from_hwc(vec![0.0; 2], 1, 1, 2)).is_none());
    }
}
