//! Gradient reduction: from one gradient set per tower to the full-batch gradient.
//!
//! Tower `i` of a batch of `B` examples scales its mean loss by `n_i / B` before `backward`, so
//! its gradients are already weighted and the reduction is a plain sum:
//! `sum_i (n_i / B) grad(mean loss of slice i)` is exactly the gradient of the mean loss over
//! the whole batch. Under gradient accumulation the towers scale by `n_i` instead and the sum is
//! divided once by the examples of all micro-batches (see [`crate::TowersConfig`]).
//!
//! Burn 0.22.1 has a collective `all_reduce` (`burn::tensor::distributed`), but only CUDA
//! implements it (cubecl's other runtimes, flex and ndarray panic or refuse), and every device of
//! one collective must be of the same backend. Towers run on any backend and mix them, so the
//! all-reduce here is a ring over the towers' threads, built from `to_device` and `add`
//! (`ring.rs`), or, when every tower computes in host memory, shares of the sums handed round
//! by reference (`shares.rs`).

mod packing;
mod ring;
mod shares;

use std::collections::HashSet;
use std::thread;

use burn::module::{Module, ModuleVisitor, Param, ParamId};
use burn::optim::GradientsParams;
use burn::tensor::{Device, Tensor};
use serde::{Deserialize, Serialize};

use crate::devices::in_host_memory;
use ring::DEFAULT_BUCKET_BYTES;
pub(crate) use ring::{PeerGone, RingLink, ring};
use shares::{ShareLink, shared};

/// How the towers' gradients become one update; named `parameter_device` and `all_reduce` in
/// config files. More may come (`#[non_exhaustive]`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Reduce {
    /// The TF tower design: every tower sends its gradients to the model's own device (the
    /// parameter device), they are summed there in tower order, one optimizer updates the model,
    /// and the new weights are broadcast to the towers.
    #[default]
    ParameterDevice,
    /// All-reduce: each tower ends with the summed gradients on its own device and applies
    /// the same update with its own optimizer, so no device holds more than its replica. The
    /// model is tower 0's replica. A ring (`ring.rs`) moves `2 (N - 1) / N` of the gradients per
    /// tower instead of gathering `N - 1` gradient sets on one device; towers that all compute
    /// in host memory, where a move copies nothing, each sum a share instead (`shares.rs`).
    /// With a remote tower among them, or a tower on Burn's fusion backend, the chunks pass
    /// through this process's memory rather than server to server or device to device (see
    /// [`TowerDevice::is_remote`](crate::TowerDevice::is_remote) and
    /// [`TowerDevice::is_fused`](crate::TowerDevice::is_fused)).
    AllReduce,
}

/// One tower's part in a [`Reduce::AllReduce`]: by shares where every tower computes in host
/// memory (`shares.rs`), by the ring elsewhere (`ring.rs`).
pub(crate) enum AllReduceLink {
    Ring(RingLink),
    Shares(ShareLink),
}

/// The links of an all-reduce between towers on `devices`, in rank order: shares when every
/// device computes in host memory, else a ring in buckets of `bucket_bytes` whose chunks pass
/// through host memory when `through_host` (see [`RingLink`]).
pub(crate) fn all_reduce_links(
    devices: &[&Device],
    through_host: bool,
    bucket_bytes: usize,
) -> Vec<AllReduceLink> {
    match devices.iter().all(|d| in_host_memory(d)) {
        true => (shared(devices.len()).into_iter())
            .map(AllReduceLink::Shares)
            .collect(),
        false => (ring(devices.len(), through_host, bucket_bytes).into_iter())
            .map(AllReduceLink::Ring)
            .collect(),
    }
}

/// A rank-erased view of a gradient set: a model's trainable float parameters, in visiting
/// order, with what it takes to move their gradients in and out of a [`GradientsParams`]
/// (whose accessors need the rank as a const generic).
#[derive(Clone, Debug)]
pub(crate) struct Layout {
    slots: Vec<Slot>,
}

