//! [`BufferPool`]: batch buffers handed back when their batch is dropped, for the next batch.
//!
//! A batch of 32 Inception images is 34 MB, above glibc's largest mmap threshold (32 MB): a
//! fresh buffer per batch is a fresh mapping, every page of which faults and is zeroed by the
//! kernel, which costs more than the batcher's copy into it. A buffer that comes back is
//! already mapped.

use std::sync::{Arc, Mutex, PoisonError};

/// A bounded stack of spare `f32` buffers, shared by a pipeline and its batches.
#[derive(Debug, Clone)]
pub(crate) struct BufferPool {
    free: Arc<Mutex<Vec<Vec<f32>>>>,
    keep: usize,
}

impl BufferPool {
    /// A pool keeping at most `keep` spare buffers.
    pub(crate) fn new(keep: usize) -> Self {
        Self {
            free: Arc::default(),
            keep,
        }
    }

    /// An empty buffer with room for `len` values: a spare one when there is one.
    pub(crate) fn take(&self, len: usize) -> Vec<f32> {
        let mut buffer = self.take_as_is(len);
        buffer.clear();
        buffer
    }

    /// A spare buffer as it came back (at most `len` values kept), or a new empty one; with
    /// room for `len` values. Its values need no zeroing when the caller overwrites them.
    pub(crate) fn take_as_is(&self, len: usize) -> Vec<f32> {
        let spare = self
            .free
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        let mut buffer = spare.unwrap_or_default();
        buffer.truncate(len);
        buffer.reserve(len - buffer.len());
        buffer
    }

    /// Keeps `buffer` for a later [`take`](Self::take), unless the pool is full.
    pub(crate) fn put(&self, buffer: Vec<f32>) {
        let mut free = self.free.lock().unwrap_or_else(PoisonError::into_inner);
        if free.len() < self.keep {
            free.push(buffer);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_come_back_up_to_the_bound() {
        let pool = BufferPool::new(1);
        let a = pool.take(100);
        let at = a.as_ptr();
        pool.put(a);
        pool.put(vec![1.0; 10]); // over the bound: dropped
        let b = pool.take(50);
        assert!(b.is_empty() && b.capacity() >= 50);
        assert_eq!(b.as_ptr(), at, "the same allocation, reused");
        assert_eq!(pool.take(5).capacity(), 5, "none left: a new one");
        pool.put(vec![1.0, 2.0, 3.0]);
        assert_eq!(
            pool.take_as_is(2),
            [1.0, 2.0],
            "values kept, up to the length"
        );
    }
}
