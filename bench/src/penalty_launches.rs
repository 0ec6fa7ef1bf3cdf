//! The L2 penalty's value in a bundled net's loss (`ImageClassifier::loss_decay_in_update`)
//! launches no more kernels on a fused GPU than the penalty and the data term apart: taken
//! after the data term, the penalty's last `[1]`-sized ops fuse with the loss's. Taken first,
//! as before 2026-11-29, its ops split the data term's fused blocks: the CIFAR-10 net's loss
//! launched 43 kernels against 31 + 7 apart, ResNet-18's 337 against 176 + 158 (lavapipe).
//!
//! Inception v3's step launches as many kernels in either order (2873 on lavapipe,
//! 2026-11-29), so it is not counted here.
//!
//! On a GPU its value joins the decayed tensors into a few sums (`joined_sum_of_squares`):
//! ResNet-18's 62 in 10 launches on lavapipe, against 158 one tensor at a time (2026-11-30).
//!
//! Counted, not timed: the loss with the penalty against the same net without decay (whose
//! loss is the data term alone) and the penalty alone (`l2_penalty`).
//!
//! A unit test of this crate rather than an integration test: an integration test would make
//! `cargo test` link every benchmark binary too (~10 s each on 2 cores), for nothing.

use std::collections::BTreeMap;

use burn::tensor::{Distribution, Int, Tensor, TensorData};
use towers_models::{Cifar10Config, ImageClassifier, ResNet18, ResNetConfig, l2_penalty};
use towers_testing::gpu::gpu_or_skip;

use crate::step_counts::{StepCounts, count};

/// The launches of computing and reading `value`, after one call that tunes its kernels. Under
/// fusion, each is put down to the fusion block that made it (`fusion_blocks.rs`): checked
/// here, where no other test counts launches at the same time.
fn launches(value: impl Fn() -> Tensor<1>) -> StepCounts {
    let read = || drop(value().into_data());
    read();
    let counts = count(1, read);
    #[cfg(feature = "fusion")]
    assert_eq!(
        counts.by_block.iter().map(|(_, n)| n).sum::<u64>(),
        counts.total_launches(),
        "launches not put down to a fusion block: by block {:?}, by kernel {:?}",
        counts.by_block,
        counts.launches,
    );
    counts
}

/// `decayed`'s loss launches at most what `undecayed`'s (the same net without decay) and the
/// penalty alone launch together, and its penalty's value at most a kernel per four decayed
/// tensors where there are enough to join.
fn assert_penalty_fuses_into_the_loss<M: ImageClassifier>(net: &str, decayed: M, undecayed: M) {
    assert!(undecayed.weight_decays().is_empty() && !decayed.weight_decays().is_empty());
    let device = decayed.devices()[0].clone();
    let [c, h, w] = decayed.input_shape();
    let images = Tensor::<4>::random([2, c, h, w], Distribution::Uniform(-1.0, 1.0), &device);
    let labels = Tensor::<1, Int>::from_data(TensorData::new(vec![1i64, 3], [2]), &device);
    let loss = |model: &M| {
        model
            .loss_decay_in_update(images.clone(), labels.clone())
            .loss
    };

    let decays: BTreeMap<String, f64> = (decayed.weight_decays().into_iter())
        .map(|term| (term.path, term.decay))
        .collect();
    let rule = |path: &str| decays.get(path).copied().unwrap_or(0.0);
    let penalty = launches(|| l2_penalty(&decayed, rule).expect("a penalty"));
    let data_term = launches(|| loss(&undecayed));
    let together = launches(|| loss(&decayed));
    let value = together
        .total_launches()
        .saturating_sub(data_term.total_launches());
    let tensors = decays.len() as u64;
    assert!(
        tensors < 3 || value * 4 <= tensors,
        "{net}: the penalty's value launched {value} kernels for {tensors} decayed tensors: \
         they are summed one at a time, not joined"
    );
    assert!(
        together.total_launches() <= data_term.total_launches() + penalty.total_launches(),
        "{net}: the loss with its penalty launched {} kernels, the data term {} and the \
         penalty {} apart\ntogether: {:?}\ndata term: {:?}\npenalty: {:?}",
        together.total_launches(),
        data_term.total_launches(),
        penalty.total_launches(),
        together.launches,
        data_term.launches,
        penalty.launches,
    );
}

/// One test for both nets: the launch observer counts every thread's launches, so two tests
/// counting at once would count each other's.
#[test]
fn the_penalty_fuses_into_the_loss() {
    let Some(gpu) = gpu_or_skip("the_penalty_fuses_into_the_loss") else {
        return;
    };
    let device = gpu.device;
    let cifar10 = Cifar10Config::new();
    assert_penalty_fuses_into_the_loss(
        "CIFAR-10",
        cifar10.init(&device),
        cifar10.clone().with_weight_decay(0.0).init(&device),
    );
    let resnet18 = ResNetConfig::resnet18(5).with_image_size(32);
    let decayed: ResNet18 = resnet18.clone().with_weight_decay(1e-2).init(&device);
    assert_penalty_fuses_into_the_loss("ResNet-18", decayed, resnet18.init(&device));
}
