//! JPEG decoding that gives TensorFlow's pixels bit for bit: `tf.io.decode_jpeg(contents,
//! channels=3)` (and `tf.image.decode_image`), through the decoder TF links, libjpeg-turbo's,
//! with the settings and the error handling of TF's `DecodeJpegOp`
//! (tensorflow/core/kernels/image/decode_image_op.cc and tensorflow/core/lib/jpeg/jpeg_mem.cc):
//!
//! - `dct_method`: `""` and `"INTEGER_FAST"` are libjpeg's `JDCT_IFAST` ("the TensorFlow-chosen
//!   default for jpeg decoding is IFAST, sacrificing image quality for speed"),
//!   `"INTEGER_ACCURATE"` is `JDCT_ISLOW`: [`DctMethod`]. The committed fixtures check that
//!   TF's `""` equals `"INTEGER_FAST"`;
//! - `fancy_upscaling` true (libjpeg's `do_fancy_upsampling`), scale 1/1;
//! - `try_recover_truncated` false: a JPEG whose data ends before its last row (or without its
//!   end marker, which libjpeg must see to finish the last rows) is an error, as TF's "Premature
//!   end of JPEG data", not an image completed with grey. libjpeg's warnings (corrupt data it
//!   can decode past) keep the image, as in TF; its fatal errors are errors;
//! - `channels=3`: greyscale and RGB JPEGs decode to RGB by libjpeg's own colour conversion;
//!   CMYK and YCCK JPEGs decode to CMYK, which TF then turns into RGB by its own formula
//!   ([`cmyk_to_rgb`]), chosen by libjpeg's `saw_Adobe_marker`;
//! - TF refuses images of 2^29 header values or more (width x height x components) before
//!   decoding; so do we, and below that our own bound on the size a header may claim for its
//!   input's length.
//!
//! Two bounds beyond TF's, so that a small hostile file cannot cost much memory or CPU: the
//! same bound caps what libjpeg itself may allocate (`max_memory_to_use`: a progressive JPEG's
//! whole-image coefficient buffers, about twice the decoded size for colour, must fit in it),
//! and a JPEG may have at most 100 scans (`Scan number 101 exceeds maximum scans (100)`, the
//! message of libjpeg-turbo's `djpeg -maxscans`): each scan walks every block of the image, and a
//! scan can be a dozen bytes. Both are errors of the image, named with its file and record by
//! the format that read it.
//!
//! The library is mozjpeg's copy of libjpeg-turbo (a fork that changes the encoder), which
//! mozjpeg-sys builds with the `cc` crate alone: a C compiler is all the build needs. With NASM
//! on the PATH at build time (the default `jpeg-simd` feature) it adds libjpeg-turbo's x86 SIMD
//! code, as TF's build does ([`simd`] says which); without it, the C code. libjpeg-turbo's
//! integer IDCTs, upsampling and colour conversion give the same values in C and in SIMD (its
//! own tests expect the same checksums with and without SIMD for all but the float IDCT, which
//! TF does not use), and both builds pass the fixture test.
//!
//! libjpeg's calls go through a C shim (`tf_jpeg.c`): libjpeg reports a fatal error by a
//! callback that must not return, which there longjmps back into C (as TF's `CatchError` does),
//! so no Rust frame is ever unwound by C, whatever the panic strategy.
//!
//! Pixels equal TF's on JPEGs written by TF and by Pillow (baseline, progressive, 4:2:0, 4:2:2,
//! 4:4:4, odd sizes, restart markers, greyscale, RGB, CMYK with and without Adobe's marker):
//! `tests/tf_jpeg.rs`, fixtures from `scripts/tf_fixtures/jpeg_decode.py`. `codec/mod.rs` calls
//! this decoder for every JPEG.

use std::cell::RefCell;
use std::ffi::{CStr, c_int, c_uint};
use std::str::FromStr;

// mozjpeg-sys's libjpeg, which the C shim calls: linked through this crate's use of it.
use mozjpeg_sys as _;

use crate::error::Cause;
use crate::image::Rgb8;

/// The inverse DCT libjpeg runs: TF's `dct_method` attribute of `decode_jpeg`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum DctMethod {
    /// `"INTEGER_FAST"` (libjpeg's `JDCT_IFAST`), and TF's default `""`.
    #[default]
    IntegerFast,
    /// `"INTEGER_ACCURATE"` (libjpeg's `JDCT_ISLOW`).
    IntegerAccurate,
}

