//! The winners a tuning bundle names, checked before a run takes them.
//!
//! CubeCL takes a tuned entry's winner (`fastest_index`) as the index of one of the kernel's
//! candidates without checking it (cubecl-runtime 0.11.3, `TunableSet::fastest`): a bundle
//! whose index names no candidate (edited, or corrupted on its way) ended the run's first step
//! with `index out of bounds: the len is 13 but the index is 99`, from a tower, naming neither
//! the file nor the kernel. CubeCL writes each entry with the result of every candidate it
//! timed, the winner's among them, so an entry whose winner is none of its timed candidates is
//! refused here, naming the file, the kernel and the entry.
//!
//! Not caught: an index that one of the recorded results also names but that is still past the
//! kernel's candidates (a crafted entry, consistent in itself); CubeCL's panic then ends the
//! step with an error, as before. Entries CubeCL cannot decode are left alone: it skips them
//! and tunes those kernels again.

use std::path::Path;

use cubecl_environment::bundle::{Bundle, SqliteBundle};
use cubecl_runtime::tune::PersistentCacheValue;

use crate::error::{Error, Result};

/// An error naming `file` when an entry of `bundle` (opened from it) names a winner that is
/// none of the candidates it timed (see the module's docs). Read before the bundle is mounted.
pub(super) fn check_winners(file: &Path, bundle: &SqliteBundle) -> Result<()> {
    for namespace in bundle.namespaces() {
        let Some(kernel) = namespace.strip_prefix("autotune/") else {
            continue;
        };
        if let Some((entry, winner)) = first_stray_winner(bundle, &namespace) {
            return Err(Error::Config(format!(
                "the tuning bundle {} names candidate {winner} as the winner of its entry \
                 {entry} for `{kernel}`, a candidate it never timed: the file is damaged or \
                 was edited. Load another, or tune again without it",
                file.display()
            )));
        }
    }
    Ok(())
}

/// The first entry of `namespace` (counted from 1) whose winner is none of its timed
/// candidates, and that winner.
fn first_stray_winner(bundle: &SqliteBundle, namespace: &str) -> Option<(usize, usize)> {
    let mut entry = 0;
    let mut stray = None;
    bundle.scan(namespace, &mut |_key, value| {
        entry += 1;
        if stray.is_some() {
            return;
        }
        let Ok(tuned) = ciborium::from_reader::<PersistentCacheValue, _>(value) else {
            return;
        };
        if !timed(&tuned, tuned.fastest_index) {
            stray = Some((entry, tuned.fastest_index));
        }
    });
    stray
}

/// Whether `tuned` holds a result for candidate `index` that ran.
fn timed(tuned: &PersistentCacheValue, index: usize) -> bool {
    (tuned.results.iter()).any(|result| result.outcome.as_ref().is_ok_and(|ran| ran.index == index))
}
