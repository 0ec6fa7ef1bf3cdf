//! Towers checked against plain steps on one device.

use burn::module::Module;
use towers_data::{HostBatch, image_loss};
use towers_multigpu::{StepOutput, TowerDevice, Towers, TowersConfig};

use crate::batches::concat;
use crate::compare::{assert_close, values};
use crate::nets::{LR, Net, sgd};
use crate::reference::plain_training;

/// Trains a copy of `model` with towers on `devices`, one `step` per micro-batch, and checks
/// the parameters and reported losses against plain flex steps on the concatenated
/// micro-batches of each update, to `tolerance` (relative, see [`assert_close`]).
pub fn assert_like_one_device(
    model: &Net,
    devices: &[TowerDevice],
    config: TowersConfig,
    micro_batches: &[Vec<HostBatch>],
    tolerance: f32,
) -> Towers<Net> {
    let k = config.accumulation;
    let mut towers = Towers::new(model.clone(), sgd(), devices, config).unwrap();
    let mut outputs: Vec<StepOutput> = Vec::new();
    for update in micro_batches {
        assert_eq!(update.len(), k);
        for micro in update {
            outputs.push(
                towers
                    .step(micro, LR, image_loss(|m: &Net, x, y| m.loss(x, y)))
                    .unwrap(),
            );
        }
    }
    let updates: Vec<HostBatch> = micro_batches.iter().map(|u| concat(u)).collect();
    let (expected, expected_outputs) = plain_training(model.clone(), &updates);

    let before = values(model);
    let got = values(towers.model());
    let want = values(&expected);
    assert_close(&got, &want, tolerance, "parameters");
    let moved = want
        .iter()
        .zip(&before)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f32::max);
    assert!(
        moved > 1e-3,
        "the steps must move the parameters (moved {moved})"
    );
    for (replica, tower) in towers.replicas().iter().zip(towers.devices()) {
        assert_eq!(
            values(replica),
            got,
            "every replica holds the model's weights"
        );
        assert_eq!(replica.devices(), vec![tower.device().clone()]);
    }

    let updated: Vec<bool> = outputs.iter().map(|o| o.updated).collect();
    let expected_updated: Vec<bool> = (0..outputs.len()).map(|i| (i + 1) % k == 0).collect();
    assert_eq!(updated, expected_updated);
    if k == 1 {
        for (out, (loss, correct)) in outputs.iter().zip(expected_outputs) {
            assert!(
                (out.loss - loss).abs() <= tolerance as f64 * loss.abs(),
                "{} vs {loss}",
                out.loss
            );
            assert_eq!(out.correct, Some(correct));
        }
    }
    towers
}
