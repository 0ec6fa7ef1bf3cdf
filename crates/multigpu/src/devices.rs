//! Device lists as written on a command line.
//!
//! A list is comma-separated entries, each `backend` or `backend:index`, optionally followed by
//! `*share` to give that tower a larger part of every batch:
//!
//! | entry | device |
//! |---|---|
//! | `flex` | [`Device::flex()`] (CPU) |
//! | `ndarray` | `Device::ndarray()` (CPU; slow, for tests and mixed-backend runs) |
//! | `cuda`, `cuda:1` | [`Device::cuda`] with index 0 or 1 |
//! | `rocm:0` | `Device::rocm` |
//! | `wgpu`, `vulkan`, `metal` | the best adapter of that API ([`DeviceKind::DefaultDevice`]) |
//! | `wgpu:1`, `vulkan:0`, `metal:0` | the discrete GPU with that index ([`DeviceKind::DiscreteGpu`]) |
//!
//! Entries may repeat (`flex,flex` runs two towers on one CPU backend) and backends may mix
//! (`cuda:0,wgpu:0`). `cuda:0*3,cuda:1` sends three quarters of each batch to `cuda:0`; quote
//! such a list in a shell, where `*` is a glob. An unknown backend, or one this build does not
//! include, is an error; the latter names the cargo feature that compiles it in.

use std::str::FromStr;

use burn::tensor::Device;
#[allow(unused_imports)] // only the constructors of compiled-in backends use it
use burn::tensor::DeviceKind;

use crate::error::{Error, Result};

/// One tower's device: where it runs, the name it goes by in errors, and its share of a batch.
#[derive(Clone, Debug)]
pub struct TowerDevice {
    name: String,
    device: Device,
    share: f64,
}

impl TowerDevice {
    /// A tower on `device`, called `name` in errors, with share 1.
    pub fn new(name: impl Into<String>, device: Device) -> Self {
        Self {
            name: name.into(),
            device,
            share: 1.0,
        }
    }

    /// Sets the tower's share of each batch: slices are proportional to the shares of all towers.
    pub fn with_share(mut self, share: f64) -> Self {
        self.share = share;
        self
    }

    /// The name used in errors (the device list entry, without its share).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The device, as parsed (without autodiff; the towers add it).
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The tower's share of each batch.
    pub fn share(&self) -> f64 {
        self.share
    }
}

impl FromStr for TowerDevice {
    type Err = Error;

    /// Parses one entry: `backend`, `backend:index`, either followed by `*share`.
    fn from_str(entry: &str) -> Result<Self> {
        let entry = entry.trim();
        let invalid = |reason: String| Error::DeviceList {
            entry: entry.to_string(),
            reason,
        };
        let (spec, share) = match entry.split_once('*') {
            None => (entry, 1.0),
            Some((spec, share)) => {
                let share = share
                    .trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|s| s.is_finite() && *s > 0.0)
                    .ok_or_else(|| invalid(format!("share `{share}` is not a positive number")))?;
                (spec.trim(), share)
            }
        };
        let (backend, index) = match spec.split_once(':') {
            None => (spec, None),
            Some((backend, index)) => {
                let index = index
                    .trim()
                    .parse::<usize>()
                    .map_err(|_| invalid(format!("device index `{index}` is not a number")))?;
                (backend.trim(), Some(index))
            }
        };
        let device = backend_device(entry, &backend.to_ascii_lowercase(), index)?;
        Ok(TowerDevice::new(spec, device).with_share(share))
    }
}

/// Parses a comma-separated device list such as `cuda:0,cuda:1` or `flex,flex`.
pub fn parse_devices(list: &str) -> Result<Vec<TowerDevice>> {
    list.split(',')
        .map(|entry| {
            if entry.trim().is_empty() {
                Err(Error::DeviceList {
                    entry: list.to_string(),
                    reason: "empty entry: expected e.g. `flex`, `cuda:0,cuda:1`".into(),
                })
            } else {
                entry.parse()
            }
        })
        .collect()
}

/// `Ok(device)` when the cargo feature is on, else the error naming it. The constructor is only
/// compiled when its feature is, so it may name functions that do not exist otherwise.
macro_rules! compiled_in {
    ($entry:expr, $feature:literal, $device:expr) => {{
        #[cfg(feature = $feature)]
        let device = Ok($device);
        #[cfg(not(feature = $feature))]
        let device = Err(Error::BackendNotCompiled {
            entry: $entry.to_string(),
            feature: $feature,
        });
        device
    }};
}

fn backend_device(entry: &str, backend: &str, index: Option<usize>) -> Result<Device> {
    let single = |name: &str| Error::DeviceList {
        entry: entry.to_string(),
        reason: format!(
            "`{name}` has one device and takes no index; repeat it (`{name},{name}`) for more towers"
        ),
    };
    // wgpu-family APIs: no index is "the best adapter", an index is a discrete GPU.
    #[allow(unused_variables)]
    let kind = match index {
        None => DeviceKind::DefaultDevice,
        Some(i) => DeviceKind::DiscreteGpu(i),
    };
    #[allow(unused_variables)]
    let index = index.unwrap_or(0);
    match backend {
        "flex" if index != 0 => Err(single("flex")),
        "flex" => compiled_in!(entry, "flex", Device::flex()),
        "ndarray" if index != 0 => Err(single("ndarray")),
        #[allow(deprecated)] // burn 0.22 deprecates ndarray, but it is the second CPU backend
        "ndarray" => compiled_in!(entry, "ndarray", Device::ndarray()),
        "cuda" => compiled_in!(entry, "cuda", Device::cuda(index)),
        "rocm" => compiled_in!(entry, "rocm", Device::rocm(index)),
        "wgpu" => compiled_in!(entry, "wgpu", Device::wgpu(kind)),
        "vulkan" => compiled_in!(entry, "vulkan", Device::vulkan(kind)),
        "metal" => compiled_in!(entry, "metal", Device::metal(kind)),
        _ => Err(Error::DeviceList {
            entry: entry.to_string(),
            reason: "unknown backend: expected flex, ndarray, cuda, rocm, wgpu, vulkan or metal"
                .into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_and_weighted_entries() {
        let towers = parse_devices("flex, flex*3 ,ndarray").unwrap();
        let names: Vec<&str> = towers.iter().map(TowerDevice::name).collect();
        assert_eq!(names, ["flex", "flex", "ndarray"]);
        let shares: Vec<f64> = towers.iter().map(TowerDevice::share).collect();
        assert_eq!(shares, [1.0, 3.0, 1.0]);
        assert_eq!(towers[0].device(), &Device::flex());
        assert_eq!(towers[1].device(), towers[0].device());
        assert_ne!(towers[2].device(), towers[0].device());
    }

    #[test]
    fn backend_not_compiled_in_names_the_feature() {
        // The tests build with flex and ndarray only.
        for (entry, feature) in [("cuda:1", "cuda"), ("wgpu", "wgpu"), ("metal:0", "metal")] {
            let err = parse_devices(&format!("flex,{entry}")).unwrap_err();
            assert!(
                matches!(&err, Error::BackendNotCompiled { feature: f, .. } if *f == feature),
                "{err}"
            );
            assert!(err.to_string().contains(&format!("--features {feature}")));
        }
    }

    #[test]
    fn malformed_entries_are_errors() {
        for list in [
            "", "flex,", "tpu:0", "cuda:x", "flex*0", "flex*-1", "flex*", "flex:1",
        ] {
            let err = parse_devices(list).unwrap_err();
            assert!(matches!(err, Error::DeviceList { .. }), "{list}: {err}");
        }
    }
}
