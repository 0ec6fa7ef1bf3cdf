//! The built-in Inception data is learnable through TF's training distortions: a
//! nearest-centroid classifier on three image statistics (the mean colour's hue, as a point on
//! the wheel weighted by saturation, and the balance of horizontal and vertical gradients),
//! fitted on distorted training images, classifies distorted held-out images far above chance.

use std::sync::Arc;

use towers_data::inception::{self, BuiltinShards, BuiltinShardsConfig, TfExampleFormat};
use towers_data::transforms::{InceptionTrain, rgb_to_hsv};
use towers_data::{Pipeline, PipelineConfig};

const CLASSES: usize = 4;
const SIZE: usize = 48;

/// Statistics of one CHW image in [-1, 1].
fn features(image: &[f32]) -> [f32; 3] {
    let plane = SIZE * SIZE;
    let mean = |c: usize| image[c * plane..][..plane].iter().sum::<f32>() / plane as f32;
    let rgb = [0, 1, 2].map(|c| (mean(c) + 1.0) / 2.0);
    let [hue, saturation, _] = rgb_to_hsv(rgb);
    let angle = hue * std::f32::consts::TAU;
    let (mut across, mut down) = (0.0, 0.0);
    for c in 0..3 {
        let p = &image[c * plane..][..plane];
        for y in 0..SIZE - 1 {
            for x in 0..SIZE - 1 {
                across += (p[y * SIZE + x + 1] - p[y * SIZE + x]).abs();
                down += (p[(y + 1) * SIZE + x] - p[y * SIZE + x]).abs();
            }
        }
    }
    [
        saturation * angle.cos(),
        saturation * angle.sin(),
        (across - down) / (across + down),
    ]
}

/// Features and labels (0-based) of every example of `files`, distorted as for training.
fn distorted(files: Vec<std::path::PathBuf>) -> Vec<([f32; 3], usize)> {
    let config = PipelineConfig::eval(16).with_reader_threads(2).with_seed(5);
    let format = Arc::new(TfExampleFormat::new(CLASSES).with_label_offset(-1));
    let pipeline = Pipeline::start(config, format, files, Arc::new(InceptionTrain::new(SIZE)));
    let mut out = Vec::new();
    for batch in pipeline.unwrap() {
        let batch = batch.unwrap();
        let len = 3 * SIZE * SIZE;
        for (image, &label) in batch.images().chunks_exact(len).zip(batch.labels()) {
            out.push((features(image), label as usize));
        }
    }
    out
}

#[test]
fn distorted_classes_are_told_apart_by_nearest_centroid() {
    let data = BuiltinShards::create(
        BuiltinShardsConfig::new(CLASSES, 64)
            .with_train_shards(2)
            .with_per_shard(48),
    )
    .unwrap();
    let train = distorted(inception::train_files(data.dir()).unwrap());
    let held_out = distorted(inception::validation_files(data.dir()).unwrap());
    assert_eq!((train.len(), held_out.len()), (96, 48));

    // Each feature scaled by its spread over the training images, then one centroid a class.
    let spread: [f32; 3] = std::array::from_fn(|i| {
        let n = train.len() as f32;
        let mean = train.iter().map(|(f, _)| f[i]).sum::<f32>() / n;
        (train
            .iter()
            .map(|(f, _)| (f[i] - mean).powi(2))
            .sum::<f32>()
            / n)
            .sqrt()
    });
    let scaled = |f: &[f32; 3]| std::array::from_fn::<f32, 3, _>(|i| f[i] / spread[i]);
    let mut centroids = [[0.0f32; 3]; CLASSES];
    for (f, label) in &train {
        let s = scaled(f);
        for i in 0..3 {
            centroids[*label][i] += s[i] / (train.len() / CLASSES) as f32;
        }
    }
    let nearest = |f: &[f32; 3]| {
        let s = scaled(f);
        let distance = |c: &[f32; 3]| (0..3).map(|i| (s[i] - c[i]).powi(2)).sum::<f32>();
        (0..CLASSES)
            .min_by(|&a, &b| distance(&centroids[a]).total_cmp(&distance(&centroids[b])))
            .unwrap()
    };
    let correct = held_out.iter().filter(|(f, l)| nearest(f) == *l).count();
    let accuracy = correct as f32 / held_out.len() as f32;
    // Chance is 0.25.
    assert!(
        accuracy >= 0.9,
        "held-out accuracy {accuracy} ({correct}/48)"
    );
}
