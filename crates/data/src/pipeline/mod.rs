//! [`Pipeline`]: files in, host batches out, on threads (TF's `shuffle_batch_join` family).
//!
//! ```text
//! record cursor (files x epochs, seeded)           shared, under a lock
//!   -> R reader threads: read -> decode -> transform
//!   -> ordered gate (deterministic mode)            records enter the queue in cursor order
//!                                                   (a reader ahead of its turn parks its chunk)
//!   -> example queue (shuffle or FIFO)
//!   -> batcher thread: dequeue_many(B) -> HostBatch
//!   -> batch queue (prefetch depth k)
//!   -> Pipeline::next_batch
//! ```
//!
//! The TF shapes map onto [`PipelineConfig`]: `shuffle_batch_join` is [`PipelineConfig::train`]
//! (shuffle queue, R readers); `batch_join` is the same with `shuffle: None`; `batch` is one
//! reader. [`PipelineConfig::eval`] reads every example exactly once, in file order, and keeps
//! the last partial batch.
//!
//! Reproducibility: with `deterministic` on (the default), the batches depend only on the
//! files, the config and the seed, not on the number of reader threads nor on thread timing:
//! each record's distortions are seeded by its sequence number, records enter the example
//! queue in sequence order, and the shuffle queue's picks depend only on that order.

mod batch;
mod buffer_pool;
mod corrupt_records;
mod ordered_gate;
mod record_cursor;

pub use batch::{BatchSlice, HostBatch, split_sizes};
pub use corrupt_records::{CorruptRecords, RecordCount};

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rand::SeedableRng;

pub(crate) use buffer_pool::BufferPool;
use corrupt_records::CorruptTally;
use ordered_gate::OrderedGate;
use record_cursor::{CursorOrder, RecordCursor, WorkItem};

use crate::error::{Error, Result};
use crate::format::RecordFormat;
use crate::image::Planes;
use crate::queue::{CoordinatedThread, Coordinator, Queue, QueueError, QueueRunner};
use crate::transforms::{Rng, Transform};

/// The shuffling example queue's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShuffleConfig {
    /// Most examples held.
    pub capacity: usize,
    /// Examples kept back for mixing until the input ends (TF's `min_after_dequeue`).
    pub min_after_dequeue: usize,
}

/// What to do with the examples left over at the end of the last epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinalBatch {
    /// Drop them: every batch has exactly `batch_size` examples.
    Drop,
    /// Emit them as one smaller batch.
    Keep,
}

/// How a [`Pipeline`] reads, mixes and batches.
#[derive(Debug, Clone, PartialEq)]
pub struct PipelineConfig {
    /// Examples per batch (the global batch, before any split across devices).
    pub batch_size: usize,
    /// Reader threads (TF `num_readers`): each reads, decodes and transforms records.
    pub reader_threads: usize,
    /// Consecutive records a reader takes at once: one read, one lock and one ordered hand-off
    /// per chunk. Larger chunks cost less per record; each reader holds a chunk of decoded
    /// images in memory, and in deterministic mode may park up to four more that are ahead of
    /// their turn.
    pub read_chunk: usize,
    /// `Some`: a shuffle queue; `None`: a FIFO queue of `fifo_capacity` examples.
    pub shuffle: Option<ShuffleConfig>,
    /// Capacity of the example queue when it is FIFO.
    pub fifo_capacity: usize,
    /// Passes over the files; `None` runs until stopped.
    pub num_epochs: Option<usize>,
    /// Shuffle the file order each epoch.
    pub shuffle_files: bool,
    /// Batches prepared ahead of the consumer (the batch queue's capacity).
    pub prefetch: usize,
    /// Seed of file order, distortions and shuffling.
    pub seed: u64,
    /// Same batches on every run whatever the thread count and timing; `false` lets readers
    /// enqueue as soon as they finish.
    pub deterministic: bool,
    /// The last, smaller batch of a finite run.
    pub final_batch: FinalBatch,
    /// How long [`Pipeline::stop`] waits for threads after the stop request.
    pub join_grace: Duration,
    /// Records that fail to decode stop the pipeline, or are skipped within a budget.
    pub corrupt_records: CorruptRecords,
}

