//! JPEG decoding that gives TensorFlow's pixels bit for bit: `tf.io.decode_jpeg(contents,
//! channels=3)` (and `tf.image.decode_image`), through the library TF links, libjpeg-turbo, with
//! the settings TF's `DecodeJpegOp` passes it (tensorflow/core/kernels/image/decode_image_op.cc
//! and tensorflow/core/lib/jpeg/jpeg_mem.cc):
//!
//! - `dct_method`: `""` and `"INTEGER_FAST"` are libjpeg's `JDCT_IFAST` ("the TensorFlow-chosen
//!   default for jpeg decoding is IFAST, sacrificing image quality for speed"),
//!   `"INTEGER_ACCURATE"` is `JDCT_ISLOW`: [`DctMethod`]. The committed fixtures check that
//!   TF's `""` equals `"INTEGER_FAST"`;
//! - `fancy_upscaling` true (libjpeg's `do_fancy_upsampling`, TurboJPEG's default), scale 1/1;
//! - `try_recover_truncated` false: a JPEG whose data ends early is an error, not an image
//!   completed with grey;
//! - `channels=3`: greyscale and RGB JPEGs decode to RGB by libjpeg's own colour conversion;
//!   CMYK and YCCK JPEGs decode to CMYK, which TF then turns into RGB by its own formula
//!   ([`cmyk_to_rgb`]).
//!
//! Pixels equal TF's on JPEGs written by TF and by Pillow (baseline, progressive, 4:2:0, 4:2:2,
//! 4:4:4, odd sizes, restart markers, greyscale, RGB, CMYK with and without Adobe's marker):
//! `tests/tf_jpeg.rs`, fixtures from `scripts/tf_fixtures/jpeg_decode.py`.
//!
//! Compiled only with the `tf-jpeg` feature: JPEG pixels bit-identical to tf.io.decode_jpeg
//! (libjpeg-turbo built from source: needs cmake and nasm). `codec.rs` picks this decoder or
//! zune-jpeg.

use std::cell::RefCell;
use std::ffi::{CStr, c_int};
use std::str::FromStr;

use turbojpeg_sys as tj;

use crate::image::Rgb8;

/// The inverse DCT libjpeg runs: TF's `dct_method` attribute of `decode_jpeg`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
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

/// Decodes the JPEG `bytes` into `out` (RGB, reusing its buffer) as TF does with `dct`.
/// `max_bytes` bounds the decoded size a header may claim, checked before decoding.
pub fn decode(bytes: &[u8], dct: DctMethod, max_bytes: u64, out: &mut Rgb8) -> Result<(), String> {
    DECOMPRESSOR.with_borrow_mut(|slot| {
        let decompressor = match slot {
            Some(d) => d,
            None => slot.insert(Decompressor::new()?),
        };
        let result = decompressor.decode(bytes, dct, max_bytes, out);
        if result.is_err() {
            // An error can leave libjpeg mid-stream (it unwinds by longjmp): start afresh.
            *slot = None;
        }
        result
    })
}

thread_local! {
    /// Each thread's TurboJPEG instance, reused from image to image.
    static DECOMPRESSOR: RefCell<Option<Decompressor>> = const { RefCell::new(None) };
}

/// libjpeg's warnings (the `JWRN_` messages of jerror.h) after which TF keeps the image. Not
/// among them: "Premature end of JPEG file", data that ends early, which TF refuses
/// (`try_recover_truncated=false`).
const TOLERATED_WARNINGS: [&str; 6] = [
    "Corrupt JPEG data:",
    "Unknown Adobe color transform code",
    "Inconsistent progression sequence",
    "Warning: unknown JFIF revision number",
    "Invalid SOS parameters for sequential JPEG",
    "Application transferred too many scanlines",
];

/// The JPEG's colour space as libjpeg reads it from the header.
fn is_four_channel(colour_space: c_int) -> bool {
    colour_space == tj::TJCS_TJCS_CMYK as c_int || colour_space == tj::TJCS_TJCS_YCCK as c_int
}

