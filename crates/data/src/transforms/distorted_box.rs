//! `tf.image.sample_distorted_bounding_box`: a random crop window that covers enough of an
//! object box, the crop the Inception trainer distorts every training image with.

use burn::config::Config;
use rand::RngExt;

use super::Rng;
use crate::bounding_box::BoundingBox;

/// The constraints on the sampled window (TF's defaults for Inception): [`new`](Self::new)
/// and `with_*`, as Burn's configs.
#[derive(Config, Debug, Copy, PartialEq)]
#[non_exhaustive]
pub struct DistortedBoxConfig {
    /// The window must contain at least this fraction of some object box's area.
    #[config(default = 0.1)]
    pub min_object_covered: f32,
    /// Range of the window's width / height.
    #[config(default = "(0.75, 1.33)")]
    pub aspect_ratio_range: (f32, f32),
    /// Range of the window's area, as a fraction of the image's.
    #[config(default = "(0.05, 1.0)")]
    pub area_range: (f32, f32),
    /// Windows tried before falling back to the whole image.
    #[config(default = 100)]
    pub max_attempts: usize,
}

impl Default for DistortedBoxConfig {
    fn default() -> Self {
        Self::new()
    }
}

/// A window in pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// Top row.
    pub top: usize,
    /// Left column.
    pub left: usize,
    /// Rows.
    pub height: usize,
    /// Columns.
    pub width: usize,
}

/// Samples a crop window of a `height` x `width` image as TF's kernel does: up to
/// `max_attempts` times, draw an aspect ratio, a height within the area range and a position,
/// and keep the first window covering `min_object_covered` of some box. With no box, the
/// whole image is the box; when every attempt fails, the window is the whole image.
pub fn sample_distorted_box(
    height: usize,
    width: usize,
    boxes: &[BoundingBox],
    config: &DistortedBoxConfig,
    rng: &mut Rng,
) -> Window {
    let whole = Window {
        top: 0,
        left: 0,
        height,
        width,
    };
    let boxes = if boxes.is_empty() {
        &[BoundingBox::WHOLE][..]
    } else {
        boxes
    };
    let image_area = (height * width) as f32;
    let (min_area, max_area) = (
        config.area_range.0 * image_area,
        config.area_range.1 * image_area,
    );
    for _ in 0..config.max_attempts {
        let aspect = rng.random_range(config.aspect_ratio_range.0..=config.aspect_ratio_range.1);
        let Some((h, w)) = crop_size(height, width, aspect, min_area, max_area, rng) else {
            continue;
        };
        let top = rng.random_range(0..=height - h);
        let left = rng.random_range(0..=width - w);
        let window = Window {
            top,
            left,
            height: h,
            width: w,
        };
        if boxes
            .iter()
            .any(|b| coverage(&window, b, height, width) >= config.min_object_covered)
        {
            return window;
        }
    }
    whole
}

/// A window size with the given aspect ratio and an area in range, or `None` (TF's
/// `GenerateRandomCrop`): the height is drawn between the heights the area bounds allow.
fn crop_size(
    height: usize,
    width: usize,
    aspect: f32,
    min_area: f32,
    max_area: f32,
    rng: &mut Rng,
) -> Option<(usize, usize)> {
    let mut max_h = (max_area / aspect).sqrt().round();
    if (max_h * aspect).round() > width as f32 {
        // The widest window the image allows, at this aspect ratio.
        max_h = ((width as f32 + 0.5 - 1e-7) / aspect).floor();
    }
    let max_h = max_h.min(height as f32);
    let min_h = (min_area / aspect).sqrt().round().min(max_h);
    if max_h < 1.0 {
        return None;
    }
    let mut h = rng.random_range(min_h as usize..=max_h as usize);
    let mut w = (h as f32 * aspect).round() as usize;
    // Rounding can leave the area just outside its range: step once, as TF does.
    if ((h * w) as f32) < min_area {
        h += 1;
        w = (h as f32 * aspect).round() as usize;
    }
    let area = (h * w) as f32;
    (h > 0 && w > 0 && h <= height && w <= width && area >= min_area && area <= max_area)
        .then_some((h, w))
}

/// Fraction of `b`'s area inside `window`.
fn coverage(window: &Window, b: &BoundingBox, height: usize, width: usize) -> f32 {
    let (h, w) = (height as f32, width as f32);
    let (by0, bx0, by1, bx1) = (b.ymin * h, b.xmin * w, b.ymax * h, b.xmax * w);
    let box_area = (by1 - by0) * (bx1 - bx0);
    if box_area <= 0.0 {
        return 0.0;
    }
    let iy = ((window.top + window.height) as f32).min(by1) - (window.top as f32).max(by0);
    let ix = ((window.left + window.width) as f32).min(bx1) - (window.left as f32).max(bx0);
    if iy <= 0.0 || ix <= 0.0 {
        0.0
    } else {
        iy * ix / box_area
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn windows_respect_area_aspect_and_bounds() {
        let config = DistortedBoxConfig::default();
        let mut rng = Rng::seed_from_u64(1);
        let (h, w) = (300, 400);
        let mut areas = Vec::new();
        for _ in 0..500 {
            let win = sample_distorted_box(h, w, &[], &config, &mut rng);
            assert!(win.top + win.height <= h && win.left + win.width <= w);
            let area = (win.height * win.width) as f32 / (h * w) as f32;
            let aspect = win.width as f32 / win.height as f32;
            // Rounding to whole pixels moves the aspect ratio by at most half a pixel's worth.
            assert!((0.05 - 1e-3..=1.0).contains(&area), "area {area}");
            assert!(
                aspect > 0.75 - 0.5 / win.height as f32 - 1e-3
                    && aspect < 1.33 + 0.5 / win.height as f32 + 1e-3,
                "aspect {aspect}"
            );
            areas.push(area);
        }
        let mean = areas.iter().sum::<f32>() / areas.len() as f32;
        assert!(
            mean > 0.2 && mean < 0.8,
            "areas spread over the range: mean {mean}"
        );
    }

    #[test]
    fn windows_cover_enough_of_the_object() {
        let object = BoundingBox {
            ymin: 0.6,
            xmin: 0.7,
            ymax: 0.9,
            xmax: 0.95,
        };
        let config = DistortedBoxConfig::new().with_min_object_covered(0.5);
        let mut rng = Rng::seed_from_u64(2);
        for _ in 0..200 {
            let win = sample_distorted_box(200, 200, &[object], &config, &mut rng);
            assert!(coverage(&win, &object, 200, 200) >= 0.5, "{win:?}");
        }
    }

    #[test]
    fn impossible_constraints_fall_back_to_the_whole_image() {
        // A window of at most 5% of the area cannot cover 90% of a box filling the image.
        let config = DistortedBoxConfig {
            min_object_covered: 0.9,
            area_range: (0.01, 0.05),
            ..Default::default()
        };
        let win = sample_distorted_box(100, 100, &[], &config, &mut Rng::seed_from_u64(3));
        assert_eq!(
            win,
            Window {
                top: 0,
                left: 0,
                height: 100,
                width: 100
            }
        );
    }

    #[test]
    fn coverage_by_hand() {
        let b = BoundingBox {
            ymin: 0.0,
            xmin: 0.0,
            ymax: 0.5,
            xmax: 0.5,
        }; // 50x50 of 100x100
        let win = Window {
            top: 25,
            left: 0,
            height: 50,
            width: 100,
        };
        assert!((coverage(&win, &b, 100, 100) - 0.5).abs() < 1e-6);
    }
}
