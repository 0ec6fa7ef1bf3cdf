//! Image decoding as the pipeline decodes a record's image (`codec::decode_rgb8`: JPEGs
//! through libjpeg-turbo with TF's settings and our caps; PNG, BMP, PPM/PGM, TIFF and WebP
//! through the `image` crate).
//!
//! Input: the encoded image.

#![no_main]

use std::cell::RefCell;

use libfuzzer_sys::fuzz_target;
use towers_data::Rgb8;
use towers_data::codec::decode_rgb8;

thread_local! {
    /// The decoded image's buffer, reused as the pipeline's readers reuse theirs.
    static OUT: RefCell<Rgb8> = RefCell::new(Rgb8::default());
}

fuzz_target!(|data: &[u8]| {
    OUT.with_borrow_mut(|out| {
        if decode_rgb8(data, out).is_ok() {
            assert_eq!(out.pixels.len(), out.width * out.height * 3);
        }
    });
});
