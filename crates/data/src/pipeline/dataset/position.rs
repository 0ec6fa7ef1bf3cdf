//! [`DatasetPosition`]: where a [`DatasetPipeline`](super::DatasetPipeline) stands after the
//! batches its consumer took, by item indices, never items: resuming reads the buffered items
//! again and goes on from the cursor, in time linear in the buffer.
//!
//! It is [`InputPosition`] for a dataset laid out as one single-record file per item: the
//! epoch's file order is its permutation of the indices, a record's slot is its step in that
//! permutation and its file is its index. This type says so in the dataset's own terms.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::pipeline::{CursorAt, InputPosition, RecordAt};
use crate::queue::ShuffleRng;

/// One item in the run. Serialized as `[seq, epoch, step, index]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "[u64; 4]", into = "[u64; 4]")]
pub struct ItemAt {
    /// Place in the run's item sequence, from 0.
    pub seq: u64,
    /// The epoch it was read in.
    pub epoch: u64,
    /// Its place in that epoch's order of the indices.
    pub step: usize,
    /// Its index in the dataset.
    pub index: usize,
}

impl From<[u64; 4]> for ItemAt {
    fn from([seq, epoch, step, index]: [u64; 4]) -> Self {
        // Out-of-range values (a damaged checkpoint) fail `DatasetPosition::check`.
        let index_of = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
        Self {
            seq,
            epoch,
            step: index_of(step),
            index: index_of(index),
        }
    }
}

impl From<ItemAt> for [u64; 4] {
    fn from(i: ItemAt) -> Self {
        [i.seq, i.epoch, i.step as u64, i.index as u64]
    }
}

impl From<RecordAt> for ItemAt {
    fn from(r: RecordAt) -> Self {
        Self {
            seq: r.seq,
            epoch: r.epoch,
            step: r.slot,
            index: r.file,
        }
    }
}

impl From<ItemAt> for RecordAt {
    fn from(i: ItemAt) -> Self {
        Self {
            seq: i.seq,
            epoch: i.epoch,
            slot: i.step,
            file: i.index,
            record: 0,
        }
    }
}

/// Where the cursor goes on: the item numbered `seq` is the one at step `step` of epoch
/// `epoch`'s order (at the epoch's end: the next epoch's first).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NextItem {
    /// The next item's number in the run's sequence.
    pub seq: u64,
    /// The epoch.
    pub epoch: u64,
    /// The place in the epoch's order of the indices.
    pub step: usize,
}

impl From<CursorAt> for NextItem {
    fn from(c: CursorAt) -> Self {
        // Past the single record of the file at `slot` is the next slot.
        Self {
            seq: c.seq,
            epoch: c.epoch,
            step: c.slot + c.record.min(1),
        }
    }
}

impl From<NextItem> for CursorAt {
    fn from(n: NextItem) -> Self {
        Self {
            seq: n.seq,
            epoch: n.epoch,
            slot: n.step,
            record: 0,
        }
    }
}

/// Where a dataset pipeline's input stands after the batches its consumer took, by item
/// indices: the items the example queue held (read again first on resume), where the cursor
/// goes on, and the shuffle queue's generator. [`DatasetPipeline::position`] gives it,
/// [`DatasetPipeline::resume`] starts there, in time linear in the buffer. Checkpoints store it
/// as JSON.
///
/// [`DatasetPipeline::position`]: crate::DatasetPipeline::position
/// [`DatasetPipeline::resume`]: crate::DatasetPipeline::resume
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatasetPosition {
    /// The length of the dataset it was saved over: a resumed pipeline's must be the same.
    pub len: usize,
    /// Seed of the epochs' orders and of the shuffle queue.
    pub seed: u64,
    /// Where the cursor goes on.
    pub next: NextItem,
    /// Items at or past `next` that were already read (out of sequence order, parallel readers
    /// without the ordered hand-off): the cursor passes over them.
    pub skip: Vec<ItemAt>,
    /// The example queue's items, in its order: read again first on resume.
    pub buffer: Vec<ItemAt>,
    /// The shuffle queue's generator; `None` for a FIFO example queue.
    pub shuffle: Option<ShuffleRng>,
}

impl DatasetPosition {
    /// The start of a run over a dataset of `len` items seeded `seed`.
    pub fn start(len: usize, seed: u64) -> Self {
        Self::from_input(len, InputPosition::start(Vec::new(), seed))
    }

    /// Whether this position can restart a pipeline over a dataset of `len` items: the same
    /// length, every step and index within it. The error says what differs.
    pub fn check(&self, len: usize) -> Result<()> {
        let bad = |m: String| Err(Error::Config(format!("dataset position: {m}")));
        if len != self.len {
            return bad(format!(
                "it was saved over a dataset of {} items, this one has {len}",
                self.len
            ));
        }
        if self.next.step > len {
            return bad(format!("step {} of {len} items", self.next.step));
        }
        match self
            .buffer
            .iter()
            .chain(&self.skip)
            .find(|i| i.index >= len || i.step >= len)
        {
            Some(i) => bad(format!("item {i:?} lies outside the {len} items")),
            None => Ok(()),
        }
    }

    /// The position `input` of the pipeline's core, over `len` items.
    pub(crate) fn from_input(len: usize, input: InputPosition) -> Self {
        let items = |records: Vec<RecordAt>| records.into_iter().map(ItemAt::from).collect();
        Self {
            len,
            seed: input.seed,
            next: input.next.into(),
            skip: items(input.skip),
            buffer: items(input.buffer),
            shuffle: input.shuffle,
        }
    }

    /// The same position for the pipeline's core.
    pub(crate) fn to_input(&self) -> InputPosition {
        let records = |items: &[ItemAt]| items.iter().map(|&i| RecordAt::from(i)).collect();
        InputPosition {
            files: Vec::new(),
            seed: self.seed,
            next: self.next.into(),
            skip: records(&self.skip),
            buffer: records(&self.buffer),
            shuffle: self.shuffle,
        }
    }
}
