//! The CIFAR-10 trainer end to end on the built-in data: it learns on two towers, and in bf16
//! as in f32, a NaN loss
//! stops it, a resumed run continues exactly, one tower and two log the same losses, the
//! TensorBoard event files hold what the log holds, step for step, and the timeline holds
//! every step's phases.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use burn::module::{Module, ModuleVisitor, Param};
use burn::tensor::{Device, Tensor};
use towers_data::cifar10::BuiltinCifar10;
use towers_kernels::Precision;
use towers_models::{Cifar10Config, Cifar10Net, ImageClassifier};
use towers_multigpu::TowerLoss;
use towers_testing::compare::{max_abs_diff, values};
use towers_testing::training::quick_cifar_config;
use towers_testing::{assert_error_names, report};
use towers_train::summary::proto::{Event, Kind, SessionStatus, What};
use towers_train::summary::{event_files, read_events};
use towers_train::{
    Error, Input, StopFlag, TrainConfig, Trained, Trainer, evaluate, evaluate_first,
    evaluate_first_until, init_holding_generators, read_log,
};

/// 5 x 200 training and 500 test images, seed 3: the same bytes for every test.
fn data() -> BuiltinCifar10 {
    BuiltinCifar10::create(200, 500, 3).unwrap()
}

/// A small, quick run: batch 32, momentum 0.9 at 0.01, averages, every step logged.
fn config(train_dir: &Path, devices: &str, max_steps: u64) -> TrainConfig {
    quick_cifar_config(train_dir, devices, max_steps)
        .with_batch_size(32)
        .with_checkpoint_every(1000)
        .with_seed(11)
}

fn net(device: &Device) -> Cifar10Net {
    Cifar10Config::new().init(device)
}

fn train(config: TrainConfig, data: &BuiltinCifar10) -> Result<Trained<Cifar10Net>, Error> {
    Trainer::new(config).run(net, &Input::cifar10_train(data.dir()).unwrap())
}

fn losses(train_dir: &Path) -> Vec<(u64, f64)> {
    read_log(&train_dir.join(towers_train::LOG_FILE))
        .unwrap()
        .iter()
        .map(|e| (e.step, e.loss))
        .collect()
}

#[test]
fn two_towers_learn_the_builtin_data() {
    let data = data();
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path(), "flex,flex", 150);
    c.log_every = 25;
    c.checkpoint_every = 50;
    let trained = train(c, &data).unwrap();
    let report = &trained.report;
    assert_eq!(
        (report.first_step, report.step, report.interrupted),
        (0, 150, false)
    );
    assert!(
        report
            .checkpoint
            .as_ref()
            .unwrap()
            .ends_with("model.ckpt-150")
    );
    assert!(report.plot.is_file() && report.log.is_file());

    let test = Input::cifar10_test(data.dir()).unwrap();
    let raw = evaluate(&trained.model, &test, 100, 2).unwrap();
    let averaged = evaluate(trained.averages.as_ref().unwrap(), &test, 64, 2).unwrap();
    assert_eq!(
        (raw.examples, averaged.examples),
        (500, 500),
        "every test image once"
    );
    assert_eq!(raw.correct_at_5, None, "no top-5 for 10 classes");
    // Chance is 0.1.
    assert!(raw.at_1() > 0.5, "raw weights: {raw}");
    assert!(averaged.at_1() > 0.5, "moving averages: {averaged}");
    let log = losses(dir.path());
    let steps: Vec<u64> = log.iter().map(|e| e.0).collect();
    assert_eq!(steps, [25, 50, 75, 100, 125, 150]);
    assert!(log[5].1 < log[0].1, "loss fell: {log:?}");
}

