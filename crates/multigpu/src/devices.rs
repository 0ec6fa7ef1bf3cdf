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
//! | `wgpu`, `vulkan`, `metal` | the adapter Burn prefers on that API ([`DeviceKind::DefaultDevice`]) |
//! | `wgpu:1`, `vulkan:0`, `metal:0` | adapter 1 (0) as the API lists them, whatever its kind (see `--list-devices`) |
//! | `wgpu:discrete:1`, `wgpu:integrated:0`, `wgpu:virtual:0`, `wgpu:cpu` | the second discrete GPU, the first integrated or virtual one, the software adapter (lavapipe) |
//! | `iroh://ID@10.0.0.2:3000/1` | device 1 of the Burn remote server `ID` at that address, authenticated and encrypted (`remote` feature; see [`crate::remote`]) |
//! | `ws://10.0.0.2:3000/1` | device 1 of the WebSocket server at that address (trusted networks only) |
//!
//! Entries may repeat (`flex,flex` runs two towers on one CPU backend) and backends may mix
//! (`cuda:0,wgpu:0`). `cuda:0*3,cuda:1` sends three quarters of each batch to `cuda:0`; quote
//! such a list in a shell, where `*` is a glob. An unknown backend, or one this build does not
//! include, is an error; the latter names the cargo feature that compiles it in. An adapter that
//! does not exist is an error that lists the adapters that do ([`crate::adapters`]).
//!
//! A remote entry connects while the list is parsed (Burn's client retries for about 16 s before
//! it calls a server unreachable), so a list that parses is a list whose servers answered. Remote
//! and local entries mix: `cuda:0,ws://10.0.0.2:3000/0,ws://10.0.0.2:3000/1`. The servers are
//! Burn's own `burn::server::RemoteServer`, which the `towers-serve` binary runs.

use std::str::FromStr;

use burn::backend::{Backend, Dispatch};
use burn::tensor::Device;
#[allow(unused_imports)] // only the constructors of compiled-in backends use it
use burn::tensor::DeviceKind;

use crate::adapters::{AdapterChoice, wgpu_family_feature};
use crate::error::{Error, Result};
use crate::remote::{self, remote_device};

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

    /// Whether the device is on a remote server: its name is a `ws://` or `iroh://` entry. The ring
    /// all-reduce then passes gradients through host memory (see [`crate::Reduce::AllReduce`]).
    pub fn is_remote(&self) -> bool {
        remote::is_remote(&self.name)
    }

    /// Whether the device runs on Burn's fusion backend (a CubeCL backend built with Burn's
    /// `fusion` feature, which a `burn` dependency with default features turns on), which queues
    /// operations per thread. The ring all-reduce then passes gradients through host memory:
    /// a chunk tensor handed to the next tower's thread is intermittently lost there ("Should
    /// have handle for tensor" in the fusion server, found on lavapipe, 2026-11-26), flushes
    /// before the hand-over notwithstanding.
    pub fn is_fused(&self) -> bool {
        backend_name(&self.device).contains("fusion<")
    }
}

/// The name Burn gives `device`'s backend, e.g. `dispatch<fusion<jit<wgpu>>>`.
fn backend_name(device: &Device) -> String {
    <Dispatch as Backend>::name(device.as_dispatch())
}

/// Whether a read from `device` on a thread first hands over everything that thread queued on
/// it, so that no flush is needed after the read: on the CubeCL backends, fused or not (the
/// fusion server drains the read tensor's stream, burn-fusion `server.rs`, `prepare_read`;
/// CubeCL submits a stream's work before it reads from it), and on flex and ndarray, which
/// queue nothing. Not assumed of a remote device, whose client may hold operations back.
pub(crate) fn read_hands_over(device: &Device) -> bool {
    !backend_name(device).contains("remote-")
}

/// Whether `device` computes eagerly in this process's memory (flex, ndarray): there a move
/// between towers copies nothing and no kernel launch is saved by packing gradients into
/// buckets, which then only adds a pass over them.
pub(crate) fn in_host_memory(device: &Device) -> bool {
    // Each of the two backends has one device.
    #[cfg(any(feature = "flex", feature = "ndarray"))]
    let device = device.clone().inner();
    #[cfg(not(any(feature = "flex", feature = "ndarray")))]
    let _ = device; // Built without a CPU backend: no device computes in host memory.
    #[cfg(feature = "flex")]
    if device == Device::flex() {
        return true;
    }
    #[cfg(feature = "ndarray")]
    #[allow(deprecated)] // Device::ndarray: Burn points CPU users to flex; this names both.
    if device == Device::ndarray() {
        return true;
    }
    false
}

impl FromStr for TowerDevice {
    type Err = Error;

