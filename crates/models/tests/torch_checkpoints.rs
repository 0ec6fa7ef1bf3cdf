//! A state dict where PyTorch training code saves one, read as torchvision's own files are
//! (`TorchSource`): inside a training checkpoint (PyTorch's ImageNet example, in both of
//! `torch.save`'s formats; torchvision's reference scripts; PyTorch's tutorial; Lightning's
//! `Trainer`; timm's, with a moving average beside it) and under a wrapper's prefix
//! (`DataParallel`'s `module.`, `torch.compile`'s `_orig_mod.`), saved as safetensors (Hugging
//! Face's and timm's `model.safetensors`, also converted with its floats only, or in float16),
//! and in a zip that the zip crate misreads (a file name of 21 characters before `.pth`). Each file was written by
//! torch 2 or Lightning 2.6 (`scripts/torch_fixtures/training_checkpoints.py`), with the plain
//! state dict's values in `expected.json` (Lightning's, one step on, in
//! `lightning_expected.json`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use burn::tensor::Device;
use towers_models::weights::{
    RestoreOptions, TorchSource, WeightSource, open_safetensors, restore,
};
use towers_models::{ResNet18, ResNetConfig};

fn data(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/torch_checkpoints")
        .join(file)
}

/// The values of the state dict saved by torch, and by Lightning after its training step.
const TORCH: &str = "expected.json";
const LIGHTNING: &str = "lightning_expected.json";

/// Each file, where its state dict sits, and the file of its values.
const FILES: [(&str, &str, &str); 11] = [
    ("state_dict.pth", "", TORCH),
    ("finetuned_resnet18_v2.pth", "", TORCH),
    ("imagenet_example.pth.tar", "state_dict.module.", TORCH),
    (
        "legacy_imagenet_example.pth.tar",
        "state_dict.module.",
        TORCH,
    ),
    ("torchvision_reference.pth", "model.", TORCH),
    ("tutorial.pt", "model_state_dict.", TORCH),
    ("compiled.pt", "_orig_mod.", TORCH),
    ("lightning.ckpt", "state_dict.model.", LIGHTNING),
    ("ema.pth.tar", "state_dict.", TORCH),
    ("model.safetensors", "", TORCH),
    ("float_only.safetensors", "", TORCH),
];

/// Our parameter paths and the state dict's keys of the tiny module the files hold.
const PARAMETERS: [(&str, &str); 7] = [
    ("conv1.weight", "conv1.weight"),
    ("bn1.gamma", "bn1.weight"),
    ("bn1.beta", "bn1.bias"),
    ("bn1.running_mean", "bn1.running_mean"),
    ("bn1.running_var", "bn1.running_var"),
    ("fc.weight", "fc.weight"),
    ("fc.bias", "fc.bias"),
];

/// torch's values of each key in `file`, flattened; `fc.weight` transposed to our `[in, out]`.
fn expected(file: &str) -> HashMap<String, Vec<f32>> {
    let json = std::fs::read_to_string(data(file)).unwrap();
    let values: HashMap<String, serde_json::Value> = serde_json::from_str(&json).unwrap();
    let flat = |value: &serde_json::Value| -> Vec<f32> {
        let mut out = Vec::new();
        let mut stack = vec![value];
        while let Some(value) = stack.pop() {
            match value {
                serde_json::Value::Array(items) => stack.extend(items.iter().rev()),
                number => out.push(number.as_f64().unwrap() as f32),
            }
        }
        out
    };
    let mut expected: HashMap<String, Vec<f32>> = values
        .iter()
        .map(|(key, v)| (key.clone(), flat(v)))
        .collect();
    let fc = &values["fc.weight"];
    let rows: Vec<Vec<f32>> = (fc.as_array().unwrap().iter()).map(flat).collect();
    let transposed = (0..rows[0].len()).flat_map(|c| rows.iter().map(move |row| row[c]));
    expected.insert("fc.weight".into(), transposed.collect());
    expected
}

