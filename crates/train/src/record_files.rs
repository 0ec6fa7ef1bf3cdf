//! [`Input`]: what a pipeline reads, as the trainer and the evaluator take it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use towers_data::cifar10::{BuiltinCifar10, Cifar10Dir};
use towers_data::cifar100::{Cifar100Dir, Cifar100Labels};
use towers_data::transforms::{CifarEval, CifarTrain, Transform};
use towers_data::{
    HostBatch, IndexedFile, InputPosition, Pipeline, PipelineConfig, QueueFill, RecordCount,
    RecordFormat, Share,
};

use crate::error::Result;
use crate::train_input::{
    BatchSource, TrainInput, position_from_json, position_json, positions_from_json,
};

/// A record format, its files and the transform applied to every example.
#[derive(Clone)]
pub struct Input {
    /// How records are framed and decoded.
    pub format: Arc<dyn RecordFormat>,
    /// The files, in order.
    pub files: Vec<PathBuf>,
    /// Preprocessing (and, for training, distortion) of each example.
    pub transform: Arc<dyn Transform>,
}

impl std::fmt::Debug for Input {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Input")
            .field("files", &self.files)
            .finish_non_exhaustive()
    }
}

impl Input {
    /// `files` in `format`, each example through `transform`.
    pub fn new(
        format: impl RecordFormat + 'static,
        files: Vec<PathBuf>,
        transform: impl Transform + 'static,
    ) -> Self {
        Self {
            format: Arc::new(format),
            files,
            transform: Arc::new(transform),
        }
    }

    /// The CIFAR-10 training files of `dir` with the TF tutorial's distortions
    /// (`cifar10_input.distorted_inputs`). `dir` is a `cifar-10-batches-bin` or
    /// `cifar-10-batches-py` folder, or the folder holding one, or TFDS's `cifar10` there
    /// ([`Cifar10Dir::find`]).
    pub fn cifar10_train(dir: &Path) -> Result<Self> {
        let cifar = Cifar10Dir::find(dir)?;
        Ok(Self::cifar(
            cifar.format(),
            cifar.train_files()?,
            CifarTrain::default(),
        ))
    }

    /// The CIFAR-10 test file of `dir` with the evaluation preprocessing (central crop,
    /// standardization: `cifar10_input.inputs(eval_data=True)`). `dir` as in
    /// [`cifar10_train`](Self::cifar10_train).
    pub fn cifar10_test(dir: &Path) -> Result<Self> {
        let cifar = Cifar10Dir::find(dir)?;
        Ok(Self::cifar(
            cifar.format(),
            cifar.test_files()?,
            CifarEval::default(),
        ))
    }

    /// CIFAR-100's training file of `dir`, with its `labels` (fine: 100 classes, coarse: 20),
    /// through the CIFAR-10 tutorial's distortions. `dir` is a `cifar-100-binary` or
    /// `cifar-100-python` folder, or the folder holding one, or TFDS's `cifar100` there
    /// ([`Cifar100Dir::find`]).
    pub fn cifar100_train(dir: &Path, labels: Cifar100Labels) -> Result<Self> {
        let cifar = Cifar100Dir::find(dir, labels)?;
        Ok(Self::cifar(
            cifar.format(),
            cifar.train_files()?,
            CifarTrain::default(),
        ))
    }

    /// CIFAR-100's test file of `dir`, with its `labels`, through the evaluation
    /// preprocessing; `dir` as in [`cifar100_train`](Self::cifar100_train).
    pub fn cifar100_test(dir: &Path, labels: Cifar100Labels) -> Result<Self> {
        let cifar = Cifar100Dir::find(dir, labels)?;
        Ok(Self::cifar(
            cifar.format(),
            cifar.test_files()?,
            CifarEval::default(),
        ))
    }

    fn cifar(
        format: Arc<dyn RecordFormat>,
        files: Vec<PathBuf>,
        transform: impl Transform + 'static,
    ) -> Self {
        Self {
            format,
            files,
            transform: Arc::new(transform),
        }
    }

