//! [`RecordCursor`]: the shared, seeded order in which records are read.
//!
//! TF feeds reader threads from a filename queue filled by a producer thread. Here reader
//! threads pull single records from one cursor under a lock instead: the cursor walks the
//! epochs, the files of each epoch (shuffled by seed when asked) and the records of each file,
//! and numbers every record it hands out. That number fixes the record's place in the output
//! and seeds its random distortions, so parallel readers give the same batches as one reader.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use rand::SeedableRng;
use rand::seq::SliceRandom;

use super::corrupt_records::CorruptTally;
use crate::error::{Error, Result};
use crate::format::{RecordFormat, RecordSpan};
use crate::transforms::Rng;

/// One record to read: its place in the output sequence and where it lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WorkItem {
    /// Position in the whole run's record sequence, from 0.
    pub seq: u64,
    /// Index into the cursor's file list.
    pub file: usize,
    /// Index of the record in its file.
    pub record: usize,
    /// Where the record lies in the file.
    pub span: RecordSpan,
}

/// How the cursor walks the files.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CursorOrder {
    /// Epochs to run; `None` runs forever.
    pub num_epochs: Option<usize>,
    /// Shuffle the files at the start of each epoch.
    pub shuffle_files: bool,
    /// Seed of the file shuffles.
    pub seed: u64,
}

struct State {
    epoch: usize,
    /// Files of this epoch in reading order, and the position in it.
    order: Vec<usize>,
    position: usize,
    /// Spans of the current file, and the next record to hand out.
    spans: Arc<Vec<RecordSpan>>,
    record: usize,
    next_seq: u64,
    /// Whether the current epoch handed out any record (an epoch of empty files must not
    /// spin forever).
    epoch_had_records: bool,
    /// Indexes already built, by file: files are indexed once, however many epochs run.
    indexes: HashMap<usize, Arc<Vec<RecordSpan>>>,
    done: bool,
}

/// Hands out [`WorkItem`]s in a seeded order; shared by every reader thread.
pub(crate) struct RecordCursor {
    files: Arc<Vec<PathBuf>>,
    format: Arc<dyn RecordFormat>,
    order: CursorOrder,
    /// Where a file's broken framing is counted when corrupt records are skipped.
    tally: Arc<CorruptTally>,
    state: Mutex<State>,
}

impl RecordCursor {
    pub fn new(
        files: Arc<Vec<PathBuf>>,
        format: Arc<dyn RecordFormat>,
        order: CursorOrder,
        tally: Arc<CorruptTally>,
    ) -> Self {
        let state = State {
            epoch: 0,
            order: Vec::new(),
            position: 0,
            spans: Arc::new(Vec::new()),
            record: 0,
            next_seq: 0,
            epoch_had_records: false,
            indexes: HashMap::new(),
            done: order.num_epochs == Some(0),
        };
        let cursor = Self {
            files,
            format,
            order,
            tally,
            state: Mutex::new(state),
        };
        cursor.start_epoch(&mut cursor.state.lock().expect("fresh lock"));
        cursor
    }

