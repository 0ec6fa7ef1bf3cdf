//! [`Preprocessing`]: which ImageNet preprocessing a model is trained and evaluated with, as a
//! command-line choice (`--preprocessing
//! torchvision|torchvision-bicubic|inception|keras|keras-tf|keras-pixels`).

use towers_data::transforms::{
    InceptionEval, InceptionTrain, KerasImageNetEval, KerasInputMode, Normalize, PilFilter,
    TorchvisionEval, TorchvisionTrain, Transform,
};

use towers_models::{EfficientNetLayout, MobileNetLayout, ResNetLayout};

use crate::error::{Error, Result};

/// torchvision's ImageNet preprocessing, TF's Inception preprocessing, or Keras's ResNet50's,
/// ResNet50V2's or EfficientNet's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
#[non_exhaustive]
pub enum Preprocessing {
    /// torchvision's ([`TorchvisionTrain`], [`TorchvisionEval`]): what its ImageNet weights
    /// expect (ImageNet's mean and deviation).
    Torchvision,
    /// torchvision's with its evaluation's resize by Pillow's bicubic filter: what its
    /// EfficientNet weights' presets do. Training is torchvision's (bilinear).
    TorchvisionBicubic,
    /// TF's Inception distortions and central crop ([`InceptionTrain`], [`InceptionEval`]):
    /// values in [-1, 1].
    Inception,
    /// What keras.applications' ResNet50 weights expect: BGR less ImageNet's mean pixel, in
    /// 0-255 ([`Normalize::CAFFE`]). Keras has no training preprocessing of its own: training
    /// takes torchvision's crops and flips ([`TorchvisionTrain`]); evaluation is Keras's
    /// example's ([`KerasImageNetEval`]: the whole image resized).
    Keras,
    /// What keras.applications' ResNet50V2 weights expect, Keras's "tf" mode: values in [-1,
    /// 1]. Training takes torchvision's crops and flips ([`Normalize::SIGNED_UNIT`]);
    /// evaluation is Keras's example's ([`KerasImageNetEval`] in [`KerasInputMode::Tf`]).
    KerasTf,
    /// What keras.applications' EfficientNets take: the values in 0-255, RGB, normalized by
    /// the network itself. Training takes torchvision's crops and flips
    /// ([`Normalize::PIXELS`]); evaluation is Keras's example's ([`KerasImageNetEval`] in
    /// [`KerasInputMode::Pixels`]).
    KerasPixels,
}

impl Preprocessing {
    /// The preprocessing a ResNet in `layout` was trained with, by default: torchvision's, or
    /// Keras's.
    pub fn for_resnet(layout: ResNetLayout) -> Self {
        match layout {
            ResNetLayout::Keras => Self::Keras,
            _ => Self::Torchvision,
        }
    }

    /// What the weights of a MobileNetV2 in `layout` expect: torchvision's preprocessing, or
    /// Keras's "tf" mode (`mobilenet_v2.preprocess_input`).
    pub fn for_mobilenet(layout: MobileNetLayout) -> Self {
        match layout {
            MobileNetLayout::Keras => Self::KerasTf,
            _ => Self::Torchvision,
        }
    }

    /// What the weights of a MobileNetV3 in `layout` expect: torchvision's preprocessing, or
    /// Keras's pixels (its network scales them itself; `mobilenet_v3.preprocess_input` passes
    /// them through).
    pub fn for_mobilenet_v3(layout: MobileNetLayout) -> Self {
        match layout {
            MobileNetLayout::Keras => Self::KerasPixels,
            _ => Self::Torchvision,
        }
    }

    /// What the weights of an EfficientNet in `layout` expect: torchvision's preprocessing
    /// with its bicubic resize, or Keras's pixels (`efficientnet.preprocess_input` passes them
    /// through).
    pub fn for_efficientnet(layout: EfficientNetLayout) -> Self {
        match layout {
            EfficientNetLayout::Keras => Self::KerasPixels,
            _ => Self::TorchvisionBicubic,
        }
    }

    /// The training transform at `image_size`.
    pub fn train(self, image_size: usize) -> Box<dyn Transform> {
        match self {
            Self::Torchvision | Self::TorchvisionBicubic => {
                Box::new(TorchvisionTrain::new(image_size))
            }
            Self::Inception => Box::new(InceptionTrain::new(image_size)),
            Self::Keras => {
                Box::new(TorchvisionTrain::new(image_size).with_normalize(Normalize::CAFFE))
            }
            Self::KerasTf => {
                let normalize = Normalize::SIGNED_UNIT;
                Box::new(TorchvisionTrain::new(image_size).with_normalize(normalize))
            }
            Self::KerasPixels => {
                Box::new(TorchvisionTrain::new(image_size).with_normalize(Normalize::PIXELS))
            }
        }
    }

