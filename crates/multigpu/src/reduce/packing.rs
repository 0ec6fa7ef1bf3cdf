//! Gradient sets as flat buckets: packed into one tensor per bucket (zeros where a parameter
//! has no gradient), and unpacked into a view per gradient, as PyTorch DDP's
//! `gradient_as_bucket_view`. A bucket moves between devices as one tensor: on GPUs one copy
//! instead of one per parameter.

use burn::optim::GradientsParams;
use burn::tensor::{Device, Tensor};

use super::Layout;
use crate::buckets;

/// A gradient set as buckets: each bucket's slots, its tensor, and which slots had a
/// gradient.
pub(crate) struct Packed {
    pub(crate) buckets: Vec<Vec<usize>>,
    pub(crate) tensors: Vec<Tensor<1>>,
    pub(crate) present: Vec<bool>,
}

impl Layout {
    /// `grads` packed, on `device`, in buckets of about `bucket_bytes` (see
    /// [`buckets::in_backward_order`]).
    pub(crate) fn packed(
        &self,
        grads: GradientsParams,
        bucket_bytes: usize,
        device: &Device,
    ) -> Packed {
        let sizes = self.sizes();
        let buckets = buckets::in_backward_order(&sizes, bucket_bytes);
        let mut flat = self.per_slot(grads);
        let present = flat.iter().map(Option::is_some).collect();
        let tensors = (buckets.iter())
            .map(|slots| {
                let tensors = (slots.iter())
                    .map(|&s| (flat[s].take()).unwrap_or_else(|| Tensor::zeros([sizes[s]], device)))
                    .collect();
                buckets::joined(tensors)
            })
            .collect();
        Packed {
            buckets,
            tensors,
            present,
        }
    }

    /// The gradient set of `packed`: a view of its bucket per present gradient.
    pub(crate) fn unpacked(&self, packed: Packed) -> GradientsParams {
        let sizes = self.sizes();
        let mut out = GradientsParams::new();
        for (slots, bucket) in packed.buckets.iter().zip(&packed.tensors) {
            for (slot, view) in buckets::views(bucket, slots.iter().copied(), &sizes) {
                if packed.present[slot] {
                    let g = &self.slots[slot];
                    (g.put)(&mut out, g.id, view, &g.dims);
                }
            }
        }
        out
    }

    /// `grads` (on `from`) moved to `to` a bucket at a time; as they are when `from` is `to`.
    pub(crate) fn moved_in_buckets(
        &self,
        grads: GradientsParams,
        (from, to): (&Device, &Device),
        bucket_bytes: usize,
    ) -> GradientsParams {
        if from == to {
            return grads;
        }
        let mut packed = self.packed(grads, bucket_bytes, from);
        packed.tensors = (packed.tensors.into_iter())
            .map(|t| t.to_device(to))
            .collect();
        self.unpacked(packed)
    }
}