/// `evaluate_first` counts exactly the first 150 test images, whatever the batch: one reader
/// thread delivers them in the files' order, so batches of 64 (the third cut to 22), of 50 and
/// of 150 count the same; asked for more than the set holds, it is `evaluate`.
#[test]
fn evaluating_the_first_examples_cuts_the_batch_that_passes_the_count() {
    let data = data();
    let test = Input::cifar10_test(data.dir()).unwrap();
    // Drawn on flex's generator beside the other tests' runs (see `lock_device_generators`).
    let model = init_holding_generators(|| net(&Device::flex().autodiff()));
    let first_150 = |batch| evaluate_first(&model, &test, 150, batch, 1).unwrap();
    let one_batch = first_150(150);
    assert_eq!(one_batch.examples, 150);
    assert_eq!(first_150(64), one_batch, "the third batch cut");
    assert_eq!(first_150(50), one_batch, "three whole batches");
    let all = evaluate(&model, &test, 100, 2).unwrap();
    assert_eq!(all.examples, 500);
    assert_eq!(evaluate_first(&model, &test, 10_000, 64, 1).unwrap(), all);
}

/// An evaluation stops once its stop flag is raised (Ctrl-C after training): raised before,
/// nothing is evaluated; never raised, it is `evaluate_first`.
#[test]
fn a_raised_stop_flag_ends_an_evaluation() {
    let data = data();
    let test = Input::cifar10_test(data.dir()).unwrap();
    let model = init_holding_generators(|| net(&Device::flex().autodiff()));
    let stop = StopFlag::new();
    let until = |stop: &StopFlag| evaluate_first_until(&model, &test, 150, 50, 1, stop).unwrap();
    assert_eq!(
        until(&stop),
        evaluate_first(&model, &test, 150, 50, 1).unwrap()
    );
    stop.request();
    assert_eq!(until(&stop).examples, 0);
}

/// The same run with products in bf16 (on AMX tiles where the CPU has them) reaches f32's
/// held-out precision within 0.02, and its losses fall as f32's do.
#[test]
fn bf16_products_learn_like_f32() {
    let data = data();
    let test = Input::cifar10_test(data.dir()).unwrap();
    let run = |precision| {
        let dir = tempfile::tempdir().unwrap();
        let mut c = config(dir.path(), "flex", 150);
        c.log_every = 30;
        c.precision = precision;
        let trained = train(c, &data).unwrap();
        let at_1 = evaluate(&trained.model, &test, 100, 2).unwrap().at_1();
        let log = read_log(&dir.path().join(towers_train::LOG_FILE)).unwrap();
        let means: Vec<f64> = log.iter().map(|e| e.mean_loss.unwrap().loss).collect();
        (at_1, means)
    };
    let (f32_at_1, f32_losses) = run(Precision::F32);
    let (bf16_at_1, bf16_losses) = run(Precision::Bf16);
    assert!(f32_at_1 > 0.5, "f32 learns: {f32_at_1}");
    assert!(
        (bf16_at_1 - f32_at_1).abs() <= 0.02,
        "bf16 {bf16_at_1}, f32 {f32_at_1}"
    );
    // The first 30 steps' mean agrees closely; later the two runs part as any two runs of
    // this noisy schedule do (momentum 0.9, batch 32: 10-15% between intervals), both falling:
    // the last 60 steps' mean below 0.75 of the first 30's (one interval alone rose by 14%
    // when the weight decay's gradient moved to the update, a change of rounding only).
    let (f, b) = (&f32_losses, &bf16_losses);
    assert!((f[0] - b[0]).abs() < 0.01 * f[0], "f32 {f:?}, bf16 {b:?}");
    let fell = |l: &[f64]| (l[3] + l[4]) / 2.0 < 0.75 * l[0];
    assert!(fell(f) && fell(b), "f32 {f:?}, bf16 {b:?}");
    assert_ne!(f32_losses, bf16_losses, "bf16 rounds: the losses differ");
}

