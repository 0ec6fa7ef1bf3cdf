//! The GPUs of a run and of a tuning bundle's manifest (`bundle.rs`), and the tuning a bundle
//! shares between the keys of one GPU: CubeCL keeps a device's tuning under its index, not its
//! GPU.

use std::panic::{self, AssertUnwindSafe};
use std::path::Path;

use burn::backend::DispatchDevice;
use burn_cubecl::CubeTuneId;
use cubecl_environment::bundle::{EnvironmentInfo, SqliteBundle};
use cubecl_environment::bytes::Bytes;
use cubecl_environment::persistence::{self, Origin};

use super::device_tunes;
use crate::devices::TowerDevice;
use crate::error::{Error, Result, panic_message};
use crate::stderr_line::eprint_line;

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

/// `devices`' GPUs (those that tune, see [`device_tunes`]), once each. Opens them: a
/// device that cannot be opened (a CUDA index the machine lacks, a missing driver, which
/// CubeCL reports by panicking) is an error naming its entry.
pub(super) fn of(devices: &[TowerDevice]) -> Result<Vec<Gpu>> {
    let mut gpus: Vec<Gpu> = Vec::new();
    for tower in devices.iter().filter(|d| device_tunes(d)) {
        let opened = panic::catch_unwind(AssertUnwindSafe(|| gpu_of(tower)));
        let gpu = opened.map_err(|panic| Error::DeviceList {
            entry: tower.name().to_string(),
            reason: format!(
                "cannot be opened to check a tuning bundle against its GPU: {}",
                panic_message(&*panic)
            ),
        })?;
        if let Some(gpu) = gpu
            && gpus.iter().all(|g| g.tuning_key != gpu.tuning_key)
        {
            gpus.push(gpu);
        }
    }
    Ok(gpus)
}

/// `tower`'s GPU, `None` for a device CubeCL does not run or that does not name itself.
fn gpu_of(tower: &TowerDevice) -> Option<Gpu> {
    let DispatchDevice::Cube(cube) = tower.device().clone().inner().as_dispatch().clone() else {
        return None;
    };
    let id = tower.device().identity()?;
    Some(Gpu {
        device: format!("{}: {} ({})", tower.name(), id.name, id.fingerprint),
        tuning_key: CubeTuneId::new(&cube.client(), &cube).to_string(),
    })
}

/// The GPUs `bundle` (opened from `file`) records, after saying what it is on stderr.
pub(super) fn recorded_in(file: &Path, bundle: &SqliteBundle) -> Vec<Gpu> {
    let manifest = bundle.manifest();
    manifest.warn_on_version_mismatch();
    // Escaped: a crafted manifest's newlines or terminal codes would otherwise print as lines
    // and colours of their own in what we say of it.
    let gpus: Vec<Gpu> = (manifest.environments.iter())
        .flat_map(|env| {
            (env.devices.iter()).map(|device| Gpu {
                device: device.escape_debug().to_string(),
                tuning_key: env.label.escape_debug().to_string(),
            })
        })
        .collect();
    let names: Vec<&str> = gpus.iter().map(|gpu| gpu.device.as_str()).collect();
    eprint_line(&format!(
        "tuning: loading {} (CubeCL {}, tuned on {})",
        file.display(),
        manifest.cubecl_version,
        match names.is_empty() {
            true => "GPUs not recorded".to_string(),
            false => names.join(", "),
        }
    ));
    gpus
}

/// An error naming `file` when it records GPUs and one of the run's is not among them, or is
/// under a key (a device index) the bundle recorded for another GPU: CubeCL would use that
/// GPU's entries as they are (a bundle tuned on an H100 at `cuda:0` and an A100 at `cuda:1`,
/// run where `cuda:1` is an H100).
pub(super) fn refuse_others(file: &Path, tuned_on: &[Gpu], run: &[Gpu]) -> Result<()> {
    let other = |gpu: &&Gpu| {
        tuned_on.iter().all(|t| t.model() != gpu.model())
            || (tuned_on.iter()).any(|t| t.tuning_key == gpu.tuning_key && t.model() != gpu.model())
    };
    let others: Vec<&str> = (run.iter())
        .filter(other)
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
        let taken = match copied {
            0 => "takes none of the kernels (the bundle took no copy: read-only?)".to_string(),
            n => format!("takes the {n} kernels"),
        };
        eprint_line(&format!(
            "tuning: {} {taken} tuned on {}, the same GPU ({})",
            gpu.entry(),
            source.entry(),
            gpu.model()
        ));
    }
}

/// Copies every `autotune/{version}/{from}/...` namespace's entries to
/// `autotune/{version}/{to}/...`; returns how many entries it stored (none where the bundle
/// cannot be written, e.g. on a read-only mount).
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
        copied += persistence::open(&format!("autotune/{version}/{to}/{kernel}"))
            .insert_many(&mut entries.into_iter(), Origin::Imported)
            .stored;
    }
    copied
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(device: &str, tuning_key: &str) -> Gpu {
        Gpu {
            device: device.to_string(),
            tuning_key: tuning_key.to_string(),
        }
    }

    #[test]
    fn a_device_index_recorded_for_another_gpu_is_refused() {
        let file = Path::new("two-gpus.db");
        let tuned_on = [
            gpu("cuda:0: NVIDIA H100 (ptx_sm90)", "device-0-0-cuda"),
            gpu("cuda:1: NVIDIA A100 (ptx_sm80)", "device-0-1-cuda"),
        ];
        // The H100's own index: its entries are the H100's.
        let same = [gpu("cuda:0: NVIDIA H100 (ptx_sm90)", "device-0-0-cuda")];
        refuse_others(file, &tuned_on, &same).unwrap();
        // An H100 where the bundle has the A100: CubeCL would take the A100's entries.
        let swapped = [gpu("cuda:1: NVIDIA H100 (ptx_sm90)", "device-0-1-cuda")];
        let error = refuse_others(file, &tuned_on, &swapped).unwrap_err();
        assert!(error.to_string().contains("cuda:1: NVIDIA H100"), "{error}");
        // An H100 under an index the bundle lacks: shared from the recorded H100.
        let third = [gpu("cuda:2: NVIDIA H100 (ptx_sm90)", "device-0-2-cuda")];
        refuse_others(file, &tuned_on, &third).unwrap();
    }
}