impl FromStr for DctMethod {
    type Err = String;

    /// TF's names: `""`, `"INTEGER_FAST"`, `"INTEGER_ACCURATE"`.
    fn from_str(name: &str) -> Result<Self, String> {
        match name {
            "" | "INTEGER_FAST" => Ok(Self::IntegerFast),
            "INTEGER_ACCURATE" => Ok(Self::IntegerAccurate),
            other => Err(format!(
                "dct_method must be one of '', 'INTEGER_FAST', 'INTEGER_ACCURATE', not {other:?}"
            )),
        }
    }
}

/// Whether this build's libjpeg-turbo has its SIMD code (NASM was found when it was built).
/// The pixels are the same either way; only the speed differs.
pub fn simd() -> bool {
    // SAFETY: no arguments, no state.
    unsafe { ffi::towers_jpeg_simd() != 0 }
}

/// Decodes the JPEG `bytes` into `out` (RGB, reusing its buffer) as TF does with `dct`.
/// `max_bytes` bounds the decoded size a header may claim, checked before decoding, and what
/// libjpeg may allocate for the image's whole-image buffers.
pub(super) fn decode(
    bytes: &[u8],
    dct: DctMethod,
    cmyk_to_rgb_by: CmykToRgb,
    max_bytes: u64,
    out: &mut Rgb8,
) -> Result<(), Cause> {
    if bytes.is_empty() {
        // TF's source manager: "empty file -> treated as an error".
        return Err("corrupt image: an empty JPEG".into());
    }
    DECOMPRESSOR.with_borrow_mut(|slot| {
        let decompressor = match slot {
            Some(d) => d,
            None => slot.insert(Decompressor::new()?),
        };
        decompressor.decode(bytes, dct, cmyk_to_rgb_by, max_bytes, out)
    })
}

thread_local! {
    /// Each thread's libjpeg decompressor, reused from image to image (the shim ends each
    /// image, decoded or failed, so that the next one starts afresh).
    static DECOMPRESSOR: RefCell<Option<Decompressor>> = const { RefCell::new(None) };
}

/// TF's bound: images whose header gives 2^29 values or more (width x height x the JPEG's
/// components) are refused before decoding ("Image too large").
const TF_MAX_HEADER_VALUES: u64 = 1 << 29;

/// The shim's functions (`tf_jpeg.c`, which documents them).
mod ffi {
    use std::ffi::{c_char, c_int, c_uint};

    /// The shim's decompressor: libjpeg's decompression object, error handler and source.
    #[repr(C)]
    pub(super) struct State {
        _opaque: [u8; 0],
    }

    unsafe extern "C" {
        pub(super) fn towers_jpeg_new() -> *mut State;
        pub(super) fn towers_jpeg_free(state: *mut State);
        pub(super) fn towers_jpeg_message(state: *const State) -> *const c_char;
        pub(super) fn towers_jpeg_abort(state: *mut State);
        #[allow(clippy::too_many_arguments)]
        pub(super) fn towers_jpeg_read_header(
            state: *mut State,
            data: *const u8,
            len: usize,
            max_memory: usize,
            fast_dct: c_int,
            width: *mut c_uint,
            height: *mut c_uint,
            channels: *mut c_int,
            components: *mut c_int,
        ) -> c_int;
        pub(super) fn towers_jpeg_decode(
            state: *mut State,
            pixels: *mut u8,
            adobe: *mut c_int,
        ) -> c_int;
        pub(super) fn towers_jpeg_simd() -> c_int;
    }
}

/// One libjpeg decompressor (the shim's state, owned).
struct Decompressor(*mut ffi::State);

impl Decompressor {
    fn new() -> Result<Self, Cause> {
        // SAFETY: no preconditions; a null state (out of memory) is checked below.
        let state = unsafe { ffi::towers_jpeg_new() };
        if state.is_null() {
            return Err("cannot create a libjpeg decompressor".into());
        }
        Ok(Self(state))
    }

