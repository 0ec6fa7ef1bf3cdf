//! [`ImageClassifier`]: what the trainer and the towers need of an image classifier, and
//! `features_classifier!`, its implementation for the nets whose logits are a dense layer on
//! their features (the ResNets, MobileNetV2).

use burn::module::{Module, ParamId};
use burn::tensor::{Int, Tensor};
use towers_kernels::softmax_cross_entropy;

use crate::params::WeightDecay;
use crate::penalty::l2_penalty_value;

/// What the trainer and the towers need of an image classifier.
///
/// Training and evaluation differ only by the device and the module state, as everywhere in
/// Burn: on an autodiff device the model trains (dropout on, batch norm on batch statistics
/// and updating its moving averages); after [`Module::valid`] it evaluates.
pub trait ImageClassifier: Module + Send + Sync {
    /// Logits `[n, num_classes]` for images `[n, 3, h, w]` (NCHW, f32).
    fn forward(&self, images: Tensor<4>) -> Tensor<2>;

    /// The training objective, a scalar tensor of shape `[1]`: mean cross-entropy over the batch
    /// (with label smoothing / aux head as configured) + the model's own regularization (weight
    /// decay). Also returns the main head's logits for accuracy logging.
    ///
    /// The data term is a mean and the regularizer does not depend on the batch, so the
    /// size-weighted mean of per-tower gradients equals the full-batch gradient.
    fn loss(&self, images: Tensor<4>, labels: Tensor<1, Int>) -> ClassifierLoss;

    /// The L2 penalties [`loss`](Self::loss) holds, `decay · ΣW² / 2` for each parameter
    /// named; none by default. Override it together with
    /// [`loss_decay_in_update`](Self::loss_decay_in_update), or neither.
    fn weight_decays(&self) -> Vec<WeightDecay> {
        Vec::new()
    }

    /// [`weight_decays`](Self::weight_decays) as the optimizer takes them
    /// (`OptimizerConfig::init_with_weight_decays`): each parameter's id and decay.
    fn weight_decays_by_id(&self) -> Vec<(ParamId, f64)> {
        self.weight_decays().into_iter().map(Into::into).collect()
    }

    /// [`loss`](Self::loss) for a trainer that adds the penalties' gradients, `decay · W` for
    /// each of [`weight_decays`](Self::weight_decays), in the update itself (towers-train's
    /// `Decayed` optimizer, or the towers' `with_weight_decay`): the same value, the penalties a
    /// constant in it, so that backward takes only the data term. On a fused GPU the penalties'
    /// backward is then no kernel at all. By default the loss itself, right for a model that
    /// decays nothing.
    fn loss_decay_in_update(&self, images: Tensor<4>, labels: Tensor<1, Int>) -> ClassifierLoss {
        self.loss(images, labels)
    }

    /// The number of classes the logits cover.
    fn num_classes(&self) -> usize;

    /// `[channels, height, width]` the model expects.
    fn input_shape(&self) -> [usize; 3];
}

/// The training objective and the main head's logits of one batch.
#[derive(Debug, Clone)]
pub struct ClassifierLoss {
    /// Scalar objective, shape `[1]`.
    pub loss: Tensor<1>,
    /// Main head logits `[n, num_classes]`.
    pub logits: Tensor<2>,
}

impl ClassifierLoss {
    /// The loss with `penalty` added, when there is one.
    pub(crate) fn plus(self, penalty: Option<Tensor<1>>) -> Self {
        match penalty {
            Some(penalty) => Self {
                loss: self.loss + penalty,
                ..self
            },
            None => self,
        }
    }

    /// The loss with the value of `module`'s L2 penalty under `rule` added, a constant (see
    /// [`l2_penalty_value`]): the loss of [`ImageClassifier::loss_decay_in_update`]. Taken
    /// from the data term's loss, so that the penalty comes after it, where its ops fuse.
    pub(crate) fn plus_penalty_value<M: Module>(
        self,
        module: &M,
        rule: impl Fn(&str) -> f64,
    ) -> Self {
        self.plus(l2_penalty_value(module, rule))
    }
}

/// Implements [`ImageClassifier`] for a net whose logits are a dense layer on its features
/// (`$network`, generic over `$generic` where given), from its `features`, `fc`,
/// `weight_decay`, `num_classes` and `image_size`: the logits `fc(features(images))`, the mean
/// cross-entropy plus an L2 penalty of `weight_decay` on every parameter (not the moving
/// statistics). A macro because the nets share these fields but no type: a head module of
/// their own would move `fc` away from the names their weights load by.
macro_rules! features_classifier {
    ($network:ty $(, $generic:ident: $bound:path)?) => {
        // A block of its own, for its imports.
        const _: () = {
            use burn::tensor::{Int, Tensor};
            use $crate::nets::classifier::cross_entropy;
            use $crate::nets::{ClassifierLoss, ImageClassifier};
            use $crate::params::{WeightDecay, weight_decays};
            use $crate::penalty::l2_penalty;

            impl$(<$generic: $bound>)? ImageClassifier for $network {
                fn forward(&self, images: Tensor<4>) -> Tensor<2> {
                    self.fc.forward(self.features(images))
                }

                fn loss(&self, images: Tensor<4>, labels: Tensor<1, Int>) -> ClassifierLoss {
                    let penalty = l2_penalty(self, |_| self.weight_decay);
                    cross_entropy(self, images, labels).plus(penalty)
                }

                fn weight_decays(&self) -> Vec<WeightDecay> {
                    weight_decays(self, |_| self.weight_decay)
                }

                fn loss_decay_in_update(
                    &self,
                    images: Tensor<4>,
                    labels: Tensor<1, Int>,
                ) -> ClassifierLoss {
                    cross_entropy(self, images, labels)
                        .plus_penalty_value(self, |_| self.weight_decay)
                }

                fn num_classes(&self) -> usize {
                    self.num_classes
                }

                fn input_shape(&self) -> [usize; 3] {
                    [3, self.image_size, self.image_size]
                }
            }
        };
    };
}
pub(crate) use features_classifier;

/// The loss of [`features_classifier!`]'s nets without their penalty: the mean cross-entropy
/// of `model`'s logits.
pub(crate) fn cross_entropy(
    model: &impl ImageClassifier,
    images: Tensor<4>,
    labels: Tensor<1, Int>,
) -> ClassifierLoss {
    let logits = model.forward(images);
    let loss = softmax_cross_entropy(logits.clone(), labels, 0.0);
    ClassifierLoss { loss, logits }
}
