//! [`Timeline`]: what each thread of a run did when, as a Chrome trace (`chrome://tracing`,
//! <https://ui.perfetto.dev>): one process per rank, one track for the caller's thread, one per
//! tower and one for the exchange across ranks.
//!
//! The towers record each tower's forward, backward and reduction, the exchange's buckets (from
//! the moment one is handed to the ranks to the moment its sum is back), and the update; the
//! trainer adds the input wait, the step and the checkpoint. Off (the default), a span costs a
//! branch. A timeline can also only follow the main track's current phase, without recording
//! ([`Timeline::following`]): what a rank's watchdog reports when it is stuck.
//!
//! A recording timeline streams to its file as the run goes (Chrome's JSON object format):
//! events are serialized as they end and written when the main track's outermost span (the
//! trainer's step) ends, when a second has passed since the last write, or when 64 KiB are
//! pending, each write ending with the closing `]}` that the next write overwrites. Memory
//! stays bounded, and the file is valid JSON after every write, so a run killed (a second
//! SIGTERM, an abort, a timeout) leaves a trace that parses, missing only the step under way.

use std::fmt::Write as _;
use std::fs::File;
use std::io::{Seek, SeekFrom, Write as _};
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Written to the file at least this often while spans end.
const FLUSH_EVERY: Duration = Duration::from_secs(1);
/// Serialized events pending beyond this are written at once.
const FLUSH_BYTES: usize = 64 << 10;
/// What closes the file after every write; the next write starts over it.
const TAIL: &str = "\n]}\n";

/// The thread a span ran on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Track {
    /// The thread that calls [`Towers::step`](crate::Towers::step) (the trainer's).
    Main,
    /// Tower `i`'s thread.
    Tower(usize),
    /// The thread of the exchange across ranks, when it overlaps backward.
    Exchange,
}

impl Track {
    /// Chrome's thread id.
    fn tid(self) -> usize {
        match self {
            Track::Main => 0,
            Track::Tower(i) => i + 1,
            Track::Exchange => 1000,
        }
    }

    fn name(self) -> String {
        match self {
            Track::Main => "main".into(),
            Track::Tower(i) => format!("tower {i}"),
            Track::Exchange => "exchange across ranks".into(),
        }
    }
}

/// The trace file and the events not yet written to it.
struct Sink {
    file: File,
    /// Serialized events (each starting with `,\n`), not yet written.
    pending: String,
    /// Tracks whose name the trace already holds.
    named: Vec<Track>,
    last_write: Instant,
    /// The first write that failed; reported by [`Timeline::finish`].
    failed: Option<std::io::Error>,
}

impl Sink {
    /// Appends `pending` over the previous tail, then the tail again; the file is valid JSON
    /// before and after.
    fn write_pending(&mut self) {
        let written = self.file.seek(SeekFrom::End(-(TAIL.len() as i64)));
        let written = written
            .and_then(|_| self.file.write_all(self.pending.as_bytes()))
            .and_then(|()| self.file.write_all(TAIL.as_bytes()))
            .and_then(|()| self.file.flush());
        if let Err(e) = written {
            self.failed.get_or_insert(e);
        }
        self.pending.clear();
        self.last_write = Instant::now();
    }
}

struct Recorder {
    /// Chrome's process id: the rank.
    pid: usize,
    origin: Instant,
    /// Where spans go; `None` when only the main track's current phase is followed.
    sink: Option<Mutex<Sink>>,
    /// The main track's open spans, innermost last: its current phase.
    main: Mutex<Vec<(&'static str, Instant)>>,
}

/// A run's recorded spans, shared by every thread that records (cloning shares it); or off.
#[derive(Clone, Default)]
pub struct Timeline(Option<Arc<Recorder>>);

impl std::fmt::Debug for Timeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Timeline").field(&self.0.is_some()).finish()
    }
}

/// A span being recorded: it ends when dropped.
#[must_use = "a span ends when dropped"]
pub struct Span<'a> {
    timeline: &'a Timeline,
    name: &'static str,
    track: Track,
    start: Instant,
}

impl Drop for Span<'_> {
    fn drop(&mut self) {
        let mut outermost = false;
        if let (Some(recorder), Track::Main) = (&self.timeline.0, self.track) {
            let mut open = recorder.main.lock().unwrap_or_else(PoisonError::into_inner);
            open.pop();
            outermost = open.is_empty();
        }
        self.timeline
            .record(self.name, self.track, self.start, Instant::now());
        // The end of a step: what a killed run should not lose.
        if outermost {
            self.timeline.write_pending();
        }
    }
}

impl Timeline {
    /// A timeline that records, as process `rank`, streaming to `path` (created or
    /// truncated; see the module documentation).
    pub fn recording(rank: usize, path: &Path) -> std::io::Result<Self> {
        let mut file = File::create(path)?;
        write!(
            file,
            "{{\"traceEvents\":[\n{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":{rank},\"args\":{{\"name\":\"rank {rank}\"}}}}{TAIL}"
        )?;
        let sink = Sink {
            file,
            pending: String::new(),
            named: Vec::new(),
            last_write: Instant::now(),
            failed: None,
        };
        Ok(Self::new(rank, Some(sink)))
    }

    /// A timeline that records nothing but follows the main track's current phase
    /// ([`current_phase`](Self::current_phase)).
    pub fn following(rank: usize) -> Self {
        Self::new(rank, None)
    }

