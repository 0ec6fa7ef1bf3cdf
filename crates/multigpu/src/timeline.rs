//! [`Timeline`]: what each thread of a run did when, as a Chrome trace (`chrome://tracing`,
//! <https://ui.perfetto.dev>): one process per rank, one track for the caller's thread, one per
//! tower and one for the exchange across ranks.
//!
//! The towers record each tower's forward, backward and reduction, the exchange's buckets (from
//! the moment one is handed to the ranks to the moment its sum is back), and the update; the
//! trainer adds the input wait, the step and the checkpoint. Off (the default), a span costs a
//! branch. A timeline can also only follow the main track's current phase, without recording
//! ([`Timeline::following`]): what a rank's watchdog reports when it is stuck.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

/// The thread a span ran on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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

struct Event {
    name: String,
    track: Track,
    start: Instant,
    end: Instant,
}

struct Recorder {
    /// Chrome's process id: the rank.
    pid: usize,
    origin: Instant,
    /// Whether spans are kept (else only the main track's current phase is followed).
    recording: bool,
    events: Mutex<Vec<Event>>,
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
        if let (Some(recorder), Track::Main) = (&self.timeline.0, self.track) {
            let mut open = recorder.main.lock().unwrap_or_else(PoisonError::into_inner);
            open.pop();
        }
        self.timeline
            .record(self.name, self.track, self.start, Instant::now());
    }
}

impl Timeline {
    /// A timeline that records, as process `rank`.
    pub fn recording(rank: usize) -> Self {
        Self::new(rank, true)
    }

    /// A timeline that records nothing but follows the main track's current phase
    /// ([`current_phase`](Self::current_phase)).
    pub fn following(rank: usize) -> Self {
        Self::new(rank, false)
    }

    fn new(rank: usize, recording: bool) -> Self {
        Self(Some(Arc::new(Recorder {
            pid: rank,
            origin: Instant::now(),
            recording,
            events: Mutex::new(Vec::new()),
            main: Mutex::new(Vec::new()),
        })))
    }

    /// Whether it records spans.
    pub fn is_on(&self) -> bool {
        self.0.as_ref().is_some_and(|r| r.recording)
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

    /// A span of `name` on `track` from `start` to `end`.
    pub fn record(&self, name: impl Into<String>, track: Track, start: Instant, end: Instant) {
        if let Some(recorder) = self.0.as_ref().filter(|r| r.recording) {
            let event = Event {
                name: name.into(),
                track,
                start,
                end,
            };
            let mut events = recorder
                .events
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            events.push(event);
        }
    }

    /// The spans so far as `(name, track, duration in seconds)`, in the order they ended.
    pub fn spans(&self) -> Vec<(String, Track, f64)> {
        let Some(recorder) = &self.0 else {
            return Vec::new();
        };
        let events = recorder
            .events
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        (events.iter())
            .map(|e| (e.name.clone(), e.track, (e.end - e.start).as_secs_f64()))
            .collect()
    }

    /// The trace in Chrome's JSON format: `{"traceEvents": [...]}`, complete events (`"X"`)
    /// in microseconds since the timeline started, and the names of the process and tracks.
    pub fn to_json(&self) -> String {
        let Some(recorder) = &self.0 else {
            return "{\"traceEvents\":[]}".into();
        };
        let events = recorder
            .events
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let pid = recorder.pid;
        let micros = |t: Instant| t.saturating_duration_since(recorder.origin).as_secs_f64() * 1e6;
        let mut out = String::from("{\"traceEvents\":[\n");
        let _ = write!(
            out,
            "{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":{pid},\"args\":{{\"name\":\"rank {pid}\"}}}}"
        );
        let mut tracks: Vec<Track> = events.iter().map(|e| e.track).collect();
        tracks.sort_by_key(|t| t.tid());
        tracks.dedup();
        for track in tracks {
            let _ = write!(
                out,
                ",\n{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":{pid},\"tid\":{},\"args\":{{\"name\":{}}}}}",
                track.tid(),
                json_string(&track.name())
            );
        }
        for e in events.iter() {
            let _ = write!(
                out,
                ",\n{{\"name\":{},\"ph\":\"X\",\"pid\":{pid},\"tid\":{},\"ts\":{:.1},\"dur\":{:.1}}}",
                json_string(&e.name),
                e.track.tid(),
                micros(e.start),
                micros(e.end) - micros(e.start)
            );
        }
        out.push_str("\n]}\n");
        out
    }

    /// Writes [`to_json`](Self::to_json) to `path`.
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        std::fs::write(path, self.to_json())
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

    #[test]
    fn spans_become_complete_events_on_named_tracks() {
        let timeline = Timeline::recording(2);
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
        let json = timeline.to_json();
        assert!(json.contains("\"name\":\"backward\",\"ph\":\"X\",\"pid\":2,\"tid\":2"));
        assert!(json.contains("\"args\":{\"name\":\"tower 1\"}"));
        assert!(json.contains("bucket \\\"0\\\""));
        assert_eq!(timeline.spans().len(), 3);
        let off = Timeline::default();
        drop(off.span("step", Track::Main));
        assert!(off.spans().is_empty());
        // Following: the innermost open main span, and nothing recorded.
        let following = Timeline::following(0);
        let step = following.span("step", Track::Main);
        let input = following.span("input", Track::Main);
        assert_eq!(following.current_phase().map(|p| p.0), Some("input"));
        drop(input);
        assert_eq!(following.current_phase().map(|p| p.0), Some("step"));
        drop(step);
        assert_eq!(following.current_phase(), None);
        assert!(following.spans().is_empty() && !following.is_on());
    }
}