#[test]
fn a_nan_loss_stops_the_run_at_its_step() {
    let data = data();
    let dir = tempfile::tempdir().unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&calls);
    // Two towers call the loss twice per step: steps 1 to 3 are clean, step 4 is NaN.
    let poisoned = move |m: &Cifar10Net, x, y| {
        let loss = m.loss(x, y).loss;
        match counter.fetch_add(1, Ordering::SeqCst) {
            n if n >= 6 => TowerLoss::new(loss.mul_scalar(f32::NAN)),
            _ => TowerLoss::new(loss),
        }
    };
    let mut c = config(dir.path(), "flex,flex", 10);
    c.checkpoint_every = 2;
    let err = Trainer::new(c)
        .with_loss(poisoned)
        .run(net, &Input::cifar10_train(data.dir()).unwrap())
        .unwrap_err();
    assert!(matches!(err, Error::Diverged { step: 4, .. }), "{err}");
    let msg = report(&err);
    assert_error_names(&msg, &["step 4", "NaN", "model.ckpt-2"]);
    let ckpts: Vec<u64> = towers_train::CheckpointDir::new(dir.path(), 5)
        .list()
        .unwrap()
        .iter()
        .map(|c| c.0)
        .collect();
    assert_eq!(ckpts, [2], "nothing saved after the divergence");
    assert_eq!(calls.load(Ordering::SeqCst), 8, "no step after the NaN");
}

/// 3 steps, then a resumed run to 5, against 5 steps in one go: the resumed steps have the
/// same losses, and the runs end with the same weights and averages.
#[test]
fn a_resumed_run_continues_like_an_uninterrupted_one() {
    let data = data();
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let whole = train(config(a.path(), "flex", 5), &data).unwrap();
    let first = train(config(b.path(), "flex", 3), &data).unwrap();
    assert_eq!(first.report.step, 3);
    let err = train(config(b.path(), "flex", 5), &data).unwrap_err();
    assert_error_names(&report(&err), &["--resume"]);
    let resumed = train(config(b.path(), "flex", 5).with_resume(true), &data).unwrap();
    assert_eq!((resumed.report.first_step, resumed.report.step), (3, 5));
    let (whole_log, resumed_log) = (losses(a.path()), losses(b.path()));
    assert_eq!(whole_log.len(), 5);
    assert_eq!(
        resumed_log, whole_log,
        "step for step, resumed steps included"
    );

    let weights = |m: &Cifar10Net| -> Vec<f32> {
        let mut v: Vec<f32> = m.local3.weight.val().into_data().try_to_vec().unwrap();
        v.extend(
            m.conv1
                .weight
                .val()
                .into_data()
                .try_to_vec::<f32>()
                .unwrap(),
        );
        v
    };
    assert_eq!(weights(&resumed.model), weights(&whole.model));
    assert_eq!(
        weights(resumed.averages.as_ref().unwrap()),
        weights(whole.averages.as_ref().unwrap())
    );
}

#[test]
fn one_tower_and_two_log_the_same_losses() {
    let data = data();
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    train(config(a.path(), "flex", 4), &data).unwrap();
    let mut two = config(b.path(), "flex,flex", 4);
    two.reader_threads = Some(3);
    train(two, &data).unwrap();
    let (one, two) = (losses(a.path()), losses(b.path()));
    assert_eq!(one.len(), 4);
    for ((s1, l1), (s2, l2)) in one.iter().zip(&two) {
        assert_eq!(s1, s2);
        assert!(
            (l1 - l2).abs() <= 1e-6 * l1.abs(),
            "step {s1}: {l1} vs {l2}"
        );
    }
}

