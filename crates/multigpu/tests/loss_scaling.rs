//! Dynamic loss scaling against the same training without it. A power-of-two scale multiplies
//! and divides the gradients exactly, so every update that is not skipped is bit for bit the
//! update of a run without scaling; the update whose loss is forced to overflow is skipped on
//! every replica and halves the scale.

use burn::tensor::Tensor;
use towers_data::image_loss;
use towers_multigpu::{LossScaling, Reduce, TowerLoss, Towers, TowersConfig, parse_devices};
use towers_testing::batches::batch;
use towers_testing::compare::values;
use towers_testing::nets::{LR, Net, sgd};
use towers_testing::reference::flex;

/// The step whose loss is multiplied by infinity.
const OVERFLOW: usize = 2;

/// The net's loss times `factor`.
fn scaled_loss(net: &Net, x: Tensor<4>, y: Tensor<1, burn::tensor::Int>, factor: f32) -> TowerLoss {
    let loss = net.loss(x, y);
    TowerLoss {
        loss: loss.loss * factor,
        ..loss
    }
}

#[test]
fn an_overflow_skips_exactly_its_update_on_every_replica() {
    let model = Net::new(&flex());
    let batches: Vec<_> = (0..5).map(|seed| batch(8, seed)).collect();
    let scaling = LossScaling::new()
        .with_initial(1024.0)
        .with_growth_interval(2);
    let cases = [
        ("flex", Reduce::ParameterDevice),
        ("flex,flex", Reduce::ParameterDevice),
        ("flex,flex", Reduce::AllReduce),
        ("flex*1,flex*3", Reduce::AllReduce),
    ];
    for (devices, reduce) in cases {
        let case = format!("{devices} {reduce:?}");
        let devices = parse_devices(devices).unwrap();
        let config = TowersConfig::default().with_reduce(reduce);
        let scaled_config = config.clone().with_loss_scaling(Some(scaling.clone()));
        let mut scaled = Towers::new(model.clone(), sgd(), &devices, scaled_config).unwrap();
        let mut plain = Towers::new(model.clone(), sgd(), &devices, config).unwrap();
        let mut scales = Vec::new();
        for (i, b) in batches.iter().enumerate() {
            let factor = if i == OVERFLOW { f32::INFINITY } else { 1.0 };
            let before: Vec<_> = scaled.replicas().iter().map(values).collect();
            let loss = image_loss(move |m: &Net, x, y| scaled_loss(m, x, y, factor));
            let out = scaled.step(b, LR, loss).unwrap();
            assert_eq!(out.skipped, i == OVERFLOW, "{case}: step {i}");
            assert!(out.updated, "{case}: step {i} ends its cycle");
            scales.push(scaled.loss_scale().unwrap());
            let after: Vec<_> = scaled.replicas().iter().map(values).collect();
            if i == OVERFLOW {
                assert_eq!(after, before, "{case}: every replica as it was");
                continue;
            }
            plain
                .step(b, LR, image_loss(|m: &Net, x, y| m.loss(x, y)))
                .unwrap();
            let want: Vec<_> = plain.replicas().iter().map(values).collect();
            assert_eq!(after, want, "{case}: step {i}, bit for bit");
        }
        assert_eq!(scales, [1024.0, 2048.0, 1024.0, 1024.0, 2048.0], "{case}");
    }
}