#[derive(Clone, Debug)]
struct Slot {
    id: ParamId,
    dims: Vec<usize>,
    /// `GradientsParams::remove::<D>`, flattened.
    take: fn(&mut GradientsParams, ParamId) -> Option<Tensor<1>>,
    /// `GradientsParams::register::<D>`, reshaped back to `dims`.
    put: fn(&mut GradientsParams, ParamId, Tensor<1>, &[usize]),
}

fn take<const D: usize>(grads: &mut GradientsParams, id: ParamId) -> Option<Tensor<1>> {
    grads.remove::<D>(id).map(|g| g.flatten(0, D - 1))
}

fn put<const D: usize>(grads: &mut GradientsParams, id: ParamId, flat: Tensor<1>, dims: &[usize]) {
    let dims: [usize; D] = dims.try_into().expect("a slot keeps its parameter's rank");
    grads.register::<D>(id, flat.reshape(dims));
}

struct SlotCollector {
    seen: HashSet<ParamId>,
    slots: Vec<Slot>,
}

impl ModuleVisitor for SlotCollector {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        // Running statistics and frozen weights never get gradients; a tied weight is visited
        // twice but has one gradient.
        let value = param.val();
        if value.is_require_grad() && self.seen.insert(param.id) {
            self.slots.push(Slot {
                id: param.id,
                dims: value.dims().to_vec(),
                take: take::<D>,
                put: put::<D>,
            });
        }
    }
}

impl Layout {
    /// The trainable parameters of `module`.
    pub(crate) fn of<M: Module>(module: &M) -> Self {
        let mut collector = SlotCollector {
            seen: HashSet::new(),
            slots: Vec::new(),
        };
        module.visit(&mut collector);
        Self {
            slots: collector.slots,
        }
    }

    /// Each parameter's slot, by id.
    pub(crate) fn slot_map(&self) -> std::collections::HashMap<ParamId, usize> {
        (self.slots.iter().enumerate())
            .map(|(i, slot)| (slot.id, i))
            .collect()
    }

    /// The number of values of each slot's gradient, in slot order.
    pub(crate) fn sizes(&self) -> Vec<usize> {
        (self.slots.iter())
            .map(|slot| slot.dims.iter().product())
            .collect()
    }

    /// The sum of gradient sets, each moved to `device` first and added in order, so the result
    /// does not depend on thread timing. A parameter missing from a set counts as zero. With one
    /// set this is a move to `device`.
    pub(crate) fn sum(&self, sets: Vec<GradientsParams>, device: &Device) -> GradientsParams {
        let parts = sets.into_iter().map(|grads| self.per_slot(grads)).collect();
        self.unflatten_present(summed(parts, device))
    }

    /// Each slot's gradient in `grads`, flattened, in slot order; `None` where it has none.
    pub(crate) fn per_slot(&self, mut grads: GradientsParams) -> Vec<Option<Tensor<1>>> {
        (self.slots.iter())
            .map(|slot| (slot.take)(&mut grads, slot.id))
            .collect()
    }

    /// The gradient set whose flattened gradients, in slot order, are `flat` (as
    /// [`Layout::per_slot`] gives them).
    pub(crate) fn unflatten_present(&self, flat: Vec<Option<Tensor<1>>>) -> GradientsParams {
        let mut grads = GradientsParams::new();
        for (slot, g) in self.slots.iter().zip(flat) {
            if let Some(g) = g {
                (slot.put)(&mut grads, slot.id, g, &slot.dims);
            }
        }
        grads
    }

    /// This tower's part of an all-reduce over `link`: the sum of every tower's `grads`, on
    /// `device`.
    pub(crate) fn all_reduce(
        &self,
        link: &AllReduceLink,
        grads: GradientsParams,
        device: &Device,
    ) -> Result<GradientsParams, PeerGone> {
        match link {
            AllReduceLink::Ring(link) => self.ring_all_reduce(link, grads, device),
            AllReduceLink::Shares(link) => self.shared_all_reduce(link, grads, device),
        }
    }

