//! [`BoundingBox`]: where an object lies in an image, as datasets record it and the
//! crops that keep objects in view read it.

/// A box in an image, in TF's order and normalized coordinates: 0.0 is the top (left) edge,
/// 1.0 the bottom (right) edge.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BoundingBox {
    /// Top edge.
    pub ymin: f32,
    /// Left edge.
    pub xmin: f32,
    /// Bottom edge.
    pub ymax: f32,
    /// Right edge.
    pub xmax: f32,
}

impl BoundingBox {
    /// The whole image.
    pub const WHOLE: BoundingBox = BoundingBox {
        ymin: 0.0,
        xmin: 0.0,
        ymax: 1.0,
        xmax: 1.0,
    };
}
