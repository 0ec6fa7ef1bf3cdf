//! [`OutputLoss`]: the loss a burn-train step output holds.

use burn::tensor::Tensor;
use burn_train::{
    ClassificationOutput, MultiLabelClassificationOutput, RegressionOutput, SequenceOutput,
};

/// A burn-train training step's output that holds its batch's mean loss, shape `[1]`. The
/// towers weigh the towers' losses into the step's loss with it; burn-train's metrics still
/// read the outputs themselves.
///
/// burn-train's own outputs implement it; an output of your own adds one method:
///
/// ```
/// # use burn::tensor::Tensor;
/// struct MyOutput { loss: Tensor<1>, logits: Tensor<2> }
///
/// impl towers_learner::OutputLoss for MyOutput {
///     fn loss(&self) -> Tensor<1> {
///         self.loss.clone()
///     }
/// }
/// ```
pub trait OutputLoss {
    /// The mean loss of the step's batch, shape `[1]`.
    fn loss(&self) -> Tensor<1>;
}

impl OutputLoss for ClassificationOutput {
    fn loss(&self) -> Tensor<1> {
        self.loss.clone()
    }
}

impl OutputLoss for MultiLabelClassificationOutput {
    fn loss(&self) -> Tensor<1> {
        self.loss.clone()
    }
}

impl OutputLoss for RegressionOutput {
    fn loss(&self) -> Tensor<1> {
        self.loss.clone()
    }
}

impl OutputLoss for SequenceOutput {
    fn loss(&self) -> Tensor<1> {
        self.loss.clone()
    }
}