    /// The evaluation transform at `image_size`; torchvision's resizes the shorter side to
    /// `resize_size` when given (232 for torchvision's `IMAGENET1K_V2` weights), which must not
    /// be less than `image_size` and is torchvision's alone.
    pub fn eval(self, image_size: usize, resize_size: Option<usize>) -> Result<Box<dyn Transform>> {
        match (self, resize_size) {
            (Self::Torchvision, _) => {
                torchvision_eval(image_size, resize_size, PilFilter::Bilinear)
            }
            (Self::TorchvisionBicubic, _) => {
                torchvision_eval(image_size, resize_size, PilFilter::Bicubic)
            }
            (Self::Inception, None) => Ok(Box::new(InceptionEval::new(image_size))),
            (Self::Inception, Some(_)) => Err(Error::Config(
                "a resize size is torchvision's preprocessing's (TF's crops 87.5% centrally)"
                    .into(),
            )),
            (Self::Keras, None) => Ok(Box::new(KerasImageNetEval::new(image_size))),
            (Self::KerasTf, None) => Ok(Box::new(
                KerasImageNetEval::new(image_size).with_mode(KerasInputMode::Tf),
            )),
            (Self::KerasPixels, None) => Ok(Box::new(
                KerasImageNetEval::new(image_size).with_mode(KerasInputMode::Pixels),
            )),
            (Self::Keras | Self::KerasTf | Self::KerasPixels, Some(_)) => Err(Error::Config(
                "a resize size is torchvision's preprocessing's (Keras's resizes the whole image)"
                    .into(),
            )),
        }
    }
}

/// torchvision's evaluation preset at `image_size`, its resize by Pillow's `filter`, to
/// `resize_size` where given (which must not be less than `image_size`).
fn torchvision_eval(
    image_size: usize,
    resize_size: Option<usize>,
    filter: PilFilter,
) -> Result<Box<dyn Transform>> {
    let eval = TorchvisionEval::new(image_size).with_interpolation(filter);
    match resize_size {
        None => Ok(Box::new(eval)),
        Some(resize) if resize >= image_size => Ok(Box::new(eval.with_resize_size(resize))),
        Some(resize) => Err(Error::Config(format!(
            "a resize to {resize} is less than the crop, {image_size}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use towers_data::Image;
    use towers_data::codec::encode_png;
    use towers_data::transforms::Rng;

    use super::*;

    /// `transform`'s planes of a 40x30 PNG of rising values.
    fn planes(transform: &dyn Transform) -> Vec<f32> {
        let values = (0..40 * 30 * 3).map(|i| (i % 251) as f32 / 255.0).collect();
        let png = encode_png(&Image::from_hwc(values, 30, 40, 3));
        let mut rng = Rng::seed_from_u64(0);
        transform
            .apply_encoded(&png, &[], &mut rng)
            .unwrap()
            .data()
            .to_vec()
    }

    #[test]
    fn each_choice_is_its_transform_and_a_resize_is_torchvisions_alone() {
        let torchvision = Preprocessing::Torchvision.eval(16, None).unwrap();
        assert_eq!(planes(&*torchvision), planes(&TorchvisionEval::new(16)));
        let resized = Preprocessing::Torchvision.eval(16, Some(24)).unwrap();
        let expected = TorchvisionEval::new(16).with_resize_size(24);
        assert_eq!(planes(&*resized), planes(&expected));
        let inception = Preprocessing::Inception.eval(16, None).unwrap();
        assert_eq!(planes(&*inception), planes(&InceptionEval::new(16)));
        let keras = Preprocessing::Keras.eval(16, None).unwrap();
        assert_eq!(planes(&*keras), planes(&KerasImageNetEval::new(16)));
        let keras_train = TorchvisionTrain::new(16).with_normalize(Normalize::CAFFE);
        assert_eq!(
            planes(&*Preprocessing::Keras.train(16)),
            planes(&keras_train)
        );
        let keras_tf = Preprocessing::KerasTf.eval(16, None).unwrap();
        let tf_mode = KerasImageNetEval::new(16).with_mode(KerasInputMode::Tf);
        assert_eq!(planes(&*keras_tf), planes(&tf_mode));
        let tf_train = TorchvisionTrain::new(16).with_normalize(Normalize::SIGNED_UNIT);
        assert_eq!(
            planes(&*Preprocessing::KerasTf.train(16)),
            planes(&tf_train)
        );

        let too_small = Preprocessing::Torchvision.eval(16, Some(15)).err().unwrap();
        assert!(
            too_small.to_string().contains("less than the crop"),
            "{too_small}"
        );
        let not_tfs = Preprocessing::Inception.eval(16, Some(24)).err().unwrap();
        assert!(not_tfs.to_string().contains("torchvision"), "{not_tfs}");
        let not_keras = Preprocessing::Keras.eval(16, Some(24)).err().unwrap();
        assert!(not_keras.to_string().contains("whole image"), "{not_keras}");
        let not_keras_tf = Preprocessing::KerasTf.eval(16, Some(24)).err().unwrap();
        assert!(
            not_keras_tf.to_string().contains("whole image"),
            "{not_keras_tf}"
        );
        let bicubic = Preprocessing::TorchvisionBicubic
            .eval(16, Some(24))
            .unwrap();
        let bicubic_preset =
            (TorchvisionEval::new(16).with_resize_size(24)).with_interpolation(PilFilter::Bicubic);
        assert_eq!(planes(&*bicubic), planes(&bicubic_preset));
        assert_ne!(planes(&*bicubic), planes(&*resized));
        let pixels = Preprocessing::KerasPixels.eval(16, None).unwrap();
        let pixels_mode = KerasImageNetEval::new(16).with_mode(KerasInputMode::Pixels);
        assert_eq!(planes(&*pixels), planes(&pixels_mode));
        let pixels_train = TorchvisionTrain::new(16).with_normalize(Normalize::PIXELS);
        assert_eq!(
            planes(&*Preprocessing::KerasPixels.train(16)),
            planes(&pixels_train)
        );
    }
}
