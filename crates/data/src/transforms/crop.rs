//! Crops: fixed, random (`tf.random_crop`), centered to a size
//! (`tf.image.resize_image_with_crop_or_pad`) and centered to a fraction (`tf.image.central_crop`).

use rand::RngExt;

use super::{Rng, Window};
use crate::error::Cause;
use crate::image::Image;

/// The `height` x `width` window whose top-left corner is (`top`, `left`).
pub fn crop(image: &Image, top: usize, left: usize, height: usize, width: usize) -> Image {
    assert!(
        top + height <= image.height() && left + width <= image.width(),
        "crop window outside the image"
    );
    let c = image.channels();
    let row_len = width * c;
    let mut data = Vec::with_capacity(height * row_len);
    for y in top..top + height {
        let start = (y * image.width() + left) * c;
        data.extend_from_slice(&image.data()[start..start + row_len]);
    }
    Image::from_hwc(data, height, width, c)
}

/// A `height` x `width` window at a uniformly random position (TF `random_crop`).
pub fn random_crop(
    image: &Image,
    height: usize,
    width: usize,
    rng: &mut Rng,
) -> Result<Image, Cause> {
    if height > image.height() || width > image.width() {
        return Err(format!(
            "image of {}x{} is smaller than the {height}x{width} crop",
            image.height(),
            image.width()
        )
        .into());
    }
    let top = rng.random_range(0..=image.height() - height);
    let left = rng.random_range(0..=image.width() - width);
    Ok(crop(image, top, left, height, width))
}

/// The centered `height` x `width` window, zero-padded where the image is smaller, as TF's
/// `resize_image_with_crop_or_pad` (the odd pixel of an uneven margin goes to the bottom/right).
pub fn crop_or_pad_center(image: &Image, height: usize, width: usize) -> Image {
    let c = image.channels();
    let mut data = vec![0.0; height * width * c];
    // Offsets of the window in the source (crop) and in the target (pad).
    let (src_y, dst_y) = center_offsets(image.height(), height);
    let (src_x, dst_x) = center_offsets(image.width(), width);
    let rows = image.height().min(height);
    let row_len = image.width().min(width) * c;
    for r in 0..rows {
        let src = ((src_y + r) * image.width() + src_x) * c;
        let dst = ((dst_y + r) * width + dst_x) * c;
        data[dst..dst + row_len].copy_from_slice(&image.data()[src..src + row_len]);
    }
    Image::from_hwc(data, height, width, c)
}

/// The central `fraction` of each side (`tf.image.central_crop`): the margin is
/// `int((side - side * fraction) / 2)` on both ends, as TF truncates it.
pub fn central_crop(image: &Image, fraction: f64) -> Image {
    let w = central_window(image.height(), image.width(), fraction);
    crop(image, w.top, w.left, w.height, w.width)
}

/// The window [`central_crop`] keeps of a `height` x `width` image.
pub fn central_window(height: usize, width: usize, fraction: f64) -> Window {
    assert!(
        fraction > 0.0 && fraction <= 1.0,
        "central_crop fraction must be in (0, 1]"
    );
    let margin = |side: usize| ((side as f64 - side as f64 * fraction) / 2.0) as usize;
    let (top, left) = (margin(height), margin(width));
    Window {
        top,
        left,
        height: height - 2 * top,
        width: width - 2 * left,
    }
}

fn center_offsets(have: usize, want: usize) -> (usize, usize) {
    if have >= want {
        ((have - want) / 2, 0)
    } else {
        (0, (want - have) / 2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    /// A 1-channel image whose value is 10 * row + column.
    fn grid(h: usize, w: usize) -> Image {
        let data = (0..h)
            .flat_map(|y| (0..w).map(move |x| (10 * y + x) as f32))
            .collect();
        Image::from_hwc(data, h, w, 1)
    }

    #[test]
    fn crop_takes_the_window() {
        let out = crop(&grid(4, 5), 1, 2, 2, 3);
        assert_eq!(out.data(), &[12.0, 13.0, 14.0, 22.0, 23.0, 24.0]);
    }

    #[test]
    fn center_crop_matches_tf_offsets() {
        // 5 rows -> 2: offset (5-2)/2 = 1; 4 columns -> 3: offset 0.
        let out = crop_or_pad_center(&grid(5, 4), 2, 3);
        assert_eq!(out.data(), &[10.0, 11.0, 12.0, 20.0, 21.0, 22.0]);
    }

    #[test]
    fn center_pad_puts_the_image_in_the_middle() {
        let out = crop_or_pad_center(&grid(1, 1), 3, 3);
        assert_eq!(out.data(), &[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
        let out = crop_or_pad_center(&Image::from_hwc(vec![7.0], 1, 1, 1), 3, 3);
        assert_eq!(out.get(1, 1, 0), 7.0);
        assert_eq!(out.data().iter().sum::<f32>(), 7.0);
    }

    #[test]
    fn central_crop_truncates_the_margin_like_tf() {
        // 10 x 7 at 0.875: margins int(1.25 / 2) = 0 rows... int((10 - 8.75) / 2) = 0 and
        // int((7 - 6.125) / 2) = 0; at 0.5: int(2.5) = 2 rows, int(1.75) = 1 column.
        assert_eq!(central_crop(&grid(10, 7), 0.875).shape(), [10, 7, 1]);
        let out = central_crop(&grid(10, 7), 0.5);
        assert_eq!(out.shape(), [6, 5, 1]);
        assert_eq!(out.get(0, 0, 0), 21.0);
        // 299 at 0.875: int(18.6875) = 18 -> 263.
        assert_eq!(central_crop(&grid(299, 299), 0.875).shape(), [263, 263, 1]);
    }

    #[test]
    fn random_crop_stays_inside_and_covers_every_offset() {
        let img = grid(4, 4);
        let mut rng = Rng::seed_from_u64(1);
        let mut corners = std::collections::BTreeSet::new();
        for _ in 0..200 {
            let out = random_crop(&img, 3, 3, &mut rng).unwrap();
            let v = out.get(0, 0, 0) as usize;
            // The window is contiguous: bottom-right is top-left + 22.
            assert_eq!(out.get(2, 2, 0) as usize, v + 22);
            corners.insert(v);
        }
        assert_eq!(corners.into_iter().collect::<Vec<_>>(), vec![0, 1, 10, 11]);
        assert!(random_crop(&img, 5, 3, &mut rng).is_err());
    }
}
