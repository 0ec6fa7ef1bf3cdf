//! Images in host memory: [`Image`] (`f32`, HWC), the unit every transform works on;
//! [`Rgb8`], a decoder's 8-bit output before any conversion; [`Planes`] (`f32`, CHW), the
//! network input a transform hands to the batcher.

use crate::buffer_pool::BufferPool;

/// An `f32` image in HWC order (height, width, channels), as TF's image ops see it.
///
/// Values keep whatever scale the reader produced (CIFAR-10: 0..=255) until a transform
/// changes it. [`Image::into_chw`] gives the CHW layout Burn's convolutions take.
#[derive(Debug, Clone, PartialEq)]
pub struct Image {
    data: Vec<f32>,
    height: usize,
    width: usize,
    channels: usize,
}

impl Image {
    /// An image from HWC data.
    ///
    /// # Panics
    /// If `data.len() != height * width * channels`.
    pub fn from_hwc(data: Vec<f32>, height: usize, width: usize, channels: usize) -> Self {
        assert_eq!(
            data.len(),
            height * width * channels,
            "image data of {} values for {height}x{width}x{channels}",
            data.len()
        );
        Self {
            data,
            height,
            width,
            channels,
        }
    }

    /// An image from CHW (planar) data, e.g. a CIFAR-10 record's R, G and B planes.
    pub fn from_chw(planes: &[f32], channels: usize, height: usize, width: usize) -> Self {
        let plane = height * width;
        assert_eq!(planes.len(), channels * plane, "CHW data size mismatch");
        let mut data = Vec::with_capacity(planes.len());
        for i in 0..plane {
            data.extend((0..channels).map(|c| planes[c * plane + i]));
        }
        Self::from_hwc(data, height, width, channels)
    }

    /// Height in pixels.
    pub fn height(&self) -> usize {
        self.height
    }

    /// Width in pixels.
    pub fn width(&self) -> usize {
        self.width
    }

    /// Channels per pixel.
    pub fn channels(&self) -> usize {
        self.channels
    }

    /// `[height, width, channels]`.
    pub fn shape(&self) -> [usize; 3] {
        [self.height, self.width, self.channels]
    }

    /// The HWC values.
    pub fn data(&self) -> &[f32] {
        &self.data
    }

    /// The HWC values, mutable.
    pub fn data_mut(&mut self) -> &mut [f32] {
        &mut self.data
    }

    /// The value at row `y`, column `x`, channel `c`.
    pub fn get(&self, y: usize, x: usize, c: usize) -> f32 {
        self.data[(y * self.width + x) * self.channels + c]
    }

    /// Every value in [0, 1] as a byte (times 255, rounded, clamped), in HWC order: the bytes
    /// an image made by [`Rgb8::to_image`] came from.
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        (self.data.iter())
            .map(|v| (v * 255.0).round().clamp(0.0, 255.0) as u8)
            .collect()
    }

    /// The values in CHW order, the layout of a Burn image tensor.
    pub fn into_chw(self) -> Vec<f32> {
        let plane = self.height * self.width;
        let mut out = vec![0.0; self.data.len()];
        for (i, pixel) in self.data.chunks_exact(self.channels).enumerate() {
            for (c, &v) in pixel.iter().enumerate() {
                out[c * plane + i] = v;
            }
        }
        out
    }
}

/// Decoded 8-bit RGB pixels, HWC: a decoder's output, kept as bytes so a transform converts to
/// `f32` only the pixels it uses. A reader keeps one and decodes into it again and again.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rgb8 {
    /// `height * width * 3` bytes.
    pub pixels: Vec<u8>,
    /// Height in pixels.
    pub height: usize,
    /// Width in pixels.
    pub width: usize,
}

impl Rgb8 {
    /// The image in [0, 1], as TF's `convert_image_dtype` to float gives it.
    pub fn to_image(&self) -> Image {
        let data = self.pixels.iter().map(|&v| unit(v)).collect();
        Image::from_hwc(data, self.height, self.width, 3)
    }
}

/// A byte as a value in [0, 1]: `v / 255`.
pub(crate) const fn unit(v: u8) -> f32 {
    v as f32 / 255.0
}

/// An `f32` image in CHW order (one plane per channel), the layout of a Burn image tensor.
#[derive(Debug, Clone)]
pub struct Planes {
    data: Vec<f32>,
    shape: [usize; 3],
    /// Where `data` goes when these planes are dropped, for the next image's planes.
    recycle: Option<BufferPool>,
}

impl PartialEq for Planes {
    fn eq(&self, other: &Self) -> bool {
        self.shape == other.shape && self.data == other.data
    }
}

impl Drop for Planes {
    fn drop(&mut self) {
        if let Some(pool) = self.recycle.take() {
            pool.put(std::mem::take(&mut self.data));
        }
    }
}

impl Planes {
    /// `channels` planes of `height` x `width` zeros.
    pub fn zeros(channels: usize, height: usize, width: usize) -> Self {
        Self {
            data: vec![0.0; channels * height * width],
            shape: [channels, height, width],
            recycle: None,
        }
    }

    /// Planes in a buffer from `pool`, which gets it back when these planes are dropped: a
    /// reader makes an image's planes, the batcher copies and drops them, and the next image
    /// reuses the memory (a fresh megabyte per image costs page faults). The values are those
    /// an earlier image left (zeros in a new buffer), for a caller that overwrites them all.
    pub(crate) fn reused_in(
        pool: &BufferPool,
        channels: usize,
        height: usize,
        width: usize,
    ) -> Self {
        let len = channels * height * width;
        let mut data = pool.take_as_is(len);
        data.resize(len, 0.0);
        Self {
            data,
            shape: [channels, height, width],
            recycle: Some(pool.clone()),
        }
    }

    /// `[channels, height, width]`.
    pub fn shape(&self) -> [usize; 3] {
        self.shape
    }

    /// The CHW values.
    pub fn data(&self) -> &[f32] {
        &self.data
    }

    /// The CHW values, mutable.
    pub fn data_mut(&mut self) -> &mut [f32] {
        &mut self.data
    }

    /// The three planes of an RGB image, mutable.
    ///
    /// # Panics
    /// If there are not 3 channels.
    pub fn rgb_mut(&mut self) -> [&mut [f32]; 3] {
        assert_eq!(self.shape[0], 3, "RGB planes of a {:?} image", self.shape);
        let plane = self.shape[1] * self.shape[2];
        let (r, gb) = self.data.split_at_mut(plane);
        let (g, b) = gb.split_at_mut(plane);
        [r, g, b]
    }

    /// The CHW values.
    pub fn into_data(mut self) -> Vec<f32> {
        self.recycle = None;
        std::mem::take(&mut self.data)
    }

    /// The same image in HWC order.
    pub fn to_image(&self) -> Image {
        let [c, h, w] = self.shape;
        Image::from_chw(&self.data, c, h, w)
    }
}

impl From<Image> for Planes {
    fn from(image: Image) -> Self {
        let shape = [image.channels(), image.height(), image.width()];
        Self {
            data: image.into_chw(),
            shape,
            recycle: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chw_round_trip() {
        // 2 channels of 2x3: channel 0 = 0..6, channel 1 = 10..16
        let planes: Vec<f32> = (0..6).chain(10..16).map(|v| v as f32).collect();
        let img = Image::from_chw(&planes, 2, 2, 3);
        assert_eq!(img.get(1, 2, 0), 5.0);
        assert_eq!(img.get(1, 2, 1), 15.0);
        assert_eq!(&img.data()[..4], &[0.0, 10.0, 1.0, 11.0]);
        assert_eq!(img.into_chw(), planes);
    }
}
