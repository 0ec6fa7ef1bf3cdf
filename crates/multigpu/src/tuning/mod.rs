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
//! [`load_tuning_bundle_for`] checks that a file is one, was tuned on the run's GPUs and names
//! winners it timed (`winners.rs`), and mounts it in place of the database (`bundle.rs`);
//! [`check_tuning_bundle_for`] checks alone. Processes sharing the database open it one at a
//! time ([`open_tuning_database`], `database.rs`): opened at the same moment, some lost it.
//!
//! A `[cubecl]` section in `burn.toml` or a `cubecl.toml` (found from the working directory
//! up), or `CUBECL_DEBUG_LOG`, `CUBECL_AUTOTUNE_LEVEL`, ... in the environment, still decide
//! where CubeCL logs: [`show_tuning`] only gives the autotune logger a sink when they give it
//! none.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use cubecl_environment::config::RuntimeConfig;
use cubecl_environment::config::logger::LogCrateLevel;
use cubecl_runtime::config::CubeClRuntimeConfig;
use cubecl_runtime::config::autotune::AutotuneLogLevel;

use crate::devices::TowerDevice;
use crate::stderr_line::eprint_line;

mod bundle;
#[cfg(feature = "gpu")]
mod database;
#[cfg(feature = "gpu")]
mod gpus;
#[cfg(feature = "gpu")]
mod winners;
pub use bundle::{
    check_tuning_bundle_for, load_tuning_bundle, load_tuning_bundle_for, save_tuning_bundle,
    save_tuning_bundle_for,
};
#[cfg(feature = "gpu")]
pub use database::open_tuning_database;

/// [`open_tuning_database`] in a build without a GPU backend, which keeps no tuning database
/// (CubeCL's `persistence` comes with one): nothing to open. It is here so that code built
/// with and without one calls it alike.
#[cfg(not(feature = "gpu"))]
pub fn open_tuning_database() {}

/// Kernel-and-shape decisions CubeCL's tuner reported since [`show_tuning`].
static TUNED: AtomicU64 = AtomicU64::new(0);
/// When [`show_tuning`] ran.
static STARTED: OnceLock<Instant> = OnceLock::new();
/// Whether [`TUNED`] counts the decisions (our sink took CubeCL's autotune logger).
static COUNTING: AtomicBool = AtomicBool::new(false);

/// Whether CubeCL warned that its tuning database would not open or refused a write: what
/// this run tuned is then not kept for the next (see [`TuningReport::kept`]).
static NOT_KEPT: AtomicBool = AtomicBool::new(false);
/// Whether CubeCL refused a write because it had opened the database read-only.
static READ_ONLY: AtomicBool = AtomicBool::new(false);
/// CubeCL's warnings shown on stderr so far, each once: a database that will not open is
/// warned about once per table and tuned kernel, hundreds of times in a run.
static WARNED: Mutex<Vec<String>> = Mutex::new(Vec::new());
/// The most distinct CubeCL warnings shown; the rest are dropped, and the last shown says so.
const MOST_WARNINGS_SHOWN: usize = 10;

/// The `log` sink CubeCL's autotune logger writes to: each decision on stderr, numbered, with
/// the time since [`show_tuning`]. CubeCL's warnings go to stderr too, each once: without
/// them a tuning database that cannot be written looked like one that kept everything (the
/// next run tuned it all again, found with a database CubeCL opened read-only, 2026-11-30).
struct TuningLines;

