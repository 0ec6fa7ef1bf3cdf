//! The graphics adapters that the wgpu family of backends (`wgpu`, `vulkan`, `metal`) can run on,
//! and how a device list entry picks one.
//!
//! Burn selects a wgpu adapter by kind and index within that kind ([`DeviceKind::DiscreteGpu`]`(1)`
//! is the second discrete GPU). People count adapters as the graphics API lists them, whatever
//! their kind: a laptop's integrated GPU, a cloud VM's virtual GPU or Mesa's lavapipe (a CPU
//! adapter) is adapter 0 there. [`Adapter`] carries both numberings, so `wgpu:0` means the first
//! adapter listed and `wgpu:integrated:0` the first integrated one.

use std::fmt;

use burn::tensor::DeviceKind;

use crate::error::{Error, Result};

/// The type of an adapter, as the graphics API reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AdapterKind {
    /// A GPU with memory of its own.
    Discrete,
    /// A GPU sharing the CPU's memory.
    Integrated,
    /// A GPU of a virtual machine.
    Virtual,
    /// A software implementation running on the CPU (lavapipe, llvmpipe, WARP).
    Cpu,
    /// Anything else; Burn has no way to select it.
    Other,
}

impl AdapterKind {
    /// Every kind, with the word that names it in a device list entry (`wgpu:discrete:0`).
    pub const NAMED: [(AdapterKind, &'static str); 4] = [
        (AdapterKind::Discrete, "discrete"),
        (AdapterKind::Integrated, "integrated"),
        (AdapterKind::Virtual, "virtual"),
        (AdapterKind::Cpu, "cpu"),
    ];

    /// The kind a device list entry names (`discrete`, `integrated`, `virtual`, `cpu`).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::NAMED
            .iter()
            .find(|(_, n)| n.eq_ignore_ascii_case(name))
            .map(|(kind, _)| *kind)
    }

    /// Burn's selector for the `index`-th adapter of this kind, if Burn can select it.
    pub fn device_kind(self, index: usize) -> Option<DeviceKind> {
        match self {
            AdapterKind::Discrete => Some(DeviceKind::DiscreteGpu(index)),
            AdapterKind::Integrated => Some(DeviceKind::IntegratedGpu(index)),
            AdapterKind::Virtual => Some(DeviceKind::VirtualGpu(index)),
            // Burn's `Cpu` selector has no index: it is always the first CPU adapter.
            AdapterKind::Cpu if index == 0 => Some(DeviceKind::Cpu),
            AdapterKind::Cpu | AdapterKind::Other => None,
        }
    }
}

impl fmt::Display for AdapterKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            AdapterKind::Discrete => "discrete GPU",
            AdapterKind::Integrated => "integrated GPU",
            AdapterKind::Virtual => "virtual GPU",
            AdapterKind::Cpu => "CPU (software)",
            AdapterKind::Other => "other",
        };
        f.write_str(name)
    }
}

/// One adapter of a wgpu-family backend.
#[derive(Clone, Debug, PartialEq)]
pub struct Adapter {
    /// Its position in the graphics API's list: `wgpu:{index}`.
    pub index: usize,
    /// Its type.
    pub kind: AdapterKind,
    /// Its position among the adapters of its kind: `wgpu:{kind}:{kind_index}`.
    pub kind_index: usize,
    /// The name the driver gives it (`NVIDIA H100 PCIe`, `llvmpipe (LLVM 15.0.6, 256 bits)`).
    pub name: String,
    /// The driver and its version.
    pub driver: String,
    /// The graphics API it was listed on (`Vulkan`, `Metal`, ...).
    pub api: String,
}

impl Adapter {
    /// Burn's selector for this adapter, if Burn can select it.
    pub fn device_kind(&self) -> Option<DeviceKind> {
        self.kind.device_kind(self.kind_index)
    }

    /// The device list entries that name this adapter on `backend`, best first.
    pub fn entries(&self, backend: &str) -> Vec<String> {
        let mut entries = vec![format!("{backend}:{}", self.index)];
        if let Some((_, word)) = AdapterKind::NAMED.iter().find(|(k, _)| *k == self.kind) {
            entries.push(match self.kind {
                AdapterKind::Cpu => format!("{backend}:{word}"),
                _ => format!("{backend}:{word}:{}", self.kind_index),
            });
        }
        entries
    }
}

impl fmt::Display for Adapter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}, {}", self.name, self.kind, self.api)?;
        if !self.driver.is_empty() {
            write!(f, ", driver {}", self.driver)?;
        }
        f.write_str(")")
    }
}

