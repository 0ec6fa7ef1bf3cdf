//! Image folders against torchvision 0.29's `ImageFolder` and Pillow 13
//! (`scripts/torch_fixtures/torchvision_image_folder.py`, in `tests/data/image_folder`): the
//! same classes, the same images in the same order with the same labels, and the same pixels
//! from every format torchvision takes.

use std::path::{Path, PathBuf};

use serde_json::Value;
use towers_data::Rgb8;
use towers_data::codec::{decode_rgb8, decode_rgb8_as_pillow};
use towers_data::image_folder::ImageFolder;

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/image_folder")
}

fn expected() -> Value {
    let json = std::fs::read(fixture().join("expected.json")).unwrap();
    serde_json::from_slice(&json).unwrap()
}

fn relative(path: &Path) -> String {
    let tree = fixture().join("tree");
    path.strip_prefix(&tree)
        .unwrap()
        .to_str()
        .unwrap()
        .to_string()
}

#[test]
fn classes_images_order_and_labels_are_torchvisions() {
    let expected = expected();
    let folder = ImageFolder::scan(&fixture().join("tree")).unwrap();
    let classes: Vec<&str> = expected["classes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert_eq!(folder.classes(), classes);
    let listed: Vec<(String, i64)> = folder
        .files()
        .iter()
        .map(|file| (relative(file), folder.label(file).unwrap()))
        .collect();
    let torchvisions: Vec<(String, i64)> = expected["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["path"].as_str().unwrap().into(),
                s["label"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(listed, torchvisions);
}

/// Every sample decodes to `pil_loader`'s bytes (`Image.open(f).convert("RGB")`): BMP (24-bit
/// and palette), PPM, PGM, a PBM bitmap, TIFF (LZW, grey, CMYK, RGBA), WebP (lossless, lossy,
/// with alpha, animated: the first frame), PNG (grey with alpha, RGBA, 16-bit grey and colour),
/// GIF named as another format (a palette with a transparent colour, grey, animated),
/// JPEG.
#[test]
fn every_format_decodes_to_pillows_pixels() {
    for sample in expected()["samples"].as_array().unwrap() {
        let name = sample["path"].as_str().unwrap();
        let encoded = std::fs::read(fixture().join("tree").join(name)).unwrap();
        let mut rgb = Rgb8::default();
        decode_rgb8_as_pillow(&encoded, &mut rgb).unwrap_or_else(|e| panic!("{name}: {e}"));
        let size = (
            sample["width"].as_u64().unwrap(),
            sample["height"].as_u64().unwrap(),
        );
        assert_eq!((rgb.width as u64, rgb.height as u64), size, "{name}");
        let pillows = sample["rgb"].as_str().unwrap();
        let ours: String = rgb.pixels.iter().map(|b| format!("{b:02x}")).collect();
        let differing = (ours.as_bytes().chunks(2).zip(pillows.as_bytes().chunks(2)))
            .filter(|(a, b)| a != b)
            .count();
        assert_eq!(
            differing,
            0,
            "{name}: {differing} of {} bytes differ",
            rgb.pixels.len()
        );
    }
}

/// TF's decoders take the same files, to the same pixels but for the JPEGs (TF's fast DCT) and
/// the 16-bit PNGs (rounded where Pillow truncates or clips).
#[test]
fn tfs_decoders_take_every_format_too() {
    for sample in expected()["samples"].as_array().unwrap() {
        let name = sample["path"].as_str().unwrap();
        let encoded = std::fs::read(fixture().join("tree").join(name)).unwrap();
        let (mut tf, mut pillow) = (Rgb8::default(), Rgb8::default());
        decode_rgb8(&encoded, &mut tf).unwrap_or_else(|e| panic!("{name}: {e}"));
        decode_rgb8_as_pillow(&encoded, &mut pillow).unwrap();
        let lower = name.to_lowercase();
        if !(lower.ends_with("jpeg") || lower.ends_with("16.png")) {
            assert!(tf.pixels == pillow.pixels, "{name}");
        }
    }
}