    /// Parses one entry: `backend`, `backend:index` or a remote entry ([`crate::remote`]), followed by an
    /// optional `*share`. A remote entry connects to its server.
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
        if let Some(device) = remote_device(entry, spec) {
            return Ok(TowerDevice::new(spec, device?).with_share(share));
        }
        let (backend, selector) = match spec.split_once(':') {
            None => (spec, None),
            Some((backend, selector)) => (backend.trim(), Some(selector.trim())),
        };
        let device = backend_device(entry, &backend.to_ascii_lowercase(), selector)?;
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

fn backend_device(entry: &str, backend: &str, selector: Option<&str>) -> Result<Device> {
    let invalid = |reason: String| Error::DeviceList {
        entry: entry.to_string(),
        reason,
    };
    if let Some((feature, _)) = wgpu_family_feature(backend) {
        return wgpu_family_device(entry, backend, feature, selector);
    }
    let index = match selector {
        None => 0,
        Some(text) => text
            .parse::<usize>()
            .map_err(|_| invalid(format!("device index `{text}` is not a number")))?,
    };
    let single = |name: &str| {
        invalid(format!(
            "`{name}` has one device and takes no index; repeat it (`{name},{name}`) for more towers"
        ))
    };
    match backend {
        "flex" if index != 0 => Err(single("flex")),
        "flex" => compiled_in!(entry, "flex", Device::flex()),
        "ndarray" if index != 0 => Err(single("ndarray")),
        #[allow(deprecated)] // burn 0.22 deprecates ndarray, but it is the second CPU backend
        "ndarray" => compiled_in!(entry, "ndarray", Device::ndarray()),
        "cuda" => compiled_in!(entry, "cuda", Device::cuda(index)),
        "rocm" => compiled_in!(entry, "rocm", Device::rocm(index)),
        _ => Err(invalid(
            "unknown backend: expected flex, ndarray, cuda, rocm, wgpu, vulkan, metal \
             or ws://host:port/index"
                .into(),
        )),
    }
}

/// A `wgpu`, `vulkan` or `metal` device: the preferred adapter, or the one `selector` names
/// among those this machine lists ([`AdapterChoice`]).
fn wgpu_family_device(
    entry: &str,
    backend: &str,
    feature: &'static str,
    selector: Option<&str>,
) -> Result<Device> {
    let invalid = |reason: String| Error::DeviceList {
        entry: entry.to_string(),
        reason,
    };
    // Parsed whatever the build, so a malformed entry is reported as such.
    #[allow(unused_variables)]
    let choice = AdapterChoice::parse(selector).map_err(invalid)?;
    // The adapters listed (which opens the graphics API) for the preferred one too, so that a
    // machine whose adapters cannot run Burn's kernels is an error here, not a hang later.
    #[cfg(any(feature = "wgpu", feature = "vulkan", feature = "metal"))]
    let adapter = || -> Result<DeviceKind> {
        let adapters = crate::adapters::wgpu_adapters(backend)?;
        if let Some(why) = crate::adapters::unusable(backend, &adapters) {
            return Err(invalid(why));
        }
        choice.select(backend, &adapters).map_err(invalid)
    };
    match backend {
        #[cfg(feature = "wgpu")]
        "wgpu" => Ok(Device::wgpu(adapter()?)),
        #[cfg(feature = "vulkan")]
        "vulkan" => Ok(Device::vulkan(adapter()?)),
        #[cfg(feature = "metal")]
        "metal" => Ok(Device::metal(adapter()?)),
        _ => Err(Error::BackendNotCompiled {
            entry: entry.to_string(),
            feature,
        }),
    }
}

#[cfg(test)]
mod tests {
    use towers_testing::assert_error_names;

    use super::*;

    #[test]
    fn repeated_and_weighted_entries() {
        let towers = parse_devices("flex, flex*3 ,flex*0.5").unwrap();
        let names: Vec<&str> = towers.iter().map(TowerDevice::name).collect();
        assert_eq!(names, ["flex", "flex", "flex"]);
        let shares: Vec<f64> = towers.iter().map(TowerDevice::share).collect();
        assert_eq!(shares, [1.0, 3.0, 0.5]);
        assert_eq!(towers[0].device(), &Device::flex());
        assert_eq!(towers[1].device(), towers[0].device());
    }

    #[test]
    fn backend_not_compiled_in_names_the_feature() {
        let absent = [
            ("cuda:1", "cuda", cfg!(feature = "cuda")),
            ("wgpu", "wgpu", cfg!(feature = "wgpu")),
            ("wgpu:discrete:0", "wgpu", cfg!(feature = "wgpu")),
            ("metal:0", "metal", cfg!(feature = "metal")),
            ("vulkan:cpu", "vulkan", cfg!(feature = "vulkan")),
        ];
        for (entry, feature, _) in absent.into_iter().filter(|(_, _, compiled)| !compiled) {
            let err = parse_devices(&format!("flex,{entry}")).unwrap_err();
            assert!(
                matches!(&err, Error::BackendNotCompiled { feature: f, .. } if *f == feature),
                "{err}"
            );
            assert_error_names(&err, &[&format!("--features {feature}")]);
        }
    }

    #[cfg(not(feature = "remote"))]
    #[test]
    fn remote_entries_need_the_remote_feature() {
        let err = parse_devices("flex,WS://127.0.0.1:3000/1*2").unwrap_err();
        assert!(
            matches!(&err, Error::BackendNotCompiled { entry, feature: "remote" }
                if entry == "WS://127.0.0.1:3000/1*2"),
            "{err}"
        );
    }

    #[test]
    fn malformed_entries_are_errors() {
        for list in [
            "",
            "flex,",
            "tpu:0",
            "cuda:x",
            "flex*0",
            "flex*-1",
            "flex*",
            "flex:1",
            "wgpu:gpu",
            "vulkan:discrete:x",
            "metal:-1",
            "ws://",
            "ws://host",
            "ws://:3000",
            "ws://host:port/0",
            "ws://host:3000/x",
            "ws://host:70000/0",
        ] {
            let err = parse_devices(list).unwrap_err();
            assert!(matches!(err, Error::DeviceList { .. }), "{list}: {err}");
        }
    }
}