    /// `grads` and a copy of it; the two share their tensors.
    pub(crate) fn copy(&self, mut grads: GradientsParams) -> (GradientsParams, GradientsParams) {
        let mut copy = GradientsParams::new();
        for slot in &self.slots {
            if let Some(g) = (slot.take)(&mut grads, slot.id) {
                (slot.put)(&mut copy, slot.id, g.clone(), &slot.dims);
                (slot.put)(&mut grads, slot.id, g, &slot.dims);
            }
        }
        (grads, copy)
    }

    /// Every gradient of `grads`, flattened, in slot order; zeros where `grads` has none, so
    /// that processes whose sets differ still exchange lists of one shape.
    pub(crate) fn flatten(&self, grads: GradientsParams, device: &Device) -> Vec<Tensor<1>> {
        self.flatten_present(grads, device).0
    }

    /// [`flatten`](Self::flatten), and whether `grads` had each slot's gradient.
    pub(crate) fn flatten_present(
        &self,
        grads: GradientsParams,
        device: &Device,
    ) -> (Vec<Tensor<1>>, Vec<bool>) {
        (self.per_slot(grads).into_iter())
            .zip(&self.slots)
            .map(|(g, slot)| match g {
                Some(g) => (g, true),
                None => (
                    Tensor::zeros([slot.dims.iter().product::<usize>()], device),
                    false,
                ),
            })
            .unzip()
    }

    /// The gradient set of `flat` (in slot order) without the slots no rank had: `had` is the
    /// ranks' [`presence`] summed (weighted or not), 0 where none had the slot's gradient. An
    /// optimizer then leaves those parameters as they are, where a gradient of zeros would still
    /// move them (momentum, a decay added in the update).
    pub(crate) fn unflatten_where(&self, flat: Vec<Tensor<1>>, had: &[f32]) -> GradientsParams {
        let flat = flat.into_iter().zip(had);
        self.unflatten_present(flat.map(|(g, &had)| (had != 0.0).then_some(g)).collect())
    }

    /// Every gradient multiplied by `factor`.
    pub(crate) fn scale(&self, mut grads: GradientsParams, factor: f64) -> GradientsParams {
        for slot in &self.slots {
            if let Some(g) = (slot.take)(&mut grads, slot.id) {
                (slot.put)(&mut grads, slot.id, g.mul_scalar(factor), &slot.dims);
            }
        }
        grads
    }
}

/// Which gradients a rank had (`present`, per slot), as the values that travel with them: 1
/// where it had the slot's gradient, else 0. Summed over the ranks, they are 0 only where no
/// rank had it (see [`Layout::unflatten_where`]).
pub(crate) fn presence(present: &[bool]) -> Vec<f32> {
    present
        .iter()
        .map(|&had| f32::from(u8::from(had)))
        .collect()
}

/// Slot by slot, the gradient sets `parts` (as [`Layout::per_slot`] gives them) moved to
/// `device` and added in the order of `parts`, so the result does not depend on thread timing;
/// `None` where no set has that gradient.
fn summed(mut parts: Vec<Vec<Option<Tensor<1>>>>, device: &Device) -> Vec<Option<Tensor<1>>> {
    (0..parts.first().map_or(0, Vec::len))
        .map(|i| {
            (parts.iter_mut())
                .filter_map(|part| part[i].take())
                .map(|g| g.to_device(device))
                .reduce(|a, b| a + b)
        })
        .collect()
}

/// The [`Reduce::ParameterDevice`] reduction on its own: the sum of `grads` (one set per tower,
/// on any devices) on `device`, added in order. `module` is any replica: it names the
/// parameters.
pub fn reduce_to_device<M: Module>(
    module: &M,
    grads: Vec<GradientsParams>,
    device: &Device,
) -> GradientsParams {
    Layout::of(module).sum(grads, device)
}

