//! A gradient-ready hook for every backend: each parameter's gradient is handed out the moment
//! backward has finished it, while backward goes on with the layers below.
//!
//! # Why not Burn's own hook
//!
//! Burn 0.22.1's autodiff has one (`DistributedRegistration::on_register`, which calls
//! `DistributedOps::submit_gradient_sync` once a marked parameter's gradient is complete), but it
//! can only drive Burn's own sync server, which reduces with `DistributedOps::all_reduce`: CUDA
//! implements that, while flex, ndarray and wgpu panic (`unimplemented!` or cubecl's
//! `ComputeServer::all_reduce`), every device of one collective must be of one backend, and
//! nothing crosses processes. The towers mix backends and exchange over MPI, so they need the
//! hook without the reduction.
//!
//! # How
//!
//! [`Tap::attach`] maps a replica's trainable parameters to `tap(p)`, an identity operation
//! (the backend extension [`GradientTap`]) whose backward step first hands the gradient of its
//! output, i.e. of `p`, to a [`Tapped`] channel, then passes it on to `p` unchanged. Autodiff
//! runs a node's backward step only after every use of it has added its share, so what the tap
//! hands out is final. A parameter used twice (tied weights) is tapped once and the tapped
//! value used at both places. The tap works on every backend Burn dispatches to here (flex,
//! ndarray, the cubecl ones, remote) and changes no value: outputs and gradients are those of
//! the untapped model, bit for bit.

use std::any::Any;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{LazyLock, Mutex};

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::tensor::FloatTensor;
use burn::backend::{Autodiff, Backend, Dispatch, TensorMetadata};
use burn::module::{Module, ModuleMapper, Param, ParamId};
use burn::tensor::Tensor;

/// Reads a finished gradient as `f32` values, waiting for the device if it is still computing.
/// Runs on whichever thread needs the values (e.g. the one that sends them to other ranks).
pub(crate) type ReadGradient = Box<dyn FnOnce() -> Result<Vec<f32>, String> + Send>;

/// What the taps of one tower report, in the order backward produces it.
pub(crate) enum Tapped {
    /// The gradient of the parameter in layout slot `slot` is final.
    Gradient {
        tower: usize,
        slot: usize,
        read: ReadGradient,
    },
    /// The tower's backward pass is over (or failed): slots it did not report got no gradient.
    Finished { tower: usize },
}

pub(crate) use extension::GradientTap;

/// The extension, apart: its expansion names `NdArray`, deprecated in Burn 0.22.
mod extension {
    #![allow(deprecated)]
    // Built without a backend feature, the expansion's routing leaves `key` unused.
    #![cfg_attr(
        not(any(
            feature = "flex",
            feature = "ndarray",
            feature = "gpu",
            feature = "remote"
        )),
        allow(unused_variables)
    )]

    use burn::backend::tensor::FloatTensor;
    use burn::backend::{Backend, backend_extension};

    /// The identity, whose backward pass reports its gradient to the tap `key` names.
    #[backend_extension(
        Flex: cfg(feature = "flex"),
        NdArray: cfg(feature = "ndarray"),
        Cube: cfg(feature = "gpu"),
        Remote: cfg(feature = "remote"),
        Autodiff
    )]
    pub(crate) trait GradientTap: Backend {
        /// `x` itself; under autodiff, its gradient goes to the tap `key` names.
        fn towers_gradient_tap(x: FloatTensor<Self>, key: u64) -> FloatTensor<Self> {
            let _ = key; // Without autodiff there is no gradient to report.
            x
        }
    }

    #[cfg(feature = "flex")]
    impl GradientTap for burn::backend::Flex {}
    #[cfg(feature = "ndarray")]
    impl GradientTap for burn::backend::NdArray {}
    #[cfg(feature = "gpu")]
    impl GradientTap for burn::backend::Cube {}
    #[cfg(feature = "remote")]
    impl GradientTap for burn::backend::Remote {}
}

impl<B: Backend, C: CheckpointStrategy> GradientTap for Autodiff<B, C> {
    fn towers_gradient_tap(x: FloatTensor<Self>, key: u64) -> FloatTensor<Self> {
        match TapBackward
            .prepare::<C>([x.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => prep.finish(key, x.into_primitive()),
            OpsKind::UnTracked(prep) => prep.finish(x.into_primitive()),
        }
    }
}

#[derive(Debug)]
struct TapBackward;

impl<B: Backend> Backward<B, 1> for TapBackward {
    type State = u64;

    fn backward(self, ops: Ops<u64, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let grad = grads.consume::<B>(&ops.node);
        // Lazy backends queue work per thread: hand it over before another thread reads.
        let _ = B::flush(&grad.device());
        let copy = grad.clone();
        report(ops.state, Box::new(move || read_f32::<B>(copy)));
        if let Some(parent) = &ops.parents[0] {
            grads.register::<B>(parent.id, grad);
        }
    }
}

fn read_f32<B: Backend>(grad: FloatTensor<B>) -> Result<Vec<f32>, String> {
    let data = pollster::block_on(B::float_into_data(grad))
        .map_err(|e| format!("cannot read a gradient from its device: {e:?}"))?;
    data.convert::<f32>()
        .try_into_vec::<f32>()
        .map_err(|e| format!("cannot read a gradient as f32: {e:?}"))
}

/// The open taps: key's high half -> (tower, where its reports go).
type OpenTaps = HashMap<u64, (usize, Sender<Tapped>)>;
static TAPS: LazyLock<Mutex<OpenTaps>> = LazyLock::new(|| Mutex::new(HashMap::new()));
static NEXT_TAP: AtomicU64 = AtomicU64::new(1);

fn report(key: u64, read: ReadGradient) {
    let (id, slot) = (key >> 32, (key & 0xFFFF_FFFF) as usize);
    let taps = TAPS.lock().unwrap_or_else(|e| e.into_inner());
    // A tap closed since (its step dropped) has no one left to tell.
    if let Some((tower, sender)) = taps.get(&id) {
        let _ = sender.send(Tapped::Gradient {
            tower: *tower,
            slot,
            read,
        });
    }
}

/// One tower's tap for one backward pass. Dropping it (also while unwinding from a panic in
/// the tower) reports [`Tapped::Finished`] and closes it.
pub(crate) struct Tap {
    id: u64,
    tower: usize,
    sender: Sender<Tapped>,
}

impl Tap {
    /// A tap for `tower` that reports to `sender`.
    pub(crate) fn new(tower: usize, sender: Sender<Tapped>) -> Self {
        let id = NEXT_TAP.fetch_add(1, Ordering::Relaxed);
        let mut taps = TAPS.lock().unwrap_or_else(|e| e.into_inner());
        taps.insert(id, (tower, sender.clone()));
        Self { id, tower, sender }
    }

