//! SIGTERM (what SLURM and Kubernetes send) and SIGINT (Ctrl-C), sent to a real training
//! process: the first stops it after the current step with a checkpoint and a clean exit; a
//! second one ends it at once, leaving a timeline that parses and no temporary files.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use towers_data::cifar10::BuiltinCifar10;
use towers_models::{Cifar10Config, Cifar10Net, ImageClassifier};
use towers_multigpu::TowerLoss;
use towers_train::{Checkpoint, CheckpointDir, Input, StopFlag, TrainConfig, Trainer};

use towers_testing::child::{child, role};

/// Each step takes at least this long (the child's loss waits), so that signals sent just
/// after a step starts arrive during it.
const STEP: Duration = Duration::from_millis(1500);

/// The child's timeline, in its train directory.
const TIMELINE: &str = "timeline.json";

/// The child: trains with the signal handlers installed, printing `step-start K` as step K
/// begins, and prints its report.
#[test]
fn child_trainer() {
    let Some(dir) = role() else { return };
    let data = BuiltinCifar10::create(100, 10, 3).unwrap();
    let calls = AtomicUsize::new(0);
    let slow_loss = move |m: &Cifar10Net, x, y| {
        let step = calls.fetch_add(1, Ordering::SeqCst) + 1;
        println!("step-start {step}");
        std::io::stdout().flush().unwrap();
        std::thread::sleep(STEP);
        TowerLoss::new(m.loss(x, y).loss)
    };
    let mut config = TrainConfig::cifar10();
    config.batch_size = 16;
    config.reader_threads = Some(1);
    config.max_steps = 1000;
    config.checkpoint_every = 1000;
    config.log_every = 1;
    config.timeline = Some(Path::new(&dir).join(TIMELINE));
    config.train_dir = dir.into();
    let trained = Trainer::new(config)
        .with_stop(StopFlag::ctrl_c().unwrap())
        .with_loss(slow_loss)
        .run(
            |d| Cifar10Config::new().init(d),
            &Input::cifar10_train(data.dir()).unwrap(),
        )
        .unwrap();
    println!(
        "report: {}",
        trained.report.to_string().replace('\n', " | ")
    );
}

fn start(dir: &Path) -> Watched {
    let mut trainer = child(
        &towers_testing::test_name!("child_trainer"),
        dir.to_str().unwrap(),
        &[],
        "true",
    );
    // The child's built-in data in `dir` too, where a test can see whether it is left.
    trainer.env("TMPDIR", dir);
    Watched::start(trainer)
}

#[test]
fn sigterm_and_sigint_stop_after_the_step_with_a_checkpoint() {
    if role().is_some() {
        return;
    }
    for signal in ["TERM", "INT"] {
        let dir = tempfile::tempdir().unwrap();
        let mut trainer = start(dir.path());
        trainer.wait_for("step-start 2", Duration::from_secs(120));
        trainer.signal(signal);
        let (code, _) = trainer.exit_code(Duration::from_secs(60));
        let output = trainer.seen.join("\n");
        assert_eq!(code, Some(0), "SIG{signal}: {output}");
        assert!(
            output.contains("report: stopped at step 2 "),
            "SIG{signal}: the step under way when the signal came is the last: {output}"
        );
        assert!(!output.contains("step-start 3"), "{output}");
        let (step, path) = CheckpointDir::new(dir.path(), 5).latest().unwrap().unwrap();
        assert_eq!(step, 2);
        assert_eq!(Checkpoint::load(&path).unwrap().step, 2);
        assert!(dir.path().join(towers_train::PLOT_FILE).is_file());
    }
}

#[test]
fn a_second_signal_exits_at_once_without_a_checkpoint() {
    if role().is_some() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut trainer = start(dir.path());
    trainer.wait_for("step-start 2", Duration::from_secs(120));
    trainer.signal("TERM");
    std::thread::sleep(Duration::from_millis(100));
    trainer.signal("INT");
    let (code, took) = trainer.exit_code(Duration::from_secs(60));
    let output = trainer.seen.join("\n");
    assert_eq!(code, Some(130), "{output}");
    // At once: well before the step under way (STEP long) could have ended.
    assert!(took < STEP / 2, "took {took:?}");
    assert!(!output.contains("report:"), "{output}");
    assert!(
        CheckpointDir::new(dir.path(), 5)
            .latest()
            .unwrap()
            .is_none()
    );
    // The built-in data went with the exit, though no destructor ran.
    let names = std::fs::read_dir(dir.path()).unwrap();
    let names: Vec<_> = names.map(|e| e.unwrap().file_name()).collect();
    assert!(
        !names
            .iter()
            .any(|n| n.to_string_lossy().starts_with("towers-")),
        "left in TMPDIR: {names:?}"
    );
    // The timeline streamed as it went: strict JSON (serde_json, not the lenient rule that
    // lets Chrome read an unclosed array), holding the first step's spans.
    let trace = std::fs::read(dir.path().join(TIMELINE)).unwrap();
    let trace: serde_json::Value = serde_json::from_slice(&trace)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&trace)));
    let events = trace["traceEvents"].as_array().unwrap();
    let steps = events
        .iter()
        .filter(|e| e["name"] == "step" && e["ph"] == "X");
    assert!(steps.count() >= 1, "{events:?}");
}

/// A started child whose stdout lines arrive on a channel as they are printed.
struct Watched {
    /// The process.
    pub child: Child,
    lines: Receiver<String>,
    /// Every line read so far.
    pub seen: Vec<String>,
}

impl Watched {
    /// Starts `command` with stdout piped.
    fn start(mut command: Command) -> Self {
        let mut child = command
            .stdout(Stdio::piped())
            .spawn()
            .expect("child starts");
        let stdout = child.stdout.take().expect("piped");
        let (send, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits for a line starting with `prefix`; panics (killing the child) after `limit`.
    fn wait_for(&mut self, prefix: &str, limit: Duration) -> String {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if line.starts_with(prefix) {
                        return line;
                    }
                }
                Err(_) => {
                    let _ = self.child.kill();
                    panic!(
                        "no line `{prefix}...` within {limit:?}; got {:#?}",
                        self.seen
                    );
                }
            }
        }
    }

    /// Sends signal `name` (`TERM`, `INT`) to the child.
    fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .args([&format!("-{name}"), &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -{name} failed");
    }

    /// The exit code once the child ends, and how long that took; panics (killing the child)
    /// after `limit`. The rest of its output is collected into `seen`.
    fn exit_code(&mut self, limit: Duration) -> (Option<i32>, Duration) {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("wait works") {
                let took = started.elapsed();
                // The reader thread ends with the pipe.
                while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(5)) {
                    self.seen.push(line);
                }
                return (status.code(), took);
            }
            if started.elapsed() > limit {
                let _ = self.child.kill();
                panic!(
                    "the child did not exit within {limit:?}; output {:#?}",
                    self.seen
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
