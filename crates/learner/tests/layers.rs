//! The layers of `src/`, bottom up, written once ([`LAYERING`]): every `crate::` path in a
//! module names a module of its own layer or of one below it, never a crate-root re-export
//! (`towers_testing::layers`).

use std::path::Path;

use towers_testing::layers::{Layering, assert_no_unit_tests};

const LAYERING: Layering = Layering {
    layers: &[
        // burn-train's accumulation, the batches split per device and the loss of a model's
        // output.
        "accumulation",
        "device_batches",
        "output_loss",
        // burn-train's training strategy on the towers.
        "strategy",
    ],
    within: &[],
};

#[test]
fn every_module_uses_only_its_own_layer_and_those_below() {
    LAYERING.assert_kept(env!("CARGO_MANIFEST_DIR"));
}

/// Cargo.toml builds the library without a test harness (`test = false`).
#[test]
fn the_library_holds_no_unit_tests() {
    assert_no_unit_tests(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
}