/// The [`Reduce::AllReduce`] reduction on its own, as towers do it: one thread per tower, by
/// shares when every device computes in host memory, else by the ring in buckets of 25 MB.
/// Returns, for each `(grads, device)`, the sum of all sets on that device. `module` is any
/// replica: it names the parameters.
///
/// # Panics
///
/// When a tower's thread panics (a device failing mid-transfer); the panic is passed on.
pub fn all_reduce<M: Module>(
    module: &M,
    grads: Vec<(GradientsParams, Device)>,
) -> Vec<GradientsParams> {
    let devices: Vec<&Device> = grads.iter().map(|(_, d)| d).collect();
    // Tensors move device to device: these devices are not known to be remote.
    let links = all_reduce_links(&devices, false, DEFAULT_BUCKET_BYTES);
    all_reduce_over(module, grads, links)
}

/// The ring all-reduce on its own, whatever the devices, with buckets of `bucket_bytes` (0: one
/// per gradient; see [`TowersConfig::bucket_bytes`](crate::TowersConfig::bucket_bytes)).
///
/// # Panics
///
/// As [`all_reduce`].
pub fn all_reduce_in_buckets<M: Module>(
    module: &M,
    grads: Vec<(GradientsParams, Device)>,
    bucket_bytes: usize,
) -> Vec<GradientsParams> {
    let links = ring(grads.len(), false, bucket_bytes);
    all_reduce_over(
        module,
        grads,
        links.into_iter().map(AllReduceLink::Ring).collect(),
    )
}

/// Each `(grads, device)` all-reduced on a thread of its own over its link.
fn all_reduce_over<M: Module>(
    module: &M,
    grads: Vec<(GradientsParams, Device)>,
    links: Vec<AllReduceLink>,
) -> Vec<GradientsParams> {
    let layout = Layout::of(module);
    let layout = &layout;
    let results: Vec<_> = thread::scope(|s| {
        let handles: Vec<_> = grads
            .into_iter()
            .zip(links)
            .map(|((grads, device), link)| {
                s.spawn(move || layout.all_reduce(&link, grads, &device))
            })
            .collect();
        handles.into_iter().map(|h| h.join()).collect()
    });
    // A panic anywhere makes the other towers see PeerGone: pass the panic on, not that.
    let results: Vec<_> = results
        .into_iter()
        .collect::<thread::Result<_>>()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
    results
        .into_iter()
        .map(|r| r.expect("no tower's thread panicked, so none left the all-reduce"))
        .collect()
}

#[cfg(test)]
mod tests {
    use burn::module::Module;
    use burn::nn::{Linear, LinearConfig};
    use burn::tensor::{Tensor, TensorData};

    use super::*;

    #[derive(Module, Debug)]
    struct Two {
        a: Linear,
        b: Linear,
    }

    /// Gradients of a made-up loss on 4 inputs that depend on `seed` (no RNG: tests run in
    /// parallel and share the device's generator).
    fn grads_of(model: &Two, seed: usize, device: &Device) -> GradientsParams {
        let x: Vec<f32> = (0..12)
            .map(|i| ((i * 7 + seed * 5) % 11) as f32 / 5.0 - 1.0)
            .collect();
        let x = Tensor::<2>::from_data(TensorData::new(x, [4, 3]), device);
        let loss = model.b.forward(model.a.forward(x)).powi_scalar(2).mean();
        GradientsParams::from_grads(loss.backward(), model)
    }

    fn values(grads: &GradientsParams, model: &Two) -> Vec<f32> {
        let weights = [&model.a.weight, &model.b.weight];
        let biases = [&model.a.bias, &model.b.bias].map(|b| b.as_ref().unwrap());
        let weights = weights
            .iter()
            .map(|p| grads.get::<2>(p.id).unwrap().into_data());
        let biases = biases
            .iter()
            .map(|p| grads.get::<1>(p.id).unwrap().into_data());
        weights
            .chain(biases)
            .flat_map(|data| data.try_into_vec::<f32>().unwrap())
            .collect()
    }

