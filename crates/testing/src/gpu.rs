//! The device of the GPU tests: `wgpu` (wgpu's preferred adapter, Mesa's lavapipe on a machine
//! without a GPU) unless `TOWERS_GPU_DEVICE` names another entry, e.g. `cuda:0` or `wgpu:1`.

use burn::tensor::Device;

/// The variable that names the GPU tests' device list entry.
pub const GPU_DEVICE_VAR: &str = "TOWERS_GPU_DEVICE";

/// The device the GPU tests run on.
#[derive(Clone, Debug)]
pub struct Gpu {
    /// Its device list entry (`wgpu`, `cuda:0`, ...), to build lists such as `flex,{entry}`.
    pub entry: String,
    /// The device, with autodiff.
    pub device: Device,
}

impl Gpu {
    /// `{entry}` repeated as the tower list `pattern` says: `pattern` with `GPU` replaced by
    /// the entry (`"flex,GPU*3"`).
    pub fn list(&self, pattern: &str) -> String {
        pattern.replace("GPU", &self.entry)
    }
}

/// The GPU tests' device, or `None` after a loud `SKIPPED` message where this build or machine
/// has none. Under CI (the `CI` variable set) a missing device fails the test instead: CI
/// installs lavapipe so that these tests run.
pub fn gpu_or_skip(test: &str) -> Option<Gpu> {
    let entry = std::env::var(GPU_DEVICE_VAR).unwrap_or_else(|_| "wgpu".into());
    let skip = |why: String| {
        assert!(
            std::env::var_os("CI").is_none(),
            "{test}: {why}; CI must run the GPU tests"
        );
        eprintln!("SKIPPED {test}: {why}");
        None
    };
    if entry.starts_with("wgpu") {
        match towers_multigpu::adapters::wgpu_adapters("wgpu") {
            Ok(adapters) if adapters.is_empty() => {
                return skip(
                    "no wgpu adapter on this machine (on Linux without a GPU: \
                             `apt-get install mesa-vulkan-drivers libvulkan1`)"
                        .into(),
                );
            }
            Ok(adapters) => eprintln!("{test}: on `{entry}`; wgpu adapters: {adapters:?}"),
            Err(e) => return skip(e.to_string()),
        }
    }
    match towers_multigpu::parse_devices(&entry) {
        Ok(towers) => Some(Gpu {
            device: towers[0].device().clone().autodiff(),
            entry,
        }),
        Err(e) => skip(format!("{GPU_DEVICE_VAR}={entry}: {e}")),
    }
}
