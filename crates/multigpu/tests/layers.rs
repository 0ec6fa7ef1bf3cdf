//! The layers of `src/`, bottom up, written once ([`LAYERING`]): every `crate::` path in a
//! module names a module of its own layer or of one below it, never a crate-root re-export, so
//! the dependencies run one way with no circle (`towers_testing::layers`). Read from the
//! sources: it runs without a device.

use towers_testing::layers::Layering;

const LAYERING: Layering = Layering {
    layers: &[
        // Beside everything: the error, the host-sync counter, whole lines on stderr, temporary
        // paths an exit removes, and what the towers and the ranks share untyped.
        "error",
        "host_syncs",
        "stderr_line",
        "scratch",
        "batch",
        "buckets",
        "wire_format",
        "loss",
        "running_state",
        "timeline",
        "tower_index",
        // Devices: other machines' (remote), the backends' adapters, the device list.
        "remote",
        "adapters",
        "devices",
        // CubeCL's kernel tuning: shown, counted, bundled.
        "tuning",
        // Gradients: reductions between towers, between processes, and the taps on backward.
        "reduce",
        "cross_process",
        "gradient_tap",
        "loss_scale",
        "weight_decay",
        "mpi",
        "overlap",
        // The towers, and the device listing that reports on them.
        "towers",
        "listing",
    ],
    within: &[],
};

#[test]
fn every_module_uses_only_its_own_layer_and_those_below() {
    LAYERING.assert_kept(env!("CARGO_MANIFEST_DIR"));
}
