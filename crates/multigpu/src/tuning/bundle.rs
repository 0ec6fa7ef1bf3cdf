//! Tuning bundles: what a run tuned, written to one file (CubeCL's bundle) that recorded the
//! GPUs it was tuned on, and mounted by later runs, here or on machines with the same GPU.
//!
//! CubeCL 0.11.3 keeps tuned kernels under its version, runtime and device *index*
//! (`autotune/0.11.3/device-{type}-{index}-{runtime}/...`, cubecl-core's `CubeTuneId`), not
//! under the GPU. So on its own, a bundle tuned on an H100's `cuda:0` would be used as it is
//! for an RTX 4090's `cuda:0`, and would not serve `cuda:1` of the same H100 machine at all.
//! The bundles written here record each GPU with its CubeCL key; a run on another GPU is
//! refused, and a run's other devices of a recorded GPU get that GPU's tuning copied under
//! their own keys.

use std::path::Path;

use crate::devices::TowerDevice;
use crate::error::{Error, Result};

/// Mounts the tuning bundle at `file` (written by [`save_tuning_bundle`], here or on another
/// machine with the same GPU and versions) as the environment the run loads its tuned kernels
/// from; kernels it lacks are tuned and added to it. Call it before any device is used.
///
/// A file that is not such a bundle is an error naming it, before anything is mounted:
/// CubeCL's own `load` takes any path, and a run then tuned everything again and wrote
/// nowhere. What the bundle says of itself goes to stderr: its CubeCL version and the GPUs it
/// was tuned on. Entries of another CubeCL version are not used (CubeCL keys them by version)
/// and are tuned again. [`load_tuning_bundle_for`] also checks the run's GPUs.
pub fn load_tuning_bundle(file: &Path) -> Result<()> {
    load_tuning_bundle_for(file, &[])
}

/// [`load_tuning_bundle`] for a run on `devices`.
///
/// A bundle whose recorded GPUs ([`save_tuning_bundle_for`]) lack one of `devices`' GPUs is
/// refused before anything is mounted, naming the file and the GPUs: CubeCL would take
/// another GPU's choices for the same device index, some of them kernels this GPU may lack
/// the features for. Once mounted, each of `devices` on a recorded GPU under another key
/// (`cuda:1` of a bundle tuned on `cuda:0`, or the same adapter as `wgpu:0` and as `wgpu`)
/// gets that GPU's tuning copied under its own key in the bundle, and tunes nothing either.
/// A bundle that records no GPUs (written by [`save_tuning_bundle`] or CubeCL itself) is
/// mounted as it is.
#[cfg_attr(not(feature = "gpu"), allow(unused_variables))]
pub fn load_tuning_bundle_for(file: &Path, devices: &[TowerDevice]) -> Result<()> {
    if !file.is_file() {
        return Err(Error::Config(format!(
            "no tuning bundle at {}: write one with --save-tuning",
            file.display()
        )));
    }
    #[cfg(feature = "gpu")]
    {
        let tuned_on = gpus::recorded_in(file)?;
        let run_gpus = gpus::of(devices);
        gpus::refuse_others(file, &tuned_on, &run_gpus)?;
        cubecl_environment::environment::load(file);
        gpus::share_tuning(&tuned_on, &run_gpus);
    }
    #[cfg(not(feature = "gpu"))]
    cubecl_environment::environment::load(file);
    Ok(())
}

/// Writes what this run tuned (and what it loaded) to `file`, one database another run loads
/// with [`load_tuning_bundle`]. It records no GPUs: [`save_tuning_bundle_for`] does.
pub fn save_tuning_bundle(file: &Path) -> Result<()> {
    save_tuning_bundle_for(file, &[])
}