    /// The number of examples in the files (one pass over their framing, no decoding). A file
    /// cut short counts its whole records: whether it may be read is the pipeline's to say
    /// (see `skip_corrupt_records`).
    pub fn count_examples(&self) -> Result<u64> {
        let mut total = 0;
        for file in &self.files {
            total += IndexedFile::open_partial(self.format.as_ref(), file)?
                .spans
                .len() as u64;
        }
        Ok(total)
    }

    /// Starts a pipeline over this input.
    pub fn start(&self, config: PipelineConfig) -> Result<Pipeline> {
        Ok(Pipeline::start(
            config,
            Arc::clone(&self.format),
            self.files.clone(),
            Arc::clone(&self.transform),
        )?)
    }

    /// Starts a pipeline over this input where `position` stands (see [`Pipeline::resume`]).
    pub fn resume(&self, config: PipelineConfig, position: &InputPosition) -> Result<Pipeline> {
        Ok(Pipeline::resume(
            config,
            Arc::clone(&self.format),
            self.files.clone(),
            Arc::clone(&self.transform),
            position,
        )?)
    }
}

/// Files in a record format, read by a [`Pipeline`] of host image batches.
impl TrainInput for Input {
    type Source = Pipeline;

    fn count_examples(&self) -> Result<u64> {
        Input::count_examples(self)
    }

    fn share_note(&self, share: Share) -> String {
        format!(
            "this rank reads {} of the {} input files (file i on rank i mod {})",
            share.count(self.files.len()),
            self.files.len(),
            share.ranks
        )
    }

    fn start(
        &self,
        config: PipelineConfig,
        position: Option<&serde_json::Value>,
    ) -> Result<Pipeline> {
        match position {
            Some(json) => self.resume(config, &position_from_json(json)?),
            None => Input::start(self, config),
        }
    }

    fn recut(
        &self,
        config: &PipelineConfig,
        positions: &[serde_json::Value],
    ) -> Result<(serde_json::Value, usize)> {
        let old: Vec<InputPosition> = positions_from_json(positions)?;
        let format = Arc::clone(&self.format);
        let position = Pipeline::recut(config, format, &self.files, &old)?;
        Ok((position_json(&position), position.buffer.len()))
    }
}

impl BatchSource for Pipeline {
    type Batch = HostBatch;

    fn next_batch(&mut self) -> Result<Option<HostBatch>> {
        Ok(Pipeline::next_batch(self)?)
    }

    fn position(&self) -> serde_json::Value {
        position_json(&Pipeline::position(self))
    }

    fn fill(&self) -> QueueFill {
        Pipeline::fill(self)
    }

    fn record_count(&self) -> RecordCount {
        Pipeline::record_count(self)
    }

    fn stop(self) -> Result<()> {
        Ok(Pipeline::stop(self)?)
    }

    fn images(batch: &HostBatch) -> Option<&HostBatch> {
        Some(batch)
    }
}

/// The built-in CIFAR-10 data of the examples: the synthetic set of
/// [`towers_data::cifar10::BuiltinCifar10`] with 10,000 training and 2,000 test images,
/// always the same bytes, so that a trainer and an evaluator without `--data-dir` see one
/// dataset. Deleted when dropped.
pub fn builtin_cifar10() -> Result<BuiltinCifar10> {
    Ok(BuiltinCifar10::create(2000, 2000, 1)?)
}

#[cfg(test)]
mod tests {
    use towers_data::inception::TfExampleFormat;
    use towers_data::transforms::InceptionEval;

    use super::*;

    /// The same three records in TFRecord files TF wrote uncompressed, GZIP and ZLIB
    /// (towers-data's fixtures): each counts them, so an epoch's length (and the learning-rate
    /// schedule built on it) does not depend on the compression.
    #[test]
    fn compressed_files_count_their_records() {
        let tf = Path::new(env!("CARGO_MANIFEST_DIR")).join("../data/tests/data/tf_compressed");
        let files = ["none", "gzip", "zlib"].map(|name| tf.join(format!("{name}.tfrecord")));
        let input = Input::new(
            TfExampleFormat::new(2),
            files.to_vec(),
            InceptionEval::new(8),
        );
        assert_eq!(input.count_examples().unwrap(), 9);
    }
}
