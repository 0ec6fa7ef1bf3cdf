//! torchvision's ImageNet preprocessing against files torchvision 0.29 and Pillow 13 wrote
//! (`scripts/torch_fixtures/torchvision_preprocessing.py`, in `tests/data/torchvision`): the
//! evaluation preset's resize and center crop, `F.resized_crop`, and the normalized tensor.

use std::path::PathBuf;

use rand::SeedableRng;
use serde_json::Value;
use towers_data::Rgb8;
use towers_data::codec::decode_rgb8_as_pillow;
use towers_data::transforms::{
    Normalize, Rng, TorchvisionEval, Transform, Window, resized_crop, shorter_side_to,
};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/torchvision")
        .join(name)
}

/// A fixture image as 8-bit RGB, JPEGs decoded as Pillow decodes them.
fn bytes(name: &str) -> Rgb8 {
    let mut rgb = Rgb8::default();
    let encoded = std::fs::read(fixture(name)).unwrap();
    decode_rgb8_as_pillow(&encoded, &mut rgb).unwrap();
    rgb
}

/// `image` normalized as torchvision's `ToTensor` and `Normalize` do, CHW.
fn normalized(image: &Rgb8) -> Vec<f32> {
    let Normalize { mean, std, .. } = Normalize::IMAGENET;
    let plane = |c: usize| {
        (image.pixels.chunks_exact(3)).map(move |p| (p[c] as f32 / 255.0 - mean[c]) / std[c])
    };
    (0..3).flat_map(plane).collect()
}

fn expected() -> Value {
    serde_json::from_slice(&std::fs::read(fixture("expected.json")).unwrap()).unwrap()
}

#[test]
fn evaluation_resizes_and_crops_every_image_as_torchvision() {
    let cases = [
        ("landscape.jpg", 73, 64),
        ("grey.jpg", 73, 64),
        ("portrait.png", 73, 64),
        ("small.png", 73, 64),
        ("landscape.jpg", 256, 224),
    ];
    for (name, resize, crop) in cases {
        let stem = name.split('.').next().unwrap();
        let theirs = bytes(&format!("eval-{resize}-{crop}-{stem}.png"));
        let eval = TorchvisionEval::new(crop).with_resize_size(resize);
        let encoded = std::fs::read(fixture(name)).unwrap();
        let ours = eval
            .apply_encoded(&encoded, &[], &mut Rng::seed_from_u64(0))
            .unwrap();
        assert_eq!(ours.shape(), [3, crop, crop], "{name} at {resize}/{crop}");
        let differing = (ours.data().iter())
            .zip(normalized(&theirs))
            .filter(|(a, b)| *a != b)
            .count();
        assert_eq!(
            differing, 0,
            "{name} at {resize}/{crop}: values unlike torchvision's"
        );
    }
}

#[test]
fn the_normalized_tensor_is_torchvisions() {
    let expected = &expected()["landscape_256_224"];
    let encoded = std::fs::read(fixture("landscape.jpg")).unwrap();
    let eval = TorchvisionEval::new(224);
    let ours = eval
        .apply_encoded(&encoded, &[], &mut Rng::seed_from_u64(0))
        .unwrap();
    let data = ours.data();
    for place in expected["values"].as_array().unwrap() {
        let [c, y, x] = [0, 1, 2].map(|i| place[i].as_u64().unwrap() as usize);
        let theirs = place[3].as_f64().unwrap() as f32;
        assert_eq!(data[(c * 224 + y) * 224 + x], theirs, "at {c}, {y}, {x}");
    }
    for (c, theirs) in expected["channel_sums"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
    {
        let ours: f64 = data[c * 224 * 224..][..224 * 224]
            .iter()
            .map(|&v| v as f64)
            .sum();
        let theirs = theirs.as_f64().unwrap();
        assert!(
            (ours - theirs).abs() < 1e-6 * theirs.abs().max(1.0),
            "channel {c}: {ours} against {theirs}"
        );
    }
}

#[test]
fn a_resized_crop_is_torchvisions() {
    let landscape = bytes("landscape.jpg");
    for (top, left, height, width) in [
        (10, 37, 100, 111),
        (0, 0, 150, 200),
        (97, 150, 20, 13),
        (3, 5, 140, 60),
    ] {
        let window = Window {
            top,
            left,
            height,
            width,
        };
        let theirs = bytes(&format!("crop-{top}-{left}-{height}-{width}.png"));
        let ours = resized_crop(&landscape, window, 64, 64);
        let differing = (ours.pixels.iter())
            .zip(&theirs.pixels)
            .filter(|(a, b)| a != b)
            .count();
        assert_eq!(differing, 0, "{window:?}: bytes unlike torchvision's");
    }
}

#[test]
fn the_shorter_side_is_resized_as_torchvision_sizes_it() {
    for case in expected()["resize_256_sizes"].as_array().unwrap() {
        let [h, w, new_h, new_w] = [0, 1, 2, 3].map(|i| case[i].as_u64().unwrap() as usize);
        assert_eq!(shorter_side_to(h, w, 256), (new_h, new_w), "{h}x{w}");
    }
}

/// ImageNet holds a few CMYK JPEGs; torchvision's loader makes them RGB with Pillow's
/// `convert("RGB")`, whose formula is not TF's: a CMYK gradient Pillow wrote decodes to the
/// bytes Pillow gives (in about half of them one off TF's).
#[test]
fn a_cmyk_jpeg_decodes_as_pillow_converts_it() {
    let mut ours = Rgb8::default();
    let encoded = std::fs::read(fixture("cmyk.jpg")).unwrap();
    decode_rgb8_as_pillow(&encoded, &mut ours).unwrap();
    assert_eq!(ours, bytes("cmyk-rgb.png"));
}
