//! [`DeviceBatches`]: one batch per tower, each from that tower's own data loader.

use std::sync::Mutex;

use towers_multigpu::TowerBatch;

/// A step's batches, one per tower, as burn-train feeds its devices: each device has a data
/// loader of its own (`split_dataloader`), whose batches are already tensors on that device.
/// Tower `i` takes batch `i` whole (the towers' shares are equal, so each gets one), and
/// the towers average the gradients by the batches' weights.
pub(crate) struct DeviceBatches<I> {
    /// Each taken once, by its tower's thread.
    batches: Vec<Mutex<Option<I>>>,
    weights: Vec<f64>,
}

impl<I> DeviceBatches<I> {
    /// `batches[i]` for tower `i`, weighing `weights[i]` in the mean gradient.
    pub(crate) fn new(batches: Vec<I>, weights: Vec<f64>) -> Self {
        assert_eq!(batches.len(), weights.len(), "one weight per batch");
        let batches = batches.into_iter().map(|b| Mutex::new(Some(b))).collect();
        Self { batches, weights }
    }
}

/// Takes the batch out of a tower's part: each part is taken once.
pub(crate) fn take<I>(part: &Mutex<Option<I>>) -> Result<I, String> {
    let mut slot = part
        .lock()
        .map_err(|_| "a tower's batch was poisoned".to_string())?;
    slot.take()
        .ok_or_else(|| "a tower's batch was taken twice".to_string())
}

impl<I: Send> TowerBatch for DeviceBatches<I> {
    type Part<'a>
        = &'a Mutex<Option<I>>
    where
        I: 'a;

    /// Batches, not examples: the towers split them one per tower.
    fn len(&self) -> usize {
        self.batches.len()
    }

    fn split(&self, sizes: &[usize]) -> Vec<Self::Part<'_>> {
        assert!(
            sizes.iter().all(|&n| n == 1),
            "device batches split one per tower, not {sizes:?}"
        );
        self.batches.iter().collect()
    }

    fn weights(&self, _sizes: &[usize]) -> Vec<f64> {
        self.weights.clone()
    }
}
