//! [`RecordCursor`]: the shared, seeded order in which records are read.
//!
//! TF feeds reader threads from a filename queue filled by a producer thread. Here reader
//! threads pull single records from one cursor under a lock instead: the cursor walks the
//! epochs, the files of each epoch (shuffled by seed when asked) and the records of each file,
//! and numbers every record it hands out. That number fixes the record's place in the output
//! and seeds its random distortions, so parallel readers give the same batches as one reader.
//!
//! A cursor may start inside a run, at an [`InputPosition`]: it hands out the position's
//! buffered records first, then goes on from its `next` record, passing over those it skips.
//! Each handout also gets a ticket, its place among this cursor's handouts, which is what the
//! ordered hand-off orders by.
//!
//! What the files are is the [`Layout`]'s business: dataset files, or a Burn `Dataset`'s items.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use rand::SeedableRng;
use rand::seq::SliceRandom;

use super::layout::Layout;
use super::position::{InputPosition, RecordAt};
use super::share::Share;
use crate::error::{Error, Result};
use crate::format::RecordSpan;
use crate::rng::Rng;

/// One record to read: its place among the cursor's handouts, in the run and in the files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WorkItem {
    /// Place among this cursor's handouts, from 0.
    pub ticket: u64,
    /// The record.
    pub at: RecordAt,
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
    /// The files each epoch walks.
    pub share: Share,
}

struct State {
    epoch: u64,
    /// Files of this epoch in reading order, and the next slot to enter.
    order: Vec<usize>,
    position: usize,
    /// Spans of the current file, and the next record to hand out.
    spans: Arc<Vec<RecordSpan>>,
    record: usize,
    /// The record to start at in the next file entered (a resumed cursor's first file).
    start_record: usize,
    next_seq: u64,
    next_ticket: u64,
    /// Records to hand out before going on (a resumed cursor's buffer).
    replay: VecDeque<RecordAt>,
    /// Sequence numbers to pass over (read before the resume).
    skip: HashSet<u64>,
    /// Whether the current epoch handed out any record (an epoch of empty files must not
    /// spin forever).
    epoch_had_records: bool,
    done: bool,
}

impl State {
    fn tickets(&mut self, n: usize) -> u64 {
        self.next_ticket += n as u64;
        self.next_ticket - n as u64
    }
}

/// Hands out [`WorkItem`]s in a seeded order; shared by every reader thread.
pub(crate) struct RecordCursor {
    layout: Arc<dyn Layout>,
    order: CursorOrder,
    seed: u64,
    state: Mutex<State>,
}

impl RecordCursor {
    /// A cursor over the files of `layout` from `start` (see [`InputPosition::start`] for a
    /// fresh run; its `files` are not looked at).
    pub(super) fn new(start: &InputPosition, layout: Arc<dyn Layout>, order: CursorOrder) -> Self {
        let next = start.next;
        let state = State {
            epoch: next.epoch,
            order: Vec::new(),
            position: 0,
            spans: Arc::new(Vec::new()),
            record: 0,
            start_record: next.record,
            next_seq: next.seq,
            next_ticket: 0,
            replay: start.buffer.iter().copied().collect(),
            skip: start.skip.iter().map(|r| r.seq).collect(),
            epoch_had_records: next.slot > 0 || next.record > 0,
            done: order.num_epochs.is_some_and(|n| next.epoch >= n as u64),
        };
        let cursor = Self {
            layout,
            order,
            seed: start.seed,
            state: Mutex::new(state),
        };
        let mut state = cursor.state.lock().expect("fresh lock");
        cursor.order_epoch(&mut state);
        state.position = next.slot;
        drop(state);
        cursor
    }

    fn order_epoch(&self, state: &mut State) {
        let share = self.order.share;
        state.order = (0..self.layout.files())
            .filter(|&f| share.holds(f))
            .collect();
        if self.order.shuffle_files {
            let mut rng =
                Rng::seed_from_u64(self.seed ^ state.epoch.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            state.order.shuffle(&mut rng);
        }
        state.position = 0;
    }

    /// The next record to read, or `None` when the last epoch is done.
    #[cfg(test)]
    pub(super) fn next(&self) -> Result<Option<WorkItem>> {
        Ok(self.next_chunk(1)?.pop())
    }

    /// Up to `max` records with consecutive tickets: consecutive records of one file when
    /// the layout reads a chunk in one go, else the next ones in order across files; empty
    /// when the last epoch is done. Taking records in chunks keeps the lock, the reads and the
    /// ordered hand-off per chunk rather than per record. Indexing a file (done the first time
    /// the cursor enters it) may fail, naming the file.
    pub(super) fn next_chunk(&self, max: usize) -> Result<Vec<WorkItem>> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(at) = state.replay.pop_front() {
            return self.replayed(&mut state, at).map(|item| vec![item]);
        }
        let mut chunk = self.next_run(&mut state, max)?;
        while !self.layout.chunk_within_file() && !chunk.is_empty() && chunk.len() < max {
            let run = self.next_run(&mut state, max - chunk.len())?;
            if run.is_empty() {
                break;
            }
            chunk.extend(run);
        }
        Ok(chunk)
    }

