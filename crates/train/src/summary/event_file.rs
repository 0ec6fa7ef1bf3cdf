//! Event files: what TensorBoard reads from a train directory.
//!
//! An event file is a TFRecord file (towers-data's framing: length, masked CRC32C of the
//! length, data, masked CRC32C of the data) of [`Event`] protos. The first event says
//! `file_version: "brain.Event:2"`; the others carry summaries with their step and wall time.
//! The name is TF's, `events.out.tfevents.<unix seconds>.<hostname>`, so every run (a resumed
//! one too) writes a new file beside the old ones and TensorBoard reads them all in order.
//!
//! Writes go through a buffer that is flushed and synced to disk when [`EventWriter::flush`]
//! is called and, at the latest, with the first write or [`EventWriter::flush_if_due`] that
//! comes `flush_every` after the last flush (TF's `flush_secs`).

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use prost::Message;
use towers_data::tfrecord::{self, TfRecordWriter};

use crate::error::{Error, Result};
use crate::summary::proto::{
    Event, SessionLog, SessionStatus, SourceMetadata, Summary, Value, What,
};

/// The version string of the first event, as TF writes it.
pub const FILE_VERSION: &str = "brain.Event:2";

/// Appends events to a new event file.
#[derive(Debug)]
pub struct EventWriter {
    path: PathBuf,
    out: BufWriter<File>,
    flush_every: Duration,
    last_flush: Instant,
}

impl EventWriter {
    /// Creates a new event file in `dir` (created if missing) and writes its first event.
    /// A name already taken (two runs in the same second) gets a `.1`, `.2`, ... suffix.
    pub fn create(dir: &Path, flush_every: Duration) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(Error::io(dir))?;
        let host = gethostname::gethostname().to_string_lossy().into_owned();
        let base = format!("events.out.tfevents.{:010}.{host}", wall_time() as u64);
        let (path, file) = create_new(dir, &base)?;
        let mut writer = Self {
            path,
            out: BufWriter::new(file),
            flush_every,
            last_flush: Instant::now(),
        };
        writer.write(&Event {
            wall_time: wall_time(),
            step: 0,
            what: Some(What::FileVersion(FILE_VERSION.into())),
            source_metadata: Some(SourceMetadata {
                writer: "burn-towers".into(),
            }),
        })?;
        writer.flush()?;
        Ok(writer)
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes the summary `values` of `step`, stamped with the current time.
    pub fn summary(&mut self, step: u64, values: Vec<Value>) -> Result<()> {
        self.write(&Event {
            wall_time: wall_time(),
            step: step as i64,
            what: Some(What::Summary(Summary { value: values })),
            source_metadata: None,
        })
    }

    /// Says that a session (re)started at `step`: TensorBoard then drops what earlier files
    /// wrote for `step` and later, so a resumed run continues one curve (TF's Supervisor wrote
    /// it on every start).
    pub fn session_start(&mut self, step: u64) -> Result<()> {
        self.write(&Event {
            wall_time: wall_time(),
            step: step as i64,
            what: Some(What::SessionLog(SessionLog {
                status: SessionStatus::Start as i32,
                ..SessionLog::default()
            })),
            source_metadata: None,
        })
    }

    /// Appends `event`, then flushes if the last flush is `flush_every` old.
    pub fn write(&mut self, event: &Event) -> Result<()> {
        TfRecordWriter::new(&mut self.out)
            .write(&event.encode_to_vec())
            .map_err(Error::io(&self.path))?;
        self.flush_if_due()
    }

    /// Flushes when the last flush is `flush_every` old.
    pub fn flush_if_due(&mut self) -> Result<()> {
        if self.last_flush.elapsed() >= self.flush_every {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes everything buffered to the file and syncs it to disk.
    pub fn flush(&mut self) -> Result<()> {
        self.out.flush().map_err(Error::io(&self.path))?;
        self.out
            .get_ref()
            .sync_data()
            .map_err(Error::io(&self.path))?;
        self.last_flush = Instant::now();
        Ok(())
    }
}

/// Seconds since the Unix epoch.
fn wall_time() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// A new file `dir/base`, or `dir/base.N` for the first free `N`.
fn create_new(dir: &Path, base: &str) -> Result<(PathBuf, File)> {
    for n in 0.. {
        let name = match n {
            0 => base.to_string(),
            n => format!("{base}.{n}"),
        };
        let path = dir.join(name);
        match OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(file) => return Ok((path, file)),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(Error::io(path)(e)),
        }
    }
    unreachable!("some suffix is free")
}

/// The events of the event file `path`, in order. A bad length or data CRC, a truncated record
/// or a record that is not an `Event` is an error naming the file and the record.
pub fn read_events(path: &Path) -> Result<Vec<Event>> {
    let bad = |e: String| Error::io(path)(std::io::Error::new(ErrorKind::InvalidData, e));
    let spans = tfrecord::index(path).map_err(|e| bad(towers_data::ErrorChain(&e).to_string()))?;
    let bytes = std::fs::read(path).map_err(Error::io(path))?;
    spans
        .iter()
        .enumerate()
        .map(|(i, span)| {
            let start = span.offset as usize;
            let span_bytes = (bytes.get(start..start + span.len))
                .ok_or_else(|| bad(format!("record {i}: the file shrank while it was read")))?;
            let data = tfrecord::record_data(path, i, span_bytes)
                .map_err(|e| bad(towers_data::ErrorChain(&e).to_string()))?;
            Event::decode(data).map_err(|e| bad(format!("record {i}: not an Event: {e}")))
        })
        .collect()
}

/// The event files of `dir` (names containing `tfevents`), oldest name first.
pub fn event_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(Error::io(dir))? {
        let path = entry.map_err(Error::io(dir))?.path();
        if path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().contains("tfevents"))
        {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}