    fn decode(
        &mut self,
        bytes: &[u8],
        dct: DctMethod,
        cmyk_to_rgb_by: CmykToRgb,
        max_bytes: u64,
        out: &mut Rgb8,
    ) -> Result<(), Cause> {
        let (mut width, mut height, mut channels, mut components): (c_uint, c_uint, c_int, c_int) =
            (0, 0, 0, 0);
        // SAFETY: the state is valid; `bytes` outlives the image (decoded or aborted below,
        // before this returns); the out-pointers are live locals.
        let status = unsafe {
            ffi::towers_jpeg_read_header(
                self.0,
                bytes.as_ptr(),
                bytes.len(),
                usize::try_from(max_bytes).unwrap_or(usize::MAX),
                c_int::from(dct == DctMethod::IntegerFast),
                &mut width,
                &mut height,
                &mut channels,
                &mut components,
            )
        };
        if status != 0 {
            return Err(self.message().into());
        }
        let (width, height) = (width as usize, height as usize);
        let channels = channels as usize; // 3 (RGB) or 4 (CMYK)
        let len = width * height * channels;
        let refuse = |why: String| {
            // SAFETY: the state is valid; the image whose header was read is ended.
            unsafe { ffi::towers_jpeg_abort(self.0) };
            Err(why.into())
        };
        if (width * height) as u64 * components as u64 >= TF_MAX_HEADER_VALUES {
            return refuse(format!(
                "corrupt image: a {width}x{height} header of {components} components is too \
                 large (TF refuses 2^29 values or more)"
            ));
        }
        if len as u64 > max_bytes {
            return refuse(format!(
                "corrupt image: a {width}x{height} header in {} bytes exceeds the limit of \
                 {max_bytes} decoded bytes",
                bytes.len()
            ));
        }
        let mut adobe = 0;
        if channels == 4 {
            let mut cmyk = vec![0; len];
            self.decode_into(&mut cmyk, &mut adobe)?;
            match cmyk_to_rgb_by {
                CmykToRgb::Tf => cmyk_to_rgb(&cmyk, adobe != 0, &mut out.pixels),
                CmykToRgb::Pillow => cmyk_to_rgb_as_pillow(&cmyk, &mut out.pixels),
            }
        } else {
            out.pixels.resize(len, 0);
            self.decode_into(&mut out.pixels, &mut adobe)?;
        }
        (out.width, out.height) = (width, height);
        Ok(())
    }

    /// Decodes the image whose header was read into `pixels` (its size already).
    fn decode_into(&mut self, pixels: &mut [u8], adobe: &mut c_int) -> Result<(), Cause> {
        // SAFETY: the state is valid with a header read; `pixels` holds the height rows of
        // width x channels bytes that the header gave.
        match unsafe { ffi::towers_jpeg_decode(self.0, pixels.as_mut_ptr(), adobe) } {
            0 => Ok(()),
            _ => Err(self.message().into()),
        }
    }

    /// The message of the last error, libjpeg's or the shim's.
    fn message(&self) -> String {
        // SAFETY: the state is valid; its message is a NUL-terminated buffer in it, copied at
        // once.
        let message = unsafe { CStr::from_ptr(ffi::towers_jpeg_message(self.0)) };
        format!("corrupt image: {}", message.to_string_lossy())
    }
}

impl Drop for Decompressor {
    fn drop(&mut self) {
        // SAFETY: the state came from towers_jpeg_new and is freed once.
        unsafe { ffi::towers_jpeg_free(self.0) }
    }
}

/// Whose formula makes a CMYK JPEG's pixels RGB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CmykToRgb {
    /// TF's ([`cmyk_to_rgb`]).
    Tf,
    /// Pillow's `convert("RGB")` ([`cmyk_to_rgb_as_pillow`]).
    Pillow,
}

/// Pillow's CMYK to RGB, into `rgb` (resized). Its JPEG reader takes every CMYK JPEG as
/// Adobe's, inverted (raw mode `CMYK;I`: ink `255 - v`), whatever its markers say; its
/// `cmyk2rgb` then gives each channel `nk - ink * nk / 255`, with `nk = 255 - k` and the
/// product rounded as its `MULDIV255` rounds it. Against TF's formula, a byte in about half
/// of the values differs by one.
fn cmyk_to_rgb_as_pillow(cmyk: &[u8], rgb: &mut Vec<u8>) {
    rgb.clear();
    rgb.reserve(cmyk.len() / 4 * 3);
    for px in cmyk.chunks_exact(4) {
        // 255 minus the un-inverted key, `255 - (255 - v)`.
        let nk = u32::from(px[3]);
        for &stored in &px[..3] {
            let product = (255 - u32::from(stored)) * nk + 128;
            let ink = ((product >> 8) + product) >> 8;
            rgb.push((nk - ink) as u8);
        }
    }
}

