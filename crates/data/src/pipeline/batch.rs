//! Host batches: what the pipeline hands to the towers.
//!
//! A [`HostBatch`] is one contiguous block of `f32` images in NCHW order plus their `i64`
//! labels. It is a [`TowerBatch`]: the towers take it apart into slices, slice `i` borrowing a
//! contiguous range of the batch (no copy), and [`BatchSlice::to_tensors`] uploads only that
//! range to device `i`, handing the tensor a view of the batch's buffer rather than a copy.

use std::ops::Range;
use std::sync::Arc;

use burn::tensor::{AllocationProperty, Bytes, DType, Device, Int, Tensor, TensorData};
use towers_multigpu::{TowerBatch, split_slice};

use crate::buffer_pool::BufferPool;

/// One batch of images (NCHW, `f32`) and labels, in host memory.
#[derive(Debug, Clone)]
pub struct HostBatch {
    /// Shared with the tensors [`BatchSlice::to_tensors`] makes, until they drop.
    images: Arc<Vec<f32>>,
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
    /// Hands the image buffer to the pool, unless a tensor (or a clone of the batch) still
    /// holds it: the buffer is then freed when the last of them drops.
    fn drop(&mut self) {
        if let Some(pool) = self.recycle.take()
            && let Some(images) = Arc::get_mut(&mut self.images)
        {
            pool.put(std::mem::take(images));
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
            images: Arc::new(images),
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
            buffer: &self.images,
            images: [0, self.images.len()],
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
                let images = [start * image_len, end * image_len];
                start = end;
                BatchSlice {
                    buffer: &self.images,
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
    /// The whole batch's images.
    buffer: &'a Arc<Vec<f32>>,
    /// This slice's range of them: `Range` is not `Copy`, and a slice is.
    images: [usize; 2],
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
        &self.buffer[self.range()]
    }

    /// Where [`Self::images`] lie in the batch's buffer.
    fn range(&self) -> Range<usize> {
        self.images[0]..self.images[1]
    }

    /// The slice's labels.
    pub fn labels(&self) -> &[i64] {
        self.labels
    }

    /// Uploads the slice to `device`: images `[n, c, h, w]` and labels `[n]`.
    ///
    /// Only this slice's bytes travel, and the images are not copied on the host to make the
    /// tensor: it gets a view of the batch's buffer (a flex tensor keeps the view; a GPU's
    /// upload reads from it). At Inception v3's batch of 32 the copy was 34 MB per step.
    pub fn to_tensors(&self, device: &Device) -> (Tensor<4>, Tensor<1, Int>) {
        let [c, h, w] = self.image_shape;
        let n = self.len();
        let view = SharedImages {
            buffer: Arc::clone(self.buffer),
            range: self.range(),
        };
        let bytes = Bytes::from_shared(bytes::Bytes::from_owner(view), AllocationProperty::Native);
        let images = Tensor::from_data(
            TensorData::from_bytes(bytes, [n, c, h, w], DType::F32),
            device,
        );
        let labels = Tensor::from_data(TensorData::new(self.labels.to_vec(), [n]), device);
        (images, labels)
    }
}

/// A range of a batch's images as the bytes a tensor is made from: it keeps the batch's buffer
/// alive as long as the tensor does.
struct SharedImages {
    buffer: Arc<Vec<f32>>,
    range: Range<usize>,
}

impl AsRef<[u8]> for SharedImages {
    fn as_ref(&self) -> &[u8] {
        bytemuck::cast_slice(&self.buffer[self.range.clone()])
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

    fn values(x: Tensor<4>) -> Vec<f32> {
        x.into_data().try_to_vec().unwrap()
    }

    /// The tensor holds a view of the batch's buffer (no copy) for as long as it lives.
    #[test]
    fn a_slice_uploads_a_view_of_the_batch_not_a_copy() {
        let b = batch(3);
        let (x, _) = b.split(&[1, 2])[1].to_tensors(&Device::flex());
        assert_eq!(
            Arc::strong_count(&b.images),
            2,
            "the tensor shares the buffer"
        );
        assert_eq!(
            values(x.clone()),
            (4..12).map(|v| v as f32).collect::<Vec<_>>()
        );
        drop(x);
        assert_eq!(
            Arc::strong_count(&b.images),
            1,
            "and lets it go when dropped"
        );
    }

    /// A pipeline's batch hands its buffer back to the pool when it drops after its tensors,
    /// and keeps it from the pool while a tensor still reads it.
    #[test]
    fn the_buffer_goes_back_to_the_pool_only_once_no_tensor_reads_it() {
        let pool = BufferPool::new(2);
        let pooled = |pool: &BufferPool| {
            let mut images = pool.take(8);
            images.extend((0..8).map(|v| v as f32));
            HostBatch::new(images, vec![0, 1], [1, 2, 2]).recycled_into(pool.clone())
        };
        let b = pooled(&pool);
        let at = b.images().as_ptr();
        let (x, _) = b.as_slice().to_tensors(&Device::flex());
        drop(x);
        drop(b);
        let back = pool.take(8);
        assert_eq!(back.as_ptr(), at, "back in the pool");

        let b = pooled(&pool);
        let at = b.images().as_ptr();
        let (x, _) = b.as_slice().to_tensors(&Device::flex());
        drop(b);
        let mut next = pool.take(8);
        assert_ne!(
            next.as_ptr(),
            at,
            "not in the pool while the tensor reads it"
        );
        next.resize(8, -1.0);
        assert_eq!(values(x), (0..8).map(|v| v as f32).collect::<Vec<_>>());
    }
}