    fn new(rank: usize, sink: Option<Sink>) -> Self {
        Self(Some(Arc::new(Recorder {
            pid: rank,
            origin: Instant::now(),
            sink: sink.map(Mutex::new),
            main: Mutex::new(Vec::new()),
        })))
    }

    /// Whether it records spans.
    pub fn is_on(&self) -> bool {
        self.0.as_ref().is_some_and(|r| r.sink.is_some())
    }

    /// A span of `name` on `track`, from now until the span is dropped.
    pub fn span(&self, name: &'static str, track: Track) -> Span<'_> {
        let start = Instant::now();
        if let (Some(recorder), Track::Main) = (&self.0, track) {
            let mut open = recorder.main.lock().unwrap_or_else(PoisonError::into_inner);
            open.push((name, start));
        }
        Span {
            timeline: self,
            name,
            track,
            start,
        }
    }

    /// The main track's innermost open span and when it began; `None` when none is open or
    /// the timeline is off.
    pub fn current_phase(&self) -> Option<(&'static str, Instant)> {
        let recorder = self.0.as_ref()?;
        let open = recorder.main.lock().unwrap_or_else(PoisonError::into_inner);
        open.last().copied()
    }

    /// A span of `name` on `track` from `start` to `end`: a complete event (`"X"`) in
    /// microseconds since the timeline started, after its track's name the first time.
    pub fn record(&self, name: impl Into<String>, track: Track, start: Instant, end: Instant) {
        let Some(recorder) = &self.0 else { return };
        let Some(sink) = &recorder.sink else { return };
        let pid = recorder.pid;
        let micros = |t: Instant| t.saturating_duration_since(recorder.origin).as_secs_f64() * 1e6;
        let mut sink = sink.lock().unwrap_or_else(PoisonError::into_inner);
        if !sink.named.contains(&track) {
            sink.named.push(track);
            let _ = write!(
                sink.pending,
                ",\n{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":{pid},\"tid\":{},\"args\":{{\"name\":{}}}}}",
                track.tid(),
                json_string(&track.name())
            );
        }
        let _ = write!(
            sink.pending,
            ",\n{{\"name\":{},\"ph\":\"X\",\"pid\":{pid},\"tid\":{},\"ts\":{:.1},\"dur\":{:.1}}}",
            json_string(&name.into()),
            track.tid(),
            micros(start),
            micros(end) - micros(start)
        );
        if sink.pending.len() >= FLUSH_BYTES || sink.last_write.elapsed() >= FLUSH_EVERY {
            sink.write_pending();
        }
    }

    /// Writes the events pending, if any.
    fn write_pending(&self) {
        if let Some(sink) = self.0.as_ref().and_then(|r| r.sink.as_ref()) {
            let mut sink = sink.lock().unwrap_or_else(PoisonError::into_inner);
            if !sink.pending.is_empty() {
                sink.write_pending();
            }
        }
    }

    /// Writes the events still pending; the first error any write met, if one did.
    pub fn finish(&self) -> std::io::Result<()> {
        let Some(sink) = self.0.as_ref().and_then(|r| r.sink.as_ref()) else {
            return Ok(());
        };
        let mut sink = sink.lock().unwrap_or_else(PoisonError::into_inner);
        sink.write_pending();
        match sink.failed.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// `s` as a JSON string literal.
fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The trace as JSON, parsed.
    fn parsed(path: &Path) -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
    }

    #[test]
    fn spans_stream_as_complete_events_on_named_tracks_and_the_file_always_parses() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("timeline.json");
        let timeline = Timeline::recording(2, &path).unwrap();
        assert_eq!(parsed(&path)["traceEvents"].as_array().unwrap().len(), 1);
        {
            let _step = timeline.span("step", Track::Main);
            let _pass = timeline.span("backward", Track::Tower(1));
        }
        timeline.record(
            "bucket \"0\"",
            Track::Exchange,
            Instant::now(),
            Instant::now(),
        );
        timeline.finish().unwrap();
        let json = std::fs::read_to_string(&path).unwrap();
        assert!(json.contains("\"name\":\"backward\",\"ph\":\"X\",\"pid\":2,\"tid\":2"));
        assert!(json.contains("\"args\":{\"name\":\"tower 1\"}"));
        assert!(json.contains("bucket \\\"0\\\""));
        let events = parsed(&path)["traceEvents"].as_array().unwrap().clone();
        let complete = events.iter().filter(|e| e["ph"] == "X").count();
        assert_eq!((events.len(), complete), (7, 3), "{events:?}");
        // Past the size bound, events are written without waiting for the next second (or
        // `finish`), and every write leaves a file that parses.
        for i in 0..FLUSH_BYTES / 40 {
            timeline.record(
                format!("span {i}"),
                Track::Main,
                Instant::now(),
                Instant::now(),
            );
        }
        let written = parsed(&path)["traceEvents"].as_array().unwrap().len();
        assert!(written > 7, "{written} events in the file before finish");
        let off = Timeline::default();
        drop(off.span("step", Track::Main));
        assert!(!off.is_on() && off.finish().is_ok());
        // Following: the innermost open main span, and nothing recorded.
        let following = Timeline::following(0);
        let step = following.span("step", Track::Main);
        let input = following.span("input", Track::Main);
        assert_eq!(following.current_phase().map(|p| p.0), Some("input"));
        drop(input);
        assert_eq!(following.current_phase().map(|p| p.0), Some("step"));
        drop(step);
        assert_eq!(following.current_phase(), None);
        assert!(!following.is_on());
    }
}
