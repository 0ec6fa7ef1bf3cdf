//! The built-in CIFAR-10: synthetic images of ten classes in the binary layout, written into a
//! temporary folder and read back through the real reader.

use std::path::Path;

use rand::SeedableRng;

use super::{IMAGE_SIZE, NUM_CLASSES, RECORD_BYTES, TEST_FILE, TRAIN_FILES};
use crate::bounding_box::BoundingBox;
use crate::error::{Error, Result};
use crate::format::synthetic::{BuiltinDir, ClassLook, synthetic_image};
use crate::image::Image;
use crate::rng::Rng;

/// Encodes one record: the label byte, then the image's R, G and B planes.
///
/// # Panics
/// If `image` is not 32x32x3 or `label` is not a byte.
pub fn encode_record(image: &Image, label: u8) -> Vec<u8> {
    assert_eq!(
        image.shape(),
        [IMAGE_SIZE, IMAGE_SIZE, 3],
        "CIFAR-10 images are 32x32x3"
    );
    let mut out = Vec::with_capacity(RECORD_BYTES);
    out.push(label);
    out.extend(
        image
            .clone()
            .into_chw()
            .iter()
            .map(|v| v.round().clamp(0.0, 255.0) as u8),
    );
    out
}

fn scale(mut image: Image, factor: f32) -> Image {
    image.data_mut().iter_mut().for_each(|v| *v *= factor);
    image
}

/// Writes a synthetic dataset in the CIFAR-10 binary layout into `dir`: the five training
/// files with `train_per_file` records each and `test_batch.bin` with `test` records, classes
/// in turn. Same `seed`, same bytes.
pub fn write_synthetic(dir: &Path, train_per_file: usize, test: usize, seed: u64) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(Error::io_at(dir))?;
    let mut rng = Rng::seed_from_u64(seed);
    let counts = TRAIN_FILES
        .iter()
        .map(|n| (*n, train_per_file))
        .chain([(TEST_FILE, test)]);
    for (name, count) in counts {
        let bytes: Vec<u8> = (0..count)
            .flat_map(|i| {
                let label = i % NUM_CLASSES;
                let image = synthetic_image(
                    ClassLook::spread(label, NUM_CLASSES),
                    IMAGE_SIZE,
                    IMAGE_SIZE,
                    BoundingBox::WHOLE,
                    &mut rng,
                );
                encode_record(&scale(image, 255.0), label as u8)
            })
            .collect();
        let path = dir.join(name);
        std::fs::write(&path, bytes).map_err(|error| Error::Io { path, error })?;
    }
    Ok(())
}

/// A synthetic CIFAR-10 dataset in a temporary directory, deleted on drop (and by a second
/// Ctrl-C's exit): the built-in data of the examples and tests, read back through the real
/// reader.
#[derive(Debug)]
pub struct BuiltinCifar10 {
    dir: BuiltinDir,
}

impl BuiltinCifar10 {
    /// Writes `train_per_file` records into each training file and `test` into the test file.
    pub fn create(train_per_file: usize, test: usize, seed: u64) -> Result<Self> {
        let dir = BuiltinDir::create("towers-cifar10-")?;
        write_synthetic(dir.path(), train_per_file, test, seed)?;
        Ok(Self { dir })
    }

    /// The `cifar-10-batches-bin`-style folder.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::cifar10::{test_files, train_files};

    #[test]
    fn synthetic_dataset_is_reproducible_and_labelled_in_turn() {
        let a = BuiltinCifar10::create(20, 10, 5).unwrap();
        let b = BuiltinCifar10::create(20, 10, 5).unwrap();
        let files = train_files(a.dir()).unwrap();
        assert_eq!(files.len(), 5);
        let bytes = std::fs::read(&files[0]).unwrap();
        assert_eq!(bytes, std::fs::read(b.dir().join(TRAIN_FILES[0])).unwrap());
        assert_eq!(bytes.len(), 20 * RECORD_BYTES);
        let labels: Vec<u8> = bytes.chunks(RECORD_BYTES).map(|r| r[0]).collect();
        assert_eq!(&labels[..12], &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1]);
        assert_eq!(
            std::fs::metadata(test_files(a.dir()).unwrap()[0].clone())
                .unwrap()
                .len(),
            10 * RECORD_BYTES as u64
        );
    }
}
