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
//! (the backend extension [`GradientTap`]) whose backward step hands the gradient of its
//! output, i.e. of `p`, to a [`Tapped`] channel (and not on to `p`: the tapped model's own
//! gradients are never read). Autodiff runs a node's backward step only after every use of it
//! has added its share, so what the tap hands out is final. A parameter used twice (tied
//! weights) is tapped once and the tapped value used at both places. The tap works on every
//! backend Burn dispatches to here (flex, ndarray, the cubecl ones, remote) and changes no
//! value: outputs and reported gradients are those of the untapped model, bit for bit.
//!
//! # When a tap reports
//!
//! Burn's autodiff runs backward level by level: a node's level (its `order`) is one more than
//! its highest parent's, and the levels run from the loss's down to 1. A tap on a parameter (a
//! leaf, order 0) would be at level 1, so every tap would report at the very end of backward,
//! after the last layer's gradient: nothing left to overlap. So each tap takes a second,
//! untracked input, an *anchor* of a chosen order (an untracked tensor's order counts, but it is
//! no parent: no gradient flows to it), which puts the tap at that order + 1. Any order is
//! correct, since the tap's consumers are then ordered above it and run first; the order only
//! decides when the report comes. [`TapSchedule`] picks it: the first step measures the depth of
//! the loss (a probe on the loss records its order), later steps put the tap of the parameter in
//! layout slot `s` of `S` at about `s / S` of that depth, a little below where a forward pass in
//! layout order uses it, so that the report follows the parameter's last use by backward.

use std::any::Any;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{LazyLock, Mutex};

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::tensor::FloatTensor;
use burn::backend::{Autodiff, Backend, Dispatch};
use burn::module::{Module, ModuleMapper, Param, ParamId};
use burn::tensor::Tensor;

use crate::error::{Cause, While};
use crate::host_syncs;