/// [`save_tuning_bundle`], recording `devices`' GPUs in the bundle (each with the key CubeCL
/// keeps its tuning under), which [`load_tuning_bundle_for`] checks a run's GPUs against.
#[cfg_attr(not(feature = "gpu"), allow(unused_variables))]
pub fn save_tuning_bundle_for(file: &Path, devices: &[TowerDevice]) -> Result<()> {
    // CubeCL keeps tuning on disk only with a GPU backend (cubecl-environment's `persistence`).
    #[cfg(not(feature = "gpu"))]
    return Err(Error::Config(format!(
        "cannot write the tuning bundle {}: this build has no GPU backend, nothing to tune",
        file.display()
    )));
    #[cfg(feature = "gpu")]
    {
        use cubecl_environment::bundle::{BundleFormat, ExportOptions, export};
        use cubecl_environment::environment;
        // What `environment::bundle().save(..)` does, with the GPUs in the manifest.
        let options = ExportOptions {
            name: environment::active().to_string(),
            format: BundleFormat::Sqlite,
            environments: gpus::of(devices).iter().map(gpus::Gpu::record).collect(),
            ..Default::default()
        };
        export(&[environment::path()], file, &options)
            .map(|_| ())
            .map_err(|e| {
                Error::Config(format!(
                    "cannot write the tuning bundle {}: {e}",
                    file.display()
                ))
            })
    }
}

/// The GPUs of a run and of a bundle's manifest, and the tuning shared between their keys.
#[cfg(feature = "gpu")]
mod gpus {
    use std::path::Path;

    use burn::backend::DispatchDevice;
    use burn_cubecl::CubeTuneId;
    use cubecl_environment::bundle::{EnvironmentInfo, SqliteBundle};
    use cubecl_environment::bytes::Bytes;
    use cubecl_environment::persistence::{self, Origin};

    use crate::devices::TowerDevice;
    use crate::error::{Error, Result};

    /// One GPU a run tunes on, as a bundle's manifest records it (one `EnvironmentInfo` each).
    pub(super) struct Gpu {
        /// Its device list entry, name and what CubeCL compiles for it:
        /// `cuda:0: NVIDIA H100 PCIe (ptx_sm90)`.
        device: String,
        /// CubeCL's key for its tuning (`device-{type}-{index}-{runtime}`), the third segment
        /// of its `autotune/` namespaces; empty in bundles that did not record it.
        tuning_key: String,
    }

    impl Gpu {
        /// The device list entry alone: `cuda:0`.
        fn entry(&self) -> &str {
            self.device.split_once(": ").map_or("", |(entry, _)| entry)
        }

        /// The GPU alone, without the device list entry: `NVIDIA H100 PCIe (ptx_sm90)`.
        fn model(&self) -> &str {
            self.device
                .split_once(": ")
                .map_or(&self.device, |(_, gpu)| gpu)
        }

        /// Its manifest entry: the key as the label, the device as its one device.
        pub(super) fn record(&self) -> EnvironmentInfo {
            EnvironmentInfo {
                label: self.tuning_key.clone(),
                devices: vec![self.device.clone()],
                ..Default::default()
            }
        }
    }

    /// `devices`' GPUs (those that tune, see [`crate::tuning::tunes`]), once each. Opens them.
    pub(super) fn of(devices: &[TowerDevice]) -> Vec<Gpu> {
        let mut gpus: Vec<Gpu> = Vec::new();
        for tower in devices
            .iter()
            .filter(|d| crate::tuning::tunes(std::slice::from_ref(*d)))
        {
            let DispatchDevice::Cube(cube) = tower.device().clone().inner().as_dispatch().clone()
            else {
                continue;
            };
            let Some(id) = tower.device().identity() else {
                continue;
            };
            let tuning_key = CubeTuneId::new(&cube.client(), &cube).to_string();
            if gpus.iter().all(|gpu| gpu.tuning_key != tuning_key) {
                gpus.push(Gpu {
                    device: format!("{}: {} ({})", tower.name(), id.name, id.fingerprint),
                    tuning_key,
                });
            }
        }
        gpus
    }

