//! The weight decay added in the update (`Towers::with_weight_decay`) against the L2 penalty in
//! the loss, taken through backward by plain flex steps.

use burn::module::ParamId;
use towers_data::{HostBatch, image_loss};
use towers_models::{l2_penalty, weight_decays};
use towers_multigpu::{Reduce, Towers, TowersConfig, parse_devices};
use towers_testing::batches::{concat, unequal_micro_batches};
use towers_testing::compare::{assert_close, max_abs_diff, values};
use towers_testing::nets::{LR, Net, sgd};
use towers_testing::reference::{flex, plain_training, plain_training_penalized};

const TOLERANCE: f32 = 1e-5;

/// Two of the net's four tensors decayed, by different amounts, large enough to show.
fn decay_of(path: &str) -> f64 {
    match path {
        "conv.weight" => 0.5,
        "fc.weight" => 0.2,
        _ => 0.0,
    }
}

/// One tower, gathered towers, the ring, and a caller's update, each with micro-batches
/// accumulated: the decay joins each update once, whatever the route.
#[test]
fn weight_decay_in_the_update_trains_like_the_penalty_in_the_loss() {
    let model = Net::new(&flex());
    let decays: Vec<(ParamId, f64)> = (weight_decays(&model, decay_of).into_iter())
        .map(Into::into)
        .collect();
    assert_eq!(decays.len(), 2);
    let updates = unequal_micro_batches();
    let whole: Vec<HostBatch> = updates.iter().map(|u| concat(u)).collect();
    let penalty = |m: &Net| l2_penalty(m, decay_of);
    let (want, _) = plain_training_penalized(model.clone(), &whole, penalty);
    let (undecayed, _) = plain_training(model.clone(), &whole);
    let moved = max_abs_diff(&values(&want), &values(&undecayed));
    assert!(moved > 1e-3, "the decay must change the steps (by {moved})");

    let loss = image_loss(|m: &Net, x, y| m.loss(x, y));
    for reduce in [Reduce::ParameterDevice, Reduce::AllReduce] {
        for list in ["flex", "flex,flex", "flex,flex*2"] {
            let config = TowersConfig::default()
                .with_reduce(reduce)
                .with_accumulation(3);
            let devices = parse_devices(list).unwrap();
            let mut towers = (Towers::new(model.clone(), sgd(), &devices, config).unwrap())
                .with_weight_decay(decays.clone());
            for micro in updates.iter().flatten() {
                towers.step(micro, LR, &loss).unwrap();
            }
            let what = format!("{list}, {reduce:?}");
            assert_close(&values(towers.model()), &values(&want), TOLERANCE, &what);
        }
    }

    let config = TowersConfig::default().with_accumulation(3);
    let devices = parse_devices("flex,flex").unwrap();
    let mut towers =
        (Towers::new(model.clone(), sgd(), &devices, config).unwrap()).with_weight_decay(decays);
    let mut optim = sgd();
    for micro in updates.iter().flatten() {
        (towers.step_with_update(micro, &loss, |m, grads| optim.step(LR, m, grads))).unwrap();
    }
    let what = "a caller's update";
    assert_close(&values(towers.model()), &values(&want), TOLERANCE, what);
}
