//! The protobuf messages of TF's event files (`event.proto`, `summary.proto`,
//! `histogram.proto`): the fields the TF 1.x trainers wrote, declared with prost's derive so
//! that no `protoc` runs at build time. Field numbers are TF's.

use prost::{Enumeration, Message, Oneof};

/// `tensorflow.Event`: one record of an event file.
#[derive(Clone, PartialEq, Message)]
pub struct Event {
    /// Seconds since the Unix epoch.
    #[prost(double, tag = "1")]
    pub wall_time: f64,
    /// The training step.
    #[prost(int64, tag = "2")]
    pub step: i64,
    /// What the event carries.
    #[prost(oneof = "What", tags = "3, 5, 7")]
    pub what: Option<What>,
    /// Which program wrote the file (on the first event).
    #[prost(message, optional, tag = "10")]
    pub source_metadata: Option<SourceMetadata>,
}

/// `Event.what`.
#[derive(Clone, PartialEq, Oneof)]
pub enum What {
    /// The first event of a file: `brain.Event:2`.
    #[prost(string, tag = "3")]
    FileVersion(String),
    /// Summary values of one step.
    #[prost(message, tag = "5")]
    Summary(Summary),
    /// A session starting (or stopping).
    #[prost(message, tag = "7")]
    SessionLog(SessionLog),
}

/// `tensorflow.SourceMetadata`.
#[derive(Clone, PartialEq, Message)]
pub struct SourceMetadata {
    /// The writer's name.
    #[prost(string, tag = "1")]
    pub writer: String,
}

/// `tensorflow.SessionLog`. A `START` at step `s` tells TensorBoard that a run restarted from
/// step `s`: it drops the events of earlier files at `s` and later (a crashed run's tail).
#[derive(Clone, PartialEq, Message)]
pub struct SessionLog {
    /// A [`SessionStatus`].
    #[prost(enumeration = "SessionStatus", tag = "1")]
    pub status: i32,
    /// The checkpoint, for `CHECKPOINT`.
    #[prost(string, tag = "2")]
    pub checkpoint_path: String,
    /// A free-form message.
    #[prost(string, tag = "3")]
    pub msg: String,
}

/// `SessionLog.SessionStatus`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Enumeration)]
#[repr(i32)]
pub enum SessionStatus {
    /// Unset.
    StatusUnspecified = 0,
    /// A session (re)started.
    Start = 1,
    /// A session stopped.
    Stop = 2,
    /// A checkpoint was written.
    Checkpoint = 3,
}

/// `tensorflow.Summary`: the values of one step.
#[derive(Clone, PartialEq, Message)]
pub struct Summary {
    /// One per tag.
    #[prost(message, repeated, tag = "1")]
    pub value: Vec<Value>,
}

/// `Summary.Value`: one tagged scalar, image or histogram.
#[derive(Clone, PartialEq, Message)]
pub struct Value {
    /// The name TensorBoard shows, e.g. `loss` or `tower_0/loss`.
    #[prost(string, tag = "1")]
    pub tag: String,
    /// The value.
    #[prost(oneof = "Kind", tags = "2, 4, 5")]
    pub kind: Option<Kind>,
}

/// `Summary.Value.value`.
#[derive(Clone, PartialEq, Oneof)]
pub enum Kind {
    /// A scalar.
    #[prost(float, tag = "2")]
    SimpleValue(f32),
    /// An encoded image.
    #[prost(message, tag = "4")]
    Image(Image),
    /// A histogram.
    #[prost(message, tag = "5")]
    Histo(HistogramProto),
}

/// `Summary.Image`.
#[derive(Clone, PartialEq, Message)]
pub struct Image {
    /// Pixels.
    #[prost(int32, tag = "1")]
    pub height: i32,
    /// Pixels.
    #[prost(int32, tag = "2")]
    pub width: i32,
    /// Channels: 1 grey, 3 RGB, 4 RGBA.
    #[prost(int32, tag = "3")]
    pub colorspace: i32,
    /// PNG bytes.
    #[prost(bytes = "vec", tag = "4")]
    pub encoded_image_string: Vec<u8>,
}

/// `tensorflow.HistogramProto`: bucket `i` counts the values in
/// `[bucket_limit[i - 1], bucket_limit[i])`.
#[derive(Clone, PartialEq, Message)]
pub struct HistogramProto {
    /// Smallest value.
    #[prost(double, tag = "1")]
    pub min: f64,
    /// Largest value.
    #[prost(double, tag = "2")]
    pub max: f64,
    /// Number of values.
    #[prost(double, tag = "3")]
    pub num: f64,
    /// Sum of the values.
    #[prost(double, tag = "4")]
    pub sum: f64,
    /// Sum of their squares.
    #[prost(double, tag = "5")]
    pub sum_squares: f64,
    /// Right edges of the buckets.
    #[prost(double, repeated, tag = "6")]
    pub bucket_limit: Vec<f64>,
    /// Counts.
    #[prost(double, repeated, tag = "7")]
    pub bucket: Vec<f64>,
}

impl Value {
    /// A scalar value.
    pub fn scalar(tag: impl Into<String>, value: f32) -> Self {
        Self {
            tag: tag.into(),
            kind: Some(Kind::SimpleValue(value)),
        }
    }

    /// A histogram value.
    pub fn histogram(tag: impl Into<String>, histo: HistogramProto) -> Self {
        Self {
            tag: tag.into(),
            kind: Some(Kind::Histo(histo)),
        }
    }

    /// An image value.
    pub fn image(tag: impl Into<String>, image: Image) -> Self {
        Self {
            tag: tag.into(),
            kind: Some(Kind::Image(image)),
        }
    }
}
