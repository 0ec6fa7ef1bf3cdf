//! [`InceptionData`]: the input of the Inception examples, from TF's shards, a dataset TFDS
//! prepared, an image folder or the built-in synthetic shards.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use towers_data::image_folder::ImageFolder;
use towers_data::inception::{self, BuiltinShards, BuiltinShardsConfig, TfExampleFormat};
use towers_data::tfds::{TfdsDataset, TfdsImageFormat};
use towers_data::transforms::{InceptionEval, Transform};
use towers_models::ImageClassifier;

use crate::error::{Error, Result};
use crate::eval::evaluate;
use crate::record_files::Input;
use crate::trainer::Trained;

/// Classes of the built-in data: few enough to stay apart through TF's colour distortions
/// (see [`towers_data::synthetic::ClassLook::distortion_proof`]) and to be learnt in a minute.
pub const BUILTIN_CLASSES: usize = 4;

/// ImageNet's classes (ILSVRC 2012), TF's shards' labels `1..=1000`.
const IMAGENET_CLASSES: usize = 1000;

/// Side of the input images by default: ImageNet's 299 with a data directory, and on the
/// built-in data 75, the smallest Inception v3 takes (a step then costs about 1/16 of one
/// at 299).
pub fn inception_image_size(data_dir: Option<&Path>) -> usize {
    match data_dir {
        Some(_) => 299,
        None => 75,
    }
}

/// Which files of an Inception data directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Split {
    /// `train-XXXXX-of-YYYYY`.
    Train,
    /// `validation-XXXXX-of-YYYYY`.
    Validation,
}

/// An Inception input and what it needs kept alive.
pub struct InceptionData {
    /// The files, their format and the preprocessing.
    pub input: Input,
    /// Outputs the labels need: 1001 for TF's ImageNet layout (labels 1..=1000, 0 the
    /// background; 1000 without it), the class count of an image folder or of another TFDS
    /// dataset than ImageNet (labels from 0).
    pub num_classes: usize,
    /// The image folder, when the data is one (its classes name the labels).
    pub folder: Option<ImageFolder>,
    /// What the data is, for the log.
    pub description: String,
    /// The built-in data's folder, deleted on drop, and the format of its shards.
    builtin: Option<(BuiltinShards, TfExampleFormat)>,
    /// The dataset TFDS prepared, when the data is one, and the format of its records.
    tfds: Option<(TfdsDataset, TfdsImageFormat)>,
}

/// Whether TF's background class keeps label 0 (TF's models: 1001 outputs for ImageNet) or is
/// dropped, the stored labels read one lower (torchvision's: 1000).
#[derive(Debug, Clone, Copy)]
enum Background {
    Kept,
    Dropped,
}

impl Background {
    /// The outputs a model needs for `classes` classes stored as `1..=classes`.
    fn outputs(self, classes: usize) -> usize {
        match self {
            Self::Kept => classes + 1,
            Self::Dropped => classes,
        }
    }

    /// The format of shards of `classes` classes.
    fn format(self, classes: usize) -> TfExampleFormat {
        let offset = match self {
            Self::Kept => 0,
            Self::Dropped => -1,
        };
        TfExampleFormat::new(self.outputs(classes)).with_label_offset(offset)
    }
}

/// What the data is, for the log: `split` (a split spec) of `dataset`, in `shards` files.
fn tfds_description(dataset: &TfdsDataset, split: &str, shards: usize) -> String {
    format!(
        "TFDS's {} {} ({}), split {split}: {shards} shards, {} classes",
        dataset.name(),
        dataset.version(),
        dataset.dir().display(),
        dataset.num_classes()
    )
}

/// The image folder `dir` as `split` takes it (a validation folder keeps its empty classes), with
/// an image at least.
fn scan_folder(dir: &Path, split: Split) -> Result<ImageFolder> {
    let scan = match split {
        Split::Train => ImageFolder::scan,
        Split::Validation => ImageFolder::scan_allowing_empty_classes,
    };
    let neither = |why: &dyn std::fmt::Display| {
        Error::Config(format!(
            "{} holds neither {split:?} shards (TF's ImageNet layout) nor an image folder nor \
             a dataset TFDS prepared: {why}",
            dir.display(),
        ))
    };
    let folder = scan(dir).map_err(|e| neither(&towers_data::ErrorChain(&e)))?;
    if folder.files().is_empty() {
        return Err(neither(&"no image under any class folder"));
    }
    Ok(folder)
}