    /// The ring against a direct sum, for ring sizes that leave chunks empty (a bias of 2
    /// values in 3 chunks). (Across two backends: the tower GPU tests, `flex,GPU`.)
    #[test]
    fn ring_equals_direct_sum() {
        let flex = Device::flex().autodiff();
        let model = Two {
            a: LinearConfig::new(3, 5).init(&flex),
            b: LinearConfig::new(5, 2).init(&flex),
        };
        for devices in [
            vec![flex.clone(); 2],
            vec![flex.clone(); 3],
            vec![flex.clone(); 4],
        ] {
            let sets = |model: &Two| -> Vec<(GradientsParams, Device)> {
                devices
                    .iter()
                    .enumerate()
                    .map(|(i, d)| {
                        let replica = model.clone().fork(d);
                        (grads_of(&replica, i, d), d.clone())
                    })
                    .collect()
            };
            let expected = values(
                &reduce_to_device(
                    &model,
                    sets(&model).into_iter().map(|s| s.0).collect(),
                    &flex,
                ),
                &model,
            );
            // A bucket per gradient; buckets of two gradients and of one; one bucket.
            for bytes in [0, 48, DEFAULT_BUCKET_BYTES] {
                let reduced = all_reduce_in_buckets(&model, sets(&model), bytes);
                assert_eq!(reduced.len(), devices.len());
                for (grads, device) in reduced.iter().zip(&devices) {
                    let g = grads.get::<2>(model.a.weight.id).unwrap();
                    assert_eq!(&g.device(), device, "each sum stays on its tower's device");
                    let got = values(grads, &model);
                    assert_eq!(got.len(), expected.len());
                    for (e, g) in expected.iter().zip(&got) {
                        assert!((e - g).abs() <= 1e-6 * e.abs().max(1.0), "{e} vs {g}");
                    }
                    assert_eq!(got, values(&reduced[0], &model), "towers agree bitwise");
                }
            }
            // By shares (flex computes in host memory): each sum is the parameter device's,
            // added in the same order, bit for bit.
            let reduced = all_reduce(&model, sets(&model));
            for (grads, device) in reduced.iter().zip(&devices) {
                let g = grads.get::<2>(model.b.weight.id).unwrap();
                assert_eq!(&g.device(), device, "each sum stays on its tower's device");
                assert_eq!(values(grads, &model), expected, "{} towers", devices.len());
            }
        }
    }

    #[test]
    fn a_gradient_missing_on_a_tower_counts_as_zero_and_one_missing_on_all_stays_missing() {
        let flex = Device::flex().autodiff();
        let model = Two {
            a: LinearConfig::new(3, 5).init(&flex),
            b: LinearConfig::new(5, 2).init(&flex),
        };
        let (b_bias, a_bias) = (
            model.b.bias.as_ref().unwrap().id,
            model.a.bias.as_ref().unwrap().id,
        );
        let sets = || -> Vec<(GradientsParams, Device)> {
            (0..3)
                .map(|i| {
                    let mut grads = grads_of(&model, i, &flex);
                    grads.remove::<1>(a_bias);
                    if i == 1 {
                        grads.remove::<1>(b_bias);
                    }
                    (grads, flex.clone())
                })
                .collect()
        };
        let expected = reduce_to_device(&model, sets().into_iter().map(|s| s.0).collect(), &flex);
        let expected = expected.get::<1>(b_bias).unwrap().into_data();
        let rings =
            [0, 48, DEFAULT_BUCKET_BYTES].map(|bytes| all_reduce_in_buckets(&model, sets(), bytes));
        for (how, reduced) in rings
            .into_iter()
            .chain([all_reduce(&model, sets())])
            .enumerate()
        {
            for grads in reduced {
                assert!(grads.get::<1>(a_bias).is_none(), "{how}: no tower had it");
                let got = grads.get::<1>(b_bias).unwrap().into_data();
                got.assert_approx_eq::<f32>(&expected, Default::default());
            }
        }
    }
}
