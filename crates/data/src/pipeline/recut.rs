//! Re-cutting the epoch in progress for a job resumed on another number of ranks.
//!
//! Each rank of the old job stood at its own [`InputPosition`] over its [`Share`] of the files:
//! records it had consumed, records in its example queue (the position's buffer) and the rest
//! of its epoch, not read yet. Its epoch in progress is that of its oldest record not
//! consumed; the records of that epoch it had not consumed are its buffered ones and the rest
//! of the epoch from its cursor, which a cursor started at its position hands out in that
//! order. Those of every old rank, in rank order, are dealt to the
//! new ranks in contiguous blocks of equal size (to one record), so that every record of the
//! epoch is read exactly once across the new ranks. Each new rank reads its block first (as a
//! resumed pipeline reads its buffer), then whole epochs of its own share, numbered after the
//! old ranks' last.
//!
//! Walking the rest of each old rank's epoch indexes its files: time linear in the records of
//! an epoch, once, when the world size changes.

use std::sync::Arc;

use super::layout::Layout;
use super::position::{CursorAt, InputPosition, RecordAt};
use super::record_cursor::{CursorOrder, RecordCursor};
use super::share::Share;
use crate::error::{Error, Result};

/// Where rank `share` of the new job goes on, after the ranks of the old job (as many as `old`
/// holds) stood at `old`, in rank order: its block of the records they had not consumed of
/// their epochs in progress, then its share of the files, from the next epoch on.
pub(crate) fn recut(
    old: &[InputPosition],
    layout: Arc<dyn Layout>,
    shuffle_files: bool,
    share: Share,
) -> Result<InputPosition> {
    let first = old
        .first()
        .ok_or_else(|| Error::Config("no input positions to re-cut".into()))?;
    // The callers checked every position against the files (by name: ranks may read copies
    // in directories of their own).
    if let Some(other) = old.iter().find(|p| p.seed != first.seed) {
        return Err(Error::Config(format!(
            "the ranks' input positions were saved with other seeds ({} and {})",
            first.seed, other.seed
        )));
    }
    let mut unread = Vec::new();
    for (rank, position) in old.iter().enumerate() {
        let old_share = Share::new(rank, old.len());
        unread.extend(unread_in_epoch(
            position,
            Arc::clone(&layout),
            shuffle_files,
            old_share,
        )?);
    }
    let block = |rank: usize| rank * unread.len() / share.ranks;
    let mine = &unread[block(share.rank)..block(share.rank + 1)];
    // Renumbered from 0: a record's number must be unique in this rank's sequence.
    let buffer: Vec<RecordAt> = (mine.iter().enumerate())
        .map(|(seq, r)| RecordAt {
            seq: seq as u64,
            ..*r
        })
        .collect();
    let epoch = old.iter().map(|p| p.next.epoch).max().unwrap_or(0) + 1;
    Ok(InputPosition {
        files: first.files.clone(),
        seed: first.seed,
        next: CursorAt {
            seq: buffer.len() as u64,
            epoch,
            slot: 0,
            record: 0,
        },
        skip: Vec::new(),
        buffer,
        shuffle: None,
    })
}

/// The records of its epoch in progress that the rank reading `share` had not consumed when
/// it stood at `position`: its buffered ones, then the rest of the epoch from its cursor.
fn unread_in_epoch(
    position: &InputPosition,
    layout: Arc<dyn Layout>,
    shuffle_files: bool,
    share: Share,
) -> Result<Vec<RecordAt>> {
    let order = CursorOrder {
        num_epochs: None,
        shuffle_files,
        share,
    };
    // The epoch in progress: that of the oldest record not consumed (a shuffle queue may hold
    // records of an epoch the cursor has left). Records of later epochs read ahead are left
    // to the new epochs.
    let buffered = position.buffer.iter().map(|r| r.epoch);
    let epoch = buffered
        .chain([position.next.epoch])
        .min()
        .expect("one at least");
    let cursor = RecordCursor::new(position, layout, order);
    let mut unread = Vec::new();
    // The cursor hands out the buffered records first, one at a time.
    for _ in 0..position.buffer.len() {
        unread.extend(
            (cursor.next_chunk(1)?.iter())
                .filter(|w| w.at.epoch <= epoch)
                .map(|w| w.at),
        );
    }
    loop {
        let chunk = cursor.next_chunk(1024)?;
        let in_epoch = chunk.iter().take_while(|w| w.at.epoch <= epoch);
        let before = unread.len();
        unread.extend(in_epoch.map(|w| w.at));
        if chunk.is_empty() || unread.len() - before < chunk.len() {
            return Ok(unread);
        }
    }
}