/// Reads a finished gradient as `f32` values, waiting for the device if it is still computing.
/// Runs on whichever thread needs the values (e.g. the one that sends them to other ranks).
pub(crate) type ReadGradient = Box<dyn FnOnce() -> Result<Vec<f32>, Cause> + Send>;

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
        /// `x` itself; under autodiff, its gradient goes to the tap `key` names, and the tap
        /// sits one level above `anchor` (untracked: no gradient goes to it).
        fn towers_gradient_tap(
            x: FloatTensor<Self>,
            anchor: FloatTensor<Self>,
            key: u64,
        ) -> FloatTensor<Self> {
            // Without autodiff there is no gradient to report and no level.
            let _ = (anchor, key);
            x
        }

        /// `x` itself; under autodiff, its backward pass tells the tap `key` names how deep
        /// the graph below `x` is.
        fn towers_depth_probe(x: FloatTensor<Self>, key: u64) -> FloatTensor<Self> {
            let _ = key;
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
    fn towers_gradient_tap(
        x: FloatTensor<Self>,
        anchor: FloatTensor<Self>,
        key: u64,
    ) -> FloatTensor<Self> {
        match TapBackward
            .prepare::<C>([x.node(), anchor.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => prep.finish(key, x.into_primitive()),
            OpsKind::UnTracked(prep) => prep.finish(x.into_primitive()),
        }
    }

    fn towers_depth_probe(x: FloatTensor<Self>, key: u64) -> FloatTensor<Self> {
        match DepthProbe
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

impl<B: Backend> Backward<B, 2> for TapBackward {
    type State = u64;

    fn backward(self, ops: Ops<u64, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        let grad = grads.consume::<B>(&ops.node);
        // No flush per gradient: whichever thread reads it, a read runs the work queued for
        // the tensor on its own stream first (burn-fusion drains the tensor's stream,
        // `server.rs` `prepare_read`; cubecl-wgpu's `read` executes the stream that wrote the
        // buffer; cubecl-cuda's `read` has its stream wait on that one's event), so handing
        // each gradient over was one host call per parameter for nothing (`host_syncs.rs`).
        match &ops.parents[0] {
            // A tapped tensor computed from others (an activation): the gradient goes on.
            Some(parent) if parent.order > 0 => {
                let copy = grad.clone();
                report(ops.state, Box::new(move || read_f32::<B>(copy)));
                grads.register::<B>(parent.id, grad);
            }
            // A parameter (a leaf): the gradient goes to the reader alone, since nothing reads
            // a tapped model's own gradients (the exchange has them), and a gradient held once
            // is read without a copy where the backend can (flex moves its buffer out).
            _ => report(ops.state, Box::new(move || read_f32::<B>(grad))),
        }
    }
}

/// The identity on the loss whose backward step, the first of the pass, records the loss's
/// level: the depth of the graph, for the next step's [`TapSchedule`].
#[derive(Debug)]
struct DepthProbe;

impl<B: Backend> Backward<B, 1> for DepthProbe {
    type State = u64;

    fn backward(self, ops: Ops<u64, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let grad = grads.consume::<B>(&ops.node);
        let id = ops.state >> 32;
        let taps = TAPS.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(open) = taps.get(&id) {
            // The probe is one level above the loss.
            open.schedule.learn(ops.node.order.saturating_sub(1));
        }
        if let Some(parent) = &ops.parents[0] {
            grads.register::<B>(parent.id, grad);
        }
    }
}

fn read_f32<B: Backend>(grad: FloatTensor<B>) -> Result<Vec<f32>, Cause> {
    host_syncs::note_read();
    let data = pollster::block_on(B::float_into_data(grad))
        .map_err(While::doing("reading a gradient from its device"))?;
    data.convert::<f32>()
        .try_into_vec::<f32>()
        .map_err(While::doing("reading a gradient as f32"))
}

/// An open tap: its tower, where its reports go and its schedule.
struct OpenTap {
    tower: usize,
    sender: Sender<Tapped>,
    schedule: TapSchedule,
}

/// The open taps, by the high half of their keys.
type OpenTaps = HashMap<u64, OpenTap>;
static TAPS: LazyLock<Mutex<OpenTaps>> = LazyLock::new(|| Mutex::new(HashMap::new()));
static NEXT_TAP: AtomicU64 = AtomicU64::new(1);

fn report(key: u64, read: ReadGradient) {
    let (id, slot) = (key >> 32, (key & 0xFFFF_FFFF) as usize);
    let taps = TAPS.lock().unwrap_or_else(|e| e.into_inner());
    // A tap closed since (its step dropped) has no one left to tell.
    if let Some(open) = taps.get(&id) {
        let _ = open.sender.send(Tapped::Gradient {
            tower: open.tower,
            slot,
            read,
        });
    }
}

/// The share of the graph's depth at which the tap of the last slot goes: a little below the
/// depth, so that a model whose layout order runs slightly ahead of its forward pass still has
/// each tap below its parameter's use (a tap above it would only lift the use, and everything
/// after it, to higher levels: correct, but later reports for the taps above).
const DEPTH_SHARE: f64 = 0.9;

/// Where each tap of a model goes in backward (see "When a tap reports"): learned from the
/// first step, shared by every step and tower of one [`Towers`](crate::Towers).
#[derive(Clone, Debug, Default)]
pub(crate) struct TapSchedule {
    /// The loss's level in the last step that measured it; 0 before any.
    depth: Arc<AtomicUsize>,
}

impl TapSchedule {
    /// The level of the tap of `slot`, of `slots` slots: 1 until the depth is known.
    fn level(&self, slot: usize, slots: usize) -> usize {
        let depth = self.depth.load(Ordering::Relaxed);
        let share = (slot + 1) as f64 / slots.max(1) as f64;
        ((depth as f64 * share * DEPTH_SHARE) as usize).max(1)
    }

    /// Whether the depth is known yet (the first tapped step measures it).
    fn learned(&self) -> bool {
        self.depth.load(Ordering::Relaxed) > 0
    }

    fn learn(&self, depth: usize) {
        self.depth.store(depth, Ordering::Relaxed);
    }
}

/// One tower's tap for one backward pass. Dropping it (also while unwinding from a panic in
/// the tower) reports [`Tapped::Finished`] and closes it.
pub(crate) struct Tap {
    id: u64,
    tower: usize,
    sender: Sender<Tapped>,
    schedule: TapSchedule,
}

impl Tap {
    /// A tap for `tower` that reports to `sender`, its taps placed by `schedule`.
    pub(crate) fn new(tower: usize, sender: Sender<Tapped>, schedule: TapSchedule) -> Self {
        let id = NEXT_TAP.fetch_add(1, Ordering::Relaxed);
        let mut taps = TAPS.lock().unwrap_or_else(|e| e.into_inner());
        let open = OpenTap {
            tower,
            sender: sender.clone(),
            schedule: schedule.clone(),
        };
        taps.insert(id, open);
        Self {
            id,
            tower,
            sender,
            schedule,
        }
    }

    /// `model` with every parameter of `slots` (parameter -> its slot) tapped; everything
    /// else, running statistics included, shared with `model`.
    pub(crate) fn attach<M: Module>(&self, model: &M, slots: &HashMap<ParamId, usize>) -> M {
        model.clone().map(&mut Attach {
            id: self.id,
            slots,
            schedule: &self.schedule,
            anchors: Vec::new(),
            tapped: HashMap::new(),
        })
    }

    /// `loss`, through a probe that measures the graph's depth for the next steps' taps while
    /// the schedule does not know it yet: what a tapped pass calls `backward` on.
    pub(crate) fn probed(&self, loss: Tensor<1>) -> Tensor<1> {
        if self.schedule.learned() {
            return loss;
        }
        let key = self.id << 32;
        Tensor::from_dispatch(<Dispatch as GradientTap>::towers_depth_probe(
            loss.into_dispatch(),
            key,
        ))
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
    schedule: &'a TapSchedule,
    /// `anchors[k]`: an untracked one-value tensor of order `k` on the model's device, built
    /// as far as the taps so far needed (see "When a tap reports").
    anchors: Vec<Tensor<1>>,
    /// The tapped value of each parameter mapped so far (a `Tensor<D>`), for tied weights.
    tapped: HashMap<ParamId, Box<dyn Any>>,
}

impl Attach<'_> {
    /// An untracked tensor of order `order` on `device`: each step of the chain is a tap of an
    /// untracked tensor, which adds a level and no work.
    fn anchor(&mut self, order: usize, device: &burn::tensor::Device) -> Tensor<1> {
        if self.anchors.is_empty() {
            self.anchors.push(Tensor::zeros([1], device).detach());
        }
        while self.anchors.len() <= order {
            let last = self.anchors.last().expect("the leaf is there").clone();
            self.anchors.push(tap(last.clone(), last, 0));
        }
        self.anchors[order].clone()
    }
}

impl ModuleMapper for Attach<'_> {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let Some(&slot) = self.slots.get(&param.id) else {
            return param;
        };
        let key = self.id << 32 | slot as u64;
        let (id, value, mapper) = param.consume();
        if !self.tapped.contains_key(&id) {
            let level = self.schedule.level(slot, self.slots.len());
            let anchor = self.anchor(level - 1, &value.device());
            self.tapped.insert(id, Box::new(tap(value, anchor, key)));
        }
        let tapped = self.tapped[&id]
            .downcast_ref::<Tensor<D>>()
            .expect("a parameter keeps its rank")
            .clone();
        Param::from_mapped_value(id, tapped, mapper)
    }
}

