//! Towers on remote devices, on loopback: `towers-serve` child processes serve flex, and the
//! towers reach them through Burn's remote backend as `ws://127.0.0.1:PORT/0` entries, or over
//! Iroh, with a token, as `iroh://ID@127.0.0.1:PORT/0`.
//!
//! Built and run with `cargo test --features remote --test integration remote::`.
#![cfg(feature = "remote")]

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use burn::module::Module;
use burn::tensor::{Int, Tensor};
use burn_towers::data::cifar10::BuiltinCifar10;
use burn_towers::data::{HostBatch, image_loss};
use burn_towers::multigpu::remote::{TOKEN_FILE_VAR, TOKEN_VAR};
use burn_towers::multigpu::{Error, IntoTowerLoss, Reduce, Towers, TowersConfig, parse_devices};
use burn_towers::train::{CheckpointDir, Input, Trainer};
use towers_testing::batches::batch;
use towers_testing::child::{child, role};
use towers_testing::compare::{max_abs_diff, values};
use towers_testing::nets::{BnNet, LR, Net, sgd};
use towers_testing::reference::{flex, plain_training};
use towers_testing::training::{cifar_net, quick_cifar_config};
use towers_testing::within;
use towers_testing::{assert_error_names, report};

/// How long anything here may take before the test calls it a hang.
const HANG_LIMIT: Duration = Duration::from_secs(120);

/// A `towers-serve` child process on a loopback port the system picks; killed when dropped.
struct Server {
    child: Child,
    /// The lines it prints, read on a thread of their own so that its output never fills a pipe.
    lines: mpsc::Receiver<String>,
    /// `ws://127.0.0.1:PORT` or `iroh://ID@127.0.0.1:PORT`.
    url: String,
}

impl Server {
    /// A WebSocket server without a token.
    fn start(devices: &str) -> Self {
        Self::start_with(devices, "websocket", None)
    }

    /// A server on `transport`, asking for `token` when one is given.
    fn start_with(devices: &str, transport: &str, token: Option<&str>) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_towers-serve"));
        command
            .args(["--listen", "127.0.0.1:0", "--devices", devices])
            .args(["--transport", transport])
            .env_remove(TOKEN_VAR)
            .env_remove(TOKEN_FILE_VAR)
            .stdout(Stdio::piped());
        match token {
            Some(token) => command.env(TOKEN_VAR, token),
            None => command.arg("--insecure-no-token"),
        };
        let mut child = command.spawn().expect("towers-serve starts");
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        // "towers-serve: listening on ws://127.0.0.1:PORT: ws://127.0.0.1:PORT/0 = flex"
        // (or iroh://ID@127.0.0.1:PORT)
        let line = lines
            .recv_timeout(HANG_LIMIT)
            .expect("towers-serve prints its address");
        let url = line
            .split_whitespace()
            .nth(3)
            .and_then(|u| u.strip_suffix(':'))
            .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
            .to_string();
        Server { child, lines, url }
    }

    fn device(&self, index: usize) -> String {
        format!("{}/{index}", self.url)
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A copy of `model` with batch-norm buffers of its own: Burn's clones share them, so training a
/// clone would change the original's running statistics.
fn own_copy<M: Module>(model: &M) -> M {
    model.valid().train().fork(&flex())
}

/// `model` after `batches` on towers on `devices`: every parameter and running statistic.
fn train_towers<M: Module, L: IntoTowerLoss>(
    model: &M,
    devices: &str,
    reduce: Reduce,
    batches: &[HostBatch],
    loss: impl Fn(&M, Tensor<4>, Tensor<1, Int>) -> L + Sync,
) -> Vec<f32> {
    let devices = parse_devices(devices).unwrap_or_else(|e| panic!("{}", report(&e)));
    let config = TowersConfig::default().with_reduce(reduce);
    let mut towers = Towers::new(own_copy(model), sgd(), &devices, config).unwrap();
    for b in batches {
        towers.step(b, LR, image_loss(&loss)).unwrap();
    }
    values(towers.model())
}

#[test]
fn towers_on_two_remote_devices_match_one_local_tower() {
    let servers = [Server::start("flex"), Server::start("flex")];
    let remote = format!("{},{}", servers[0].device(0), servers[1].device(0));
    // Remote devices stay unfused whatever the build's `fusion` feature: Burn's remote fusion
    // (which Burn's own `fusion` feature turns on) broke a flex server mid-run (see `fusion` in
    // crates/multigpu/Cargo.toml).
    for tower in parse_devices(&remote).unwrap() {
        assert!(!tower.is_fused(), "{} is fused", tower.name());
    }
    let device = flex();
    device.seed(5);
    let batches = [batch(12, 1), batch(12, 2)];

    // Without batch norm, two half-batch towers make exactly the full-batch update.
    let model = Net::new(&device);
    let expected = values(&plain_training(model.clone(), &batches).0);
    // The model must move: the comparison is not between two untrained copies.
    assert!(max_abs_diff(&expected, &values(&model)) > 1e-3);
    for reduce in [Reduce::ParameterDevice, Reduce::AllReduce] {
        let got = train_towers(&model, &remote, reduce, &batches, |m: &Net, x, y| {
            m.loss(x, y)
        });
        let diff = max_abs_diff(&got, &expected);
        assert!(diff < 1e-5, "{reduce:?}: max abs diff {diff}");
    }

    // With batch norm each tower normalizes its own slice, so the reference is two local
    // towers (themselves tested against plain Burn in towers-multigpu); the running statistics
    // are part of the comparison.
    let model = BnNet::new(&device);
    let loss = |m: &BnNet, x, y| m.loss(x, y);
    for reduce in [Reduce::ParameterDevice, Reduce::AllReduce] {
        let expected = train_towers(&model, "flex,flex", reduce, &batches, loss);
        let got = train_towers(&model, &remote, reduce, &batches, loss);
        let diff = max_abs_diff(&got, &expected);
        assert!(
            diff < 1e-6,
            "{reduce:?} with batch norm: max abs diff {diff}"
        );
    }
}

/// Over Iroh, with a token: a client holding it trains exactly like one local tower; a client
/// with another token is refused, by name. Each client is this test run again in a child
/// process, whose environment holds its token.
#[test]
fn iroh_with_a_token_serves_its_clients_and_refuses_the_others() {
    const TEST: &str = "iroh_with_a_token_serves_its_clients_and_refuses_the_others";
    if let Some(entry) = role() {
        let batches = [batch(12, 1), batch(12, 2)];
        flex().seed(5);
        let model = Net::new(&flex());
        let expected = values(&plain_training(model.clone(), &batches).0);
        let loss = |m: &Net, x, y| m.loss(x, y);
        let got = train_towers(&model, &entry, Reduce::ParameterDevice, &batches, loss);
        let diff = max_abs_diff(&got, &expected);
        assert!(diff < 1e-5, "max abs diff {diff}");
        return;
    }
    let server = Server::start_with("flex", "iroh", Some("tower-secret"));
    let entry = server.device(0);
    assert!(entry.starts_with("iroh://"), "{entry}");
    for (token, admitted) in [("tower-secret", true), ("another-token", false)] {
        let out = child(&towers_testing::test_name!(TEST), &entry, &[], "true")
            .env(TOKEN_VAR, token)
            .output()
            .unwrap();
        let output = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.success(), admitted, "token {token}: {output}");
        if !admitted {
            assert_error_names(&output, &[&entry, "rejected the credential"]);
        }
    }
}

