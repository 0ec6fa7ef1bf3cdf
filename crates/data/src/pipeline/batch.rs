//! Host batches: what the pipeline hands to the towers.
//!
//! A [`HostBatch`] is one contiguous block of `f32` images in NCHW order plus their `i64`
//! labels. Towers take it apart with [`HostBatch::split`]: slice `i` borrows a contiguous range
//! of the batch (no copy) and [`BatchSlice::to_tensors`] uploads only that range to device `i`.

use burn::tensor::{Device, Int, Tensor, TensorData};

use super::buffer_pool::BufferPool;
use crate::error::Error;

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

    /// Splits the batch into consecutive slices of the given sizes.
    ///
    /// The sizes must add up to the batch size and none may be zero: a batch that cannot be
    /// split as asked is an error, never a silent drop.
    pub fn split(&self, sizes: &[usize]) -> Result<Vec<BatchSlice<'_>>, Error> {
        let total: usize = sizes.iter().sum();
        if total != self.len() || sizes.contains(&0) {
            return Err(Error::Split(format!(
                "cannot split a batch of {} into slices of {sizes:?}",
                self.len()
            )));
        }
        let image_len: usize = self.image_shape.iter().product();
        let mut start = 0;
        Ok(sizes
            .iter()
            .map(|&n| {
                let slice = BatchSlice {
                    images: &self.images[start * image_len..(start + n) * image_len],
                    labels: &self.labels[start..start + n],
                    image_shape: self.image_shape,
                };
                start += n;
                slice
            })
            .collect())
    }
}

/// Slice sizes for `batch` examples shared out in proportion to `shares`.
///
/// Rounds by largest remainder, so the sizes add up to `batch` exactly; equal shares give sizes
/// that differ by at most one. An error when a share is not positive and finite, or when some
/// device would get no example.
pub fn split_sizes(batch: usize, shares: &[f64]) -> Result<Vec<usize>, Error> {
    if shares.is_empty() || shares.iter().any(|s| !s.is_finite() || *s <= 0.0) {
        return Err(Error::Split(format!(
            "device shares must be positive numbers, got {shares:?}"
        )));
    }
    let total: f64 = shares.iter().sum();
    let exact: Vec<f64> = shares.iter().map(|s| s / total * batch as f64).collect();
    let mut sizes: Vec<usize> = exact.iter().map(|x| x.floor() as usize).collect();
    let mut order: Vec<usize> = (0..shares.len()).collect();
    // Largest fractional part first; ties go to the earlier device.
    order.sort_by(|&a, &b| {
        let (fa, fb) = (exact[a] - exact[a].floor(), exact[b] - exact[b].floor());
        fb.total_cmp(&fa).then(a.cmp(&b))
    });
    let missing = batch - sizes.iter().sum::<usize>();
    for &i in order.iter().take(missing) {
        sizes[i] += 1;
    }
    if sizes.contains(&0) {
        return Err(Error::Split(format!(
            "a batch of {batch} split by shares {shares:?} leaves a device without examples \
             (sizes {sizes:?}): use a larger batch or fewer devices"
        )));
    }
    Ok(sizes)
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
        let parts = b.split(&[2, 3]).unwrap();
        assert_eq!(parts[0].labels(), &[0, 1]);
        assert_eq!(parts[1].labels(), &[2, 3, 4]);
        assert_eq!(parts[1].images()[0], 8.0);
        assert_eq!(parts[1].images().len(), 12);
    }

    #[test]
    fn split_rejects_sizes_that_do_not_cover_the_batch() {
        let b = batch(5);
        assert!(b.split(&[2, 2]).is_err());
        assert!(b.split(&[5, 0]).is_err());
        assert!(b.split(&[3, 3]).is_err());
    }

    #[test]
    fn split_sizes_by_largest_remainder() {
        assert_eq!(split_sizes(128, &[1.0, 1.0]).unwrap(), vec![64, 64]);
        assert_eq!(split_sizes(128, &[1.0; 3]).unwrap(), vec![43, 43, 42]);
        assert_eq!(split_sizes(10, &[3.0, 1.0]).unwrap(), vec![8, 2]);
        assert_eq!(split_sizes(7, &[1.0, 2.0, 4.0]).unwrap(), vec![1, 2, 4]);
        assert!(split_sizes(2, &[1.0; 3]).is_err());
        assert!(split_sizes(8, &[1.0, 0.0]).is_err());
        assert!(split_sizes(8, &[]).is_err());
    }

    #[test]
    fn slice_uploads_its_own_range() {
        let b = batch(3);
        let parts = b.split(&[1, 2]).unwrap();
        let (x, y) = parts[1].to_tensors(&Device::flex());
        assert_eq!(x.dims(), [2, 1, 2, 2]);
        assert_eq!(x.to_data().try_to_vec::<f32>().unwrap()[0], 4.0);
        assert_eq!(y.to_data().iter::<i64>().collect::<Vec<_>>(), vec![1, 2]);
    }
}