/// Shows CubeCL's warning `record` on stderr unless it was shown already, and notes a
/// database trouble (a warning from cubecl-environment's `persistence`, which opens and writes
/// the database) in [`NOT_KEPT`].
fn warn_once(record: &log::Record<'_>) {
    if record.target().starts_with("cubecl_runtime::throughput") {
        // "Concurrent throughput measurement, keeping the existing value": another process
        // measured the device at the same moment, and CubeCL keeps the value it stored
        // (cubecl-runtime 0.11.3 `throughput/cache.rs`). Nothing is lost; not worth a warning.
        return;
    }
    if record
        .target()
        .starts_with("cubecl_environment::persistence")
    {
        NOT_KEPT.store(true, Ordering::Relaxed);
    }
    let message = format!("{}: {}", record.target(), record.args());
    if message.contains("database is readonly") {
        READ_ONLY.store(true, Ordering::Relaxed);
    }
    let mut warned = WARNED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if warned.len() >= MOST_WARNINGS_SHOWN || warned.contains(&message) {
        return;
    }
    let more = match warned.len() + 1 == MOST_WARNINGS_SHOWN {
        true => " (further CubeCL warnings not shown)",
        false => "",
    };
    eprint_line(&format!("towers: tuning: CubeCL warns, {message}{more}"));
    warned.push(message);
}

impl log::Log for TuningLines {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        let target = metadata.target();
        (target.starts_with("cubecl::autotune") && metadata.level() <= log::Level::Info)
            || metadata.level() <= log::Level::Warn
    }

    fn log(&self, record: &log::Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let target = record.target();
        if !target.starts_with("cubecl") {
            // The program's logger is ours (we took it only where it had none): its own
            // warnings and errors, and its crates', go to stderr as well.
            let level = record.level();
            return eprint_line(&format!("{level} {target}: {}", record.args()));
        }
        if !target.starts_with("cubecl::autotune") {
            return warn_once(record);
        }
        let message = record.args().to_string();
        // At CubeCL's `full` autotune log level (`CUBECL_DEBUG_OPTION=debug`), a decision comes
        // with a line per candidate, and each result loaded from the database with a checksum
        // line (cubecl-runtime 0.11.3 `tune/log.rs`, `tune/tuner.rs`): only decisions count.
        if !message.starts_with("Fastest result") {
            return eprint_line(&format!("towers: tuning: {message}"));
        }
        let tuned = TUNED.fetch_add(1, Ordering::Relaxed) + 1;
        let elapsed = STARTED.get().map_or(0.0, |t| t.elapsed().as_secs_f64());
        eprint_line(&format!(
            "towers: tuning kernel {tuned} ({elapsed:.1} s): {message}"
        ));
    }

    fn flush(&self) {}
}

/// Shows CubeCL's kernel tuning on stderr as it happens (see the module docs), unless a
/// CubeCL config or environment variable already gives its autotune logger a sink, or CubeCL
/// has read its config already. Call it first thing in `main`, before any device is used (and
/// before [`load_tuning_bundle`]). Returns whether the lines are counted (for
/// [`TuningReport`]).
///
/// The lines are counted where the program has no `log` logger: ours becomes it, and shows the
/// warnings and errors of every crate on stderr too. A program that sets up its own logger
/// (`env_logger::init()`, ...) does so before this call; CubeCL then writes the lines to stderr
/// itself, uncounted.
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

/// The devices towers have run on in this process, once each by name, as [`Towers::new`]
/// notes them.
///
/// [`Towers::new`]: crate::towers::Towers::new
static RAN_ON: Mutex<Vec<TowerDevice>> = Mutex::new(Vec::new());

/// Notes `towers` as run on in this process (see [`devices_run_on`]).
pub(crate) fn note_run_on(towers: &[TowerDevice]) {
    let mut ran_on = RAN_ON
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    for tower in towers {
        if ran_on.iter().all(|d| d.name() != tower.name()) {
            ran_on.push(tower.clone());
        }
    }
}

/// The devices towers have run on in this process, once each, in the order first used: the
/// GPUs a run's tuning is for, whichever named them (flags, a config file or the program's
/// code). A program ends with [`TuningReport`] and [`save_tuning_bundle_for`] on them.
pub fn devices_run_on() -> Vec<TowerDevice> {
    RAN_ON
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .clone()
}

/// Whether any of `devices` tunes kernels: a local GPU backend (CubeCL's), not flex, ndarray
/// or a remote device (whose server tunes).
pub fn tunes(devices: &[TowerDevice]) -> bool {
    devices.iter().any(device_tunes)
}