/// Over WebSocket, with a token: a client sends it only from a token line naming the server
/// (`ws://host:port=TOKEN`), never the general token; a wrong token is refused. Each client is
/// this test run again in a child process, whose environment holds its tokens.
#[test]
fn over_websocket_a_token_is_sent_only_to_the_server_its_line_names() {
    const TEST: &str = "over_websocket_a_token_is_sent_only_to_the_server_its_line_names";
    if let Some(entry) = role() {
        let devices = parse_devices(&entry).unwrap_or_else(|e| panic!("{}", report(&e)));
        let device = devices[0].device().clone();
        let doubled = Tensor::<1>::from_floats([1.0, 2.0], &device) * 2.0;
        assert_eq!(
            doubled.to_data().iter::<f32>().collect::<Vec<_>>(),
            [2.0, 4.0]
        );
        return;
    }
    let server = Server::start_with("flex", "websocket", Some("ws-secret"));
    let entry = server.device(0);
    let named = |token: &str| format!("general-token\n{}={token}\n", server.url);
    let cases = [
        (named("ws-secret"), None),
        ("ws-secret".to_string(), Some("no token was sent")),
        (named("wrong-token"), Some("rejected the credential")),
    ];
    for (tokens, refusal) in cases {
        let out = child(&towers_testing::test_name!(TEST), &entry, &[], "true")
            .env(TOKEN_VAR, &tokens)
            .output()
            .unwrap();
        let output = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.success(),
            refusal.is_none(),
            "{tokens:?}: {output}"
        );
        if let Some(refusal) = refusal {
            assert_error_names(&output, &[&entry, refusal]);
        }
    }
}

/// Without a token the server does not start, whatever the transport: it exits at once,
/// naming the token's variables and the flag that would let it serve everyone.
#[test]
fn towers_serve_without_a_token_refuses_to_start() {
    for transport in ["iroh", "websocket"] {
        let mut server = Command::new(env!("CARGO_BIN_EXE_towers-serve"))
            .args(["--listen", "127.0.0.1:0", "--transport", transport])
            .env_remove(TOKEN_VAR)
            .env_remove(TOKEN_FILE_VAR)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let started = Instant::now();
        while server.try_wait().unwrap().is_none() {
            if started.elapsed() > Duration::from_secs(10) {
                let _ = server.kill();
                panic!("{transport}: still serving 10 s after starting without a token");
            }
            thread::sleep(Duration::from_millis(20));
        }
        let out = server.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{transport}: {stderr}");
        assert_error_names(&stderr, &[TOKEN_FILE_VAR, TOKEN_VAR, "--insecure-no-token"]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.is_empty(), "{transport}: {stdout}");
    }
}