impl PipelineConfig {
    /// Training: endless epochs, files shuffled, a shuffle queue keeping
    /// `min_after_dequeue` = 10 batches back with room for 3 more (TF's
    /// `capacity = min_after_dequeue + 3 * batch_size`), 4 readers, 2 batches prefetched.
    pub fn train(batch_size: usize) -> Self {
        let min_after_dequeue = 10 * batch_size;
        Self {
            batch_size,
            reader_threads: 4,
            read_chunk: 16,
            shuffle: Some(ShuffleConfig {
                capacity: min_after_dequeue + 3 * batch_size,
                min_after_dequeue,
            }),
            fifo_capacity: 3 * batch_size,
            num_epochs: None,
            shuffle_files: true,
            prefetch: 2,
            seed: 0,
            deterministic: true,
            final_batch: FinalBatch::Drop,
            join_grace: Duration::from_secs(10),
            corrupt_records: CorruptRecords::Fail,
        }
    }

    /// Evaluation: one epoch, files in order, FIFO, every example exactly once, the last
    /// partial batch kept.
    pub fn eval(batch_size: usize) -> Self {
        Self {
            shuffle: None,
            num_epochs: Some(1),
            shuffle_files: false,
            final_batch: FinalBatch::Keep,
            ..Self::train(batch_size)
        }
    }

    fn validate(&self) -> Result<()> {
        let fail = |m: String| Err(Error::Config(m));
        if [
            self.batch_size,
            self.reader_threads,
            self.read_chunk,
            self.prefetch,
        ]
        .contains(&0)
        {
            return fail(format!(
                "batch_size ({}), reader_threads ({}), read_chunk ({}) and prefetch ({}) must be at least 1",
                self.batch_size, self.reader_threads, self.read_chunk, self.prefetch
            ));
        }
        match self.shuffle {
            Some(s) if s.capacity < s.min_after_dequeue + self.batch_size => fail(format!(
                "shuffle capacity {} must hold min_after_dequeue {} plus a batch of {}",
                s.capacity, s.min_after_dequeue, self.batch_size
            )),
            None if self.fifo_capacity < self.batch_size => fail(format!(
                "fifo_capacity {} is smaller than a batch of {}",
                self.fifo_capacity, self.batch_size
            )),
            _ => Ok(()),
        }
    }
}

/// One transformed example on its way to the batcher.
struct Sample {
    planes: Planes,
    label: i64,
    file: usize,
    record: usize,
}

/// How full the pipeline's queues are, each from 0.0 to 1.0. An example queue that stays near
/// empty while training means the input is starving the devices.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QueueFill {
    /// The example queue.
    pub examples: f32,
    /// The batch (prefetch) queue.
    pub batches: f32,
}

/// A running input pipeline. Dropping it stops and joins its threads.
pub struct Pipeline {
    coord: Coordinator,
    threads: Vec<CoordinatedThread>,
    examples: Arc<Queue<Sample>>,
    batches: Arc<Queue<HostBatch>>,
    tally: Arc<CorruptTally>,
    join_grace: Duration,
    finished: bool,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("threads", &self.threads.len())
            .field("fill", &self.fill())
            .field("finished", &self.finished)
            .finish()
    }
}

impl Pipeline {
    /// Starts reading `files` in `format`, transforming each image with `transform`.
    pub fn start(
        config: PipelineConfig,
        format: Arc<dyn RecordFormat>,
        files: Vec<PathBuf>,
        transform: Arc<dyn Transform>,
    ) -> Result<Self> {
        config.validate()?;
        if files.is_empty() {
            return Err(Error::Config("no input files".into()));
        }
        let coord = Coordinator::new();
        let tally = Arc::new(CorruptTally::new(config.corrupt_records));
        let cursor = Arc::new(RecordCursor::new(
            Arc::new(files),
            Arc::clone(&format),
            CursorOrder {
                num_epochs: config.num_epochs,
                shuffle_files: config.shuffle_files,
                seed: config.seed,
            },
            Arc::clone(&tally),
        ));
        let examples = Arc::new(match config.shuffle {
            Some(s) => Queue::shuffle(s.capacity, s.min_after_dequeue, config.seed),
            None => Queue::fifo(config.fifo_capacity),
        });
        let batches = Arc::new(Queue::fifo(config.prefetch));
        // Readers may park four chunks each ahead of the next one to enter the queue.
        let gate = config
            .deterministic
            .then(|| Arc::new(OrderedGate::new(4 * config.reader_threads)));
        if let Some(gate) = &gate {
            let gate = Arc::clone(gate);
            coord.on_stop(move || gate.cancel());
        }

        let reader = Reader {
            cursor,
            format,
            transform,
            gate,
            tally: Arc::clone(&tally),
            seed: config.seed,
            chunk: config.read_chunk,
        };
        let mut threads = QueueRunner::new(Arc::clone(&examples), config.reader_threads).start(
            &coord,
            "reader",
            move |_, queue| reader.run(queue),
        );
        let batcher = Batcher {
            examples: Arc::clone(&examples),
            batch_size: config.batch_size,
            final_batch: config.final_batch,
            // The queued batches, the one being built and the one the consumer holds.
            buffers: BufferPool::new(config.prefetch + 2),
        };
        threads.extend(QueueRunner::new(Arc::clone(&batches), 1).start(
            &coord,
            "batcher",
            move |_, queue| batcher.run(queue),
        ));
        Ok(Self {
            coord,
            threads,
            examples,
            batches,
            tally,
            join_grace: config.join_grace,
            finished: false,
        })
    }

