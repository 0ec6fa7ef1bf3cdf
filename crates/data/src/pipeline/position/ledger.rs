//! [`Ledger`]: the consumer's account of which records the batches it took used, from which
//! [`InputPosition`] is computed when a checkpoint asks for it.

use std::collections::{BTreeMap, HashMap};

use super::{CursorAt, InputPosition, RecordAt};
use crate::queue::ShuffleRng;

/// What the batcher saw when it took a batch from the example queue.
#[derive(Debug, Clone, Default)]
pub(crate) struct BatchTrace {
    /// The batch's records.
    pub records: Vec<RecordAt>,
    /// The records the example queue held right after, in its order.
    pub buffer: Vec<RecordAt>,
    /// The shuffle generator right after.
    pub shuffle: Option<ShuffleRng>,
}

/// Which records have entered the example queue, as of the last batch consumed.
///
/// A record has entered the queue when it is consumed or still held by it; every record below
/// the `frontier` has. Records at or past it that entered out of order (parallel readers
/// without the ordered hand-off) are kept in `ahead` until the frontier passes them.
#[derive(Debug)]
pub(crate) struct Ledger {
    start: InputPosition,
    frontier: CursorAt,
    ahead: BTreeMap<u64, RecordAt>,
    last: BatchTrace,
}

impl Ledger {
    /// The account of a pipeline that starts at `start`.
    pub fn new(start: InputPosition) -> Self {
        let last = BatchTrace {
            records: Vec::new(),
            buffer: start.buffer.clone(),
            shuffle: start.shuffle,
        };
        Self {
            frontier: start.next,
            ahead: start.skip.iter().map(|r| (r.seq, *r)).collect(),
            start,
            last,
        }
    }

    /// The consumer took the batch `trace` describes.
    pub fn consumed(&mut self, trace: BatchTrace) {
        for r in &trace.records {
            if r.seq >= self.frontier.seq {
                self.ahead.insert(r.seq, *r);
            }
        }
        while let Some(r) = self.ahead.remove(&self.frontier.seq) {
            self.frontier = r.after();
        }
        self.last = trace;
    }

    /// Where the input stands after the last batch consumed.
    pub fn position(&self) -> InputPosition {
        let held: HashMap<u64, &RecordAt> = self.last.buffer.iter().map(|r| (r.seq, r)).collect();
        let mut next = self.frontier;
        while let Some(r) = self
            .ahead
            .get(&next.seq)
            .or_else(|| held.get(&next.seq).copied())
        {
            next = r.after();
        }
        let skip: BTreeMap<u64, RecordAt> = self
            .ahead
            .values()
            .chain(&self.last.buffer)
            .filter(|r| r.seq >= next.seq)
            .map(|r| (r.seq, *r))
            .collect();
        InputPosition {
            files: self.start.files.clone(),
            seed: self.start.seed,
            next,
            skip: skip.into_values().collect(),
            buffer: self.last.buffer.clone(),
            shuffle: self.last.shuffle,
        }
    }
}
