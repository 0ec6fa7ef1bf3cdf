//! Saturation and hue (`tf.image.adjust_saturation`, `adjust_hue`), through TF's RGB <-> HSV
//! formulas.

use rand::RngExt;

use super::Rng;
use super::vectorized::vectorized;
use crate::image::{Image, Planes};

/// `(hue in [0, 1), saturation, value)` of an RGB pixel, as `tf.image.rgb_to_hsv`.
///
/// Written without branches (every candidate computed, one selected) so that loops over
/// planes of pixels vectorize; the values are those of TF's branching formulas.
#[inline(always)]
pub fn rgb_to_hsv([r, g, b]: [f32; 3]) -> [f32; 3] {
    let value = r.max(g).max(b);
    let range = value - r.min(g).min(b);
    let saturation = if value > 0.0 { range / value } else { 0.0 };
    let norm = 1.0 / (6.0 * range);
    let hue = if r == value {
        norm * (g - b)
    } else if g == value {
        norm * (b - r) + 2.0 / 6.0
    } else {
        norm * (r - g) + 4.0 / 6.0
    };
    let hue = if hue < 0.0 { hue + 1.0 } else { hue };
    [if range > 0.0 { hue } else { 0.0 }, saturation, value]
}

/// The RGB pixel of `(hue, saturation, value)`, as `tf.image.hsv_to_rgb`.
#[inline(always)]
pub fn hsv_to_rgb([h, s, v]: [f32; 3]) -> [f32; 3] {
    let c = s * v;
    let m = v - c;
    let dh = h * 6.0;
    let r = ((dh - 3.0).abs() - 1.0).clamp(0.0, 1.0);
    let g = (2.0 - (dh - 2.0).abs()).clamp(0.0, 1.0);
    let b = (2.0 - (dh - 4.0).abs()).clamp(0.0, 1.0);
    [r * c + m, g * c + m, b * c + m]
}

fn map_hsv(mut image: Image, f: impl Fn([f32; 3]) -> [f32; 3]) -> Image {
    assert_eq!(image.channels(), 3, "HSV adjustments take RGB images");
    for pixel in image.data_mut().chunks_exact_mut(3) {
        let rgb = hsv_to_rgb(f(rgb_to_hsv([pixel[0], pixel[1], pixel[2]])));
        pixel.copy_from_slice(&rgb);
    }
    image
}

/// `x mod 1` in [0, 1), as `rem_euclid(1.0)`. For `|x| < 2^31` the integer part is taken by a
/// conversion that vectorizes (and `x - trunc(x)` is exact, so the result is the same).
#[inline(always)]
fn wrap_unit(x: f32, small: bool) -> f32 {
    let r = if small {
        x - (x as i32) as f32
    } else {
        x % 1.0
    };
    if r < 0.0 { r + 1.0 } else { r }
}

/// The saturation-and-hue change of one pixel.
#[inline(always)]
fn saturate_and_rotate([h, s, v]: [f32; 3], factor: f32, delta: f32, small: bool) -> [f32; 3] {
    [wrap_unit(h + delta, small), (s * factor).clamp(0.0, 1.0), v]
}

/// Whether `h + delta` stays far inside `i32` for every hue `h` in [0, 1).
fn small_delta(delta: f32) -> bool {
    delta.abs() < 1e9
}

/// Multiplies saturation by `factor`, clipped to [0, 1].
pub fn adjust_saturation(image: Image, factor: f32) -> Image {
    map_hsv(image, |[h, s, v]| [h, (s * factor).clamp(0.0, 1.0), v])
}

/// Rotates hue by `delta` (a fraction of the colour wheel), wrapping into [0, 1).
pub fn adjust_hue(image: Image, delta: f32) -> Image {
    map_hsv(image, |[h, s, v]| {
        [wrap_unit(h + delta, small_delta(delta)), s, v]
    })
}

/// [`adjust_saturation`] then [`adjust_hue`] in one HSV round trip (the same result: the
/// second op would convert back the HSV values the first one produced).
pub fn adjust_saturation_and_hue(image: Image, factor: f32, delta: f32) -> Image {
    let small = small_delta(delta);
    map_hsv(image, |hsv| saturate_and_rotate(hsv, factor, delta, small))
}

/// [`adjust_saturation_and_hue`] on RGB planes, in place.
pub fn adjust_saturation_and_hue_planes(planes: &mut Planes, factor: f32, delta: f32) {
    saturation_and_hue_planes_between(planes, factor, delta, |rgb| rgb, |rgb| rgb);
}

/// [`adjust_saturation_and_hue_planes`] of the pixels mapped by `before`, each result mapped
/// by `after`: the ops on either side fused into the same pass over the planes, with the
/// values of separate passes.
pub(crate) fn saturation_and_hue_planes_between(
    planes: &mut Planes,
    factor: f32,
    delta: f32,
    before: impl Fn([f32; 3]) -> [f32; 3] + Copy,
    after: impl Fn([f32; 3]) -> [f32; 3] + Copy,
) {
    let [r, g, b] = planes.rgb_mut();
    let small = small_delta(delta);
    vectorized(
        #[inline(always)]
        move || {
            // Two copies of the loop, so that `small` is a constant in each.
            if small {
                rotate_planes(
                    r,
                    g,
                    b,
                    #[inline(always)]
                    move |rgb| {
                        let hsv = saturate_and_rotate(rgb_to_hsv(before(rgb)), factor, delta, true);
                        after(hsv_to_rgb(hsv))
                    },
                );
            } else {
                rotate_planes(
                    r,
                    g,
                    b,
                    #[inline(always)]
                    move |rgb| {
                        let hsv =
                            saturate_and_rotate(rgb_to_hsv(before(rgb)), factor, delta, false);
                        after(hsv_to_rgb(hsv))
                    },
                );
            }
        },
    );
}

