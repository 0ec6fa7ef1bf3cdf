//! Synthetic images with a learnable class signal: the built-in data of the examples and
//! tests, written to disk in the real formats and read back through the real readers.

use std::path::Path;

use rand::RngExt;
use towers_multigpu::{ScratchPath, list_scratch};

use crate::bounding_box::BoundingBox;
use crate::error::{Error, Result};
use crate::image::Image;
use crate::rng::Rng;
use crate::transforms::hsv_to_rgb;

/// The temporary folder of a built-in dataset, in `TMPDIR`: deleted on drop, and by an exit
/// that runs no destructor (`towers_multigpu::exit_now`: a second Ctrl-C).
#[derive(Debug)]
pub(crate) struct BuiltinDir {
    dir: tempfile::TempDir,
    _listed: ScratchPath,
}

impl BuiltinDir {
    /// A new empty folder named `PREFIX…`.
    pub(crate) fn create(prefix: &str) -> Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix(prefix)
            .tempdir()
            .map_err(|error| Error::Io {
                path: std::env::temp_dir(),
                error,
            })?;
        let listed = list_scratch(dir.path());
        Ok(Self {
            dir,
            _listed: listed,
        })
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// How a class looks: a colour under stripes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClassLook {
    /// Hue of the class colour, a fraction of the colour wheel.
    pub hue: f32,
    /// Whether the stripes run vertically (else horizontally).
    pub vertical: bool,
    /// Stripe period, a fraction of the image's shorter side (so a resized image keeps it).
    pub period: f32,
    /// Stripe amplitude, added to and taken from each channel.
    pub amplitude: f32,
}

impl ClassLook {
    /// Class `label` of `num_classes` that each have their own hue (`label / num_classes` of
    /// the wheel), alternate stripe orientation and vary the period: the built-in CIFAR-10
    /// data, whose distortions keep hue and scale.
    pub fn spread(label: usize, num_classes: usize) -> Self {
        Self {
            hue: label as f32 / num_classes.max(1) as f32,
            vertical: label % 2 == 1,
            period: (2.0 + (label / 2 % 5) as f32 * 1.5) / 32.0,
            amplitude: 0.16,
        }
    }

    /// Class `label` of `num_classes` that stay apart through Inception's training
    /// distortions, which rotate hue by up to 0.2 of the wheel, crop down to 5% of the area
    /// and flip: classes alternate stripe orientation (a flip keeps it), classes of one
    /// orientation are spread evenly over the wheel (half a wheel apart when there are 4
    /// classes, farther than two opposite rotations reach), and one period, 1/8 of the side,
    /// still shows a stripe or two in the smallest crop, at an amplitude that halving the
    /// contrast leaves above the noise.
    pub fn distortion_proof(label: usize, num_classes: usize) -> Self {
        let per_orientation = num_classes.div_ceil(2).max(1);
        Self {
            hue: (label / 2) as f32 / per_orientation as f32,
            vertical: label % 2 == 1,
            period: 1.0 / 8.0,
            amplitude: 0.3,
        }
    }
}

/// An RGB image in [0, 1] of a class that looks as `look`, with the class pattern filling
/// `object` (grey noise around it): the class colour under stripes, plus per-image noise,
/// brightness and stripe phase.
pub fn synthetic_image(
    look: ClassLook,
    height: usize,
    width: usize,
    object: BoundingBox,
    rng: &mut Rng,
) -> Image {
    let color = hsv_to_rgb([look.hue, 0.6, 0.6]);
    let vertical = look.vertical;
    let period = look.period * height.min(width) as f32;
    let brightness = rng.random_range(-0.12f32..=0.12);
    let phase = rng.random_range(0.0f32..std::f32::consts::TAU);
    let (y0, y1) = (
        (object.ymin * height as f32) as usize,
        (object.ymax * height as f32).ceil() as usize,
    );
    let (x0, x1) = (
        (object.xmin * width as f32) as usize,
        (object.xmax * width as f32).ceil() as usize,
    );
    let mut data = Vec::with_capacity(height * width * 3);
    for y in 0..height {
        for x in 0..width {
            let inside = (y0..y1).contains(&y) && (x0..x1).contains(&x);
            let t = if vertical { x } else { y } as f32;
            let stripe = look.amplitude * (t * std::f32::consts::TAU / period + phase).sin();
            for c in color {
                let noise = rng.random_range(-0.1f32..=0.1);
                let base = if inside { c + stripe } else { 0.5 };
                data.push((base + brightness + noise).clamp(0.0, 1.0));
            }
        }
    }
    Image::from_hwc(data, height, width, 3)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn the_pattern_fills_the_object_box_only() {
        let object = BoundingBox {
            ymin: 0.5,
            xmin: 0.0,
            ymax: 1.0,
            xmax: 0.5,
        };
        let look = ClassLook::spread(3, 10);
        let img = synthetic_image(look, 40, 40, object, &mut Rng::seed_from_u64(1));
        // Outside the box: grey 0.5 within noise and brightness (0.22); inside: the class
        // colour, whose channels differ from one another.
        let outside = img.get(5, 30, 0);
        assert!((outside - 0.5).abs() <= 0.23, "{outside}");
        let mean = |c| {
            (20..40)
                .flat_map(|y| (0..20).map(move |x| (y, x)))
                .map(|(y, x)| img.get(y, x, c))
                .sum::<f32>()
                / 400.0
        };
        let spread = [mean(0), mean(1), mean(2)];
        let max = spread.iter().cloned().fold(f32::MIN, f32::max);
        let min = spread.iter().cloned().fold(f32::MAX, f32::min);
        assert!(max - min > 0.2, "class colour inside the box: {spread:?}");
    }
}