#[test]
fn an_unreachable_server_or_device_is_an_error_naming_it() {
    // Bound but not listening: dials are refused until Burn's client gives up (about 16 s).
    let socket = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = socket.local_addr().unwrap().port();
    drop(socket);
    let entry = format!("ws://127.0.0.1:{port}/0");
    let err = within(HANG_LIMIT.as_secs(), move || {
        parse_devices(&format!("flex,{entry}")).unwrap_err()
    });
    assert!(
        matches!(&err, Error::Remote { host, .. } if *host == format!("ws://127.0.0.1:{port}")),
        "{err}"
    );

    let server = Server::start("flex");
    let entry = server.device(3);
    let err = parse_devices(&entry).unwrap_err();
    assert!(matches!(&err, Error::Remote { .. }), "{err}");
    let message = report(&err);
    assert_error_names(&message, &[&entry, "only 1 device"]);
}

#[test]
fn towers_serve_stops_on_sigterm_and_refuses_bad_arguments() {
    let mut server = Server::start("flex,flex");
    // A session is open (and the server's signal handlers are installed) once a device connects.
    let device = parse_devices(&server.device(1)).unwrap()[0]
        .device()
        .clone();
    let doubled = Tensor::<1>::from_floats([1.0, 2.0], &device) * 2.0;
    assert_eq!(
        doubled.to_data().iter::<f32>().collect::<Vec<_>>(),
        [2.0, 4.0]
    );
    let status = Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let started = Instant::now();
    let exit = loop {
        if let Some(exit) = server.child.try_wait().unwrap() {
            break exit;
        }
        assert!(
            started.elapsed() < HANG_LIMIT,
            "towers-serve ignored SIGTERM"
        );
        thread::sleep(Duration::from_millis(50));
    };
    assert!(exit.success(), "{exit}");
    let last = server.lines.iter().last();
    assert_eq!(last.as_deref(), Some("towers-serve: stopped"));

    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = taken.local_addr().unwrap().to_string();
    for (args, expected) in [
        (
            vec!["--transport", "websocket", "--listen", address.as_str()],
            address.as_str(),
        ),
        (vec!["--relays", "nowhere"], "nowhere"),
        (vec!["--devices", "flex*2"], "*share"),
        (vec!["--devices", "tpu"], "tpu"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_towers-serve"))
            .args(&args)
            .env(TOKEN_VAR, "a-token")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert_error_names(&stderr, &[expected]);
    }
}

#[test]
fn a_server_killed_mid_run_stops_training_naming_it_and_resume_goes_on_without_it() {
    let data = BuiltinCifar10::create(100, 10, 3).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start("flex");
    let remote = server.device(0);

    // Kill the server once the run has written its first checkpoint.
    let train_dir = dir.path().to_path_buf();
    let killer = thread::spawn(move || {
        let ckpts = CheckpointDir::new(&train_dir, 5);
        let started = Instant::now();
        while ckpts.latest().ok().flatten().is_none() {
            assert!(started.elapsed() < HANG_LIMIT, "no checkpoint was written");
            thread::sleep(Duration::from_millis(20));
        }
        server.kill();
    });
    // The remote tower comes first; the model stays on the local device all the same.
    let mut config = quick_cifar_config(dir.path(), &format!("{remote},flex"), 10_000);
    config.parameter_device = Some("flex".into());
    let input = Input::cifar10_train(data.dir()).unwrap();
    let err = within(HANG_LIMIT.as_secs(), move || {
        match Trainer::new(config).run(cifar_net, &input) {
            Ok(_) => panic!("training went on without its server"),
            Err(err) => err,
        }
    });
    killer.join().unwrap();
    let message = report(&err);
    assert_error_names(&message, &[&remote]);

    // The newest checkpoint is whole, and a resumed run on the local device goes on from it.
    let (saved, _) = CheckpointDir::new(dir.path(), 5).latest().unwrap().unwrap();
    assert!(saved >= 2 && saved % 2 == 0, "{saved}");
    let mut config = quick_cifar_config(dir.path(), "flex", saved + 2);
    config.resume = true;
    let trained = Trainer::new(config)
        .run(cifar_net, &Input::cifar10_train(data.dir()).unwrap())
        .unwrap();
    assert_eq!(
        (trained.report.first_step, trained.report.step),
        (saved, saved + 2)
    );
}
