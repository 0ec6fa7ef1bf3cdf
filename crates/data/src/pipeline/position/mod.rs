//! [`InputPosition`]: where a pipeline's input stands after the batches its consumer took, by
//! record positions, never pixels, so that a checkpoint can restart the input there in constant
//! time (tf.data's iterator checkpoints are the model). The type's docs say what it holds.

mod ledger;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub(crate) use ledger::{BatchTrace, Ledger};

use crate::error::{Error, Result};
use crate::queue::ShuffleRng;

/// One record: where it lies and where it falls in the run. Serialized as
/// `[seq, epoch, slot, file, record]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "[u64; 5]", into = "[u64; 5]")]
pub struct RecordAt {
    /// Place in the run's record sequence, from 0; seeds the record's distortions.
    pub seq: u64,
    /// The epoch it was read in.
    pub epoch: u64,
    /// Place of its file in that epoch's (shuffled) file order.
    pub slot: usize,
    /// Index of its file in the position's file list.
    pub file: usize,
    /// Index of the record in its file.
    pub record: usize,
}

impl From<[u64; 5]> for RecordAt {
    fn from([seq, epoch, slot, file, record]: [u64; 5]) -> Self {
        // Out-of-range values (a damaged checkpoint) fail `InputPosition::check`.
        let index = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
        Self {
            seq,
            epoch,
            slot: index(slot),
            file: index(file),
            record: index(record),
        }
    }
}

impl From<RecordAt> for [u64; 5] {
    fn from(r: RecordAt) -> Self {
        [
            r.seq,
            r.epoch,
            r.slot as u64,
            r.file as u64,
            r.record as u64,
        ]
    }
}

impl RecordAt {
    /// The cursor's place right after this record.
    pub fn after(&self) -> CursorAt {
        CursorAt {
            seq: self.seq + 1,
            epoch: self.epoch,
            slot: self.slot,
            record: self.record + 1,
        }
    }
}

/// Where the record cursor goes on: the record numbered `seq` is record `record` of the file in
/// slot `slot` of epoch `epoch`'s file order (past that file's end: the next file's first).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CursorAt {
    /// The next record's number in the run's sequence.
    pub seq: u64,
    /// The epoch.
    pub epoch: u64,
    /// Place of the file in the epoch's file order.
    pub slot: usize,
    /// Index of the record in that file.
    pub record: usize,
}

/// Where a pipeline's input stands after the batches its consumer took;
/// [`Pipeline::position`](crate::Pipeline::position) gives it,
/// [`Pipeline::resume`](crate::Pipeline::resume) starts there.
///
/// A pipeline runs ahead of its consumer: readers hold records being decoded, the example queue
/// holds decoded ones, batches wait in the prefetch queue. None of that is consumed, so none of
/// it is lost: the position names the records the example queue held when the consumer's last
/// batch left it (the shuffle buffer, re-read on resume, in the queue's order), where the cursor
/// goes on from, and the shuffle generator at that moment. The records in flight come after
/// the buffer in the record sequence, so the cursor reads them again.
///
/// Parallel readers without the ordered hand-off enqueue records out of sequence order; records
/// past the cursor's restart point that were already read are listed in `skip`, so that no
/// record is repeated or skipped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputPosition {
    /// The files this pipeline reads (under several processes, this process's share), in the
    /// order it was given them. A resumed pipeline must be given files of the same names.
    pub files: Vec<PathBuf>,
    /// Seed of the file order, the distortions and the shuffle queue.
    pub seed: u64,
    /// Where the cursor goes on.
    pub next: CursorAt,
    /// Records at or past `next` that were already read (out of sequence order): the cursor
    /// passes over them.
    pub skip: Vec<RecordAt>,
    /// The example queue's records, in its order: read again first on resume.
    pub buffer: Vec<RecordAt>,
    /// The shuffle queue's generator; `None` for a FIFO example queue.
    pub shuffle: Option<ShuffleRng>,
}

impl InputPosition {
    /// The start of a run over `files` seeded `seed`.
    pub fn start(files: Vec<PathBuf>, seed: u64) -> Self {
        Self {
            files,
            seed,
            next: CursorAt::default(),
            skip: Vec::new(),
            buffer: Vec::new(),
            shuffle: None,
        }
    }

    /// Whether this position can restart a pipeline over `files`: the same number of files,
    /// of the same names (the directory may differ), and every record it names within the
    /// file list. The error says what differs.
    pub fn check(&self, files: &[PathBuf]) -> Result<()> {
        let bad = |m: String| Err(Error::Config(format!("input position: {m}")));
        if files.len() != self.files.len() {
            return bad(format!(
                "it was saved over {} input files, this run has {}",
                self.files.len(),
                files.len()
            ));
        }
        if let Some((saved, given)) = self
            .files
            .iter()
            .zip(files)
            .find(|(saved, given)| saved.file_name() != given.file_name())
        {
            return bad(format!(
                "it was saved over {}, this run has {} in its place",
                saved.display(),
                given.display()
            ));
        }
        let n = files.len();
        if self.next.slot > n {
            return bad(format!("file slot {} of {n} files", self.next.slot));
        }
        match self
            .buffer
            .iter()
            .chain(&self.skip)
            .find(|r| r.file >= n || r.slot >= n)
        {
            Some(r) => bad(format!("record {r:?} lies outside the {n} files")),
            None => Ok(()),
        }
    }
}
