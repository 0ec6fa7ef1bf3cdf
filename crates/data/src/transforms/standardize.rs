//! `tf.image.per_image_standardization`.

use crate::image::Image;

/// `(x - mean) / max(stddev, 1 / sqrt(n))` over all `n` values of the image, TF's formula
/// (the floor keeps a uniform image finite).
pub fn per_image_standardization(mut image: Image) -> Image {
    let n = image.data().len() as f64;
    let (sum, sum_sq) = image.data().iter().fold((0.0f64, 0.0f64), |(s, q), &v| {
        (s + v as f64, q + (v as f64) * (v as f64))
    });
    let mean = sum / n;
    let variance = (sum_sq / n - mean * mean).max(0.0);
    let scale = variance.sqrt().max(1.0 / n.sqrt());
    let (mean, scale) = (mean as f32, scale as f32);
    image
        .data_mut()
        .iter_mut()
        .for_each(|v| *v = (*v - mean) / scale);
    image
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standardizes_by_population_stddev() {
        // values 1, 2, 3, 6: mean 3, population variance (4+1+0+9)/4 = 3.5
        let img = Image::from_hwc(vec![1.0, 2.0, 3.0, 6.0], 2, 2, 1);
        let out = per_image_standardization(img);
        let sd = 3.5f32.sqrt();
        let want = [-2.0 / sd, -1.0 / sd, 0.0, 3.0 / sd];
        for (o, w) in out.data().iter().zip(want) {
            assert!((o - w).abs() < 1e-6, "{o} vs {w}");
        }
    }

    #[test]
    fn uniform_image_uses_the_floor() {
        // stddev 0, floor 1/sqrt(4) = 0.5: every value becomes (5 - 5) / 0.5 = 0.
        let out = per_image_standardization(Image::from_hwc(vec![5.0; 4], 2, 2, 1));
        assert_eq!(out.data(), &[0.0; 4]);
    }
}