    /// `model` with every parameter of `slots` (parameter -> its slot) tapped; everything
    /// else, running statistics included, shared with `model`.
    pub(crate) fn attach<M: Module>(&self, model: &M, slots: &HashMap<ParamId, usize>) -> M {
        model.clone().map(&mut Attach {
            id: self.id,
            slots,
            tapped: HashMap::new(),
        })
    }
}

impl Drop for Tap {
    fn drop(&mut self) {
        TAPS.lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.id);
        let _ = self.sender.send(Tapped::Finished { tower: self.tower });
    }
}

struct Attach<'a> {
    id: u64,
    slots: &'a HashMap<ParamId, usize>,
    /// The tapped value of each parameter mapped so far (a `Tensor<D>`), for tied weights.
    tapped: HashMap<ParamId, Box<dyn Any>>,
}

impl ModuleMapper for Attach<'_> {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let Some(&slot) = self.slots.get(&param.id) else {
            return param;
        };
        let key = self.id << 32 | slot as u64;
        let (id, value, mapper) = param.consume();
        let tapped = self
            .tapped
            .entry(id)
            .or_insert_with(|| Box::new(tap(value, key)))
            .downcast_ref::<Tensor<D>>()
            .expect("a parameter keeps its rank")
            .clone();
        Param::from_mapped_value(id, tapped, mapper)
    }
}

fn tap<const D: usize>(x: Tensor<D>, key: u64) -> Tensor<D> {
    Tensor::from_dispatch(<Dispatch as GradientTap>::towers_gradient_tap(
        x.into_dispatch(),
        key,
    ))
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use burn::module::Module;
    use burn::nn::{Linear, LinearConfig};
    use burn::optim::GradientsParams;
    use burn::tensor::{Device, Tensor, TensorData};

    use super::*;
    use crate::reduce::Layout;

    /// `a` is used twice (tied), `unused` never.
    #[derive(Module, Debug)]
    struct Tied {
        a: Linear,
        b: Linear,
        unused: Linear,
    }

    fn loss(model: &Tied, device: &Device) -> Tensor<1> {
        let x: Vec<f32> = (0..12).map(|i| (i % 5) as f32 / 2.0 - 1.0).collect();
        let x = Tensor::<2>::from_data(TensorData::new(x, [4, 3]), device);
        let h = model.a.forward(x).tanh();
        let h = model.a.forward(h.narrow(1, 0, 3)).tanh();
        model.b.forward(h).powi_scalar(2).mean()
    }

    /// What the taps report is every used parameter's whole gradient, as from_grads gives it,
    /// once each; then the tower's end. On flex and on ndarray.
    #[test]
    fn taps_report_each_final_gradient_once() {
        #[allow(deprecated)]
        let devices = [Device::flex().autodiff(), Device::ndarray().autodiff()];
        for device in devices {
            let model = Tied {
                a: LinearConfig::new(3, 3).init(&device),
                b: LinearConfig::new(3, 2).init(&device),
                unused: LinearConfig::new(2, 2).init(&device),
            };
            let layout = Layout::of(&model);
            let mut expected =
                GradientsParams::from_grads(loss(&model, &device).backward(), &model);
            let expected = layout.flatten(expected_take(&mut expected), &device);

            let (sender, receiver) = mpsc::channel();
            let tap = Tap::new(3, sender);
            let tapped = tap.attach(&model, &layout.slot_map());
            let grads = loss(&tapped, &device).backward();
            drop(grads);
            drop(tap);
            let mut reported = vec![None; expected.len()];
            let mut finished = false;
            for report in receiver.iter() {
                match report {
                    Tapped::Gradient { tower, slot, read } => {
                        assert_eq!(tower, 3);
                        assert!(!finished, "a report after the end");
                        assert!(reported[slot].is_none(), "slot {slot} reported twice");
                        reported[slot] = Some(read().unwrap());
                    }
                    Tapped::Finished { tower } => {
                        assert_eq!(tower, 3);
                        finished = true;
                    }
                }
            }
            assert!(finished);
            let unused = [
                &model.unused.weight.id,
                &model.unused.bias.as_ref().unwrap().id,
            ];
            let slots = layout.slot_map();
            for (slot, (got, want)) in reported.iter().zip(&expected).enumerate() {
                let want: Vec<f32> = want.to_data().try_to_vec().unwrap();
                let is_unused = unused.iter().any(|id| slots[*id] == slot);
                match got {
                    None => assert!(is_unused, "slot {slot} was never reported"),
                    Some(got) => assert_eq!(got, &want, "slot {slot}, bit for bit"),
                }
            }
        }
    }

    fn expected_take(grads: &mut GradientsParams) -> GradientsParams {
        std::mem::replace(grads, GradientsParams::new())
    }
}