    fn start_epoch(&self, state: &mut State) {
        state.order = (0..self.files.len()).collect();
        if self.order.shuffle_files {
            let mut rng = Rng::seed_from_u64(
                self.order.seed ^ (state.epoch as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
            );
            state.order.shuffle(&mut rng);
        }
        state.position = 0;
        state.epoch_had_records = false;
    }

    /// The records of file `file`. When corrupt records are skipped, a file whose framing
    /// breaks (cut short, a bad length CRC) keeps the records before the break, and the
    /// break counts as one skipped record.
    fn index(&self, file: usize) -> Result<Vec<RecordSpan>> {
        let path = &self.files[file];
        if !self.tally.skips() {
            return self.format.index(path);
        }
        let index = self.format.index_partial(path)?;
        if let Some(broken) = index.broken {
            self.tally.record::<()>(Err(broken))?;
        }
        Ok(index.spans)
    }

    /// The path of file `index`.
    pub fn path(&self, index: usize) -> &PathBuf {
        &self.files[index]
    }

    /// The next record to read, or `None` when the last epoch is done.
    #[cfg(test)]
    pub fn next(&self) -> Result<Option<WorkItem>> {
        Ok(self.next_chunk(1)?.pop())
    }

    /// Up to `max` consecutive records of one file, numbered consecutively; empty when the
    /// last epoch is done. Taking records in chunks keeps the lock, the reads and the ordered
    /// hand-off per chunk rather than per record. Indexing a file (done the first time the
    /// cursor enters it) may fail, naming the file.
    pub fn next_chunk(&self, max: usize) -> Result<Vec<WorkItem>> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if state.done {
                return Ok(Vec::new());
            }
            if state.record < state.spans.len() {
                let take = max.min(state.spans.len() - state.record);
                let file = state.order[state.position - 1];
                let items = (0..take)
                    .map(|i| WorkItem {
                        seq: state.next_seq + i as u64,
                        file,
                        record: state.record + i,
                        span: state.spans[state.record + i],
                    })
                    .collect();
                state.record += take;
                state.next_seq += take as u64;
                state.epoch_had_records = true;
                return Ok(items);
            }
            if state.position < state.order.len() {
                let file = state.order[state.position];
                state.position += 1;
                state.record = 0;
                state.spans = match state.indexes.get(&file) {
                    Some(spans) => Arc::clone(spans),
                    None => {
                        let spans = Arc::new(self.index(file)?);
                        state.indexes.insert(file, Arc::clone(&spans));
                        spans
                    }
                };
                continue;
            }
            if !state.epoch_had_records {
                state.done = true;
                return Err(Error::Config(format!(
                    "no record in any of the {} input files",
                    self.files.len()
                )));
            }
            state.epoch += 1;
            if Some(state.epoch) == self.order.num_epochs {
                state.done = true;
                continue;
            }
            self.start_epoch(&mut state);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::Example;
    use std::path::Path;

    /// A format whose file "N records" holds N records of 10 bytes.
    struct Counted;
    impl RecordFormat for Counted {
        fn index(&self, path: &Path) -> Result<Vec<RecordSpan>> {
            let n: usize = path
                .to_str()
                .unwrap()
                .split(' ')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            Ok((0..n)
                .map(|i| RecordSpan {
                    offset: 10 * i as u64,
                    len: 10,
                })
                .collect())
        }
        fn decode(&self, _: &Path, _: usize, _: &[u8]) -> Result<Example> {
            unreachable!()
        }
    }

    fn cursor(sizes: &[usize], num_epochs: Option<usize>, shuffle_files: bool) -> RecordCursor {
        let files = sizes
            .iter()
            .map(|n| PathBuf::from(format!("{n} records")))
            .collect();
        let order = CursorOrder {
            num_epochs,
            shuffle_files,
            seed: 7,
        };
        let tally = Arc::new(CorruptTally::new(crate::CorruptRecords::Fail));
        RecordCursor::new(Arc::new(files), Arc::new(Counted), order, tally)
    }

    fn drain(c: &RecordCursor) -> Vec<(usize, usize)> {
        std::iter::from_fn(|| c.next().unwrap())
            .map(|w| (w.file, w.record))
            .collect()
    }

    #[test]
    fn walks_files_then_records_for_each_epoch() {
        let c = cursor(&[2, 0, 1], Some(2), false);
        assert_eq!(
            drain(&c),
            vec![(0, 0), (0, 1), (2, 0), (0, 0), (0, 1), (2, 0)]
        );
        assert_eq!(c.next().unwrap(), None);
    }

    #[test]
    fn numbers_records_in_order() {
        let c = cursor(&[3, 3], Some(1), false);
        let seqs: Vec<u64> = std::iter::from_fn(|| c.next().unwrap())
            .map(|w| w.seq)
            .collect();
        assert_eq!(seqs, (0..6).collect::<Vec<_>>());
    }

    #[test]
    fn shuffles_files_per_epoch_by_seed() {
        let sizes = [1; 8];
        let c = cursor(&sizes, Some(3), true);
        let files: Vec<usize> = drain(&c).into_iter().map(|(f, _)| f).collect();
        let epochs: Vec<&[usize]> = files.chunks(8).collect();
        for e in &epochs {
            let mut sorted = e.to_vec();
            sorted.sort();
            assert_eq!(
                sorted,
                (0..8).collect::<Vec<_>>(),
                "each epoch reads every file once"
            );
        }
        assert_ne!(epochs[0], epochs[1], "a new order each epoch");
        let again: Vec<usize> = drain(&cursor(&sizes, Some(3), true))
            .into_iter()
            .map(|(f, _)| f)
            .collect();
        assert_eq!(files, again, "same seed, same order");
    }

    #[test]
    fn chunks_stay_within_one_file_and_continue_the_numbering() {
        let c = cursor(&[5, 2], Some(1), false);
        let chunks: Vec<Vec<(u64, usize, usize)>> = std::iter::from_fn(|| {
            let chunk = c.next_chunk(3).unwrap();
            (!chunk.is_empty()).then(|| chunk.iter().map(|w| (w.seq, w.file, w.record)).collect())
        })
        .collect();
        assert_eq!(
            chunks,
            vec![
                vec![(0, 0, 0), (1, 0, 1), (2, 0, 2)],
                vec![(3, 0, 3), (4, 0, 4)],
                vec![(5, 1, 0), (6, 1, 1)],
            ]
        );
    }

    #[test]
    fn endless_epochs_keep_going_and_empty_input_is_an_error() {
        let c = cursor(&[2], None, false);
        assert_eq!((0..101).filter_map(|_| c.next().unwrap()).count(), 101);
        let empty = cursor(&[0, 0], None, false);
        assert!(empty.next().unwrap_err().to_string().contains("no record"));
    }
}