/// One TurboJPEG decompression instance.
struct Decompressor(tj::tjhandle);

impl Decompressor {
    fn new() -> Result<Self, String> {
        // SAFETY: tj3Init has no preconditions; a null handle is checked below.
        let handle = unsafe { tj::tj3Init(tj::TJINIT_TJINIT_DECOMPRESS as c_int) };
        if handle.is_null() {
            return Err("cannot create a libjpeg-turbo decompressor".into());
        }
        let decompressor = Self(handle);
        // Warnings (e.g. extraneous bytes before a marker) leave an image, which TF keeps.
        decompressor.set(tj::TJPARAM_TJPARAM_STOPONWARNING, 0)?;
        decompressor.set(tj::TJPARAM_TJPARAM_FASTUPSAMPLE, 0)?;
        Ok(decompressor)
    }

    fn decode(
        &mut self,
        bytes: &[u8],
        dct: DctMethod,
        max_bytes: u64,
        out: &mut Rgb8,
    ) -> Result<(), String> {
        self.set(
            tj::TJPARAM_TJPARAM_FASTDCT,
            c_int::from(dct == DctMethod::IntegerFast),
        )?;
        // SAFETY: `bytes` is a live slice of the given length; the handle is valid.
        let status = unsafe { tj::tj3DecompressHeader(self.0, bytes.as_ptr(), bytes.len() as _) };
        self.check(status)?;
        let (width, height) = (
            self.get(tj::TJPARAM_TJPARAM_JPEGWIDTH),
            self.get(tj::TJPARAM_TJPARAM_JPEGHEIGHT),
        );
        let (width, height) = (dimension(width)?, dimension(height)?);
        let four_channel = is_four_channel(self.get(tj::TJPARAM_TJPARAM_COLORSPACE));
        let channels = if four_channel { 4 } else { 3 };
        let len = width * height * channels;
        if len as u64 > max_bytes {
            return Err(format!(
                "corrupt image: a {width}x{height} header in {} bytes exceeds the limit of \
                 {max_bytes} decoded bytes",
                bytes.len()
            ));
        }
        if four_channel {
            let mut cmyk = vec![0; len];
            self.decompress(bytes, &mut cmyk, tj::TJPF_TJPF_CMYK)?;
            cmyk_to_rgb(&cmyk, saw_adobe_marker(bytes), &mut out.pixels);
        } else {
            out.pixels.resize(len, 0);
            self.decompress(bytes, &mut out.pixels, tj::TJPF_TJPF_RGB)?;
        }
        (out.width, out.height) = (width, height);
        Ok(())
    }

    /// Decompresses the whole image into `pixels` (already of the image's size) as `format`.
    fn decompress(
        &mut self,
        bytes: &[u8],
        pixels: &mut [u8],
        format: tj::TJPF,
    ) -> Result<(), String> {
        // SAFETY: `pixels` holds width * height * (bytes per pixel of `format`) bytes, as the
        // header just read says (pitch 0 = packed rows); `bytes` is a live slice.
        let status = unsafe {
            tj::tj3Decompress8(
                self.0,
                bytes.as_ptr(),
                bytes.len() as _,
                pixels.as_mut_ptr(),
                0,
                format,
            )
        };
        self.check(status)
    }

    /// `Ok` for success and for the warnings after which TF keeps the image; an error
    /// otherwise. TurboJPEG keeps the text of the first warning, or of the error that stopped
    /// decoding, which is what tells them apart: its error code says "warning" whenever a
    /// warning came first, errors included. So data that ends early after another warning
    /// passes, where TF would refuse it.
    fn check(&mut self, status: c_int) -> Result<(), String> {
        if status == 0 {
            return Ok(());
        }
        // SAFETY: the handle is valid; the string is owned by the handle and copied at once.
        let message = unsafe { CStr::from_ptr(tj::tj3GetErrorStr(self.0)) }
            .to_string_lossy()
            .into_owned();
        match TOLERATED_WARNINGS.iter().any(|w| message.starts_with(w)) {
            true => Ok(()),
            false => Err(format!("corrupt image: {message}")),
        }
    }