fn tap<const D: usize>(x: Tensor<D>, anchor: Tensor<1>, key: u64) -> Tensor<D> {
    Tensor::from_dispatch(<Dispatch as GradientTap>::towers_gradient_tap(
        x.into_dispatch(),
        anchor.into_dispatch(),
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
    /// once each; then the tower's end. On flex.
    #[test]
    fn taps_report_each_final_gradient_once() {
        let device = Device::flex().autodiff();
        let model = Tied {
            a: LinearConfig::new(3, 3).init(&device),
            b: LinearConfig::new(3, 2).init(&device),
            unused: LinearConfig::new(2, 2).init(&device),
        };
        let layout = Layout::of(&model);
        let mut expected = GradientsParams::from_grads(loss(&model, &device).backward(), &model);
        let expected = layout.flatten(expected_take(&mut expected), &device);

        let (sender, receiver) = mpsc::channel();
        let tap = Tap::new(3, sender, TapSchedule::default());
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

    fn expected_take(grads: &mut GradientsParams) -> GradientsParams {
        std::mem::replace(grads, GradientsParams::new())
    }

    /// The slot of the marker tapped on an activation (no parameter has it).
    const MIDDLE: usize = 1000;

    /// One tapped pass of `layers` in a row, with a marker tapped on the activation after the
    /// first half: the slots in the order they were reported.
    fn reports_of(layers: &[Linear], schedule: &TapSchedule, device: &Device) -> Vec<usize> {
        let slots = Layout::of(&layers.to_vec()).slot_map();
        let (sender, receiver) = mpsc::channel();
        let tap = Tap::new(0, sender, schedule.clone());
        let tapped = tap.attach(&layers.to_vec(), &slots);
        let mut h = Tensor::<2>::ones([2, 4], device);
        for (i, layer) in tapped.iter().enumerate() {
            h = layer.forward(h).tanh();
            if i + 1 == layers.len() / 2 {
                let untracked = Tensor::zeros([1], device);
                h = super::tap(h, untracked, tap.id << 32 | MIDDLE as u64);
            }
        }
        drop(tap.probed(h.powi_scalar(2).mean()).backward());
        drop(tap);
        let mut order = Vec::new();
        for report in receiver.iter() {
            if let Tapped::Gradient { slot, .. } = report {
                order.push(slot);
            }
        }
        order
    }

    /// A first pass reports every parameter at the end of backward (after the marker half
    /// way), and measures the depth; from then on, the last layers' parameters are reported
    /// before backward reaches the middle, the first half's after it. (The layer just after
    /// the middle may go either way: the schedule places taps a little low, [`DEPTH_SHARE`].)
    #[test]
    fn taps_report_a_layer_as_soon_as_backward_has_passed_it() {
        let device = Device::flex().autodiff();
        let layers: Vec<Linear> = (0..8)
            .map(|_| LinearConfig::new(4, 4).init(&device))
            .collect();
        let schedule = TapSchedule::default();
        let first = reports_of(&layers, &schedule, &device);
        assert_eq!(
            first[0], MIDDLE,
            "untaught, every tap is at the end: {first:?}"
        );
        assert!(schedule.learned());
        let later = reports_of(&layers, &schedule, &device);
        let middle = later.iter().position(|&s| s == MIDDLE).unwrap();
        // 16 slots: each layer's weight and bias; the first 4 layers hold slots 0..8.
        let (before, after) = (&later[..middle], &later[middle + 1..]);
        assert!((10..16).all(|s| before.contains(&s)), "{later:?}");
        assert!((0..8).all(|s| after.contains(&s)), "{later:?}");
        assert_eq!(later.len(), 17, "each slot once, and the marker: {later:?}");
    }
}