/// Numbers adapters listed as `(kind, name, driver, api)`: overall and within each kind.
pub fn number_adapters(
    listed: impl IntoIterator<Item = (AdapterKind, String, String, String)>,
) -> Vec<Adapter> {
    let mut adapters: Vec<Adapter> = Vec::new();
    for (index, (kind, name, driver, api)) in listed.into_iter().enumerate() {
        let kind_index = adapters.iter().filter(|a| a.kind == kind).count();
        adapters.push(Adapter {
            index,
            kind,
            kind_index,
            name,
            driver,
            api,
        });
    }
    adapters
}

/// How a device list entry of a wgpu-family backend picks its adapter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AdapterChoice {
    /// `wgpu`: the adapter Burn prefers (a high-performance GPU, else what there is).
    Default,
    /// `wgpu:N`: the N-th adapter listed, whatever its kind.
    Listed(usize),
    /// `wgpu:KIND:N` (`wgpu:cpu` for the CPU adapter): the N-th adapter of that kind.
    Kind(AdapterKind, usize),
}

impl AdapterChoice {
    /// Parses what follows `backend:` in an entry (`None`: nothing follows).
    pub fn parse(selector: Option<&str>) -> Result<Self, String> {
        let Some(selector) = selector else {
            return Ok(AdapterChoice::Default);
        };
        let (first, index) = match selector.split_once(':') {
            Some((kind, index)) => (kind.trim(), Some(index.trim())),
            None => (selector.trim(), None),
        };
        let number = |text: &str| {
            text.parse::<usize>()
                .map_err(|_| format!("adapter index `{text}` is not a number"))
        };
        if let Some(kind) = AdapterKind::from_name(first) {
            return Ok(AdapterChoice::Kind(
                kind,
                index.map(number).transpose()?.unwrap_or(0),
            ));
        }
        match index {
            None if first.chars().all(|c| c.is_ascii_digit()) => {
                Ok(AdapterChoice::Listed(number(first)?))
            }
            _ => Err(format!(
                "`{selector}` is neither an adapter index nor a kind: expected e.g. `0`, \
                 `discrete:1`, `integrated:0`, `virtual:0` or `cpu`"
            )),
        }
    }

    /// The adapter this choice picks among `adapters`, as Burn's selector. An error lists the
    /// adapters that exist.
    pub fn select(self, backend: &str, adapters: &[Adapter]) -> Result<DeviceKind, String> {
        let found = match self {
            AdapterChoice::Default => return Ok(DeviceKind::DefaultDevice),
            AdapterChoice::Listed(i) => adapters.get(i).ok_or_else(|| format!("no adapter {i}")),
            AdapterChoice::Kind(kind, i) => adapters
                .iter()
                .find(|a| a.kind == kind && a.kind_index == i)
                .ok_or_else(|| format!("no {kind} adapter {i}")),
        };
        let adapter = found.map_err(|missing| format!("{missing}: {}", list(backend, adapters)))?;
        adapter.device_kind().ok_or_else(|| {
            format!(
                "Burn has no selector for adapter {} ({adapter}): {}",
                adapter.index,
                list(backend, adapters)
            )
        })
    }
}

/// The name [`Adapter::api`] gives OpenGL (`wgpu::Backend::Gl`, as `{:?}` writes it).
#[cfg(any(feature = "wgpu", feature = "vulkan", feature = "metal"))]
const OPENGL: &str = "Gl";

/// What a machine without a usable adapter needs, for error messages.
const INSTALL_A_DRIVER: &str = "install a Vulkan driver (on Linux without a GPU, Mesa's \
    lavapipe: `apt-get install mesa-vulkan-drivers libvulkan1`), or train on `flex`";

/// Why Burn's kernels cannot run on `adapters`, the ones `backend` settled on
/// ([`wgpu_adapters`]), where they cannot: there are none, or only OpenGL adapters. Burn's wgpu
/// kernels need Vulkan, Metal or DirectX 12: on OpenGL (where wgpu falls back when no Vulkan
/// driver is installed) they fail to compile (subgroup operations) and the run hangs at its
/// first step, for good, after wgpu panics on a thread of its own ("Could not lock adapter
/// context"; Mesa's llvmpipe, 2026-12-06).
#[cfg(any(feature = "wgpu", feature = "vulkan", feature = "metal"))]
pub(crate) fn unusable(backend: &str, adapters: &[Adapter]) -> Option<String> {
    if adapters.is_empty() {
        return Some(format!(
            "this machine has no {backend} adapter: {INSTALL_A_DRIVER}"
        ));
    }
    if adapters.iter().all(|a| a.api == OPENGL) {
        let names: Vec<String> = adapters.iter().map(|a| a.name.clone()).collect();
        return Some(format!(
            "{backend} finds no GPU on Vulkan, Metal or DirectX 12 here, only OpenGL adapters \
             ({}), on which Burn's kernels do not compile and a run hangs: {INSTALL_A_DRIVER}",
            names.join("; ")
        ));
    }
    None
}

