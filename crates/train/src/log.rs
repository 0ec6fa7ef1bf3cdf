//! Training logs: TF's console line, a progress bar on a terminal, and JSON lines.
//!
//! Every `log_every` steps one [`LogEntry`] is printed as TF printed it,
//! `step 120, loss = 2.31 (1450.2 examples/sec; 0.088 sec/batch)`, and appended to
//! `train_log.jsonl` in the train directory, one JSON object per line. When stderr is a
//! terminal a progress bar shows the steps done and the latest loss; lines print above it.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::{Deserialize, Serialize};

use towers_multigpu::eprint_line;

use crate::error::{Error, Result};

/// One line of the training log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogEntry {
    /// Updates applied.
    pub step: u64,
    /// The loss of the step's batch (all towers, weighted by their slices).
    pub loss: f64,
    /// The mean loss of the steps since the previous entry, this one included (weighted by
    /// their examples), and how many steps that is: one batch's loss is noisy where the
    /// batches are small, the mean shows the trend. Absent in logs of earlier versions.
    #[serde(default)]
    pub mean_loss: Option<MeanLoss>,
    /// The learning rate that step used.
    pub lr: f64,
    /// Examples per second of training time since the previous entry.
    pub examples_per_sec: f64,
    /// Seconds per step (input wait, towers, update, averages) since the previous entry.
    pub sec_per_batch: f64,
    /// How full the example queue was (0 to 1): near 0, the input starves the towers.
    pub input_queue_fill: f32,
    /// How full the prefetched-batch queue was (0 to 1).
    pub batch_queue_fill: f32,
    /// Corrupt input records skipped so far in this run (`skip_corrupt_records`).
    #[serde(default)]
    pub corrupt_records_skipped: u64,
    /// The step's metrics by name (`accuracy` when the loss gave predictions, and the
    /// model's own); absent when there are none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metrics: BTreeMap<String, f64>,
}

/// The mean loss over the steps a log entry covers.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MeanLoss {
    /// The mean.
    pub loss: f64,
    /// Steps averaged.
    pub steps: u64,
}

impl LogEntry {
    /// The TF trainers' line: `step 120, loss = 2.31 (1450.2 examples/sec; 0.088 sec/batch)`;
    /// then the mean loss since the previous line when that covers several steps, the step's
    /// metrics, and the corrupt records skipped so far when there are any.
    pub fn line(&self) -> String {
        let mut line = format!(
            "step {}, loss = {:.2} ({:.1} examples/sec; {:.3} sec/batch)",
            self.step, self.loss, self.examples_per_sec, self.sec_per_batch
        );
        if let Some(mean) = self.mean_loss.filter(|m| m.steps > 1) {
            line += &format!(", mean loss {:.3} over {} steps", mean.loss, mean.steps);
        }
        for (name, value) in &self.metrics {
            line += &format!(", {name} {value:.4}");
        }
        if self.corrupt_records_skipped > 0 {
            line += &format!(", {} corrupt records skipped", self.corrupt_records_skipped);
        }
        line
    }
}

/// Where a run's log goes.
#[derive(Debug)]
pub struct TrainLog {
    path: PathBuf,
    /// None for a log that writes and prints nothing (a rank other than 0).
    file: Option<File>,
    bar: ProgressBar,
}

impl TrainLog {
    /// Appends to `path` (a resumed run continues the file, cutting a last line left
    /// half-written by a crash or a full disk, with a warning) and shows a progress bar from
    /// `step` to `max_steps` when stderr is a terminal.
    pub fn open(path: &Path, step: u64, max_steps: u64) -> Result<Self> {
        let file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(path)
            .map_err(Error::io(path))?;
        cut_torn_line(&file, path)?;
        // indicatif draws nothing when stderr is not a terminal.
        let bar = ProgressBar::with_draw_target(Some(max_steps), ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template(
                "{bar:30.cyan/blue} {pos}/{len} steps  {per_sec}  eta {eta}  {msg}",
            )
            .expect("a valid template"),
        );
        bar.set_position(step);
        Ok(Self {
            path: path.to_path_buf(),
            file: Some(file),
            bar,
        })
    }

    /// A log that writes and prints nothing: the log of a rank other than 0, whose lines
    /// would repeat rank 0's.
    pub fn silent() -> Self {
        Self {
            path: PathBuf::new(),
            file: None,
            bar: ProgressBar::hidden(),
        }
    }