    /// The next batch, blocking until it is ready. `Ok(None)` at the end of a finite input
    /// (or after a clean stop); the first error of any pipeline thread otherwise, after which
    /// every thread has been joined.
    pub fn next_batch(&mut self) -> Result<Option<HostBatch>> {
        if self.finished {
            return Ok(None);
        }
        match self.batches.dequeue() {
            Ok(batch) => Ok(Some(batch)),
            Err(_) => self.finish().map(|()| None),
        }
    }

    /// How full the queues are now.
    pub fn fill(&self) -> QueueFill {
        QueueFill {
            examples: self.examples.fill(),
            batches: self.batches.fill(),
        }
    }

    /// Records read so far, and those skipped as corrupt.
    pub fn record_count(&self) -> RecordCount {
        self.tally.count()
    }

    /// The coordinator of the pipeline's threads: a trainer can share it to stop the
    /// pipeline (e.g. on Ctrl-C) or to check whether it stopped.
    pub fn coordinator(&self) -> &Coordinator {
        &self.coord
    }

    /// Stops every thread and joins them; returns the first error any of them had.
    pub fn stop(mut self) -> Result<()> {
        self.coord.request_stop();
        self.finish()
    }

    fn finish(&mut self) -> Result<()> {
        if self.finished {
            return Ok(());
        }
        self.finished = true;
        // Threads that end on their own (end of input) need no stop; a stop requested here
        // wakes any that are blocked, so join never waits on them for more than the grace.
        if !self.examples.is_closed() || !self.batches.is_closed() {
            self.coord.request_stop();
        }
        self.coord
            .join(std::mem::take(&mut self.threads), self.join_grace)
    }
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        self.coord.request_stop();
        // Errors were the consumer's to collect through next_batch or stop.
        let _ = self.finish();
    }
}

impl Iterator for Pipeline {
    type Item = Result<HostBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_batch().transpose()
    }
}

/// What every reader thread runs.
struct Reader {
    cursor: Arc<RecordCursor>,
    format: Arc<dyn RecordFormat>,
    transform: Arc<dyn Transform>,
    gate: Option<Arc<OrderedGate<Vec<Sample>>>>,
    tally: Arc<CorruptTally>,
    seed: u64,
    chunk: usize,
}

impl Reader {
    fn run(&self, queue: &Queue<Sample>) -> Result<()> {
        let mut open: Option<(usize, File)> = None;
        let mut bytes = Vec::new();
        loop {
            let chunk = self.cursor.next_chunk(self.chunk)?;
            let Some(first) = chunk.first() else {
                return Ok(());
            };
            self.read(&chunk, &mut open, &mut bytes)?;
            let mut samples = Vec::with_capacity(chunk.len());
            for item in &chunk {
                let start = (item.span.offset - first.span.offset) as usize;
                let prepared = self.prepare(item, &bytes[start..start + item.span.len]);
                samples.extend(self.tally.record(prepared)?);
            }
            let enqueue = |samples: Vec<Sample>| {
                samples
                    .into_iter()
                    .try_for_each(|s| queue.enqueue(s))
                    .map_err(|_| Error::Cancelled)
            };
            match &self.gate {
                Some(gate) => gate.pass(first.seq, chunk.len() as u64, samples, enqueue)?,
                None => enqueue(samples)?,
            }
        }
    }