/// The model's own loss leaves its weight decay's gradient to the update: three steps on two
/// towers end where the loss with its penalty taken through backward ends (and where a run that
/// drops the gradient does not), the logged losses the same.
#[test]
fn the_weight_decay_added_in_the_update_trains_like_the_penalty_in_the_loss() {
    let data = data();
    let input = Input::cifar10_train(data.dir()).unwrap();
    // A decay large enough to show in three steps.
    let decayed = |device: &Device| Cifar10Config::new().with_weight_decay(0.5).init(device);
    let run = |trainer: Trainer<Cifar10Net>| trainer.run(decayed, &input).unwrap();
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let config = |i: usize| config(dirs[i].path(), "flex,flex", 3);
    let in_update = run(Trainer::new(config(0)));
    let through_backward = (Trainer::new(config(1)))
        .with_loss(|m: &Cifar10Net, x, y| TowerLoss::new(m.loss(x, y).loss));
    let through_backward = run(through_backward);
    let dropped = (Trainer::new(config(2)))
        .with_loss(|m: &Cifar10Net, x, y| TowerLoss::new(m.loss_decay_in_update(x, y).loss));
    let dropped = run(dropped);

    let diff = |a: &Trained<Cifar10Net>, b: &Trained<Cifar10Net>| {
        max_abs_diff(&values(&a.model), &values(&b.model))
    };
    let same = diff(&in_update, &through_backward);
    let without = diff(&dropped, &through_backward);
    assert!(same < 1e-5, "the two routes differ by {same}");
    assert!(
        without > 1e-3,
        "dropping the decay changes the weights by only {without}"
    );
    let (got, want) = (losses(dirs[0].path()), losses(dirs[1].path()));
    for ((step, got), (_, want)) in got.iter().zip(&want) {
        assert!(
            (got - want).abs() <= 1e-6 * want.abs(),
            "step {step}: {got} vs {want}"
        );
    }
}

/// A log line every 3 steps carries the mean of the 3 steps' losses, as a run logging every
/// step records them.
#[test]
fn log_entries_carry_the_mean_loss_since_the_previous_one() {
    let data = data();
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    train(config(a.path(), "flex", 6), &data).unwrap();
    let mut every_third = config(b.path(), "flex", 6);
    every_third.log_every = 3;
    train(every_third, &data).unwrap();
    let log = |dir: &Path| read_log(&dir.join(towers_train::LOG_FILE)).unwrap();
    let (each, third) = (log(a.path()), log(b.path()));
    assert!(each.iter().all(|e| e.mean_loss.unwrap().steps == 1));
    assert_eq!(third.iter().map(|e| e.step).collect::<Vec<_>>(), [3, 6]);
    for (entry, steps) in third.iter().zip([&each[0..3], &each[3..6]]) {
        let mean = entry.mean_loss.unwrap();
        let want = steps.iter().map(|e| e.loss).sum::<f64>() / 3.0;
        assert_eq!(mean.steps, 3);
        assert!(
            (mean.loss - want).abs() <= 1e-9 * want,
            "step {}: {mean:?} vs {want}",
            entry.step
        );
        assert_eq!(entry.loss, steps[2].loss);
    }
}

/// The values of one event, by kind: scalars as `(tag, value)`, histograms as
/// `(tag, num, sum)`, images as `(tag, PNG)`.
#[derive(Default)]
struct StepValues {
    scalars: Vec<(String, f32)>,
    histograms: Vec<(String, f64, f64)>,
    images: Vec<(String, Vec<u8>)>,
}

fn step_values(event: &Event) -> StepValues {
    let Some(What::Summary(summary)) = &event.what else {
        panic!("not a summary: {event:?}")
    };
    let mut out = StepValues::default();
    for v in &summary.value {
        match v.kind.as_ref().unwrap() {
            Kind::SimpleValue(x) => out.scalars.push((v.tag.clone(), *x)),
            Kind::Histo(h) => out.histograms.push((v.tag.clone(), h.num, h.sum)),
            Kind::Image(i) => {
                assert_eq!((i.height, i.width, i.colorspace), (24, 24, 3));
                out.images
                    .push((v.tag.clone(), i.encoded_image_string.clone()));
            }
        }
    }
    out
}

/// Every trainable weight of `model` as a TensorBoard tag (`conv1/weight`), with its values.
fn weights_by_tag<M: Module>(model: &M) -> Vec<(String, Vec<f32>)> {
    #[derive(Default)]
    struct Weights(Vec<String>, Vec<(String, Vec<f32>)>);
    impl ModuleVisitor for Weights {
        fn enter_module(&mut self, name: &str, _: &str) {
            self.0.push(name.into());
        }
        fn exit_module(&mut self, _: &str, _: &str) {
            self.0.pop();
        }
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            let data = param.val().into_data().try_to_vec::<f32>().unwrap();
            self.1.push((self.0.join("/"), data));
        }
    }
    let mut weights = Weights::default();
    model.visit(&mut weights);
    weights.1
}