    /// Prints `entry`'s line and appends it to the JSON log.
    pub fn record(&mut self, entry: &LogEntry) -> Result<()> {
        let Some(file) = &mut self.file else {
            return Ok(());
        };
        let mut json = serde_json::to_string(entry).expect("an entry always serializes");
        json.push('\n');
        file.write_all(json.as_bytes())
            .map_err(Error::io(&self.path))?;
        self.println(&entry.line());
        self.bar.set_message(format!("loss {:.3}", entry.loss));
        Ok(())
    }

    /// Moves the progress bar to `step`.
    pub fn progress(&self, step: u64) {
        self.bar.set_position(step);
    }

    /// Prints a line on stdout, above the progress bar when there is one (the bar, on
    /// stderr, is taken away while the line prints: a stdout sent to a file gets every line).
    pub fn println(&self, line: &str) {
        if self.file.is_none() {
            return;
        }
        self.bar.suspend(|| println!("{line}"));
    }

    /// Removes the progress bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// Cuts the end of `file` (`path`) back to its last whole line: a line the last run left
/// half-written (a crash, a full disk), after which this run's first line would land on it.
/// Says on stderr how many bytes went.
fn cut_torn_line(file: &File, path: &Path) -> Result<()> {
    use std::os::unix::fs::FileExt;
    let io = |error| Error::io(path)(error);
    let len = file.metadata().map_err(io)?.len();
    let mut end = len;
    let mut chunk = [0u8; 4096];
    while end > 0 {
        let start = end.saturating_sub(chunk.len() as u64);
        let piece = &mut chunk[..(end - start) as usize];
        file.read_exact_at(piece, start).map_err(io)?;
        if let Some(newline) = piece.iter().rposition(|&b| b == b'\n') {
            end = start + newline as u64 + 1;
            break;
        }
        end = start;
    }
    if end < len {
        file.set_len(end).map_err(io)?;
        eprint_line(&format!(
            "warning: {}: its last {} bytes, a line cut short (the last run ended while \
             writing it), are cut",
            path.display(),
            len - end
        ));
    }
    Ok(())
}

/// The entries of a JSON log, in step order. A run resumed from a checkpoint logs again the
/// steps after that checkpoint; the later lines replace the earlier ones. A last line cut
/// short (a run that ended while writing it) is left out.
pub fn read_log(path: &Path) -> Result<Vec<LogEntry>> {
    let file = File::open(path).map_err(Error::io(path))?;
    let mut entries: Vec<LogEntry> = Vec::new();
    let mut reader = BufReader::new(file);
    let mut line = String::new();
    for i in 0.. {
        line.clear();
        if reader.read_line(&mut line).map_err(Error::io(path))? == 0 {
            break;
        }
        if line.trim().is_empty() {
            continue;
        }
        // Only the file's last line can lack its newline.
        let cut_short = !line.ends_with('\n');
        let entry: LogEntry = match serde_json::from_str(&line) {
            Ok(entry) => entry,
            Err(_) if cut_short => break,
            Err(error) => {
                let path = path.to_path_buf();
                return Err(Error::LogLine {
                    path,
                    line: i + 1,
                    error,
                });
            }
        };
        while entries.last().is_some_and(|last| last.step >= entry.step) {
            entries.pop();
        }
        entries.push(entry);
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use towers_testing::{assert_error_names, report};

    use super::*;

    fn entry(step: u64, loss: f64) -> LogEntry {
        LogEntry {
            step,
            loss,
            mean_loss: None,
            lr: 0.1,
            examples_per_sec: 1450.24,
            sec_per_batch: 0.08826,
            input_queue_fill: 0.5,
            batch_queue_fill: 1.0,
            corrupt_records_skipped: 0,
            metrics: BTreeMap::new(),
        }
    }

    #[test]
    fn line_has_the_tf_shape() {
        assert_eq!(
            entry(120, 2.3051).line(),
            "step 120, loss = 2.31 (1450.2 examples/sec; 0.088 sec/batch)"
        );
        let mean = |loss, steps| Some(MeanLoss { loss, steps });
        let averaged = LogEntry {
            mean_loss: mean(2.41234, 10),
            ..entry(120, 2.3051)
        };
        assert_eq!(
            averaged.line(),
            "step 120, loss = 2.31 (1450.2 examples/sec; 0.088 sec/batch), mean loss 2.412 over 10 steps"
        );
        let with_metrics = LogEntry {
            metrics: BTreeMap::from([("accuracy".to_string(), 0.75), ("tokens".to_string(), 12.0)]),
            ..entry(7, 1.0)
        };
        assert_eq!(
            with_metrics.line(),
            "step 7, loss = 1.00 (1450.2 examples/sec; 0.088 sec/batch), accuracy 0.7500, tokens 12.0000"
        );
        let one_step = LogEntry {
            mean_loss: mean(2.3051, 1),
            ..entry(1, 2.3051)
        };
        assert!(!one_step.line().contains("mean"));
    }

    #[test]
    fn logs_without_a_mean_loss_still_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("train_log.jsonl");
        let old = r#"{"step":10,"loss":2.5,"lr":0.1,"examples_per_sec":1.0,"sec_per_batch":1.0,"input_queue_fill":1.0,"batch_queue_fill":1.0}"#;
        std::fs::write(&path, format!("{old}\n")).unwrap();
        let entries = read_log(&path).unwrap();
        assert_eq!((entries[0].step, entries[0].mean_loss), (10, None));
    }

    #[test]
    fn json_lines_round_trip_and_resumed_steps_replace_old_ones() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("train_log.jsonl");
        let mut log = TrainLog::open(&path, 0, 100).unwrap();
        for (step, loss) in [(10, 3.0), (20, 2.5), (30, 2.0)] {
            log.record(&entry(step, loss)).unwrap();
        }
        drop(log);
        // Resumed from the checkpoint at step 20.
        let mut log = TrainLog::open(&path, 20, 100).unwrap();
        log.record(&entry(30, 1.9)).unwrap();
        log.record(&entry(40, 1.8)).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        for key in ["step", "loss", "lr", "examples_per_sec", "input_queue_fill"] {
            assert!(first.get(key).is_some(), "{key} missing from {first}");
        }
        let steps: Vec<(u64, f64)> = read_log(&path)
            .unwrap()
            .iter()
            .map(|e| (e.step, e.loss))
            .collect();
        assert_eq!(steps, [(10, 3.0), (20, 2.5), (30, 1.9), (40, 1.8)]);
    }

