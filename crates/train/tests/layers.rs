//! The layers of `src/`, bottom up, written once ([`LAYERING`]): every `crate::` path in a
//! module names a module of its own layer or of one below it, never a crate-root re-export, so
//! the dependencies run one way with no circle (`towers_testing::layers`).

use towers_testing::layers::Layering;

const LAYERING: Layering = Layering {
    layers: &[
        // Beside everything.
        "error",
        "step",
        // What the trainer reads: the trait, a Burn dataset, record files.
        "train_input",
        "burn_dataset",
        "record_files",
        // Optimizers and what a run writes: checkpoints, the log, its intervals, the plot.
        "optim",
        "checkpoint",
        "train_dir",
        "log",
        "interval",
        "plot",
        "stop",
        // Evaluation, and what uses it.
        "eval",
        "classify",
        "summary",
        "config",
        // A TF run's checkpoint, which the trainer can continue.
        "tf_run",
        // The trainer, and what drives it.
        "trainer",
        "inception_data",
        "preprocessing",
        "pretrained",
        "cli",
        "network_args",
    ],
    within: &[],
};

#[test]
fn every_module_uses_only_its_own_layer_and_those_below() {
    LAYERING.assert_kept(env!("CARGO_MANIFEST_DIR"));
}