/// The shards of `split` in `dir`.
fn split_files(dir: &Path, split: Split) -> Result<Vec<PathBuf>> {
    Ok(match split {
        Split::Train => inception::train_files(dir)?,
        Split::Validation => inception::validation_files(dir)?,
    })
}

impl InceptionData {
    /// `split` of `data_dir` through `transform`: TF's TFRecord shards of `tf.train.Example`s
    /// (ImageNet layout), or a dataset TFDS prepared (`~/tensorflow_datasets/imagenet2012`, its
    /// `train` split, or `validation`, else `test`; see [`TfdsDataset::open`]; its 1000-class
    /// datasets taken as ImageNet's, whose labels `0..1000` are TF's `1..=1000` less one), or
    /// an image folder `data_dir/<class>/<image>` (all of it, whatever
    /// the split; for [`Split::Validation`] class folders without images keep their labels, as
    /// torchvision's `allow_empty=True`), or without `data_dir` the built-in synthetic shards
    /// ([`BUILTIN_CLASSES`] classes that differ in stripe orientation and colour, so one more
    /// output; JPEGs of about `image_size`; the same bytes on every call).
    pub fn open(
        data_dir: Option<&Path>,
        split: Split,
        image_size: usize,
        transform: impl Transform + 'static,
    ) -> Result<Self> {
        Self::open_labelled(data_dir, split, image_size, transform, Background::Kept)
    }

    /// [`InceptionData::open`] for a model without TF's background class, as torchvision's
    /// ImageNet weights (1000 outputs): the shards' labels `1..=1000` (the built-in data's
    /// `1..=4`) are read as `0..1000` (`0..4`). An image folder's labels start at 0 anyway.
    pub fn open_without_background(
        data_dir: Option<&Path>,
        split: Split,
        image_size: usize,
        transform: impl Transform + 'static,
    ) -> Result<Self> {
        Self::open_labelled(data_dir, split, image_size, transform, Background::Dropped)
    }

    fn open_labelled(
        data_dir: Option<&Path>,
        split: Split,
        image_size: usize,
        transform: impl Transform + 'static,
        background: Background,
    ) -> Result<Self> {
        let Some(dir) = data_dir else {
            return Self::builtin(split, image_size, transform, background);
        };
        if let Ok(files) = split_files(dir, split) {
            return Ok(Self::shards(dir, files, transform, background));
        }
        // An image folder before TFDS: a TFDS folder is no image folder, and the search for
        // TFDS's version folders would list every class folder's images once more.
        let folder = scan_folder(dir, split);
        if let Ok(folder) = folder {
            return Ok(Self::folder(dir, folder, transform));
        }
        match TfdsDataset::find(dir)? {
            Some(dataset) => Self::tfds(dataset, split, transform, background),
            None => Err(folder.unwrap_err()),
        }
    }

    /// The built-in synthetic shards.
    fn builtin(
        split: Split,
        image_size: usize,
        transform: impl Transform + 'static,
        background: Background,
    ) -> Result<Self> {
        let config = BuiltinShardsConfig::new(BUILTIN_CLASSES, image_size);
        let builtin = BuiltinShards::create(config)?;
        let format = background.format(config.num_classes);
        Ok(Self {
            input: Input::new(format, split_files(builtin.dir(), split)?, transform),
            num_classes: background.outputs(config.num_classes),
            folder: None,
            description: format!(
                "built-in synthetic ImageNet-layout shards in {}: {} classes (stripe \
                 orientation x colour), {} training and {} held-out images",
                builtin.dir().display(),
                config.num_classes,
                config.train_shards * config.per_shard,
                config.validation_shards * config.per_shard,
            ),
            builtin: Some((builtin, format)),
            tfds: None,
        })
    }

