//! Frozen parameters across a resume: each checkpoint's config records the dotted paths of the
//! parameters its run froze ([`frozen_params`]: `--trainable-scopes`, or a model of one's own
//! that calls `set_require_grad(false)`), and a resume that freezes others is refused. Its
//! optimizer state would not fit them: a parameter frozen then and trained now would start
//! without its momentum or moments, one trained then and frozen now would keep state it never
//! uses, and either goes on without a word.

use std::path::Path;

use burn::module::Module;
use towers_models::frozen_params;

use crate::error::{Error, Result};

/// The key of the frozen parameters' paths in a checkpoint's config.
const FROZEN: &str = "frozen_parameters";

/// The run's `config` (a JSON object) for a checkpoint of `model`: with its frozen parameters.
pub(super) fn with_frozen<M: Module>(
    mut config: serde_json::Value,
    model: &M,
) -> serde_json::Value {
    if let Some(fields) = config.as_object_mut() {
        fields.insert(FROZEN.into(), frozen_params(model).into());
    }
    config
}

/// Refuses the checkpoint `path`, whose run's config is `saved`, when that run froze other
/// parameters than `model` has frozen. A config that records none (a checkpoint from before
/// they were recorded) passes.
pub(super) fn same_frozen<M: Module>(
    saved: &serde_json::Value,
    model: &M,
    path: &Path,
) -> Result<()> {
    let Some(theirs) = saved.get(FROZEN).and_then(|f| f.as_array()) else {
        return Ok(());
    };
    let theirs: Vec<&str> = theirs.iter().filter_map(|p| p.as_str()).collect();
    let ours = frozen_params(model);
    if theirs == ours {
        return Ok(());
    }
    let differing = (theirs.iter().map(|p| p.to_string()))
        .filter(|p| !ours.contains(p))
        .chain(
            ours.iter()
                .filter(|p| !theirs.contains(&p.as_str()))
                .cloned(),
        )
        .next()
        .unwrap_or_default();
    Err(Error::Checkpoint {
        path: path.to_path_buf(),
        reason: format!(
            "written by a run that froze {} parameters, where this run freezes {} (`{differing}` \
             is frozen in one only): its optimizer state does not fit them; resume with the \
             same --trainable-scopes, or, to train others from its weights (Keras's second \
             fine-tuning phase), train in another --train-dir with --pretrained {}",
            theirs.len(),
            ours.len(),
            path.display(),
        ),
        error: None,
    })
}
