//! Host batches: what the pipeline hands to the towers.
//!
//! A [`HostBatch`] is one contiguous block of `f32` images in NCHW order plus their `i64`
//! labels. It is a [`TowerBatch`]: the towers take it apart into slices, slice `i` borrowing a
//! contiguous range of the batch (no copy), and [`BatchSlice::to_tensors`] uploads only that
//! range to device `i`.

use burn::tensor::{Device, Int, Tensor, TensorData};
use towers_multigpu::{TowerBatch, split_slice};

use crate::buffer_pool::BufferPool;

/// One batch of images (NCHW, `f32`) and labels, in host memory.
#[derive(Debug, Clone)]
pub struct HostBatch {
    images: Vec<f32>,
    labels: Vec<i64>,
    image_shape: [usize; 3],
    /// Where the image buffer goes when the batch is dropped (a pipeline's batches).
    recycle: Option<BufferPool>,
}

impl PartialEq for HostBatch {
    fn eq(&self, other: &Self) -> bool {
        (&self.images, &self.labels, self.image_shape)
            == (&other.images, &other.labels, other.image_shape)
    }
}

impl Drop for HostBatch {
    fn drop(&mut self) {
        if let Some(pool) = self.recycle.take() {
            pool.put(std::mem::take(&mut self.images));
        }
    }
}

impl HostBatch {
    /// A batch of `labels.len()` images of shape `image_shape` = `[channels, height, width]`.
    ///
    /// # Panics
    /// If `images.len()` is not `labels.len()` times the image size.
    pub fn new(images: Vec<f32>, labels: Vec<i64>, image_shape: [usize; 3]) -> Self {
        let image_len: usize = image_shape.iter().product();
        assert_eq!(
            images.len(),
            labels.len() * image_len,
            "HostBatch: {} floats for {} images of shape {image_shape:?}",
            images.len(),
            labels.len()
        );
        Self {
            images,
            labels,
            image_shape,
            recycle: None,
        }
    }

    /// The same batch, its image buffer handed to `pool` when it is dropped.
    pub(crate) fn recycled_into(mut self, pool: BufferPool) -> Self {
        self.recycle = Some(pool);
        self
    }

    /// Number of examples.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// Whether the batch holds no example.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// `[channels, height, width]` of every image.
    pub fn image_shape(&self) -> [usize; 3] {
        self.image_shape
    }

    /// All images, NCHW, contiguous.
    pub fn images(&self) -> &[f32] {
        &self.images
    }

    /// All labels.
    pub fn labels(&self) -> &[i64] {
        &self.labels
    }

    /// The whole batch as one slice.
    pub fn as_slice(&self) -> BatchSlice<'_> {
        BatchSlice {
            images: &self.images,
            labels: &self.labels,
            image_shape: self.image_shape,
        }
    }
}

/// The towers split a host batch into consecutive slices, weighted by their examples.
impl TowerBatch for HostBatch {
    type Part<'a> = BatchSlice<'a>;

    fn len(&self) -> usize {
        self.labels.len()
    }

    /// Consecutive slices of `sizes` examples, borrowed (no copy).
    ///
    /// # Panics
    ///
    /// When the sizes add up to more than the batch.
    fn split(&self, sizes: &[usize]) -> Vec<BatchSlice<'_>> {
        let image_len: usize = self.image_shape.iter().product();
        let mut start = 0;
        (split_slice(&self.labels, sizes).into_iter())
            .map(|labels| {
                let end = start + labels.len();
                let images = &self.images[start * image_len..end * image_len];
                start = end;
                BatchSlice {
                    images,
                    labels,
                    image_shape: self.image_shape,
                }
            })
            .collect()
    }
}

/// A contiguous range of a [`HostBatch`], borrowed.
#[derive(Debug, Clone, Copy)]
pub struct BatchSlice<'a> {
    images: &'a [f32],
    labels: &'a [i64],
    image_shape: [usize; 3],
}

impl BatchSlice<'_> {
    /// Number of examples.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// Whether the slice holds no example.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// The slice's images, NCHW.
    pub fn images(&self) -> &[f32] {
        self.images
    }

    /// The slice's labels.
    pub fn labels(&self) -> &[i64] {
        self.labels
    }

    /// Uploads the slice to `device`: images `[n, c, h, w]` and labels `[n]`.
    ///
    /// Only this slice's bytes travel; the host copy into `TensorData` is the one copy made.
    pub fn to_tensors(&self, device: &Device) -> (Tensor<4>, Tensor<1, Int>) {
        let [c, h, w] = self.image_shape;
        let n = self.len();
        let images = Tensor::from_data(TensorData::new(self.images.to_vec(), [n, c, h, w]), device);
        let labels = Tensor::from_data(TensorData::new(self.labels.to_vec(), [n]), device);
        (images, labels)
    }
}

/// A tower loss over image batches from one over tensors: `image_loss(|m, x, y| ...)` takes each
/// tower's [`BatchSlice`], uploads it to the tower's device as images `[n, c, h, w]` and labels
/// `[n]`, and calls `loss` with them. For [`Towers::step`](towers_multigpu::Towers::step) on
/// [`HostBatch`]es.
pub fn image_loss<M, L>(
    loss: impl Fn(&M, Tensor<4>, Tensor<1, Int>) -> L + Sync,
) -> impl for<'a> Fn(&M, BatchSlice<'a>, &Device) -> L + Sync {
    move |model, slice, device| {
        let (images, labels) = slice.to_tensors(device);
        loss(model, images, labels)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(n: usize) -> HostBatch {
        let shape = [1, 2, 2];
        let images = (0..n * 4).map(|v| v as f32).collect();
        HostBatch::new(images, (0..n as i64).collect(), shape)
    }

    #[test]
    fn split_gives_consecutive_ranges() {
        let b = batch(5);
        let parts = b.split(&[2, 3]);
        assert_eq!(parts[0].labels(), &[0, 1]);
        assert_eq!(parts[1].labels(), &[2, 3, 4]);
        assert_eq!(parts[1].images()[0], 8.0);
        assert_eq!(parts[1].images().len(), 12);
        assert_eq!(b.weights(&[2, 3]), vec![2.0, 3.0]);
    }

    #[test]
    fn slice_uploads_its_own_range() {
        let b = batch(3);
        let parts = b.split(&[1, 2]);
        let (x, y) = parts[1].to_tensors(&Device::flex());
        assert_eq!(x.dims(), [2, 1, 2, 2]);
        assert_eq!(x.to_data().try_to_vec::<f32>().unwrap()[0], 4.0);
        assert_eq!(y.to_data().iter::<i64>().collect::<Vec<_>>(), vec![1, 2]);
    }
}
