//! The layers of `src/`, bottom up, written once ([`LAYERING`]): every `crate::` path in a
//! module names a module of its own layer or of one below it, so the dependencies run one way
//! with no circle (`towers_testing::layers`).

use towers_testing::layers::Layering;

/// The top-level modules of `src/`, bottom up: each may use only itself and those before it.
const LAYERING: Layering = Layering {
    layers: &[
        // Beside everything.
        "error",
        "atomic_file",
        // TF's queues, coordinator and queue runners.
        "queue",
        // The vocabulary the layers above share.
        "buffer_pool",
        "image",
        "bounding_box",
        "rng",
        "codec",
        // The image ops, the dataset formats, and the threads that wire them.
        "transforms",
        "format",
        "pipeline",
    ],
    within: &[],
};

#[test]
fn every_module_uses_only_its_own_layer_and_those_below() {
    LAYERING.assert_kept(env!("CARGO_MANIFEST_DIR"));
}