/// "this machine's `backend` adapters are: ..." for error messages.
fn list(backend: &str, adapters: &[Adapter]) -> String {
    if adapters.is_empty() {
        return format!("this machine has no {backend} adapter: {INSTALL_A_DRIVER}");
    }
    let each: Vec<String> = adapters
        .iter()
        .map(|a| format!("{} = {a}", a.entries(backend).join(" or ")))
        .collect();
    format!("this machine's {backend} adapters are: {}", each.join("; "))
}

/// The adapters `backend` (`wgpu`, `vulkan` or `metal`) lists on this machine, numbered as on the
/// graphics API Burn brings its devices up on; an error where this build does not include it.
pub fn wgpu_adapters(backend: &str) -> Result<Vec<Adapter>> {
    let Some((feature, compiled)) = wgpu_family_feature(backend) else {
        return Err(Error::DeviceList {
            entry: backend.to_string(),
            reason: "not a wgpu-family backend (wgpu, vulkan, metal)".into(),
        });
    };
    if !compiled {
        return Err(Error::BackendNotCompiled {
            entry: backend.to_string(),
            feature,
        });
    }
    #[cfg(any(feature = "wgpu", feature = "vulkan", feature = "metal"))]
    return Ok(listed_once(backend));
    #[cfg(not(any(feature = "wgpu", feature = "vulkan", feature = "metal")))]
    unreachable!("no wgpu-family backend is compiled in")
}

/// The cargo feature of a wgpu-family backend (`wgpu`, `vulkan`, `metal`) and whether this
/// build has it; `None` for any other backend.
pub(crate) fn wgpu_family_feature(backend: &str) -> Option<(&'static str, bool)> {
    match backend {
        "wgpu" => Some(("wgpu", cfg!(feature = "wgpu"))),
        "vulkan" => Some(("vulkan", cfg!(feature = "vulkan"))),
        "metal" => Some(("metal", cfg!(feature = "metal"))),
        _ => None,
    }
}

/// [`enumerate`]'s list, made once per backend and process: every device list entry of a
/// wgpu-family backend takes it, and each listing brings a graphics API instance up and down,
/// which the Vulkan loader does not survive on several threads at once (cubecl-wgpu's
/// `INSTANCES`); adapters do not come and go under a run.
#[cfg(any(feature = "wgpu", feature = "vulkan", feature = "metal"))]
fn listed_once(backend: &str) -> Vec<Adapter> {
    static LISTED: std::sync::Mutex<Vec<(String, Vec<Adapter>)>> =
        std::sync::Mutex::new(Vec::new());
    let mut listed = LISTED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some((_, adapters)) = listed.iter().find(|(b, _)| b == backend) {
        return adapters.clone();
    }
    let adapters = enumerate(backend);
    listed.push((backend.to_string(), adapters.clone()));
    adapters
}

/// Lists the adapters of `backend` as Burn does.
///
/// Burn (cubecl-wgpu) settles `wgpu` on the first API of its chain (Vulkan first wherever it
/// exists) that has a GPU adapter, else on the first with any adapter; `vulkan` and `metal` are
/// pinned. That rule is repeated here, on the same `wgpu` instance API, because cubecl keeps its
/// own list private: the numbering must be the one its `DiscreteGpu(n)`-style selectors count in.
#[cfg(any(feature = "wgpu", feature = "vulkan", feature = "metal"))]
fn enumerate(backend: &str) -> Vec<Adapter> {
    use burn::backend::AutoGraphicsApi;
    use burn::backend::wgpu::wgpu;

    let apis = match backend {
        "vulkan" => vec![wgpu::Backend::Vulkan],
        "metal" => vec![wgpu::Backend::Metal],
        _ => AutoGraphicsApi::chain(),
    };
    let probe = |api: wgpu::Backend| {
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
            backends: api.into(),
            ..wgpu::InstanceDescriptor::new_without_display_handle()
        });
        pollster::block_on(instance.enumerate_adapters(api.into()))
            .iter()
            .map(wgpu::Adapter::get_info)
            .collect::<Vec<_>>()
    };
    let mut software_only = None;
    let mut settled = None;
    for api in apis {
        let listed = probe(api);
        if listed
            .iter()
            .any(|a| a.device_type != wgpu::DeviceType::Cpu)
        {
            settled = Some(listed);
            break;
        }
        if software_only.is_none() && !listed.is_empty() {
            software_only = Some(listed);
        }
    }
    let kind = |t: wgpu::DeviceType| match t {
        wgpu::DeviceType::DiscreteGpu => AdapterKind::Discrete,
        wgpu::DeviceType::IntegratedGpu => AdapterKind::Integrated,
        wgpu::DeviceType::VirtualGpu => AdapterKind::Virtual,
        wgpu::DeviceType::Cpu => AdapterKind::Cpu,
        wgpu::DeviceType::Other => AdapterKind::Other,
    };
    number_adapters(
        settled
            .or(software_only)
            .unwrap_or_default()
            .into_iter()
            .map(|a| {
                let driver = [a.driver, a.driver_info]
                    .into_iter()
                    .filter(|s| !s.is_empty())
                    .collect::<Vec<_>>()
                    .join(" ");
                (
                    kind(a.device_type),
                    a.name,
                    driver,
                    format!("{:?}", a.backend),
                )
            }),
    )
}