#[test]
fn every_way_of_saving_gives_the_state_dicts_values() {
    for (file, prefix, values) in FILES {
        let expected = expected(values);
        let mut source: Box<dyn WeightSource> = match file.ends_with(".safetensors") {
            true => open_safetensors::<ResNet18>(&data(file)).unwrap(),
            false => Box::new(TorchSource::open::<ResNet18>(&data(file)).unwrap()),
        };
        for (path, key) in PARAMETERS {
            let tensor = source.tensor(path).unwrap();
            let tensor = tensor.unwrap_or_else(|| panic!("{file}: no {path}"));
            assert_eq!(tensor.name, format!("{prefix}{key}"), "{file}");
            assert_eq!(tensor.values, expected[key], "{file}: {key}");
        }
        // Each tensor of the state dict was read (`num_batches_tracked` with the batch
        // norm); the optimizer's state, the arguments and the moving average are not the
        // model's, so not unused.
        assert_eq!(source.unused(), Vec::<String>::new(), "{file}");
    }
}

/// The state dict saved as safetensors in float16, as fp16 exports save it
/// (`scripts/torch_fixtures/converted_safetensors.py`): torchvision's names, each value the
/// state dict's within float16's rounding.
#[test]
fn a_half_precision_state_dict_reads_by_torchvisions_names() {
    let expected = expected(TORCH);
    let mut source = open_safetensors::<ResNet18>(&data("half.safetensors")).unwrap();
    for (path, key) in PARAMETERS {
        let tensor = source
            .tensor(path)
            .unwrap()
            .unwrap_or_else(|| panic!("no {path}"));
        assert_eq!(tensor.name, key);
        for (got, want) in tensor.values.iter().zip(&expected[key]) {
            assert!(
                (got - want).abs() <= want.abs() / 1024.0 + 1e-7,
                "{key}: {got} {want}"
            );
        }
    }
}

#[test]
fn the_zip_crate_still_misreads_a_21_character_name() {
    // What `torch_zip_copy.rs` works around: once this fails, the zip crate reads such files
    // itself, and the copy can go.
    let file = std::fs::File::open(data("finetuned_resnet18_v2.pth")).unwrap();
    let error = zip::ZipArchive::new(file).err().map(|e| e.to_string());
    assert_eq!(
        error.as_deref(),
        Some("invalid Zip archive: Invalid Central Directory header")
    );
}

#[test]
fn a_state_dict_under_another_attribute_is_an_error_saying_where_keys_were_looked_for() {
    let path = data("unknown_attribute.pth");
    let mut source = TorchSource::open::<ResNet18>(&path).unwrap();
    let model: ResNet18 = ResNetConfig::resnet18(2).init(&Device::flex());
    let error = restore(model, &mut source, &RestoreOptions::default()).unwrap_err();
    let message = error.to_string();
    assert!(
        message.starts_with(&path.display().to_string()),
        "{message}"
    );
    assert!(message.contains("the file's: `net.bn1.bias`"), "{message}");
    assert!(message.contains("followed by `module.`"), "{message}");
}

/// A state dict whose `fc.weight` is a broadcast view (`torch.zeros(1).expand(2**25)`: 4
/// bytes stored in a file of 1.8 KB, 128 MiB of values once gathered; written by torch,
/// `scripts/torch_fixtures/broadcast_view.py`): refused by its size, naming the file and the
/// tensor, before anything is gathered; the file's other tensor reads.
#[test]
fn a_broadcast_view_larger_than_a_weights_file_may_hold_is_refused() {
    let path = data("broadcast.pth");
    let source = TorchSource::open::<ResNet18>(&path).unwrap();
    let error = source.read_key("fc.weight").unwrap_err().to_string();
    for words in ["broadcast.pth", "fc.weight", "134217728 bytes of values"] {
        assert!(error.contains(words), "{error}");
    }
    let (shape, values) = source.read_key("fc.bias").unwrap().unwrap();
    assert_eq!((shape, values), (vec![10], vec![0.0; 10]));
}
