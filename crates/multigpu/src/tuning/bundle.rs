//! Tuning bundles: what a run tuned, written to one file (CubeCL's bundle) that records the
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

#[cfg(feature = "gpu")]
use super::{gpus, winners};
use crate::devices::TowerDevice;
use crate::error::{Error, Result};
#[cfg(feature = "gpu")]
use cubecl_environment::bundle::SqliteBundle;

/// Mounts the tuning bundle at `file` (written by [`save_tuning_bundle`], here or on another
/// machine with the same GPU and versions) as the environment the run loads its tuned kernels
/// from; kernels it lacks are tuned and added to it. Call it before any device is used.
///
/// A file that is not such a bundle is an error naming it, before anything is mounted:
/// CubeCL's own `load` takes any path, and a run then tuned everything again and wrote
/// nowhere. What the bundle says of itself goes to stderr: its CubeCL version and the GPUs it
/// was tuned on. Entries of another CubeCL version are not used (CubeCL keys them by version)
/// and are tuned again. A bundle whose tuned entry names as its winner none of the candidates
/// it timed (damaged or edited: CubeCL would index its kernels with it unchecked) is an error
/// too, naming the kernel and the entry. [`load_tuning_bundle_for`] also checks the run's GPUs;
/// [`check_tuning_bundle_for`] checks without mounting.
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
    a_file(file)?;
    #[cfg(feature = "gpu")]
    let (tuned_on, run_gpus) = checked_for(file, devices)?;
    // CubeCL activates the environment its config names when it first reads the config (at a
    // device's first use), which unmounts a file mounted before (cubecl-runtime 0.11.3
    // `config/base.rs`, `on_loaded`): read it now, so that it has been read when we mount.
    #[cfg(feature = "gpu")]
    {
        use cubecl_environment::config::RuntimeConfig;
        cubecl_runtime::config::CubeClRuntimeConfig::get();
    }
    cubecl_environment::environment::load(file);
    #[cfg(feature = "gpu")]
    super::open_tuning_database();
    #[cfg(feature = "gpu")]
    gpus::share_tuning(&tuned_on, &run_gpus);
    Ok(())
}

/// Checks the bundle at `file` for a run on `devices` as [`load_tuning_bundle_for`] does
/// before it mounts it (a tuning bundle, tuned on `devices`' GPUs, its winners among the
/// candidates it timed), and mounts nothing: to vet a bundle before shipping it to other
/// machines, or before a run that should not tune.
#[cfg_attr(not(feature = "gpu"), allow(unused_variables))]
pub fn check_tuning_bundle_for(file: &Path, devices: &[TowerDevice]) -> Result<()> {
    a_file(file)?;
    #[cfg(feature = "gpu")]
    checked_for(file, devices)?;
    Ok(())
}

/// An error naming `file` where it is not a file.
fn a_file(file: &Path) -> Result<()> {
    match file.is_file() {
        true => Ok(()),
        false => Err(Error::Config(format!(
            "no tuning bundle at {}: write one with --save-tuning",
            file.display()
        ))),
    }
}

/// The checks on the bundle at `file` before it is mounted for a run on `devices`; the GPUs it
/// was tuned on and the run's, as [`gpus::share_tuning`] takes them.
#[cfg(feature = "gpu")]
fn checked_for(file: &Path, devices: &[TowerDevice]) -> Result<(Vec<gpus::Gpu>, Vec<gpus::Gpu>)> {
    let bundle = SqliteBundle::open(file).map_err(|e| {
        Error::Config(format!(
            "{} is not a tuning bundle (--save-tuning writes one): {e}",
            file.display()
        ))
    })?;
    let tuned_on = gpus::recorded_in(file, &bundle);
    let run_gpus = gpus::of(devices)?;
    gpus::refuse_others(file, &tuned_on, &run_gpus)?;
    winners::check_winners(file, &bundle)?;
    Ok((tuned_on, run_gpus))
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
            environments: gpus::of(devices)?.iter().map(gpus::Gpu::record).collect(),
            ..Default::default()
        };
        export(&[environment::path()], file, &options).map_err(|e| {
            Error::Config(format!(
                "cannot write the tuning bundle {}: {e}",
                file.display()
            ))
        })?;
        remove_stale_index(file);
        Ok(())
    }
}

/// Removes `FILE-tshm` beside the bundle just written at `file`, unless this process has `file`
/// mounted: Turso's shared-memory index of the file it replaced (left by a run that mounted
/// it), which Turso would read as this file's (a stale one opened it read-only, see the guide,
/// chapter 3). CubeCL's export removes the old `-wal` and `-shm`, not this one.
#[cfg(feature = "gpu")]
fn remove_stale_index(file: &Path) {
    let canonical = |path: &Path| std::fs::canonicalize(path).ok();
    let mounted = cubecl_environment::environment::path();
    if mounted == file || canonical(&mounted).is_some_and(|m| Some(m) == canonical(file)) {
        return;
    }
    let mut index = file.as_os_str().to_owned();
    index.push("-tshm");
    let _ = std::fs::remove_file(index);
}