/// Splits a file's events into its first two (version, session start) and the summaries by
/// step, each step's events merged.
fn summaries_by_step(path: &Path) -> (Vec<Event>, Vec<(u64, StepValues)>) {
    let mut events = read_events(path).unwrap();
    let rest = events.split_off(2);
    let mut steps: Vec<(u64, StepValues)> = Vec::new();
    for event in &rest {
        let v = step_values(event);
        match steps.last_mut() {
            Some((step, values)) if *step == event.step as u64 => {
                values.scalars.extend(v.scalars);
                values.histograms.extend(v.histograms);
                values.images.extend(v.images);
            }
            _ => steps.push((event.step as u64, v)),
        }
    }
    (events, steps)
}

#[test]
fn the_event_files_hold_each_steps_scalars_histograms_and_images_across_a_resume() {
    let data = data();
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path(), "flex,flex", 4);
    c.checkpoint_every = 2;
    c.summaries.scalars_every = 1;
    c.summaries.histograms_every = 3;
    c.summaries.images_every = 1000;
    c.summaries.images_per_tower = 2;
    let first = train(c.clone(), &data).unwrap();
    let mut resumed = c;
    resumed.max_steps = 6;
    resumed.resume = true;
    let second = train(resumed, &data).unwrap();
    let files = event_files(dir.path()).unwrap();
    assert_eq!(
        files,
        [first.report.events.unwrap(), second.report.events.unwrap()]
    );
    let log = read_log(&dir.path().join(towers_train::LOG_FILE)).unwrap();
    assert_eq!(log.len(), 6);
    let tags: Vec<String> = weights_by_tag(&first.model)
        .into_iter()
        .flat_map(|(tag, _)| [tag.clone(), format!("{tag}/gradients")])
        .collect();
    // TF's zero-debiased moving average of the losses, decay 0.9, restarted by the resume.
    let average = |losses: &[f64]| {
        let biased = losses.iter().fold(0.0, |a, l| a * 0.9 + l * 0.1);
        biased / (1.0 - 0.9f64.powi(losses.len() as i32))
    };

    // Run 1: steps 1 to 4, histograms at its first step, every 3rd and its last; run 2: 5, 6.
    for (file, start, end, histogram_steps) in
        [(0, 0u64, 4u64, vec![1, 3, 4]), (1, 4, 6, vec![5, 6])]
    {
        let (head, summaries) = summaries_by_step(&files[file]);
        assert_eq!(
            head[0].what,
            Some(What::FileVersion("brain.Event:2".into()))
        );
        match &head[1].what {
            Some(What::SessionLog(log)) => {
                assert_eq!(
                    (log.status, head[1].step),
                    (SessionStatus::Start as i32, start as i64 + 1)
                )
            }
            other => panic!("{other:?}"),
        }
        let got_steps: Vec<u64> = summaries.iter().map(|(s, _)| *s).collect();
        assert_eq!(got_steps, ((start + 1)..=end).collect::<Vec<_>>());
        for (step, values) in &summaries {
            let entry = &log[*step as usize - 1];
            let run_losses: Vec<f64> = log[start as usize..*step as usize]
                .iter()
                .map(|e| e.loss)
                .collect();
            let s = &values.scalars;
            let names: Vec<&str> = s.iter().map(|(t, _)| t.as_str()).collect();
            assert_eq!(
                names,
                [
                    "loss",
                    "total_loss",
                    "tower_0/loss",
                    "tower_1/loss",
                    "learning_rate",
                    "examples_per_sec",
                    "queue/fraction_full"
                ]
            );
            assert_eq!(s[0].1, entry.loss as f32, "step {step}");
            assert!(
                (s[1].1 as f64 - average(&run_losses)).abs() < 1e-5,
                "step {step}"
            );
            let towers_mean = (s[2].1 + s[3].1) / 2.0;
            assert!(
                (towers_mean - s[0].1).abs() < 1e-5,
                "equal slices: mean of towers"
            );
            assert_ne!(s[2].1, s[3].1, "each tower's own loss");
            assert_eq!(s[4].1, entry.lr as f32);
            assert_eq!(s[5].1, entry.examples_per_sec as f32);
            assert_eq!(s[6].1, entry.input_queue_fill);

            let written: Vec<&str> = values.histograms.iter().map(|h| h.0.as_str()).collect();
            if histogram_steps.contains(step) {
                assert_eq!(written, tags, "step {step}");
            } else {
                assert!(written.is_empty(), "step {step}");
            }
            let image_tags: Vec<&str> = values.images.iter().map(|i| i.0.as_str()).collect();
            if *step == start + 1 || *step == end {
                assert_eq!(
                    image_tags,
                    [
                        "tower_0/images/image/0",
                        "tower_0/images/image/1",
                        "tower_1/images/image/0",
                        "tower_1/images/image/1"
                    ]
                );
                for (_, png) in &values.images {
                    let image = image::load_from_memory(png).unwrap().to_rgb8();
                    assert_eq!(image.dimensions(), (24, 24));
                    let distinct: std::collections::HashSet<_> =
                        image.pixels().map(|p| p.0).collect();
                    assert!(distinct.len() > 20, "a picture, not a flat fill");
                }
            } else {
                assert!(image_tags.is_empty());
            }
        }
        // The last histograms are those of the weights the run ended with.
        let (_, last) = summaries.last().unwrap();
        let model = if file == 0 {
            &first.model
        } else {
            &second.model
        };
        for (tag, weights) in weights_by_tag(model) {
            let (_, num, sum) = last.histograms.iter().find(|h| h.0 == tag).unwrap();
            let want: f64 = weights.iter().map(|&w| w as f64).sum();
            assert_eq!((*num, *sum), (weights.len() as f64, want), "{tag}");
        }
    }
}