/// Whether `device` tunes kernels, as [`tunes`] says.
fn device_tunes(device: &TowerDevice) -> bool {
    !crate::devices::in_host_memory(device.device()) && !device.is_remote()
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
    /// Whether they were kept there: `false` when CubeCL warned that the database would not
    /// open or refused a write (the warnings are on stderr), so that the next run tunes again.
    pub kept: bool,
    /// Where CubeCL refused writes to a database it had opened read-only and Turso's
    /// shared-memory index lies beside it (`default.db-tshm`): that index, which SQLite
    /// checkpointing the database in place leaves stale (Python's `sqlite3`): unless another
    /// run is using the database, removing it lets the next run keep what it tunes.
    pub stale_index: Option<PathBuf>,
}

impl TuningReport {
    /// The decisions counted since [`show_tuning`]; `None` when it did not count them (a
    /// CubeCL config or the program's own `log` logger took the lines).
    pub fn now() -> Option<Self> {
        COUNTING.load(Ordering::Relaxed).then(|| {
            let file = tuning_file();
            Self {
                tuned: TUNED.load(Ordering::Relaxed),
                stale_index: stale_index(&file, READ_ONLY.load(Ordering::Relaxed)),
                file,
                kept: !NOT_KEPT.load(Ordering::Relaxed),
            }
        })
    }
}

/// Turso's shared-memory index beside the database `file` (`FILE-tshm`), where it is there and
/// CubeCL opened `file` read-only. CubeCL falls back to a read-only database for any failure
/// to open it for writing, and says why only at debug level; twice here (2026-11-30 and
/// 2026-12-04) the cause was an index left stale by SQLite checkpointing the database in place
/// (Python's `sqlite3`): every later run opened it read-only and tuned everything again, until
/// the index was removed.
fn stale_index(file: &std::path::Path, read_only: bool) -> Option<PathBuf> {
    let mut index = file.as_os_str().to_owned();
    index.push("-tshm");
    let index = PathBuf::from(index);
    (read_only && index.is_file()).then_some(index)
}

impl std::fmt::Display for TuningReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let file = self.file.display();
        match (self.tuned, self.kept) {
            (n, false) => {
                write!(
                    f,
                    "tuning: tuned {n} kernels, but could not keep them in {file} (CubeCL's \
                     warnings above): the next run tunes them again"
                )?;
                match &self.stale_index {
                    Some(index) => write!(
                        f,
                        ". CubeCL opened it read-only: unless another run is using it, remove \
                         {} (Turso's shared-memory index, left stale) and the next run keeps \
                         what it tunes",
                        index.display()
                    ),
                    None => Ok(()),
                }
            }
            (0, true) => write!(
                f,
                "tuning: tuned none; every kernel's tuning loaded from {file}"
            ),
            (n, true) => write!(f, "tuning: tuned {n} kernels, kept in {file}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(dir: &std::path::Path, read_only: bool) -> TuningReport {
        let file = dir.join("default.db");
        TuningReport {
            tuned: 3,
            stale_index: stale_index(&file, read_only),
            file,
            kept: false,
        }
    }

    /// Turso's index is named where CubeCL opened the database read-only and the index is
    /// there, and nowhere else.
    #[test]
    fn a_read_only_database_beside_its_index_names_the_index_to_remove() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("default.db"), b"").unwrap();
        let without_index = report(dir.path(), true);
        assert_eq!(without_index.stale_index, None);
        let index = dir.path().join("default.db-tshm");
        std::fs::write(&index, b"").unwrap();
        let read_only = report(dir.path(), true);
        assert_eq!(read_only.stale_index.as_ref(), Some(&index));
        let line = read_only.to_string();
        assert!(
            line.contains(&format!("remove {}", index.display())),
            "{line}"
        );
        assert_eq!(report(dir.path(), false).stale_index, None);
        assert!(!without_index.to_string().contains("remove"));
    }
}