/// TF's CMYK to RGB (jpeg_mem.cc), into `rgb` (resized). Adobe's applications write CMYK
/// inverted (0 = full ink), so with Adobe's marker each channel is `k * c / 255`; without it,
/// `(255 - k) * (255 - c) / 255`. Integer division truncates, as in TF's C++.
fn cmyk_to_rgb(cmyk: &[u8], adobe: bool, rgb: &mut Vec<u8>) {
    rgb.clear();
    rgb.reserve(cmyk.len() / 4 * 3);
    for px in cmyk.chunks_exact(4) {
        let k = u32::from(px[3]);
        for &ink in &px[..3] {
            let ink = u32::from(ink);
            let value = if adobe {
                k * ink / 255
            } else {
                (255 - k) * (255 - ink) / 255
            };
            rgb.push(value as u8);
        }
    }
}

#[cfg(test)]
mod tests {
    use towers_testing::assert_error_names;

    use super::*;

    #[test]
    fn dct_method_names_are_tfs() {
        assert_eq!("".parse(), Ok(DctMethod::IntegerFast));
        assert_eq!("INTEGER_FAST".parse(), Ok(DctMethod::IntegerFast));
        assert_eq!("INTEGER_ACCURATE".parse(), Ok(DctMethod::IntegerAccurate));
        assert!("FLOAT".parse::<DctMethod>().is_err());
    }

    #[test]
    fn cmyk_follows_tfs_two_formulas() {
        let mut rgb = Vec::new();
        cmyk_to_rgb(&[255, 128, 0, 200], true, &mut rgb);
        assert_eq!(rgb, [200, 100, 0]);
        cmyk_to_rgb(&[255, 128, 0, 200], false, &mut rgb);
        assert_eq!(rgb, [0, 27, 55]);
    }

    /// Pillow's formula on stored values 255, 128, 0 under a stored key of 200 (`nk` = 200):
    /// inks 0, 127 and 255 give `200 - round(ink * 200 / 255)`, that is 200, 200 - 100 and 0
    /// (TF's truncation also gives 100 there). Under 201, ink 127 gives 201 - round(100.1) =
    /// 101, where TF's `201 * 128 / 255` truncates 100.9 to 100.
    #[test]
    fn cmyk_as_pillow_rounds_the_inks_product() {
        let mut rgb = Vec::new();
        cmyk_to_rgb_as_pillow(&[255, 128, 0, 200], &mut rgb);
        assert_eq!(rgb, [200, 100, 0]);
        cmyk_to_rgb_as_pillow(&[128, 128, 128, 201], &mut rgb);
        assert_eq!(rgb, [101, 101, 101]);
        cmyk_to_rgb(&[128, 128, 128, 201], true, &mut rgb);
        assert_eq!(rgb, [100, 100, 100]);
    }

    #[test]
    fn empty_and_foreign_bytes_are_errors_and_the_decompressor_recovers() {
        let mut out = Rgb8::default();
        let fail = |bytes: &[u8], out: &mut Rgb8| {
            decode(bytes, DctMethod::IntegerFast, CmykToRgb::Tf, u64::MAX, out).unwrap_err()
        };
        assert_error_names(&fail(&[], &mut out), &["empty"]);
        let garbage = fail(&[0xFF, 0xD8, 0xFF, 0x00, 1, 2, 3], &mut out);
        assert_error_names(&garbage, &["corrupt image"]);
        // A fatal libjpeg error (a marker libjpeg refuses: SOF of a 0-row image).
        let sof0 = [
            0xFF, 0xD8, 0xFF, 0xC0, 0, 11, 8, 0, 0, 0, 8, 1, 1, 0x11, 0, 0xFF, 0xD9,
        ];
        let fatal = fail(&sof0, &mut out);
        assert_error_names(&fatal, &["corrupt image"]);
    }
}