/// Maps every pixel of three planes by `f`.
#[inline(always)]
fn rotate_planes(r: &mut [f32], g: &mut [f32], b: &mut [f32], f: impl Fn([f32; 3]) -> [f32; 3]) {
    for ((r, g), b) in r.iter_mut().zip(g.iter_mut()).zip(b.iter_mut()) {
        [*r, *g, *b] = f([*r, *g, *b]);
    }
}

/// Saturation factor drawn uniformly from `[lower, upper]`.
pub fn random_saturation(image: Image, lower: f32, upper: f32, rng: &mut Rng) -> Image {
    let factor = rng.random_range(lower..=upper);
    adjust_saturation(image, factor)
}

/// Hue delta drawn uniformly from `[-max_delta, max_delta]`.
pub fn random_hue(image: Image, max_delta: f32, rng: &mut Rng) -> Image {
    let delta = rng.random_range(-max_delta..=max_delta);
    adjust_hue(image, delta)
}

/// [`random_saturation`] then [`random_hue`] (same draws, same order), in one HSV round trip.
pub fn random_saturation_and_hue(
    image: Image,
    saturation: (f32, f32),
    max_hue_delta: f32,
    rng: &mut Rng,
) -> Image {
    let factor = rng.random_range(saturation.0..=saturation.1);
    let delta = rng.random_range(-max_hue_delta..=max_hue_delta);
    adjust_saturation_and_hue(image, factor, delta)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: [f32; 3], b: [f32; 3]) {
        assert!(
            a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-6),
            "{a:?} vs {b:?}"
        );
    }

    #[test]
    fn hsv_of_known_colours() {
        close(rgb_to_hsv([1.0, 0.0, 0.0]), [0.0, 1.0, 1.0]);
        close(rgb_to_hsv([0.0, 0.5, 0.0]), [1.0 / 3.0, 1.0, 0.5]);
        close(
            rgb_to_hsv([0.2, 0.4, 0.8]),
            [(0.2 - 0.4) / (6.0 * 0.6) + 4.0 / 6.0, 0.75, 0.8],
        );
        close(rgb_to_hsv([0.5, 0.5, 0.5]), [0.0, 0.0, 0.5]);
        close(rgb_to_hsv([1.0, 0.0, 0.5]), [1.0 - 0.5 / 6.0, 1.0, 1.0]);
    }

    #[test]
    fn hsv_round_trips() {
        for rgb in [
            [0.2, 0.4, 0.8],
            [0.9, 0.1, 0.3],
            [0.3, 0.3, 0.1],
            [0.0, 0.0, 0.0],
        ] {
            close(hsv_to_rgb(rgb_to_hsv(rgb)), rgb);
        }
    }

    #[test]
    fn saturation_and_hue_by_hand() {
        // (0.2, 0.4, 0.8): s 0.75, v 0.8. Half saturation: s 0.375 -> min = 0.8 * 0.625 = 0.5,
        // and the hue keeps green's place a third of the way from min to max.
        let img = Image::from_hwc(vec![0.2, 0.4, 0.8], 1, 1, 3);
        let out = adjust_saturation(img.clone(), 0.5);
        close(out.data().try_into().unwrap(), [0.5, 0.6, 0.8]);
        // Red rotated by a third of the wheel is green.
        let red = Image::from_hwc(vec![1.0, 0.0, 0.0], 1, 1, 3);
        close(
            adjust_hue(red.clone(), 1.0 / 3.0)
                .data()
                .try_into()
                .unwrap(),
            [0.0, 1.0, 0.0],
        );
        close(
            adjust_hue(red, -1.0 / 3.0).data().try_into().unwrap(),
            [0.0, 0.0, 1.0],
        );
    }

    /// The planes op runs a copy compiled for AVX2 (on a CPU that has it), the image op the
    /// baseline build: bitwise the same values, over colours in and out of [0, 1].
    #[test]
    fn planes_give_bitwise_the_image_ops_values() {
        let data: Vec<f32> = (0..3 * 37 * 11)
            .map(|i| ((i * 7919) % 1000) as f32 / 800.0 - 0.1)
            .collect();
        let image = Image::from_hwc(data, 37, 11, 3);
        for (factor, delta) in [(1.3, 0.15), (0.5, -0.2), (1.0, 3e9)] {
            let mut planes = Planes::from(image.clone());
            adjust_saturation_and_hue_planes(&mut planes, factor, delta);
            let want = adjust_saturation_and_hue(image.clone(), factor, delta);
            let got = planes.to_image();
            let bits = |image: &Image| image.data().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want), "factor {factor}, delta {delta}");
        }
    }

    #[test]
    fn one_round_trip_equals_the_two_ops() {
        let data: Vec<f32> = (0..30).map(|i| (i * 7 % 11) as f32 / 10.0).collect();
        let img = Image::from_hwc(data, 2, 5, 3);
        let two = adjust_hue(adjust_saturation(img.clone(), 1.3), 0.15);
        let one = adjust_saturation_and_hue(img, 1.3, 0.15);
        assert!(
            one.data()
                .iter()
                .zip(two.data())
                .all(|(a, b)| (a - b).abs() < 1e-5)
        );
    }
}