    #[test]
    fn a_line_that_is_not_an_entry_is_an_error_naming_the_line_with_the_json_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("train_log.jsonl");
        let mut log = TrainLog::open(&path, 0, 100).unwrap();
        log.record(&entry(10, 3.0)).unwrap();
        drop(log);
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str("{\"step\": 20, cut short\n");
        std::fs::write(&path, text).unwrap();
        let error = read_log(&path).unwrap_err();
        assert!(
            matches!(&error, Error::LogLine { path: p, line: 2, .. } if *p == path),
            "{error:?}"
        );
        let json =
            std::error::Error::source(&error).and_then(|e| e.downcast_ref::<serde_json::Error>());
        assert!(json.is_some_and(serde_json::Error::is_syntax), "{error:?}");
        assert_error_names(
            &report(&error),
            &["train_log.jsonl", "line 2", "key must be a string"],
        );
    }

    /// A run that ended while writing a line (a crash, a full disk) leaves it cut short: the
    /// log still reads, without it, and a resumed run cuts it before writing its own lines,
    /// which then read whole.
    #[test]
    fn a_line_cut_short_at_the_end_is_left_out_and_cut_on_resume() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("train_log.jsonl");
        let mut log = TrainLog::open(&path, 0, 100).unwrap();
        log.record(&entry(10, 3.0)).unwrap();
        log.record(&entry(20, 2.5)).unwrap();
        drop(log);
        let whole = std::fs::read(&path).unwrap();
        std::fs::write(&path, &whole[..whole.len() - 7]).unwrap();
        let steps =
            |path: &Path| -> Vec<u64> { read_log(path).unwrap().iter().map(|e| e.step).collect() };
        assert_eq!(steps(&path), [10]);
        let mut resumed = TrainLog::open(&path, 10, 100).unwrap();
        resumed.record(&entry(20, 2.4)).unwrap();
        drop(resumed);
        assert_eq!(steps(&path), [10, 20]);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 2, "{text}");
    }

    /// `/dev/full` fails every write with ENOSPC, as a full disk does.
    #[test]
    fn a_full_disk_is_an_error_naming_the_log() {
        let mut log = TrainLog::open(Path::new("/dev/full"), 0, 10).unwrap();
        let error = log.record(&entry(1, 2.0)).unwrap_err();
        let io = std::error::Error::source(&error).and_then(|e| e.downcast_ref::<std::io::Error>());
        assert_eq!(
            io.map(std::io::Error::kind),
            Some(std::io::ErrorKind::StorageFull),
            "{error:?}"
        );
        assert_error_names(&report(&error), &["/dev/full", "No space left on device"]);
    }
}
