//! What `--list-devices` prints: every backend a device list may name, whether this build
//! includes it, and the devices it sees here, with the entries that select them.
//!
//! The counterpart of `nvidia-smi -L` and `tf.config.list_physical_devices()`, for all of Burn's
//! backends at once.

use std::fmt;

/// One backend and what it sees on this machine.
#[derive(Clone, Debug)]
pub struct BackendListing {
    /// The backend's name in device lists (and its cargo feature).
    pub backend: &'static str,
    /// Its devices, or why there are none.
    pub devices: Listed,
}

/// The devices of one backend, or why there are none.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Listed {
    /// The backend is not in this build; `--features {backend}` adds it.
    NotCompiled,
    /// The backend is in this build but could not list devices here (no driver, ...).
    Unavailable(String),
    /// The devices found, in selection order.
    Devices(Vec<ListedDevice>),
}

/// One device: the device list entries that select it and what it is.
#[derive(Clone, Debug, PartialEq)]
pub struct ListedDevice {
    /// Entries that name it, best first (`wgpu:0`, `wgpu:cpu`).
    pub entries: Vec<String>,
    /// What it is: the adapter's or GPU's name and kind.
    pub description: String,
}

/// Every backend a device list may name, in the order of Burn's feature list.
pub fn list_devices() -> Vec<BackendListing> {
    [
        "flex", "ndarray", "cuda", "rocm", "wgpu", "vulkan", "metal", "remote",
    ]
    .into_iter()
    .map(|backend| BackendListing {
        backend,
        devices: list_backend(backend),
    })
    .collect()
}

fn list_backend(backend: &str) -> Listed {
    match backend {
        #[cfg(feature = "flex")]
        "flex" => Listed::Devices(vec![cpu("flex")]),
        #[cfg(feature = "ndarray")]
        "ndarray" => Listed::Devices(vec![cpu("ndarray")]),
        #[cfg(feature = "cuda")]
        "cuda" => enumerated("cuda", burn::tensor::DeviceType::Cuda),
        #[cfg(feature = "rocm")]
        "rocm" => enumerated("rocm", burn::tensor::DeviceType::Rocm),
        #[cfg(feature = "wgpu")]
        "wgpu" => adapters("wgpu"),
        #[cfg(feature = "vulkan")]
        "vulkan" => adapters("vulkan"),
        #[cfg(feature = "metal")]
        "metal" => adapters("metal"),
        #[cfg(feature = "remote")]
        "remote" => Listed::Devices(vec![ListedDevice {
            entries: vec!["iroh://ID@HOST:PORT/N".into(), "ws://HOST:PORT/N".into()],
            description: "device N of a towers-serve server (it prints its devices when it \
                          starts)"
                .into(),
        }]),
        _ => Listed::NotCompiled,
    }
}

/// The one device of a CPU backend.
#[cfg(any(feature = "flex", feature = "ndarray"))]
fn cpu(backend: &str) -> ListedDevice {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    ListedDevice {
        entries: vec![backend.to_string()],
        description: format!("CPU, {threads} threads"),
    }
}

/// The adapters of a wgpu-family backend; the bare name selects the one Burn prefers.
#[cfg(any(feature = "wgpu", feature = "vulkan", feature = "metal"))]
fn adapters(backend: &str) -> Listed {
    let adapters = match crate::adapters::wgpu_adapters(backend) {
        Ok(adapters) => adapters,
        Err(e) => return Listed::Unavailable(e.to_string()),
    };
    if let Some(why) = crate::adapters::unusable(backend, &adapters) {
        return Listed::Unavailable(why);
    }
    let mut devices: Vec<ListedDevice> = adapters
        .iter()
        .map(|a| ListedDevice {
            entries: a.entries(backend),
            description: a.to_string(),
        })
        .collect();
    devices.push(ListedDevice {
        entries: vec![backend.to_string()],
        description: "the adapter Burn prefers (a discrete GPU first)".into(),
    });
    Listed::Devices(devices)
}

/// The devices Burn enumerates for a GPU runtime (CUDA, ROCm), by their names. Enumeration
/// loads the vendor's driver library, which panics where there is none: that is reported as
/// unavailable, not as a crash.
#[cfg(any(feature = "cuda", feature = "rocm"))]
fn enumerated(backend: &str, device_type: burn::tensor::DeviceType) -> Listed {
    // `DeviceType` may hold a remote host (not unwind-safe); nothing of it is used after a panic.
    let found = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        burn::tensor::Device::enumerate(device_type)
            .into_vec()
            .into_iter()
            .map(|device| device.identity().map(|id| id.name))
            .collect::<Vec<_>>()
    }));
    match found {
        Err(panic) => Listed::Unavailable(crate::error::panic_message(&*panic)),
        Ok(names) if names.is_empty() => Listed::Unavailable("no device found".into()),
        Ok(names) => Listed::Devices(
            names
                .into_iter()
                .enumerate()
                .map(|(i, name)| ListedDevice {
                    entries: vec![format!("{backend}:{i}")],
                    description: name.unwrap_or_else(|| "unnamed device".into()),
                })
                .collect(),
        ),
    }
}

impl fmt::Display for BackendListing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let backend = self.backend;
        match &self.devices {
            Listed::NotCompiled => {
                write!(f, "{backend:<8} not in this build (--features {backend})")
            }
            Listed::Unavailable(why) => write!(f, "{backend:<8} none: {why}"),
            Listed::Devices(devices) => {
                for (i, device) in devices.iter().enumerate() {
                    let name = if i == 0 { backend } else { "" };
                    if i > 0 {
                        writeln!(f)?;
                    }
                    let entries = device.entries.join(" | ");
                    write!(f, "{name:<8} {entries:<28} {}", device.description)?;
                }
                Ok(())
            }
        }
    }
}
