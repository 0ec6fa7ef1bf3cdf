//! Kernel tuning a user can see: what CubeCL tunes, said on stderr as it decides; where the
//! results are kept; and a bundle of them to ship to machines with the same GPU.
//!
//! Built with the `fusion` feature (Burn's autotuning), a cold run times each candidate kernel
//! per shape before it trains, synchronously and for minutes on a large net; without a word it
//! looks hung. [`show_tuning`] routes CubeCL's autotune logger (`cubecl::autotune`, one line
//! per tuned kernel and shape: the winner and the top three times) to stderr, with the time
//! since start and a running count. CubeCL 0.11.3 reports a kernel once its candidates are all
//! timed (`cubecl-runtime` `tune/log.rs` collects the candidates' events and logs them with the
//! decision), so progress shows per kernel and shape, not per candidate.
//!
//! Tuned results persist in CubeCL's environment database ([`tuning_file`]:
//! `target/environment/default.db` under the outermost `Cargo.toml` above the working
//! directory, else `~/.cache/cubecl/default.db`; Burn's `persistence` feature, which `fusion`
//! turns on), keyed by CubeCL version, runtime and device index (not by GPU), and later runs
//! load them: [`TuningReport`] then says the run tuned nothing. [`save_tuning_bundle_for`]
//! exports them to one file (CubeCL's bundle) recording the run's GPUs;
//! [`load_tuning_bundle_for`] checks that a file is one and was tuned on the run's GPUs, and
//! mounts it in place of the database.
//!
//! A `[cubecl]` section in `burn.toml` or a `cubecl.toml` (found from the working directory
//! up), or `CUBECL_DEBUG_LOG`, `CUBECL_AUTOTUNE_LEVEL`, ... in the environment, still decide
//! where CubeCL logs: [`show_tuning`] only gives the autotune logger a sink when they give it
//! none.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use cubecl_environment::config::RuntimeConfig;
use cubecl_environment::config::logger::LogCrateLevel;
use cubecl_runtime::config::CubeClRuntimeConfig;
use cubecl_runtime::config::autotune::AutotuneLogLevel;

use crate::devices::TowerDevice;
use crate::error::{Error, Result};

/// Kernel-and-shape decisions CubeCL's tuner reported since [`show_tuning`].
static TUNED: AtomicU64 = AtomicU64::new(0);
/// When [`show_tuning`] ran.
static STARTED: OnceLock<Instant> = OnceLock::new();
/// Whether [`TUNED`] counts the decisions (our sink took CubeCL's autotune logger).
static COUNTING: AtomicBool = AtomicBool::new(false);

/// The `log` sink CubeCL's autotune logger writes to: each decision on stderr, numbered, with
/// the time since [`show_tuning`].
struct TuningLines;

impl log::Log for TuningLines {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.target().starts_with("cubecl::autotune") && metadata.level() <= log::Level::Info
    }

    fn log(&self, record: &log::Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let tuned = TUNED.fetch_add(1, Ordering::Relaxed) + 1;
        let elapsed = STARTED.get().map_or(0.0, |t| t.elapsed().as_secs_f64());
        eprintln!(
            "towers: tuning kernel {tuned} ({elapsed:.1} s): {}",
            record.args()
        );
    }

    fn flush(&self) {}
}

/// Shows CubeCL's kernel tuning on stderr as it happens (see the module docs), unless a
/// CubeCL config or environment variable already gives its autotune logger a sink, or CubeCL
/// has read its config already. Call it first thing in `main`, before any device is used.
/// Returns whether the lines are counted (for [`TuningReport`]).
pub fn show_tuning() -> bool {
    STARTED.get_or_init(Instant::now);
    let mut config = CubeClRuntimeConfig::from_current_dir().override_from_env();
    let logger = &mut config.autotune.logger;
    let has_sink = logger.stdout || logger.stderr || logger.file.is_some() || logger.log.is_some();
    if has_sink || matches!(logger.level, AutotuneLogLevel::Disabled) {
        return false;
    }
    // Our own `log` sink when the program has none; CubeCL's stderr lines otherwise.
    let counted = log::set_logger(&TuningLines).is_ok();
    match counted {
        true => {
            log::set_max_level(log::LevelFilter::Info);
            logger.log = Some(LogCrateLevel::Info);
        }
        false => logger.stderr = true,
    }
    let counting = CubeClRuntimeConfig::try_set(config) && counted;
    COUNTING.store(counting, Ordering::Relaxed);
    counting
}

/// Where tuned kernels are kept: the active CubeCL environment's database (or the bundle
/// [`load_tuning_bundle`] mounted).
pub fn tuning_file() -> PathBuf {
    cubecl_environment::environment::path()
}

/// Mounts the tuning bundle at `file` (written by [`save_tuning_bundle`], here or on another
/// machine with the same GPU and versions) as the environment the run loads its tuned kernels
/// from; kernels it lacks are tuned and added to it. Call it before any device is used.
///
/// A file that is not such a bundle is an error naming it, before anything is mounted:
/// CubeCL's own `load` takes any path, and a run then tuned everything again and wrote
/// nowhere. What the bundle says of itself goes to stderr: its CubeCL version and the GPUs it
/// was tuned on. Entries of another CubeCL version are not used (CubeCL keys them by version)
/// and are tuned again. [`load_tuning_bundle_for`] also refuses a bundle tuned on other GPUs.
pub fn load_tuning_bundle(file: &Path) -> Result<()> {
    load_tuning_bundle_for(file, &[])
}

