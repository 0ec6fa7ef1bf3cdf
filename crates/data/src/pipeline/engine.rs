//! [`Core`]: the pipeline's threads and queues, whatever the records are.
//!
//! A [`Source`] says how a reader thread turns a record into an example and how the batcher
//! turns examples into a batch; everything else is here, shared by [`Pipeline`](super::Pipeline)
//! (dataset files, host batches of images) and [`DatasetPipeline`](super::DatasetPipeline) (a
//! Burn `Dataset`, batches of its items): the cursor under a [`Coordinator`], the reader
//! threads of a [`QueueRunner`], the [`OrderedGate`], the example queue, the batcher thread,
//! the prefetch queue and the consumer's [`Ledger`].

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use super::corrupt_records::CorruptTally;
use super::layout::Layout;
use super::ordered_gate::OrderedGate;
use super::position::{BatchTrace, Ledger};
use super::record_cursor::{CursorOrder, RecordCursor, WorkItem};
use super::{FinalBatch, InputPosition, PipelineConfig, QueueFill, RecordAt, RecordCount};
use crate::error::{Error, Result};
use crate::queue::{
    CoordinatedThread, Coordinator, Held, Queue, QueueError, QueueRunner, ShuffleRng,
};

/// What a pipeline reads and how it batches.
pub(crate) trait Source: Send + Sync + 'static {
    /// One prepared record, as the example queue holds it.
    type Example: Send + 'static;
    /// What the consumer gets.
    type Batch: Send + 'static;
    /// What a reader thread keeps from one chunk to the next (an open file, a byte buffer).
    type Scratch: Default;

    /// Makes the chunk's records ready for [`prepare`](Self::prepare) (reads their bytes).
    fn load(&self, chunk: &[WorkItem], scratch: &mut Self::Scratch) -> Result<()>;

    /// Record `i` of the chunk last loaded, as an example. An [`Error::Record`] is a corrupt
    /// record, which the pipeline's [`CorruptRecords`](super::CorruptRecords) policy may skip.
    fn prepare(
        &self,
        chunk: &[WorkItem],
        i: usize,
        scratch: &Self::Scratch,
    ) -> Result<Self::Example>;

    /// A batch of `examples`, in the order given.
    fn assemble(&self, examples: Vec<Entry<Self::Example>>) -> Result<Self::Batch>;
}

/// An example and the record it came from.
pub(crate) struct Entry<E> {
    pub example: E,
    pub at: RecordAt,
}

/// The running threads and queues of a pipeline over source `S`. Dropping it stops and joins
/// its threads.
pub(crate) struct Core<S: Source> {
    coord: Coordinator,
    threads: Vec<CoordinatedThread>,
    examples: Arc<Queue<Entry<S::Example>>>,
    batches: Arc<Queue<(S::Batch, BatchTrace)>>,
    ledger: Ledger,
    tally: Arc<CorruptTally>,
    join_grace: Duration,
    finished: bool,
}

impl<S: Source> Core<S> {
    /// Starts reading the files of `layout` from `start` with `source`; `tally` counts the
    /// records read and skipped. `config` must be valid.
    pub(super) fn start(
        config: &PipelineConfig,
        source: Arc<S>,
        layout: Arc<dyn Layout>,
        start: InputPosition,
        tally: Arc<CorruptTally>,
    ) -> Self {
        let coord = Coordinator::new();
        let order = CursorOrder {
            num_epochs: config.num_epochs,
            shuffle_files: config.shuffle_files,
            share: config.share,
        };
        let cursor = Arc::new(RecordCursor::new(&start, layout, order));
        let examples = Arc::new(example_queue(config, &start));
        let batches = Arc::new(Queue::fifo(config.prefetch));
        // Readers may park four chunks each ahead of the next one to enter the queue.
        let gate: Option<Gate<S::Example>> = config
            .deterministic
            .then(|| Arc::new(OrderedGate::new(4 * config.reader_threads)));
        if let Some(gate) = &gate {
            let gate = Arc::clone(gate);
            coord.on_stop(move || gate.cancel());
        }
        let dropped = Dropped::default();
        let reader = Reader {
            cursor,
            source: Arc::clone(&source),
            gate,
            tally: Arc::clone(&tally),
            dropped: Arc::clone(&dropped),
            chunk: config.read_chunk,
        };
        let mut threads = QueueRunner::new(Arc::clone(&examples), config.reader_threads).start(
            &coord,
            "reader",
            move |_, queue| reader.run(queue),
        );
        let batcher = Batcher {
            source,
            examples: Arc::clone(&examples),
            batch_size: config.batch_size,
            final_batch: config.final_batch,
            dropped,
        };
        threads.extend(QueueRunner::new(Arc::clone(&batches), 1).start(
            &coord,
            "batcher",
            move |_, queue| batcher.run(queue),
        ));
        Self {
            coord,
            threads,
            examples,
            batches,
            ledger: Ledger::new(start),
            tally,
            join_grace: config.join_grace,
            finished: false,
        }
    }

    /// The next batch, blocking until it is ready. `Ok(None)` at the end of a finite input
    /// (or after a clean stop); the first error of any thread otherwise, after which every
    /// thread has been joined.
    pub(super) fn next_batch(&mut self) -> Result<Option<S::Batch>> {
        if self.finished {
            return Ok(None);
        }
        match self.batches.dequeue() {
            Ok((batch, trace)) => {
                self.ledger.consumed(trace);
                Ok(Some(batch))
            }
            Err(_) => self.finish().map(|()| None),
        }
    }

