//! Replicas in sync under [`Reduce::AllReduce`](crate::Reduce::AllReduce): every tower applies
//! the same summed gradient with its own optimizer, so replicas on one backend stay equal bit
//! for bit, but a backend that rounds its update differently (mixed backends) drifts. The
//! towers compare a checksum of every replica (values and places) with replica 0's every
//! [`TowersConfig::replica_check`](super::TowersConfig::replica_check) updates (and whenever
//! asked, e.g. before a checkpoint) and give every replica replica 0's weights when they
//! differ. Each tower reads its own replica, on its own thread (its device's stream, where the
//! replica's last update was queued), in one read.

use burn::module::{Module, ModuleVisitor, Param};
use burn::tensor::{DType, Tensor};

use std::any::Any;

use super::between_steps::State;
use super::tower::tower_failed;
use super::workers::Work;
use super::{ReplicaCheck, Towers, broadcast};
use crate::devices::TowerDevice;
use crate::error::{Error, ErrorChain, Result, panic_message};
use crate::{buckets, host_syncs};

impl<M: Module> Towers<M> {
    /// Compares every replica's weights with replica 0's (two sums per parameter tensor, of its
    /// values and of its values weighted by their places, each replica read to the host once,
    /// on its tower's thread) and, when any differs, gives every replica replica 0's weights
    /// (each tower keeps its optimizer's state). `None` unless the towers all-reduce.
    ///
    /// # Errors
    ///
    /// [`Error::TowerFailed`] where a tower's read panicked (its
    /// device failed), naming the tower and the panic; the replicas are left as they were.
    pub fn try_check_replicas(&mut self) -> Result<Option<ReplicaCheck>> {
        let State::AllReduce { replicas, .. } = &self.state else {
            return Ok(None);
        };
        let workers = self.workers.as_ref().expect("several towers have workers");
        let tasks: Vec<Work<'_, Vec<f64>>> = (replicas.iter().cloned())
            .map(|replica| Box::new(move || checksum(&replica)) as Box<_>)
            .collect();
        let sums = (workers.run(tasks, &self.towers, self.patience(), false))
            .into_iter()
            .enumerate()
            .map(|(i, sums)| sums.map_err(|panic| check_panicked(i, &self.towers[i], panic)))
            .collect::<Result<Vec<Vec<f64>>>>()?;
        let drift = (sums[1..].iter())
            .flat_map(|sums_i| sums_i.iter().zip(&sums[0]).map(|(a, b)| (a - b).abs()))
            .fold(0.0, f64::max);
        let differ = sums[1..].iter().any(|s| s != &sums[0]);
        if differ && let State::AllReduce { replicas, .. } = &mut self.state {
            // Running state is equal already (synced at every update).
            *replicas = broadcast(&replicas[0], &self.towers);
        }
        Ok(Some(ReplicaCheck {
            max_difference: drift,
            rebroadcast: differ,
        }))
    }

    /// [`try_check_replicas`](Self::try_check_replicas), for callers that cannot go on
    /// without it.
    ///
    /// # Panics
    ///
    /// Where a tower's read panics (its device failed), naming the tower and the panic.
    pub fn check_replicas(&mut self) -> Option<ReplicaCheck> {
        self.try_check_replicas()
            .unwrap_or_else(|error| panic!("{}", ErrorChain(&error)))
    }

    /// Test seam: replica `index` replaced by `perturb` of it, as a backend that rounds its
    /// updates differently would leave it; tests make replicas drift with it on backends that
    /// never do. Nothing unless the towers all-reduce.
    #[doc(hidden)]
    pub fn map_replica(&mut self, index: usize, perturb: impl FnOnce(M) -> M) {
        if let State::AllReduce { replicas, .. } = &mut self.state {
            replicas[index] = perturb(replicas[index].clone());
        }
    }

    /// A check every `replica_check` updates under the all-reduce.
    pub(super) fn scheduled_replica_check(&mut self) -> Result<Option<ReplicaCheck>> {
        self.updates += 1;
        let every = self.config.replica_check;
        match every > 0 && self.updates.is_multiple_of(every as u64) {
            true => self.try_check_replicas(),
            false => Ok(None),
        }
    }
}

/// The error of tower `tower`, whose read of its replica for the check panicked.
fn check_panicked(tower: usize, device: &TowerDevice, panic: Box<dyn Any + Send>) -> Error {
    let message = panic_message(&*panic);
    let error = format!(
        "reading its replica for the replica check panicked (the weights stand as last \
         updated): {message}"
    );
    tower_failed(tower, device, error.into())
}

/// Two sums of each trainable tensor of `model`, in visiting order, taken on the host: of its
/// values, and of its values weighted by their places (`Σ (i + 1)·v_i`), so that replicas
/// holding the same values in other places differ too. On the host: a sum on the device
/// would depend on the backend's order of additions, and replicas on two backends holding the
/// same weights would seem to differ. The tensors are joined on the device (in f32) and read
/// in one go: one wait for the device, not one per tensor.
fn checksum<M: Module>(model: &M) -> Vec<f64> {
    struct Flat(Vec<Tensor<1>>);
    impl ModuleVisitor for Flat {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            let value = param.val();
            if value.is_require_grad() {
                self.0
                    .push(value.detach().flatten::<1>(0, D - 1).cast(DType::F32));
            }
        }
    }
    let mut flat = Flat(Vec::new());
    model.visit(&mut flat);
    let lengths: Vec<usize> = flat.0.iter().map(|t| t.dims()[0]).collect();
    if lengths.is_empty() {
        return Vec::new();
    }
    host_syncs::note_read();
    let values = (buckets::joined(flat.0).into_data().convert::<f64>())
        .try_into_vec::<f64>()
        .expect("converted to f64");
    let mut rest = values.as_slice();
    let mut sums = Vec::with_capacity(2 * lengths.len());
    for len in lengths {
        let (values, after) = rest.split_at(len);
        rest = after;
        sums.push(values.iter().sum());
        let placed = values.iter().enumerate().map(|(i, v)| (i + 1) as f64 * v);
        sums.push(placed.sum());
    }
    sums
}

#[cfg(test)]
mod tests {
    use burn::nn::{Linear, LinearConfig};
    use burn::tensor::{Device, TensorData};

    use super::*;

    /// A linear layer with `weights` (2x2) and no bias, trainable.
    fn layer(weights: [f32; 4]) -> Linear {
        let device = Device::flex().autodiff();
        let mut layer = LinearConfig::new(2, 2).with_bias(false).init(&device);
        let tensor = Tensor::from_data(TensorData::new(weights.to_vec(), [2, 2]), &device);
        layer.weight = Param::from_tensor(tensor);
        layer
    }

    #[test]
    fn the_checksum_sees_values_in_other_places() {
        let weights = [0.5, -1.25, 2.0, 3.0];
        assert_eq!(checksum(&layer(weights)), checksum(&layer(weights)));
        // The same values, two swapped: the same sum, not the same checksum.
        let swapped = [-1.25, 0.5, 2.0, 3.0];
        let (a, b) = (checksum(&layer(weights)), checksum(&layer(swapped)));
        assert_eq!(a[0], b[0], "the plain sums agree");
        assert_ne!(a, b);
    }
}