    /// Up to `max` consecutive records of one file, numbered consecutively; empty when the
    /// last epoch is done.
    fn next_run(&self, state: &mut State, max: usize) -> Result<Vec<WorkItem>> {
        loop {
            if state.done {
                return Ok(Vec::new());
            }
            if state.record < state.spans.len() {
                let state = &mut *state;
                if state.skip.remove(&state.next_seq) {
                    state.record += 1;
                    state.next_seq += 1;
                    state.epoch_had_records = true;
                    continue;
                }
                let left = max.min(state.spans.len() - state.record);
                let take = match state.skip.is_empty() {
                    true => left,
                    false => (0..left as u64)
                        .take_while(|i| *i == 0 || !state.skip.contains(&(state.next_seq + i)))
                        .count(),
                };
                let ticket = state.tickets(take);
                let (slot, file) = (state.position - 1, state.order[state.position - 1]);
                let items = (0..take)
                    .map(|i| WorkItem {
                        ticket: ticket + i as u64,
                        at: RecordAt {
                            seq: state.next_seq + i as u64,
                            epoch: state.epoch,
                            slot,
                            file,
                            record: state.record + i,
                        },
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
                state.record = std::mem::take(&mut state.start_record);
                state.spans = match self.layout.spans(file) {
                    Ok(spans) => spans,
                    Err(e) => {
                        // The pipeline stops on this error: the other readers must end, not
                        // walk on past the file and report an epoch without records.
                        state.done = true;
                        return Err(e);
                    }
                };
                continue;
            }
            if !state.epoch_had_records {
                state.done = true;
                return Err(Error::Config(format!(
                    "no record in any of the {} input files",
                    state.order.len()
                )));
            }
            state.epoch += 1;
            state.start_record = 0;
            state.epoch_had_records = false;
            if Some(state.epoch) == self.order.num_epochs.map(|n| n as u64) {
                state.done = true;
                continue;
            }
            self.order_epoch(state);
        }
    }

    /// A buffered record of the position the cursor started at, with its span.
    fn replayed(&self, state: &mut State, at: RecordAt) -> Result<WorkItem> {
        let spans = self.layout.spans(at.file)?;
        let span = *spans.get(at.record).ok_or_else(|| {
            let reason = format!(
                "the input position names this record, but the file holds {} records",
                spans.len()
            );
            self.layout.record_error(at.file, at.record, reason)
        })?;
        Ok(WorkItem {
            ticket: state.tickets(1),
            at,
            span,
        })
    }
}

#[cfg(test)]
mod tests {
    use towers_testing::assert_error_names;

    use super::*;
    use crate::format::{Example, RecordFormat};
    use crate::pipeline::corrupt_records::CorruptTally;
    use crate::pipeline::layout::FileLayout;
    use std::path::{Path, PathBuf};

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

    fn start(sizes: &[usize]) -> InputPosition {
        let files = sizes
            .iter()
            .map(|n| PathBuf::from(format!("{n} records")))
            .collect();
        InputPosition::start(files, 7)
    }

    fn cursor_at(
        start: &InputPosition,
        num_epochs: Option<usize>,
        shuffle_files: bool,
    ) -> RecordCursor {
        let order = CursorOrder {
            num_epochs,
            shuffle_files,
            share: Share::ALL,
        };
        let tally = Arc::new(CorruptTally::new(crate::pipeline::CorruptRecords::Fail));
        let layout = FileLayout::new(start.files.clone(), Arc::new(Counted), tally);
        RecordCursor::new(start, Arc::new(layout), order)
    }

    fn cursor(sizes: &[usize], num_epochs: Option<usize>, shuffle_files: bool) -> RecordCursor {
        cursor_at(&start(sizes), num_epochs, shuffle_files)
    }

    fn drain(c: &RecordCursor) -> Vec<(usize, usize)> {
        std::iter::from_fn(|| c.next().unwrap())
            .map(|w| (w.at.file, w.at.record))
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
            .map(|w| w.at.seq)
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
            (!chunk.is_empty()).then(|| {
                chunk
                    .iter()
                    .map(|w| (w.at.seq, w.at.file, w.at.record))
                    .collect()
            })
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
        assert_error_names(&empty.next().unwrap_err(), &["no record"]);
    }

    /// A cursor started after any record of an uninterrupted one hands out the rest of its
    /// sequence: same numbers, files, slots and epochs.
    #[test]
    fn a_cursor_started_after_a_record_continues_the_sequence() {
        let sizes = [3, 0, 2, 4];
        let c = cursor(&sizes, Some(3), true);
        let whole: Vec<RecordAt> = std::iter::from_fn(|| c.next().unwrap())
            .map(|w| w.at)
            .collect();
        assert_eq!(whole.len(), 27);
        for cut in 0..whole.len() {
            let mut at = start(&sizes);
            at.next = whole[cut].after();
            let rest: Vec<RecordAt> = {
                let c = cursor_at(&at, Some(3), true);
                std::iter::from_fn(|| c.next().unwrap())
                    .map(|w| w.at)
                    .collect()
            };
            assert_eq!(rest, whole[cut + 1..], "after record {cut}");
        }
    }

    /// A resumed cursor hands out its buffer first, with tickets from 0, then passes over the
    /// records it skips.
    #[test]
    fn a_resumed_cursor_replays_its_buffer_and_passes_over_skipped_records() {
        let sizes = [5, 5];
        let c = cursor(&sizes, Some(1), false);
        let whole: Vec<RecordAt> = std::iter::from_fn(|| c.next().unwrap())
            .map(|w| w.at)
            .collect();
        let mut at = start(&sizes);
        at.buffer = vec![whole[3], whole[1]];
        at.next = whole[3].after();
        at.skip = vec![whole[5], whole[7]];
        let c = cursor_at(&at, Some(1), false);
        let chunks: Vec<Vec<(u64, u64)>> = std::iter::from_fn(|| {
            let chunk = c.next_chunk(4).unwrap();
            (!chunk.is_empty()).then(|| chunk.iter().map(|w| (w.ticket, w.at.seq)).collect())
        })
        .collect();
        assert_eq!(
            chunks,
            vec![
                vec![(0, 3)],
                vec![(1, 1)],
                vec![(2, 4)],
                vec![(3, 6)],
                vec![(4, 8), (5, 9)],
            ]
        );
    }
}
