//! Brightness and contrast (`tf.image.adjust_brightness`, `adjust_contrast`, and their
//! `random_` forms).

use rand::RngExt;

use super::Rng;
use super::vectorized::vectorized;
use crate::image::{Image, Planes};

/// Adds `delta` to every value.
pub fn adjust_brightness(mut image: Image, delta: f32) -> Image {
    brighten(image.data_mut(), delta);
    image
}

/// Adds `delta` to every value (of an image in any layout).
pub fn brighten(values: &mut [f32], delta: f32) {
    values.iter_mut().for_each(|v| *v += delta);
}

/// Adds a delta drawn uniformly from `[-max_delta, max_delta]`.
pub fn random_brightness(image: Image, max_delta: f32, rng: &mut Rng) -> Image {
    let delta = rng.random_range(-max_delta..=max_delta);
    adjust_brightness(image, delta)
}

/// Scales each channel's distance from that channel's mean by `factor`:
/// `(x - mean) * factor + mean`, the mean taken over the image's pixels.
pub fn adjust_contrast(mut image: Image, factor: f32) -> Image {
    let c = image.channels();
    let pixels = (image.height() * image.width()) as f32;
    let mut means = vec![0.0f32; c];
    for pixel in image.data().chunks_exact(c) {
        means.iter_mut().zip(pixel).for_each(|(m, v)| *m += v);
    }
    means.iter_mut().for_each(|m| *m /= pixels);
    for pixel in image.data_mut().chunks_exact_mut(c) {
        for (v, m) in pixel.iter_mut().zip(&means) {
            *v = (*v - m) * factor + m;
        }
    }
    image
}

/// [`adjust_contrast`] on planes, in place. The means are summed in 16 interleaved partial
/// sums (which vectorize, and round less than one running sum), so results can differ from
/// [`adjust_contrast`]'s in the last bits.
pub fn adjust_contrast_planes(planes: &mut Planes, factor: f32) {
    contrast_planes_between(planes, factor, |v| v, |v| v);
}

/// [`adjust_contrast_planes`] of the values mapped by `before`, each result mapped by
/// `after`: fused into the contrast's passes, with the values of separate passes.
pub(crate) fn contrast_planes_between(
    planes: &mut Planes,
    factor: f32,
    before: impl Fn(f32) -> f32 + Copy,
    after: impl Fn(f32) -> f32,
) {
    let means = channel_means(planes, before);
    let [_, h, w] = planes.shape();
    vectorized(
        #[inline(always)]
        || {
            for (plane, m) in planes.data_mut().chunks_exact_mut(h * w).zip(means) {
                plane
                    .iter_mut()
                    .for_each(|v| *v = after(contrast(before(*v), m, factor)));
            }
        },
    );
}

/// `(x - mean) * factor + mean`, one value of [`adjust_contrast`].
#[inline(always)]
pub(crate) fn contrast(x: f32, mean: f32, factor: f32) -> f32 {
    (x - mean) * factor + mean
}

/// The mean of each plane's values mapped by `before` (what [`adjust_contrast_planes`] uses).
pub(crate) fn channel_means(planes: &Planes, before: impl Fn(f32) -> f32 + Copy) -> Vec<f32> {
    let [_, h, w] = planes.shape();
    vectorized(
        #[inline(always)]
        || {
            planes
                .data()
                .chunks_exact(h * w)
                .map(|plane| mean(plane, before))
                .collect()
        },
    )
}

#[inline(always)]
fn mean(values: &[f32], before: impl Fn(f32) -> f32) -> f32 {
    let mut lanes = [0.0f32; 16];
    let chunks = values.chunks_exact(16);
    let rest: f32 = chunks.remainder().iter().map(|&v| before(v)).sum();
    for chunk in chunks {
        lanes
            .iter_mut()
            .zip(chunk)
            .for_each(|(l, &v)| *l += before(v));
    }
    (lanes.iter().sum::<f32>() + rest) / values.len() as f32
}

/// Adjusts contrast by a factor drawn uniformly from `[lower, upper]`.
pub fn random_contrast(image: Image, lower: f32, upper: f32, rng: &mut Rng) -> Image {
    let factor = rng.random_range(lower..=upper);
    adjust_contrast(image, factor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn brightness_adds_delta() {
        let img = Image::from_hwc(vec![1.0, 2.0], 1, 1, 2);
        assert_eq!(adjust_brightness(img, 0.5).data(), &[1.5, 2.5]);
    }

    #[test]
    fn contrast_on_planes_matches_the_image_op() {
        let data: Vec<f32> = (0..3 * 7 * 9)
            .map(|i| (i * 37 % 101) as f32 / 100.0)
            .collect();
        let image = Image::from_hwc(data, 7, 9, 3);
        let mut planes = Planes::from(image.clone());
        adjust_contrast_planes(&mut planes, 1.4);
        let want = adjust_contrast(image, 1.4).into_chw();
        let worst = planes
            .data()
            .iter()
            .zip(&want)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f32::max);
        assert!(worst < 1e-6, "{worst}");
    }

    #[test]
    fn contrast_scales_around_each_channel_mean() {
        // 2 pixels, 2 channels: channel 0 = [1, 3] (mean 2), channel 1 = [10, 20] (mean 15).
        let img = Image::from_hwc(vec![1.0, 10.0, 3.0, 20.0], 1, 2, 2);
        let out = adjust_contrast(img, 2.0);
        assert_eq!(out.data(), &[0.0, 5.0, 4.0, 25.0]);
    }
}