    /// TF's ImageNet shards `files` of `dir`.
    fn shards(
        dir: &Path,
        files: Vec<PathBuf>,
        transform: impl Transform + 'static,
        background: Background,
    ) -> Self {
        Self {
            description: format!("{} shards of {}", files.len(), dir.display()),
            input: Input::new(background.format(IMAGENET_CLASSES), files, transform),
            num_classes: background.outputs(IMAGENET_CLASSES),
            folder: None,
            builtin: None,
            tfds: None,
        }
    }

    /// `split` of the dataset TFDS prepared, ImageNet's labels as TF's shards' where it has
    /// ImageNet's classes.
    fn tfds(
        dataset: TfdsDataset,
        split: Split,
        transform: impl Transform + 'static,
        background: Background,
    ) -> Result<Self> {
        let name = match split {
            Split::Train => "train",
            Split::Validation if !dataset.has_split("validation") => "test",
            Split::Validation => "validation",
        };
        let files = dataset.split_files(name)?;
        let classes = dataset.num_classes();
        let (format, num_classes) = match (classes, background) {
            (IMAGENET_CLASSES, Background::Kept) => {
                let format = dataset.image_format().with_label_offset(1);
                (format, background.outputs(classes))
            }
            _ => (dataset.image_format(), classes),
        };
        Ok(Self {
            description: tfds_description(&dataset, name, files.len()),
            input: Input::new(format.clone(), files, transform),
            num_classes,
            folder: None,
            builtin: None,
            tfds: Some((dataset, format)),
        })
    }

    /// [`with_tfds_split`](Self::with_tfds_split) where a spec is given (`--tfds-split`), else
    /// the same data.
    pub fn with_tfds_split_given(self, spec: Option<&str>) -> Result<Self> {
        match spec {
            Some(spec) => self.with_tfds_split(spec),
            None => Ok(self),
        }
    }

    /// The same data with the records of TFDS's split spec `spec` instead (`train[:80%]`,
    /// `train[80%:]`, as `tfds.load` reads it: [`TfdsDataset::slice`]), through the same
    /// transform: a dataset TFDS prepared with one split only (`tf_flowers`) then trains on a
    /// part of it and evaluates on the rest. An error for data that is not such a dataset.
    pub fn with_tfds_split(self, spec: &str) -> Result<Self> {
        let Some((dataset, format)) = &self.tfds else {
            return Err(Error::Config(format!(
                "a TFDS split spec ({spec}) for data that is no dataset TFDS prepared: {}",
                self.description
            )));
        };
        let (slices, files) = dataset.slice_with(spec, Arc::new(format.clone()))?;
        Ok(Self {
            description: tfds_description(dataset, spec, files.len()),
            input: Input {
                format: Arc::new(slices),
                files,
                transform: Arc::clone(&self.input.transform),
            },
            ..self
        })
    }

    /// The image folder `dir`.
    fn folder(dir: &Path, folder: ImageFolder, transform: impl Transform + 'static) -> Self {
        Self {
            description: format!(
                "image folder {}: {} classes, {} images",
                dir.display(),
                folder.classes().len(),
                folder.files().len()
            ),
            input: Input::new(folder.format(), folder.files().to_vec(), transform),
            num_classes: folder.classes().len(),
            folder: Some(folder),
            builtin: None,
            tfds: None,
        }
    }

    /// The built-in data's held-out (validation) shards through `transform`; `None` for
    /// other data.
    pub fn builtin_held_out(&self, transform: impl Transform + 'static) -> Result<Option<Input>> {
        let Some((builtin, format)) = &self.builtin else {
            return Ok(None);
        };
        let files = inception::validation_files(builtin.dir())?;
        Ok(Some(Input::new(*format, files, transform)))
    }