/// `--timeline`: a Chrome trace whose main track's phases (seed, input, summaries, towers,
/// after step) fill
/// each step to within 5%, with a track per tower holding its forward, backward and reduction.
#[test]
fn the_timeline_holds_every_steps_phases() {
    let data = data();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("timeline.json");
    let mut c = config(dir.path(), "flex,flex", 4);
    c.timeline = Some(path.clone());
    train(c, &data).unwrap();
    let trace: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    let named = |tid: u64| {
        events
            .iter()
            .any(|e| e["name"] == "thread_name" && e["tid"] == tid)
    };
    assert!(
        named(0) && named(1) && named(2),
        "main and two tower tracks"
    );
    let spans = |name: &str, tid: u64| -> Vec<(f64, f64)> {
        (events.iter())
            .filter(|e| e["ph"] == "X" && e["name"] == name && e["tid"] == tid)
            .map(|e| (e["ts"].as_f64().unwrap(), e["dur"].as_f64().unwrap()))
            .collect()
    };
    for tower in [1, 2] {
        for phase in ["forward", "backward", "reduce"] {
            assert_eq!(
                spans(phase, tower).len(),
                4,
                "{phase} on tower track {tower}"
            );
        }
    }
    let steps = spans("step", 0);
    assert_eq!(steps.len(), 4);
    for (start, dur) in steps {
        let inside: f64 = ["seed", "input", "summaries", "towers", "after step"]
            .iter()
            .flat_map(|phase| spans(phase, 0))
            .filter(|(ts, d)| *ts >= start && ts + d <= start + dur + 1.0)
            .map(|(_, d)| d)
            .sum();
        assert!(
            (inside - dur).abs() <= 0.05 * dur,
            "phases {inside} us of a {dur} us step"
        );
    }
}
