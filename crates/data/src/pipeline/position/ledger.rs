//! [`Ledger`]: the consumer's account of which records the batches it took used, from which
//! [`InputPosition`] is computed when a checkpoint asks for it.

use std::collections::{BTreeMap, HashMap, HashSet};

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
///
/// A resumed pipeline's buffered records are the exception: they lie below the frontier or in
/// `ahead` from the start, but are read again, and parallel readers may still hold one when a
/// batch is taken. They stay in `replaying` until a consumed batch holds them, and the position
/// lists those the example queue did not hold as buffered again.
#[derive(Debug)]
pub(crate) struct Ledger {
    start: InputPosition,
    frontier: CursorAt,
    ahead: BTreeMap<u64, RecordAt>,
    replaying: BTreeMap<u64, RecordAt>,
    last: BatchTrace,
}

impl Ledger {
    /// The account of a pipeline that starts at `start`.
    pub(crate) fn new(start: InputPosition) -> Self {
        let last = BatchTrace {
            records: Vec::new(),
            buffer: start.buffer.clone(),
            shuffle: start.shuffle,
        };
        Self {
            frontier: start.next,
            ahead: start.skip.iter().map(|r| (r.seq, *r)).collect(),
            replaying: start.buffer.iter().map(|r| (r.seq, *r)).collect(),
            start,
            last,
        }
    }

    /// The consumer took the batch `trace` describes.
    pub(crate) fn consumed(&mut self, trace: BatchTrace) {
        for r in &trace.records {
            self.replaying.remove(&r.seq);
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
    pub(crate) fn position(&self) -> InputPosition {
        let buffer = self.buffer();
        let held: HashMap<u64, &RecordAt> = buffer.iter().map(|r| (r.seq, r)).collect();
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
            .chain(&buffer)
            .filter(|r| r.seq >= next.seq)
            .map(|r| (r.seq, *r))
            .collect();
        InputPosition {
            files: self.start.files.clone(),
            seed: self.start.seed,
            next,
            skip: skip.into_values().collect(),
            buffer,
            shuffle: self.last.shuffle,
        }
    }

    /// The records to read again first: those the example queue held after the last batch
    /// consumed, then the resumed buffer's records that no consumed batch held and the queue
    /// did not hold (still with a reader, or taken into a batch not consumed yet).
    fn buffer(&self) -> Vec<RecordAt> {
        let held: HashSet<u64> = self.last.buffer.iter().map(|r| r.seq).collect();
        let unread = self.replaying.values().filter(|r| !held.contains(&r.seq));
        self.last.buffer.iter().chain(unread).copied().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seq: u64) -> RecordAt {
        RecordAt::from([seq, 0, 0, 0, seq])
    }

    /// A resumed run's buffered record still with a reader when a batch is taken is neither
    /// consumed nor held: the next position buffers it again, and only it and the held ones.
    #[test]
    fn a_replayed_record_still_being_read_stays_buffered() {
        let start = InputPosition {
            next: at(9).after(),
            buffer: vec![at(3), at(4)],
            ..InputPosition::start(vec!["f".into()], 1)
        };
        let mut ledger = Ledger::new(start);
        ledger.consumed(BatchTrace {
            records: vec![at(10), at(11)],
            buffer: vec![at(3), at(12)],
            shuffle: None,
        });
        let position = ledger.position();
        assert_eq!(position.buffer, [at(3), at(12), at(4)]);
        assert_eq!(position.next, at(12).after());
        assert_eq!(position.skip, []);
        ledger.consumed(BatchTrace {
            records: vec![at(4), at(12)],
            buffer: vec![at(3)],
            shuffle: None,
        });
        assert_eq!(ledger.position().buffer, [at(3)]);
    }
}
