//! The layers of `src/`, bottom up, written once ([`LAYERING`]): every `crate::` path in a
//! module names a module of its own layer or of one below it, so the dependencies run one way
//! with no circle (`towers_testing::layers`).

use towers_testing::layers::Layering;

const LAYERING: Layering = Layering {
    layers: &[
        // Parameter counts and weight decay, the L2 penalty, and the table printed from them.
        "params",
        "penalty",
        "parameter_table",
        // TF-slim's layers on the kernels, the nets built of them, the weights restored into them.
        "layers",
        "nets",
        "weights",
    ],
    within: &[],
};

#[test]
fn every_module_uses_only_its_own_layer_and_those_below() {
    LAYERING.assert_kept(env!("CARGO_MANIFEST_DIR"));
}
