//! TensorBoard summaries: event files of scalars, histograms and images, as TF's trainers
//! wrote them to their train directories (`tensorboard --logdir TRAIN_DIR`).
//!
//! [`EventWriter`] writes the files, [`read_events`] reads them back; [`Histogram`] and
//! [`image_summary`] build values as TF's summary ops did; the trainer's own summaries are set
//! by [`SummaryConfig`]; [`write_precision`] records an evaluation.
//!
//! Hand-written rather than taken from `tensorboard-rs` (0.5.9, the only crate that writes
//! event files): it brings rust-protobuf 2 and a second `image` (0.23), panics on I/O errors,
//! has no reader, and takes histograms pre-bucketed; the framing (towers-data's TFRecord
//! writer) and prost were already here.

mod eval;
mod event_file;
mod histogram;
mod images;
pub mod proto;
mod train;

pub use eval::write_precision;
pub use event_file::{EventWriter, FILE_VERSION, event_files, read_events};
pub use histogram::{Histogram, default_bucket_limits};
pub use images::{image_summary, to_u8};
pub use train::SummaryConfig;
pub(crate) use train::{StepScalars, TrainSummaries};

#[cfg(test)]
mod tests;