    /// Decodes and transforms one record.
    fn prepare(&self, item: &WorkItem, bytes: &[u8]) -> Result<Sample> {
        let path = self.cursor.path(item.file);
        let mut rng = example_rng(self.seed, item.seq);
        let prepared =
            self.format
                .prepare(path, item.record, bytes, self.transform.as_ref(), &mut rng)?;
        Ok(Sample {
            planes: prepared.planes,
            label: prepared.label,
            file: item.file,
            record: item.record,
        })
    }

    /// Reads the bytes from the chunk's first record to the end of its last (records of a
    /// chunk are consecutive in one file) into `bytes`, reusing the open file when it is the
    /// same one.
    fn read(
        &self,
        chunk: &[WorkItem],
        open: &mut Option<(usize, File)>,
        bytes: &mut Vec<u8>,
    ) -> Result<()> {
        let (first, last) = (&chunk[0], &chunk[chunk.len() - 1]);
        let path = self.cursor.path(first.file);
        let io = |error| Error::Io {
            path: path.clone(),
            error,
        };
        if open.as_ref().is_none_or(|(f, _)| *f != first.file) {
            *open = Some((first.file, File::open(path).map_err(io)?));
        }
        let (_, file) = open.as_mut().expect("opened above");
        let end = last.span.offset + last.span.len as u64;
        file.seek(SeekFrom::Start(first.span.offset)).map_err(io)?;
        bytes.resize((end - first.span.offset) as usize, 0);
        match file.read_exact(bytes) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                // The file shrank after it was indexed: name the first record it lost.
                let size = file.metadata().map_err(io)?.len();
                let lost = chunk
                    .iter()
                    .find(|w| w.span.offset + w.span.len as u64 > size)
                    .unwrap_or(first);
                Err(Error::Record {
                    path: path.clone(),
                    record: lost.record,
                    reason: format!(
                        "truncated: the file ends at byte {size}, the record at {}",
                        lost.span.offset + lost.span.len as u64
                    ),
                })
            }
            Err(e) => Err(io(e)),
        }
    }
}

/// The generator of the record numbered `seq`: a function of the seed and the number only.
fn example_rng(seed: u64, seq: u64) -> Rng {
    // seed_from_u64 runs SplitMix64 over its input; mixing the seed first keeps (seed, seq)
    // and (seq, seed) apart.
    Rng::seed_from_u64(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29) ^ seq)
}

/// What the batcher thread runs: groups examples into host batches.
struct Batcher {
    examples: Arc<Queue<Sample>>,
    batch_size: usize,
    final_batch: FinalBatch,
    buffers: BufferPool,
}

impl Batcher {
    fn run(&self, batches: &Queue<HostBatch>) -> Result<()> {
        loop {
            let taken = match self.final_batch {
                FinalBatch::Drop => self.examples.dequeue_many(self.batch_size),
                FinalBatch::Keep => self.examples.dequeue_up_to(self.batch_size),
            };
            let samples = match taken {
                Ok(samples) => samples,
                Err(QueueError::Closed) => return Ok(()),
                Err(e) => return Err(e.into()),
            };
            let batch = self.assemble(samples)?;
            batches.enqueue(batch).map_err(|_| Error::Cancelled)?;
        }
    }

    fn assemble(&self, samples: Vec<Sample>) -> Result<HostBatch> {
        let shape = samples[0].planes.shape();
        let mut images = self
            .buffers
            .take(samples.len() * shape.iter().product::<usize>());
        let mut labels = Vec::with_capacity(samples.len());
        for sample in samples {
            if sample.planes.shape() != shape {
                return Err(Error::Config(format!(
                    "file #{} record {}: image shape {:?} (CHW) differs from the batch's {shape:?}; \
                     the transform must give every image the same size",
                    sample.file,
                    sample.record,
                    sample.planes.shape()
                )));
            }
            images.extend_from_slice(sample.planes.data());
            labels.push(sample.label);
        }
        Ok(HostBatch::new(images, labels, shape).recycled_into(self.buffers.clone()))
    }
}

impl From<QueueError> for Error {
    fn from(e: QueueError) -> Self {
        match e {
            QueueError::Closed | QueueError::Cancelled => Error::Cancelled,
            QueueError::Unsatisfiable { .. } => Error::Config(e.to_string()),
        }
    }
}