/// [`load_tuning_bundle`] for a run on `devices`, refusing, before anything is mounted, a
/// bundle whose recorded GPUs ([`save_tuning_bundle_for`]) lack one of `devices`' GPUs.
///
/// CubeCL 0.11.3 looks tuned kernels up by CubeCL version, runtime and device *index*
/// (`autotune/0.11.3/device-{type}-{index}-{runtime}`), not by GPU: an H100's choices would be
/// taken for an RTX 4090 at the same index, some of them kernels it lacks the features for.
/// A bundle that records no GPUs (written by [`save_tuning_bundle`] or CubeCL itself) is
/// mounted as it is. A bundle tuned on `cuda:0` serves `cuda:0` only: towers on other indices
/// tune again.
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
        let tuned_on = bundle_gpus(file)?;
        refuse_other_gpus(file, &tuned_on, &gpu_records(devices))?;
    }
    cubecl_environment::environment::load(file);
    Ok(())
}

/// The GPUs the bundle at `file` records, after saying what it is on stderr; an error naming
/// the file when it is no bundle.
#[cfg(feature = "gpu")]
fn bundle_gpus(file: &Path) -> Result<Vec<String>> {
    let bundle = cubecl_environment::bundle::SqliteBundle::open(file).map_err(|e| {
        Error::Config(format!(
            "{} is not a tuning bundle (--save-tuning writes one): {e}",
            file.display()
        ))
    })?;
    let manifest = bundle.manifest();
    manifest.warn_on_version_mismatch();
    let gpus: Vec<String> = (manifest.environments.iter())
        .flat_map(|env| env.devices.iter().cloned())
        .collect();
    eprintln!(
        "tuning: loading {} (CubeCL {}, tuned on {})",
        file.display(),
        manifest.cubecl_version,
        match gpus.is_empty() {
            true => "GPUs not recorded".to_string(),
            false => gpus.join(", "),
        }
    );
    Ok(gpus)
}

/// An error naming `file` when it records GPUs (`entry: GPU`, as [`gpu_records`] writes them)
/// and one of the run's `gpus` is not among them.
#[cfg(feature = "gpu")]
fn refuse_other_gpus(file: &Path, tuned_on: &[String], gpus: &[String]) -> Result<()> {
    let gpu = |record: &str| {
        record
            .split_once(": ")
            .map_or(record, |(_, gpu)| gpu)
            .to_string()
    };
    let tuned: Vec<String> = tuned_on.iter().map(|r| gpu(r)).collect();
    let others: Vec<&String> = (gpus.iter())
        .filter(|record| !tuned.contains(&gpu(record)))
        .collect();
    if tuned.is_empty() || others.is_empty() {
        return Ok(());
    }
    Err(Error::Config(format!(
        "the tuning bundle {} was tuned on {}, not on this run's {}: CubeCL finds tuned kernels \
         by device index, not by GPU, so this run would take another GPU's choices. Tune on \
         this GPU instead, or load a bundle saved on it",
        file.display(),
        tuned_on.join(", "),
        others
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join(", "),
    )))
}

/// `devices`' GPUs (those that tune, see [`tunes`]) as a bundle records them, once each: the
/// device list entry, then the GPU's name and what CubeCL compiles for it
/// (`cuda:0: NVIDIA H100 PCIe (ptx_sm90)`). Opens the devices.
#[cfg(feature = "gpu")]
fn gpu_records(devices: &[TowerDevice]) -> Vec<String> {
    let mut records = Vec::new();
    for tower in devices.iter().filter(|d| tunes(std::slice::from_ref(*d))) {
        if let Some(id) = tower.device().identity() {
            let record = format!("{}: {} ({})", tower.name(), id.name, id.fingerprint);
            if !records.contains(&record) {
                records.push(record);
            }
        }
    }
    records
}

/// Writes what this run tuned (and what it loaded) to `file`, one database another run loads
/// with [`load_tuning_bundle`]. It records no GPUs: [`save_tuning_bundle_for`] does.
pub fn save_tuning_bundle(file: &Path) -> Result<()> {
    save_tuning_bundle_for(file, &[])
}

/// [`save_tuning_bundle`], recording `devices`' GPUs in the bundle, which
/// [`load_tuning_bundle_for`] checks a run's GPUs against.
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
        use cubecl_environment::bundle::{BundleFormat, EnvironmentInfo, ExportOptions, export};
        use cubecl_environment::environment;
        // What `environment::bundle().save(..)` does, with the GPUs in the manifest.
        let options = ExportOptions {
            name: environment::active().to_string(),
            format: BundleFormat::Sqlite,
            environments: vec![EnvironmentInfo {
                devices: gpu_records(devices),
                ..Default::default()
            }],
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

/// Whether any of `devices` tunes kernels: a local GPU backend (CubeCL's), not flex, ndarray
/// or a remote device (whose server tunes).
pub fn tunes(devices: &[TowerDevice]) -> bool {
    (devices.iter()).any(|d| !crate::devices::in_host_memory(d.device()) && !d.is_remote())
}

/// What a run tuned: its [`Display`](std::fmt::Display) is the line a program prints at its
/// end.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct TuningReport {
    /// Kernel-and-shape decisions made this run.
    pub tuned: u64,
    /// Where they are kept.
    pub file: PathBuf,
}

impl TuningReport {
    /// The decisions counted since [`show_tuning`]; `None` when it did not count them (a
    /// CubeCL config or the program's own `log` logger took the lines).
    pub fn now() -> Option<Self> {
        COUNTING.load(Ordering::Relaxed).then(|| Self {
            tuned: TUNED.load(Ordering::Relaxed),
            file: tuning_file(),
        })
    }
}

impl std::fmt::Display for TuningReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.tuned {
            0 => write!(
                f,
                "tuning: tuned none; every kernel's tuning loaded from {}",
                self.file.display()
            ),
            n => write!(
                f,
                "tuning: tuned {n} kernels, kept in {}",
                self.file.display()
            ),
        }
    }
}
