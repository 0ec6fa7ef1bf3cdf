//! Image decoding (JPEG, PNG, BMP, PPM/PGM, TIFF, WebP) as the readers call it: what decodes is RGB with values in [0, 1].

use burn_towers::data::codec::decode_image;

use super::seed_images;
use crate::fuzz;
use crate::mutate::mutated;

#[test]
fn fuzz_image_decode() {
    fuzz("image", mutated(seed_images()), |bytes| {
        let Ok(image) = decode_image(&bytes) else {
            return false;
        };
        let [h, w, c] = image.shape();
        assert_eq!((image.data().len(), c), (h * w * 3, 3));
        assert!(image.data().iter().all(|v| (0.0..=1.0).contains(v)));
        true
    });
}
