//! Evaluation summaries: `precision_at_1` (and `precision_at_5` where counted) of a checkpoint,
//! in an event file of their own in an eval directory, as TF's `cifar10_eval.py` kept them
//! beside, not in, the train directory.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::Result;
use crate::eval::Precision;
use crate::summary::event_file::EventWriter;
use crate::summary::proto::Value;

/// Writes `precision` of the checkpoint of `step` to a new event file in `eval_dir`, flushed;
/// returns the file.
pub fn write_precision(eval_dir: &Path, step: u64, precision: &Precision) -> Result<PathBuf> {
    let mut writer = EventWriter::create(eval_dir, Duration::ZERO)?;
    let mut values = vec![Value::scalar("precision_at_1", precision.at_1() as f32)];
    if let Some(at_5) = precision.at_5() {
        values.push(Value::scalar("precision_at_5", at_5 as f32));
    }
    writer.summary(step, values)?;
    writer.flush()?;
    Ok(writer.path().to_path_buf())
}