    /// The GPUs the bundle at `file` records, after saying what it is on stderr; an error
    /// naming the file when it is no bundle.
    pub(super) fn recorded_in(file: &Path) -> Result<Vec<Gpu>> {
        let bundle = SqliteBundle::open(file).map_err(|e| {
            Error::Config(format!(
                "{} is not a tuning bundle (--save-tuning writes one): {e}",
                file.display()
            ))
        })?;
        let manifest = bundle.manifest();
        manifest.warn_on_version_mismatch();
        let gpus: Vec<Gpu> = (manifest.environments.iter())
            .flat_map(|env| {
                (env.devices.iter()).map(|device| Gpu {
                    device: device.clone(),
                    tuning_key: env.label.clone(),
                })
            })
            .collect();
        let names: Vec<&str> = gpus.iter().map(|gpu| gpu.device.as_str()).collect();
        eprintln!(
            "tuning: loading {} (CubeCL {}, tuned on {})",
            file.display(),
            manifest.cubecl_version,
            match names.is_empty() {
                true => "GPUs not recorded".to_string(),
                false => names.join(", "),
            }
        );
        Ok(gpus)
    }

    /// An error naming `file` when it records GPUs and one of the run's is not among them.
    pub(super) fn refuse_others(file: &Path, tuned_on: &[Gpu], run: &[Gpu]) -> Result<()> {
        let others: Vec<&str> = (run.iter())
            .filter(|gpu| tuned_on.iter().all(|t| t.model() != gpu.model()))
            .map(|gpu| gpu.device.as_str())
            .collect();
        if tuned_on.is_empty() || others.is_empty() {
            return Ok(());
        }
        let tuned: Vec<&str> = tuned_on.iter().map(|gpu| gpu.device.as_str()).collect();
        Err(Error::Config(format!(
            "the tuning bundle {} was tuned on {}, not on this run's {}: CubeCL finds tuned \
             kernels by device index, not by GPU, so this run would take another GPU's \
             choices. Tune on this GPU instead, or load a bundle saved on it",
            file.display(),
            tuned.join(", "),
            others.join(", "),
        )))
    }

    /// Copies, in the mounted bundle, the tuning of each recorded GPU to the run's devices of
    /// that GPU that it holds nothing for under their own keys, and says so on stderr.
    pub(super) fn share_tuning(tuned_on: &[Gpu], run: &[Gpu]) {
        let namespaces = persistence::namespaces();
        for gpu in run {
            if tuned_on.iter().any(|t| t.tuning_key == gpu.tuning_key) {
                continue;
            }
            let Some(source) =
                (tuned_on.iter()).find(|t| !t.tuning_key.is_empty() && t.model() == gpu.model())
            else {
                continue;
            };
            let copied = copy_tuning(&namespaces, &source.tuning_key, &gpu.tuning_key);
            eprintln!(
                "tuning: {} takes the {copied} kernels tuned on {}, the same GPU ({})",
                gpu.entry(),
                source.entry(),
                gpu.model()
            );
        }
    }

    /// Copies every `autotune/{version}/{from}/...` namespace's entries to
    /// `autotune/{version}/{to}/...`; returns how many entries it wrote.
    fn copy_tuning(namespaces: &[String], from: &str, to: &str) -> usize {
        let mut copied = 0;
        for namespace in namespaces {
            let mut segments = namespace.splitn(4, '/');
            let (Some("autotune"), Some(version), Some(key), Some(kernel)) = (
                segments.next(),
                segments.next(),
                segments.next(),
                segments.next(),
            ) else {
                continue;
            };
            if key != from {
                continue;
            }
            // Read first, write after: a scan's visitor must not touch another store.
            let mut entries = Vec::new();
            persistence::open(namespace).scan(&mut |key, value| {
                entries.push((
                    Bytes::from_bytes_vec(key.to_vec()),
                    Bytes::from_bytes_vec(value.to_vec()),
                ))
            });
            copied += entries.len();
            persistence::open(&format!("autotune/{version}/{to}/{kernel}"))
                .insert_many(&mut entries.into_iter(), Origin::Imported);
        }
        copied
    }
}