    /// Where the input stands after the batches taken so far.
    pub(super) fn position(&self) -> InputPosition {
        self.ledger.position()
    }

    /// How full the queues are now.
    pub(super) fn fill(&self) -> QueueFill {
        QueueFill {
            examples: self.examples.fill(),
            batches: self.batches.fill(),
        }
    }

    /// Records read so far, and those skipped as corrupt.
    pub(super) fn record_count(&self) -> RecordCount {
        self.tally.count()
    }

    /// The coordinator of the threads.
    pub(super) fn coordinator(&self) -> &Coordinator {
        &self.coord
    }

    /// The number of threads not joined yet.
    pub(super) fn threads(&self) -> usize {
        self.threads.len()
    }

    /// Whether the threads were joined.
    pub(super) fn finished(&self) -> bool {
        self.finished
    }

    /// Stops every thread and joins them; returns the first error any of them had.
    pub(super) fn stop(mut self) -> Result<()> {
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

impl<S: Source> Drop for Core<S> {
    fn drop(&mut self) {
        self.coord.request_stop();
        // Errors were the consumer's to collect through next_batch or stop.
        let _ = self.finish();
    }
}

/// The example queue of `config`, its shuffle generator where `start` left it.
fn example_queue<E>(config: &PipelineConfig, start: &InputPosition) -> Queue<E> {
    match config.shuffle {
        Some(s) => Queue::shuffle_at(
            s.capacity,
            s.min_after_dequeue,
            start.shuffle.unwrap_or(ShuffleRng {
                seed: start.seed,
                words: 0,
            }),
        ),
        None => Queue::fifo(config.fifo_capacity),
    }
}

/// The ordered hand-off of chunks of examples into the example queue (deterministic mode): a
/// chunk's examples, or the error that stopped its reading, delivered in record order.
type Gate<E> = Arc<OrderedGate<Result<Vec<Entry<E>>>>>;

/// What every reader thread runs.
struct Reader<S: Source> {
    cursor: Arc<RecordCursor>,
    source: Arc<S>,
    gate: Option<Gate<S::Example>>,
    tally: Arc<CorruptTally>,
    dropped: Dropped,
    chunk: usize,
}

impl<S: Source> Reader<S> {
    fn run(&self, queue: &Queue<Entry<S::Example>>) -> Result<()> {
        let mut scratch = S::Scratch::default();
        loop {
            let chunk = self.cursor.next_chunk(self.chunk)?;
            let Some(first) = chunk.first() else {
                return Ok(());
            };
            let entries = self.read_chunk(&chunk, &mut scratch);
            // An error is delivered like examples, so that in deterministic mode the run stops
            // on the first bad record in record order, whichever reader reaches it first.
            let enqueue = |entries: Result<Vec<Entry<S::Example>>>| {
                (entries?.into_iter())
                    .try_for_each(|e| queue.enqueue(e))
                    .map_err(|_| Error::Cancelled)
            };
            match &self.gate {
                Some(gate) => gate.pass(first.ticket, chunk.len() as u64, entries, enqueue)?,
                None => enqueue(entries)?,
            }
        }
    }

    /// The examples of `chunk`, less the records skipped as corrupt; or the error that stops
    /// the run.
    fn read_chunk(
        &self,
        chunk: &[WorkItem],
        scratch: &mut S::Scratch,
    ) -> Result<Vec<Entry<S::Example>>> {
        self.source.load(chunk, scratch)?;
        let mut entries = Vec::with_capacity(chunk.len());
        for (i, item) in chunk.iter().enumerate() {
            match self.tally.record(self.source.prepare(chunk, i, scratch))? {
                Some(example) => entries.push(Entry {
                    example,
                    at: item.at,
                }),
                None => lock(&self.dropped).push(item.at),
            }
        }
        Ok(entries)
    }
}

/// Records skipped as corrupt, until the batcher passes them on to the consumer's ledger.
type Dropped = Arc<Mutex<Vec<RecordAt>>>;

fn lock(dropped: &Dropped) -> MutexGuard<'_, Vec<RecordAt>> {
    dropped.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What the batcher thread runs: groups examples into batches.
struct Batcher<S: Source> {
    source: Arc<S>,
    examples: Arc<Queue<Entry<S::Example>>>,
    batch_size: usize,
    final_batch: FinalBatch,
    dropped: Dropped,
}

impl<S: Source> Batcher<S> {
    fn run(&self, batches: &Queue<(S::Batch, BatchTrace)>) -> Result<()> {
        // What the example queue holds after the batch leaves it: the input position's buffer.
        let see = |held: Held<'_, Entry<S::Example>>| {
            (held.items().map(|e| e.at).collect(), held.shuffle_rng())
        };
        loop {
            let taken = match self.final_batch {
                FinalBatch::Drop => self.examples.dequeue_many_seen(self.batch_size, see),
                FinalBatch::Keep => self.examples.dequeue_up_to_seen(self.batch_size, see),
            };
            let (entries, (buffer, shuffle)) = match taken {
                Ok(taken) => taken,
                Err(QueueError::Closed) => return Ok(()),
                Err(e) => return Err(e.into()),
            };
            let mut records: Vec<RecordAt> = entries.iter().map(|e| e.at).collect();
            records.append(&mut lock(&self.dropped));
            let trace = BatchTrace {
                records,
                buffer,
                shuffle,
            };
            let batch = self.source.assemble(entries)?;
            batches
                .enqueue((batch, trace))
                .map_err(|_| Error::Cancelled)?;
        }
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
