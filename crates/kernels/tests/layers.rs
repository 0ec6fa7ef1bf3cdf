//! The layers of `src/`, bottom up, written once ([`LAYERING`]): every `crate::` path in a
//! module names a module of its own layer or of one below it, and inside `flex/` a kernel family
//! of its own or one below it, so the dependencies run one way with no circle
//! (`towers_testing::layers`).

use towers_testing::layers::Layering;

const LAYERING: Layering = Layering {
    layers: &[
        // What the unit tests share.
        "test_util",
        // The vocabulary: what products compute in, TF's SAME padding, which devices are CubeCL's,
        // short sums for wgpu.
        "precision",
        "padding",
        "cubecl_device",
        "short_sums",
        // The kernels by family, the Burn extension that reaches them, our GPU kernels under
        // fusion, the GPU convolution's weight gradient, the public ops, the loss with its own backward pass, the drop-in
        // layers on them.
        "flex",
        "extension",
        "deferred",
        "conv_gradient",
        "dispatch",
        "loss",
        "batch_norm",
        "lrn",
        "nn",
    ],
    within: &[
        (
            "flex",
            &[
                "memory",
                "exp",
                "activation",
                "prelu",
                "dropout",
                "interpolate",
                "rotary",
                "softmax",
                "gemm",
                "attention",
                "recurrent",
                "conv",
                "norm",
                "pool",
                "optimizer_update",
            ],
        ),
        (
            "nn",
            &[
                "wrapped",
                "conv",
                "pool",
                "linear",
                "dropout",
                "interpolate",
                "gru",
                "lstm",
                "batch_norm",
                "group_norm",
                "instance_norm",
                "layer_norm",
                "rms_norm",
                "rotary_encoding",
                "activation",
                "attention",
                "transformer",
                "loss",
            ],
        ),
    ],
};

#[test]
fn every_module_uses_only_its_own_layer_and_those_below() {
    LAYERING.assert_kept(env!("CARGO_MANIFEST_DIR"));
}
