//! [`DatasetSource`]: what a [`DatasetPipeline`](super::DatasetPipeline)'s readers do: `get`
//! each item by index; and [`ItemLayout`], the dataset as the record cursor sees it.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use burn::data::dataset::Dataset;

use crate::error::{Error, Result};
use crate::format::RecordSpan;
use crate::pipeline::engine::{Entry, Source};
use crate::pipeline::layout::Layout;
use crate::pipeline::record_cursor::WorkItem;
use crate::queue::panic_message;

/// A dataset of `len` items as files of one record each (item `i` is file `i`), so that the
/// cursor's per-epoch file shuffle is a full permutation of the indices.
pub(crate) struct ItemLayout {
    len: usize,
    /// Every file's one record (nothing to read: the source gets items by index).
    one: Arc<Vec<RecordSpan>>,
}

impl ItemLayout {
    /// A dataset of `len` items.
    pub(crate) fn new(len: usize) -> Self {
        Self {
            len,
            one: Arc::new(vec![RecordSpan { offset: 0, len: 0 }]),
        }
    }
}

impl Layout for ItemLayout {
    fn files(&self) -> usize {
        self.len
    }

    fn spans(&self, file: usize) -> Result<Arc<Vec<RecordSpan>>> {
        match file < self.len {
            true => Ok(Arc::clone(&self.one)),
            false => Err(self.record_error(file, 0, "index out of range".into())),
        }
    }

    fn chunk_within_file(&self) -> bool {
        false
    }

    fn record_error(&self, file: usize, _record: usize, reason: String) -> Error {
        Error::Item {
            index: file,
            len: self.len,
            reason,
        }
    }
}

/// A Burn dataset's items, batched as they are.
pub(crate) struct DatasetSource<I> {
    dataset: Arc<dyn Dataset<I>>,
    len: usize,
}

impl<I> DatasetSource<I> {
    /// Items of `dataset`.
    pub(super) fn new(dataset: Arc<dyn Dataset<I>>) -> Self {
        let len = dataset.len();
        Self { dataset, len }
    }

    /// Item `index`; a failed or panicking `get` is an error naming the index (a reader
    /// thread's panic alone would name only the thread).
    fn get(&self, index: usize) -> Result<I> {
        let len = self.len;
        let error = |reason| Error::Item { index, len, reason };
        match catch_unwind(AssertUnwindSafe(|| self.dataset.get(index))) {
            Ok(Ok(item)) => Ok(item),
            Ok(Err(e)) => Err(error(e.to_string())),
            Err(payload) => Err(error(format!(
                "get panicked: {}",
                panic_message(payload.as_ref())
            ))),
        }
    }
}

impl<I: Send + 'static> Source for DatasetSource<I> {
    type Example = I;
    type Batch = Vec<I>;
    type Scratch = ();

    fn load(&self, _: &[WorkItem], _: &mut ()) -> Result<()> {
        Ok(())
    }

    fn prepare(&self, chunk: &[WorkItem], i: usize, _: &()) -> Result<I> {
        self.get(chunk[i].at.file)
    }

    fn assemble(&self, items: Vec<Entry<I>>) -> Result<Vec<I>> {
        Ok(items.into_iter().map(|e| e.example).collect())
    }
}