    /// On the built-in data, TF's `inception_eval` once: precision@1 of `trained`'s evaluation
    /// weights (the moving averages when kept) on the held-out images at `image_size`, printed
    /// against chance. Nothing for real data, which has its own evaluation examples, nor
    /// after a run a signal stopped.
    pub fn report_builtin_held_out<M: ImageClassifier>(
        &self,
        trained: &Trained<M>,
        image_size: usize,
        reader_threads: usize,
    ) -> Result<()> {
        let eval = InceptionEval::new(image_size);
        self.report_builtin_held_out_through(trained, eval, reader_threads)
    }

    /// [`report_builtin_held_out`](Self::report_builtin_held_out) with the held-out images
    /// through `eval` (e.g. torchvision's preprocessing, for a model trained on it).
    pub fn report_builtin_held_out_through<M: ImageClassifier>(
        &self,
        trained: &Trained<M>,
        eval: impl Transform + 'static,
        reader_threads: usize,
    ) -> Result<()> {
        if trained.report.interrupted {
            println!("held-out built-in images: not evaluated, the run was stopped");
            return Ok(());
        }
        let Some(held_out) = self.builtin_held_out(eval)? else {
            return Ok(());
        };
        let (weights, which) = trained.eval_weights();
        let precision = evaluate(weights, &held_out, 32, reader_threads)?;
        println!(
            "held-out built-in images, {which}: {precision} (chance {:.2})",
            1.0 / BUILTIN_CLASSES as f64
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use towers_data::PipelineConfig;
    use towers_data::codec::encode_png;
    use towers_data::transforms::InceptionEval;
    use towers_data::{ErrorChain, Image};

    use super::*;

    /// Every label of `input`, in order.
    fn labels(input: &Input) -> Vec<i64> {
        let mut pipeline = input.start(PipelineConfig::eval(64)).unwrap();
        let mut labels = Vec::new();
        while let Some(batch) = pipeline.next_batch().unwrap() {
            labels.extend_from_slice(batch.labels());
        }
        labels
    }

    #[test]
    fn without_the_background_class_the_same_examples_are_one_label_lower() {
        let open = |background| {
            let eval = InceptionEval::new(32);
            InceptionData::open_labelled(None, Split::Validation, 32, eval, background).unwrap()
        };
        let (kept, dropped) = (open(Background::Kept), open(Background::Dropped));
        assert_eq!((kept.num_classes, dropped.num_classes), (5, 4));
        let kept_labels = labels(&kept.input);
        let one_lower: Vec<i64> = kept_labels.iter().map(|l| l - 1).collect();
        assert_eq!(labels(&dropped.input), one_lower);
        assert!(kept_labels.iter().all(|l| (1..5).contains(l)));
        let held_out = dropped.builtin_held_out(InceptionEval::new(32)).unwrap();
        assert_eq!(
            labels(&held_out.unwrap()),
            one_lower,
            "the held-out input's too"
        );
    }

    #[test]
    fn a_validation_folder_keeps_empty_classes_and_a_training_one_refuses_them() {
        let dir = tempfile::tempdir().unwrap();
        let image = Image::from_hwc(vec![0.5; 8 * 8 * 3], 8, 8, 3);
        std::fs::create_dir_all(dir.path().join("cat")).unwrap();
        std::fs::create_dir_all(dir.path().join("dog")).unwrap();
        std::fs::write(dir.path().join("dog/a.png"), encode_png(&image)).unwrap();
        let open = |split| InceptionData::open(Some(dir.path()), split, 8, InceptionEval::new(8));
        let validation = open(Split::Validation).unwrap();
        assert_eq!(validation.num_classes, 2);
        assert_eq!(labels(&validation.input), [1]);
        let error = open(Split::Train).err().expect("an empty class refused");
        let message = ErrorChain(&error).to_string();
        assert!(
            message.contains("cat") && message.contains("no image"),
            "{message}"
        );
        std::fs::remove_file(dir.path().join("dog/a.png")).unwrap();
        let error = open(Split::Validation)
            .err()
            .expect("no image at all refused");
        let message = ErrorChain(&error).to_string();
        assert!(
            message.contains("no image under any class folder"),
            "{message}"
        );
    }

    fn tfds_fixtures() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../data/tests/data/tfds")
    }

    /// The labels `tfds.load` read from `name` (towers-data's fixtures).
    fn tfds_labels(name: &str) -> Vec<i64> {
        let path = tfds_fixtures().join(format!("expected/{name}.tsv"));
        let text = std::fs::read_to_string(path).unwrap();
        let labels = text
            .lines()
            .skip(1)
            .map(|line| line.split('\t').next().unwrap());
        labels.map(|label| label.parse().unwrap()).collect()
    }

    #[test]
    fn a_tfds_dataset_is_read_by_split_with_its_own_classes() {
        let flowers = tfds_fixtures().join("tiny_flowers");
        let open = |split| InceptionData::open(Some(&flowers), split, 16, InceptionEval::new(16));
        let train = open(Split::Train).unwrap();
        assert_eq!(train.num_classes, 3);
        assert_eq!(
            labels(&train.input),
            tfds_labels("tiny_flowers-small-1.1.0-train")
        );
        let validation = open(Split::Validation).unwrap();
        let theirs = tfds_labels("tiny_flowers-small-1.1.0-validation");
        assert_eq!(labels(&validation.input), theirs);
        // CIFAR-10 has no validation split: its test split is held out.
        let cifar = tfds_fixtures().join("cifar10");
        let eval = InceptionEval::new(16);
        let test = InceptionData::open(Some(&cifar), Split::Validation, 16, eval).unwrap();
        assert_eq!(labels(&test.input), tfds_labels("cifar10-3.0.2-test"));
    }

    #[test]
    fn tfds_imagenet_labels_are_tf_shards_with_the_background_class() {
        let temp = tempfile::tempdir().unwrap();
        let from = tfds_fixtures().join("tiny_flowers/small/1.1.0");
        for entry in std::fs::read_dir(&from).unwrap() {
            let path = entry.unwrap().path();
            std::fs::copy(&path, temp.path().join(path.file_name().unwrap())).unwrap();
        }
        let features = temp.path().join("features.json");
        let text = std::fs::read_to_string(&features).unwrap();
        let imagenet = text.replace(r#""numClasses": "3""#, r#""numClasses": "1000""#);
        std::fs::write(&features, imagenet).unwrap();
        let open = |background| {
            let eval = InceptionEval::new(16);
            InceptionData::open_labelled(Some(temp.path()), Split::Train, 16, eval, background)
        };
        let (kept, dropped) = (open(Background::Kept).unwrap(), open(Background::Dropped));
        let dropped = dropped.unwrap();
        assert_eq!((kept.num_classes, dropped.num_classes), (1001, 1000));
        let theirs = tfds_labels("tiny_flowers-small-1.1.0-train");
        assert_eq!(labels(&dropped.input), theirs);
        let one_higher: Vec<i64> = theirs.iter().map(|l| l + 1).collect();
        assert_eq!(labels(&kept.input), one_higher);
    }

    #[test]
    fn a_tfds_split_spec_reads_the_records_tfds_load_reads() {
        let flowers = tfds_fixtures().join("tiny_flowers");
        let eval = InceptionEval::new(16);
        let data = InceptionData::open(Some(&flowers), Split::Train, 16, eval).unwrap();
        let sliced = data.with_tfds_split("train[5:-5]").unwrap();
        assert!(sliced.description.contains("split train[5:-5]: 3 shards"));
        let slices = std::fs::read_to_string(tfds_fixtures().join("expected/slices.tsv"));
        let theirs: Vec<i64> = (slices.unwrap().lines())
            .filter(|line| line.starts_with("train[5:-5]\t1.1.0\t"))
            .map(|line| line.split('\t').nth(2).unwrap().parse().unwrap())
            .collect();
        assert_eq!(theirs.len(), 14);
        assert_eq!(labels(&sliced.input), theirs);
        let builtin = InceptionData::open(None, Split::Train, 16, InceptionEval::new(16));
        let error = builtin.unwrap().with_tfds_split("train[:5]").err().unwrap();
        assert!(
            error.to_string().contains("no dataset TFDS prepared"),
            "{error}"
        );
    }
}
