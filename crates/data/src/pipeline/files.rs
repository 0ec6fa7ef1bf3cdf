//! [`FileSource`]: what [`Pipeline`](super::Pipeline)'s readers do with dataset files: read a
//! chunk's bytes, decode and transform each record; and how its batcher packs the images into
//! one [`HostBatch`].

use std::sync::Arc;

use rand::SeedableRng;

use super::HostBatch;
use super::engine::{Entry, Source};
use super::layout::FileLayout;
use super::record_cursor::WorkItem;
use crate::buffer_pool::BufferPool;
use crate::error::{Error, Result};
use crate::format::{RecordReader, read_records};
use crate::image::Planes;
use crate::rng::Rng;
use crate::transforms::Transform;

/// One transformed example on its way to the batcher.
pub(crate) struct Sample {
    planes: Planes,
    label: i64,
}

/// A reader thread's open file and the bytes of its last chunk.
#[derive(Default)]
pub(crate) struct FileScratch {
    open: Option<(usize, RecordReader)>,
    bytes: Vec<u8>,
}

/// Dataset files, decoded and transformed into host batches.
pub(crate) struct FileSource {
    layout: Arc<FileLayout>,
    transform: Arc<dyn Transform>,
    /// Seeds every record's distortions, with its sequence number.
    seed: u64,
    /// Image buffers of batches the consumer dropped.
    buffers: BufferPool,
}

impl FileSource {
    /// The files of `layout`, transformed by `transform` seeded by `seed`; `buffers` keeps
    /// batch buffers for reuse.
    pub(super) fn new(
        layout: Arc<FileLayout>,
        transform: Arc<dyn Transform>,
        seed: u64,
        buffers: BufferPool,
    ) -> Self {
        Self {
            layout,
            transform,
            seed,
            buffers,
        }
    }
}

impl Source for FileSource {
    type Example = Sample;
    type Batch = HostBatch;
    type Scratch = FileScratch;

    /// Reads the bytes from the chunk's first record to the end of its last (records of a
    /// chunk are consecutive in one file), reusing the open file when it is the same one. A
    /// compressed file's records are read from its decompressed copy.
    fn load(&self, chunk: &[WorkItem], scratch: &mut FileScratch) -> Result<()> {
        let file = chunk[0].at.file;
        let path = self.layout.path(file);
        if scratch.open.as_ref().is_none_or(|(f, _)| *f != file) {
            scratch.open = Some((file, self.layout.open(file)?));
        }
        let (_, open) = scratch.open.as_mut().expect("opened above");
        let records: Vec<_> = chunk.iter().map(|w| (w.at.record, w.span)).collect();
        read_records(open.file(), path, &records, &mut scratch.bytes)
    }

    /// Decodes and transforms one record.
    fn prepare(&self, chunk: &[WorkItem], i: usize, scratch: &FileScratch) -> Result<Sample> {
        let item = &chunk[i];
        let start = (item.span.offset - chunk[0].span.offset) as usize;
        let mut rng = example_rng(self.seed, item.at.seq);
        let prepared = self.layout.format().prepare(
            self.layout.path(item.at.file),
            item.at.record,
            &scratch.bytes[start..start + item.span.len],
            self.transform.as_ref(),
            &mut rng,
        )?;
        Ok(Sample {
            planes: prepared.planes,
            label: prepared.label,
        })
    }

    fn assemble(&self, samples: Vec<Entry<Sample>>) -> Result<HostBatch> {
        let shape = samples[0].example.planes.shape();
        let mut images = self
            .buffers
            .take(samples.len() * shape.iter().product::<usize>());
        let mut labels = Vec::with_capacity(samples.len());
        for Entry { example, at } in samples {
            if example.planes.shape() != shape {
                return Err(Error::Config(format!(
                    "file #{} record {}: image shape {:?} (CHW) differs from the batch's {shape:?}; \
                     the transform must give every image the same size",
                    at.file,
                    at.record,
                    example.planes.shape()
                )));
            }
            images.extend_from_slice(example.planes.data());
            labels.push(example.label);
        }
        Ok(HostBatch::new(images, labels, shape).recycled_into(self.buffers.clone()))
    }
}

/// The generator of the record numbered `seq`: a function of the seed and the number only.
fn example_rng(seed: u64, seq: u64) -> Rng {
    // seed_from_u64 runs SplitMix64 over its input; mixing the seed first keeps (seed, seq)
    // and (seq, seed) apart.
    Rng::seed_from_u64(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29) ^ seq)
}
