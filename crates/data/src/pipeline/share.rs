//! [`Share`]: which files of every epoch one process of a multi-process job reads.
//!
//! Every process's pipeline is given the whole file list and reads the files whose index is
//! its rank modulo the number of ranks, so that a record is named the same way (its index in
//! the whole list) on every rank: what lets a job resumed on another number of ranks deal the
//! records its ranks had not read yet (see [`recut`](super::recut)).

use serde::{Deserialize, Serialize};

/// The files a pipeline reads each epoch: file `i` when `i mod ranks == rank`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Share {
    /// This process's rank, from 0.
    pub rank: usize,
    /// The number of processes sharing the files.
    pub ranks: usize,
}

impl Share {
    /// Every file: a process alone.
    pub const ALL: Share = Share { rank: 0, ranks: 1 };

    /// Rank `rank` of `ranks`.
    pub fn new(rank: usize, ranks: usize) -> Self {
        Self { rank, ranks }
    }

    /// Whether file `file` is in the share.
    pub fn holds(&self, file: usize) -> bool {
        file % self.ranks == self.rank
    }

    /// How many of `files` files are in the share.
    pub fn count(&self, files: usize) -> usize {
        (files + self.ranks - 1 - self.rank) / self.ranks
    }
}

#[cfg(test)]
mod tests {
    use super::Share;

    /// Against the files listed one by one: file i on rank i mod R, none twice.
    #[test]
    fn file_i_goes_to_rank_i_mod_r() {
        for (files, ranks) in [(5, 2), (5, 3), (2, 3), (7, 1)] {
            let mut seen = vec![0; files];
            for rank in 0..ranks {
                let share = Share::new(rank, ranks);
                let held: Vec<usize> = (0..files).filter(|&f| share.holds(f)).collect();
                assert_eq!(held.len(), share.count(files), "{rank} of {ranks}");
                assert!(held.iter().all(|f| f % ranks == rank));
                held.iter().for_each(|&f| seen[f] += 1);
            }
            assert!(seen.iter().all(|&n| n == 1), "{files} files, {ranks} ranks");
        }
    }
}
