//! Horizontal flips (`tf.image.flip_left_right`, `tf.image.random_flip_left_right`).

use rand::RngExt;

use super::Rng;
use crate::image::Image;

/// The mirror image: column `x` becomes column `width - 1 - x`.
pub fn flip_left_right(image: &Image) -> Image {
    let (w, c) = (image.width(), image.channels());
    let mut data = Vec::with_capacity(image.data().len());
    for row in image.data().chunks_exact(w * c) {
        for pixel in row.chunks_exact(c).rev() {
            data.extend_from_slice(pixel);
        }
    }
    Image::from_hwc(data, image.height(), w, c)
}

/// Mirrors the image with probability 1/2.
pub fn random_flip_left_right(image: Image, rng: &mut Rng) -> Image {
    if rng.random_bool(0.5) {
        flip_left_right(&image)
    } else {
        image
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flip_mirrors_columns_and_keeps_channels_together() {
        // 1 row, 3 pixels of 2 channels.
        let img = Image::from_hwc(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], 1, 3, 2);
        assert_eq!(
            flip_left_right(&img).data(),
            &[5.0, 6.0, 3.0, 4.0, 1.0, 2.0]
        );
    }
}
