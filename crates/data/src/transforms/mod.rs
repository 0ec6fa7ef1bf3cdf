//! Image transforms: the TF image ops the CIFAR-10 and Inception input pipelines use.
//!
//! Hand-written rather than taken from the `image` crate: the point is TF's exact semantics
//! (its resize sampling grid, its HSV formulas, its crop rounding), which general-purpose
//! image libraries do not share.
//!
//! Each op is a plain function on an [`Image`], tested against hand-computed values. A
//! [`Transform`] chains them for one pipeline (e.g. [`CifarTrain`]); its randomness comes from
//! the [`Rng`] the pipeline seeds per example, so results do not depend on which reader
//! thread ran the transform.

mod cifar;
mod color;
mod crop;
mod distorted_box;
mod flip;
mod hsv;
mod inception_preprocessing;
mod keras;
mod pil_resize;
mod resize;
mod standardize;
mod torchvision;
mod vectorized;

pub use cifar::{CifarEval, CifarTrain};
pub use color::{
    adjust_brightness, adjust_contrast, adjust_contrast_planes, brighten, random_brightness,
    random_contrast,
};
pub use crop::{central_crop, central_window, crop, crop_or_pad_center, random_crop};
pub use distorted_box::{DistortedBoxConfig, Window, sample_distorted_box};
pub use flip::{flip_left_right, random_flip_left_right};
pub use hsv::{
    adjust_hue, adjust_saturation, adjust_saturation_and_hue, adjust_saturation_and_hue_planes,
    hsv_to_rgb, random_hue, random_saturation, random_saturation_and_hue, rgb_to_hsv,
};
pub use inception_preprocessing::{InceptionEval, InceptionTrain};
pub use keras::{KerasImageNetEval, KerasInputMode};
pub use pil_resize::{PilFilter, pil_resize_bilinear, pil_resize_window, pil_resize_window_by};
pub use resize::{ResizeMethod, Source, Value, resize, resize_window};
pub use standardize::per_image_standardization;
pub use torchvision::{
    Normalize, TorchvisionEval, TorchvisionTrain, center_window, random_resized_window,
    resized_crop, shorter_side_to,
};

pub use crate::rng::Rng;

use crate::bounding_box::BoundingBox;
use crate::codec::decode_image;
use crate::error::Cause;
use crate::image::{Image, Planes};

/// One example's preprocessing: decoded image in, network input out.
pub trait Transform: Send + Sync {
    /// Transforms `image`, whose object boxes are `boxes` (often none); an `Err` names what is
    /// wrong with it (e.g. smaller than the crop), and the pipeline adds the file and record.
    fn apply(&self, image: Image, boxes: &[BoundingBox], rng: &mut Rng) -> Result<Image, Cause>;

    /// The network input (CHW planes) for an encoded image (any format `codec` decodes), with
    /// the same values and the same draws from `rng` as [`apply`](Self::apply) on the decoded
    /// image. The default decodes the whole image and calls `apply`; a transform that keeps
    /// only part of the image may decode and convert less.
    fn apply_encoded(
        &self,
        encoded: &[u8],
        boxes: &[BoundingBox],
        rng: &mut Rng,
    ) -> Result<Planes, Cause> {
        let image = decode_image(encoded)?;
        self.apply(image, boxes, rng).map(Planes::from)
    }
}

/// A boxed transform is one: a preprocessing chosen at run time (`Box<dyn Transform>`) goes
/// wherever a transform does.
impl<T: Transform + ?Sized> Transform for Box<T> {
    fn apply(&self, image: Image, boxes: &[BoundingBox], rng: &mut Rng) -> Result<Image, Cause> {
        (**self).apply(image, boxes, rng)
    }

    fn apply_encoded(
        &self,
        encoded: &[u8],
        boxes: &[BoundingBox],
        rng: &mut Rng,
    ) -> Result<Planes, Cause> {
        (**self).apply_encoded(encoded, boxes, rng)
    }
}

/// No preprocessing: images go through as decoded.
#[derive(Debug, Clone, Copy, Default)]
pub struct Identity;

impl Transform for Identity {
    fn apply(&self, image: Image, _: &[BoundingBox], _: &mut Rng) -> Result<Image, Cause> {
        Ok(image)
    }
}
