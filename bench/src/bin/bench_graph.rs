//! Whether a CUDA graph of our training step replays it exactly, and what it saves: issue 49's
//! item 4 as an experiment, before any tower uses one.
//!
//! `TOWERS_BENCH_DEVICE=cuda:0 bench_graph [STEPS] [MODEL]` (default 20 steps, `cifar10`; also
//! `inception`, without dropout, and `resnet50`) trains MODEL twice from the same seed on the
//! same batch, plain SGD at a constant rate (the one optimizer Burn's capture replays exactly,
//! burn #5779):
//!
//! - **eagerly**: each step run as the trainer runs it, its loss read back;
//! - **replayed**: `burn::tensor::capture` runs the step three times to tune and allocate, records
//!   the fourth, and each later step is one replay of that recording, its loss read back.
//!
//! It prints both paces (ms/image, each step's loss read included in both) and the largest
//! difference between the two runs' losses step by step. A replay that silently missed an
//! update (the parameters written to new buffers instead of the recorded ones) shows here as
//! losses that stop moving or drift: the pace alone would not say. (Only the losses are
//! compared: ResNet-50's batch-norm running averages, which a training step's loss does not
//! read, are not; nor Inception v3's.) On a device without hardware graphs (anything but CUDA
//! and ROCm) a replay re-runs the step, and the line says so.

use burn::optim::GradientsParams;
use burn::tensor::{Device, Tensor, capture};
use std::time::Instant;
use towers_bench::{
    batch, bench_device, classifier_batch, init_on, reps, trainers_sgd, weights_device,
};
use towers_models::{Cifar10Config, ImageClassifier, InceptionV3Config, ResNet50, ResNetConfig};

/// The steps `capture` runs before it records: three warm-ups (Burn's `WARMUP_ITERS`). The
/// recorded call is a fourth step only where there is no hardware graph (it runs the step);
/// on a hardware graph it only records, and the first replay runs it.
const WARM_UPS: usize = 3;

fn main() {
    let steps = reps(20);
    let (entry, device) = bench_device();
    let model = std::env::args().nth(2).unwrap_or_else(|| "cifar10".into());
    let batch = batch(if model == "cifar10" { 128 } else { 32 });
    println!("device: {entry}; {model}, batch {batch}, f32, plain SGD at 0.01, {steps} steps");

    // The weights are drawn on flex (`init_on`), the batches on the device: both seeded before
    // each run, so that the two runs start alike.
    let seed = || [device.clone(), weights_device()].map(|d| d.seed(0));
    seed();
    let eager = init(&model, &device).eager(batch, steps);
    seed();
    let replayed = init(&model, &device).replayed(batch, steps);

    let per_image = |secs: f64| secs * 1e3 / batch as f64;
    println!("eager:    {:8.4} ms/image", per_image(eager.secs_per_step));
    println!(
        "replayed: {:8.4} ms/image ({}), {:.2}x eager's pace",
        per_image(replayed.secs_per_step),
        match replayed.hardware {
            true => "one hardware graph per step",
            false => "no hardware graph on this device: each replay re-ran the step",
        },
        eager.secs_per_step / replayed.secs_per_step
    );
    let first = WARM_UPS + usize::from(!replayed.hardware);
    let compared = &eager.losses[first..first + steps];
    let largest = (compared.iter().zip(&replayed.losses))
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    println!(
        "losses, steps {} to {}: eager {:.6} -> {:.6}, replayed {:.6} -> {:.6}; \
         largest difference {largest:e}",
        first + 1,
        first + steps,
        compared[0],
        compared[steps - 1],
        replayed.losses[0],
        replayed.losses[steps - 1],
    );
    // Bit for bit where every kernel sums in a fixed order; a little room for those that
    // don't, none for a replay that trains on other values.
    if largest > TOLERANCE * compared[0].abs().max(1.0) {
        eprintln!("error: the replayed step's losses left the eager step's (by {largest:e})");
        std::process::exit(1);
    }
}

/// The model `name`d on the command line on `device`, its weights drawn on flex from flex's
/// current seed (`init_on`).
fn init(name: &str, device: &Device) -> Box<dyn Run> {
    match name {
        "cifar10" => Box::new(init_on(device, |d| Cifar10Config::new().init(d))),
        // Without dropout: a recording freezes the random mask it drew.
        "inception" => {
            let config = InceptionV3Config::new(1001).with_dropout_keep_prob(1.0);
            Box::new(init_on(device, |d| config.init(d)))
        }
        "resnet50" => {
            let resnet: ResNet50 = init_on(device, |d| ResNetConfig::resnet50(1000).init(d));
            Box::new(resnet)
        }
        other => panic!("MODEL is cifar10, inception or resnet50, not {other}"),
    }
}

/// The largest difference allowed between the two runs' losses, relative to the first.
const TOLERANCE: f32 = 1e-4;

/// One way of training: each step's loss, and the seconds a step took.
struct Trained {
    losses: Vec<f32>,
    secs_per_step: f64,
    hardware: bool,
}

/// Both ways of training one model (a trait object, so that `main` picks the model at run time).
trait Run {
    /// `WARM_UPS + 1 + steps` steps run as the trainer runs them, the last `steps` timed.
    fn eager(self: Box<Self>, batch: usize, steps: usize) -> Trained;
    /// `WARM_UPS` steps and a recording by `capture`, then `steps` timed replays.
    fn replayed(self: Box<Self>, batch: usize, steps: usize) -> Trained;
}

impl<M: ImageClassifier> Run for M {
    fn eager(self: Box<Self>, batch: usize, steps: usize) -> Trained {
        let mut step = training_step(*self, batch);
        let losses: Vec<f32> = (0..WARM_UPS + 1).map(|_| read(&step())).collect();
        let start = Instant::now();
        let timed: Vec<f32> = (0..steps).map(|_| read(&step())).collect();
        let secs_per_step = start.elapsed().as_secs_f64() / steps as f64;
        Trained {
            losses: [losses, timed].concat(),
            secs_per_step,
            hardware: false,
        }
    }

    fn replayed(self: Box<Self>, batch: usize, steps: usize) -> Trained {
        let device = self.devices()[0].clone();
        let mut graph = capture(&device, training_step(*self, batch));
        let mut replay = || {
            // SAFETY: the recording reads and writes the batch and the model's parameters,
            // which the captured closure owns (`training_step` moves them in and keeps each
            // step's updated model), so they live as long as `graph`; only this thread uses
            // them, and it reads the loss on the stream the graph was captured on.
            read(unsafe { graph.replay() })
        };
        let start = Instant::now();
        let losses: Vec<f32> = (0..steps).map(|_| replay()).collect();
        Trained {
            losses,
            secs_per_step: start.elapsed().as_secs_f64() / steps as f64,
            hardware: graph.is_hardware(),
        }
    }
}

/// One training step of `model` on a fixed random batch per call, the model and the batch
/// owned by the closure: the loss's forward pass, its backward pass and a plain SGD update at a
/// constant rate, the weight decay added in the update, as the trainer and `bench_models` do.
fn training_step<M: ImageClassifier>(model: M, batch: usize) -> impl FnMut() -> Tensor<1> {
    let (images, labels) = classifier_batch(&model, batch, &model.devices()[0]);
    let mut optim = trainers_sgd(&model);
    let mut trained = Some(model);
    move || {
        let model = trained.take().expect("the model between steps");
        let loss = (model.loss_decay_in_update(images.clone(), labels.clone())).loss;
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        trained = Some(optim.step(0.01, model, grads));
        loss.detach()
    }
}

fn read(loss: &Tensor<1>) -> f32 {
    loss.clone().into_scalar()
}