#[cfg(test)]
mod tests {
    use towers_testing::assert_error_names;

    use super::*;

    fn machine() -> Vec<Adapter> {
        let a = |kind, name: &str| (kind, name.to_string(), String::new(), "Vulkan".to_string());
        number_adapters([
            a(AdapterKind::Integrated, "iGPU"),
            a(AdapterKind::Discrete, "dGPU 0"),
            a(AdapterKind::Cpu, "llvmpipe"),
            a(AdapterKind::Discrete, "dGPU 1"),
        ])
    }

    fn select(selector: Option<&str>) -> Result<DeviceKind, String> {
        AdapterChoice::parse(selector)?.select("wgpu", &machine())
    }

    #[test]
    fn listed_indices_count_every_kind_and_kinds_count_their_own() {
        assert_eq!(select(None), Ok(DeviceKind::DefaultDevice));
        assert_eq!(select(Some("0")), Ok(DeviceKind::IntegratedGpu(0)));
        assert_eq!(select(Some("2")), Ok(DeviceKind::Cpu));
        assert_eq!(select(Some("3")), Ok(DeviceKind::DiscreteGpu(1)));
        assert_eq!(select(Some("discrete:1")), Ok(DeviceKind::DiscreteGpu(1)));
        assert_eq!(select(Some("Discrete")), Ok(DeviceKind::DiscreteGpu(0)));
        assert_eq!(
            select(Some("integrated:0")),
            Ok(DeviceKind::IntegratedGpu(0))
        );
        assert_eq!(select(Some("cpu")), Ok(DeviceKind::Cpu));
        assert_eq!(
            machine()[3].entries("vulkan"),
            ["vulkan:3", "vulkan:discrete:1"]
        );
        assert_eq!(machine()[2].entries("wgpu"), ["wgpu:2", "wgpu:cpu"]);
    }

    #[test]
    fn missing_adapters_are_errors_that_list_the_adapters() {
        for selector in ["4", "discrete:2", "virtual:0", "cpu:1"] {
            let err = select(Some(selector)).unwrap_err();
            let listed = [
                "wgpu:1 or wgpu:discrete:0 = dGPU 0 (discrete GPU, Vulkan)",
                "wgpu:2 or wgpu:cpu = llvmpipe",
            ];
            assert_error_names(&err, &listed);
        }
        assert!(select(Some("4")).unwrap_err().starts_with("no adapter 4:"));
        let none = AdapterChoice::Listed(0).select("metal", &[]).unwrap_err();
        assert_error_names(&none, &["no metal adapter"]);
    }

    #[cfg(any(feature = "wgpu", feature = "vulkan", feature = "metal"))]
    #[test]
    fn no_adapters_or_only_opengls_are_unusable() {
        assert_eq!(unusable("wgpu", &machine()), None);
        let none = unusable("vulkan", &[]).unwrap();
        assert_error_names(
            &none,
            &["no vulkan adapter", "mesa-vulkan-drivers", "`flex`"],
        );
        let gl = |name: &str| {
            (
                AdapterKind::Cpu,
                name.to_string(),
                String::new(),
                OPENGL.into(),
            )
        };
        let opengl = number_adapters([gl("llvmpipe (LLVM 15.0.7, 256 bits)")]);
        let why = unusable("wgpu", &opengl).unwrap();
        let named = [
            "only OpenGL adapters (llvmpipe (LLVM 15.0.7, 256 bits))",
            "hangs",
            "libvulkan1",
        ];
        assert_error_names(&why, &named);
    }

    /// `OPENGL` is the name `enumerate` gives wgpu's OpenGL adapters.
    #[cfg(feature = "wgpu")]
    #[test]
    fn opengl_is_named_as_wgpu_debug_prints_it() {
        use burn::backend::wgpu::wgpu;
        assert_eq!(format!("{:?}", wgpu::Backend::Gl), OPENGL);
    }

    #[test]
    fn malformed_selectors_are_errors() {
        for selector in ["gpu", "discrete:x", "-1", "0:1", ""] {
            assert!(AdapterChoice::parse(Some(selector)).is_err(), "{selector}");
        }
    }
}