    fn set(&self, param: tj::TJPARAM, value: c_int) -> Result<(), String> {
        // SAFETY: the handle is valid; an unknown parameter is an error status, not UB.
        match unsafe { tj::tj3Set(self.0, param as c_int, value) } {
            0 => Ok(()),
            _ => Err(format!("libjpeg-turbo refused parameter {param} = {value}")),
        }
    }

    fn get(&self, param: tj::TJPARAM) -> c_int {
        // SAFETY: the handle is valid.
        unsafe { tj::tj3Get(self.0, param as c_int) }
    }
}

impl Drop for Decompressor {
    fn drop(&mut self) {
        // SAFETY: the handle came from tj3Init and is destroyed once.
        unsafe { tj::tj3Destroy(self.0) }
    }
}

/// A width or height from the header (TurboJPEG answers -1 when there is none: a header cut
/// short, or tables only).
fn dimension(value: c_int) -> Result<usize, String> {
    usize::try_from(value)
        .ok()
        .filter(|&v| v > 0)
        .ok_or_else(|| format!("corrupt image: the JPEG header gives no image size ({value})"))
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

/// Whether the JPEG has an APP14 "Adobe" segment before its first scan, as libjpeg's
/// `saw_Adobe_marker` says (TurboJPEG does not expose it): at least 12 bytes of data starting
/// with "Adobe" (jdmarker.c, `examine_app14`).
fn saw_adobe_marker(jpeg: &[u8]) -> bool {
    let mut pos = 2; // after SOI
    loop {
        while jpeg.get(pos) == Some(&0xFF) && jpeg.get(pos + 1) == Some(&0xFF) {
            pos += 1; // fill bytes
        }
        let (Some(&0xFF), Some(&marker)) = (jpeg.get(pos), jpeg.get(pos + 1)) else {
            return false;
        };
        match marker {
            0xDA | 0xD9 => return false, // start of scan, end of image
            0x01 | 0xD0..=0xD7 => {
                pos += 2; // markers without a length
                continue;
            }
            _ => {}
        }
        let Some(length) = jpeg.get(pos + 2..pos + 4) else {
            return false;
        };
        let length = usize::from(u16::from_be_bytes([length[0], length[1]]));
        let data = jpeg
            .get(pos + 4..(pos + 2 + length).min(jpeg.len()))
            .unwrap_or(&[]);
        if marker == 0xEE && data.len() >= 12 && data.starts_with(b"Adobe") {
            return true;
        }
        pos += 2 + length.max(2);
    }
}

#[cfg(test)]
mod tests {
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

    #[test]
    fn the_adobe_marker_is_found_before_the_scan_only() {
        let app14 = [
            0xFF, 0xEE, 0, 14, b'A', b'd', b'o', b'b', b'e', 0, 100, 0, 0, 0, 0, 0,
        ];
        let sos = [0xFF, 0xDA, 0, 2];
        let app0 = [0xFF, 0xE0, 0, 4, 0, 0];
        let jpeg = |parts: &[&[u8]]| {
            [&[0xFF, 0xD8][..]]
                .iter()
                .chain(parts)
                .flat_map(|p| p.iter().copied())
                .collect::<Vec<u8>>()
        };
        assert!(saw_adobe_marker(&jpeg(&[&app0, &app14, &sos])));
        assert!(!saw_adobe_marker(&jpeg(&[&app0, &sos, &app14])));
        assert!(!saw_adobe_marker(&jpeg(&[&app14[..10]])), "too short");
        assert!(
            !saw_adobe_marker(&jpeg(&[&[0xFF, 0xEE, 0, 0]])),
            "bad length"
        );
        assert!(!saw_adobe_marker(&[0xFF, 0xD8]));
    }
}
