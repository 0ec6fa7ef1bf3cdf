//! Evaluation: precision@1 (and @5 for large label sets) over a whole evaluation set, every
//! example exactly once, or over its first N examples, as TF's `cifar10_eval.py` /
//! `inception_eval.py` compute it; or until a [`StopFlag`] is raised (a Ctrl-C after training).

use std::fmt;

use burn::tensor::{Device, Tensor};
use towers_data::PipelineConfig;
use towers_models::ImageClassifier;

use crate::error::{Error, Result};
use crate::record_files::Input;
use crate::stop::StopFlag;

/// Correct predictions over an evaluation set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Precision {
    /// Examples evaluated.
    pub examples: u64,
    /// Examples whose label had the highest logit.
    pub correct_at_1: u64,
    /// Examples whose label was among the 5 highest logits; counted only for models with more
    /// than 10 classes.
    pub correct_at_5: Option<u64>,
}

impl Precision {
    /// Precision@1.
    pub fn at_1(&self) -> f64 {
        self.correct_at_1 as f64 / self.examples.max(1) as f64
    }

    /// Precision@5, when counted.
    pub fn at_5(&self) -> Option<f64> {
        self.correct_at_5
            .map(|c| c as f64 / self.examples.max(1) as f64)
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "precision @ 1 = {:.4} ({}/{})",
            self.at_1(),
            self.correct_at_1,
            self.examples
        )?;
        if let (Some(at_5), Some(correct)) = (self.at_5(), self.correct_at_5) {
            write!(
                f,
                ", precision @ 5 = {at_5:.4} ({correct}/{})",
                self.examples
            )?;
        }
        Ok(())
    }
}

/// Evaluates `model` (in evaluation state: dropout off, batch norm on its moving statistics) on
/// every example of `input` once, in batches of `batch_size`, on the model's device.
pub fn evaluate<M: ImageClassifier>(
    model: &M,
    input: &Input,
    batch_size: usize,
    reader_threads: usize,
) -> Result<Precision> {
    evaluate_first(model, input, u64::MAX, batch_size, reader_threads)
}

/// [`evaluate`] on `examples` examples of `input` (all of them when it has fewer), as TF's
/// `cifar10_eval.py --num_examples`: a quick look at a large evaluation set. They are the first
/// `examples` the readers deliver, in the files' order with one reader thread; the batch that
/// passes the count is cut to it, so exactly `examples` are counted (TF counts whole batches).
pub fn evaluate_first<M: ImageClassifier>(
    model: &M,
    input: &Input,
    examples: u64,
    batch_size: usize,
    reader_threads: usize,
) -> Result<Precision> {
    let never = StopFlag::new();
    evaluate_first_until(model, input, examples, batch_size, reader_threads, &never)
}

/// [`evaluate_first`], stopping after the batch under way once `stop` is raised (the trainer's
/// flag, which Ctrl-C raises: a program that evaluates after training stops its evaluation
/// too); the precision of the examples evaluated until then, fewer than `examples` (none when
/// `stop` was raised before).
pub fn evaluate_first_until<M: ImageClassifier>(
    model: &M,
    input: &Input,
    examples: u64,
    batch_size: usize,
    reader_threads: usize,
    stop: &StopFlag,
) -> Result<Precision> {
    let (model, device) = for_evaluation(model)?;
    let classes = model.num_classes();
    let with_top_5 = classes > 10;
    let config = PipelineConfig::eval(batch_size).with_reader_threads(reader_threads);
    let mut pipeline = input.start(config)?;
    let mut precision = Precision {
        examples: 0,
        correct_at_1: 0,
        correct_at_5: with_top_5.then_some(0),
    };
    while precision.examples < examples && !stop.is_requested() {
        let Some(batch) = pipeline.next_batch()? else {
            break;
        };
        let (images, _) = batch.as_slice().to_tensors(&device);
        let logits = read_back(model.forward(images), "logits")?;
        let wanted = (examples - precision.examples).min(batch.labels().len() as u64) as usize;
        let (labels, logits) = (&batch.labels()[..wanted], &logits[..wanted * classes]);
        precision.examples += labels.len() as u64;
        precision.correct_at_1 += in_top_k(logits, classes, labels, 1)?;
        if let Some(at_5) = precision.correct_at_5.as_mut() {
            *at_5 += in_top_k(logits, classes, labels, 5)?;
        }
    }
    Ok(precision)
}

/// The values of `tensor`, read back from its device; `what` names it in the error.
pub(crate) fn read_back(tensor: Tensor<2>, what: &'static str) -> Result<Vec<f32>> {
    tensor
        .into_data()
        .try_to_vec()
        .map_err(|error| Error::Readback { what, error })
}

/// An evaluation copy of `model` (no autodiff, dropout off, batch norm on its moving
/// statistics) and the device it lives on.
pub(crate) fn for_evaluation<M: ImageClassifier>(model: &M) -> Result<(M, Device)> {
    let model = model.valid();
    let device = model
        .devices()
        .into_iter()
        .next()
        .ok_or_else(|| Error::Config("the model has no parameters".into()))?;
    Ok((model, device))
}

/// How many rows of `logits` (`labels.len()` rows of `classes`) rank their label among the
/// top `k`: TF's `in_top_k`, where a label tied with the k-th value counts as in, and a
/// non-finite logit never does.
fn in_top_k(logits: &[f32], classes: usize, labels: &[i64], k: usize) -> Result<u64> {
    let mut correct = 0;
    for (row, &label) in logits.chunks_exact(classes).zip(labels) {
        let target = usize::try_from(label)
            .ok()
            .and_then(|l| row.get(l))
            .ok_or_else(|| {
                Error::Config(format!(
                    "label {label} is outside the model's {classes} classes"
                ))
            })?;
        if target.is_finite() && row.iter().filter(|&&v| v > *target).count() < k {
            correct += 1;
        }
    }
    Ok(correct)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_k_counts_ties_in_and_nan_out() {
        let logits = [
            0.1,
            0.9,
            0.0, // label 1: top 1
            0.5,
            0.5,
            0.0, // label 0: tied for first, in
            0.3,
            0.2,
            0.1, // label 2: third
            f32::NAN,
            0.0,
            0.0, // label 0: NaN, never in
        ];
        let labels = [1, 0, 2, 0];
        assert_eq!(in_top_k(&logits, 3, &labels, 1).unwrap(), 2);
        assert_eq!(in_top_k(&logits, 3, &labels, 2).unwrap(), 2);
        assert_eq!(in_top_k(&logits, 3, &labels, 3).unwrap(), 3);
        assert!(in_top_k(&logits, 3, &[0, 0, 0, 3], 1).is_err());
    }

    #[test]
    fn display_shows_top_5_only_when_counted() {
        let p = Precision {
            examples: 200,
            correct_at_1: 50,
            correct_at_5: None,
        };
        assert_eq!(p.to_string(), "precision @ 1 = 0.2500 (50/200)");
        let p = Precision {
            correct_at_5: Some(150),
            ..p
        };
        assert!(p.to_string().ends_with("precision @ 5 = 0.7500 (150/200)"));
    }
}
