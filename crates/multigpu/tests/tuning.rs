//! Kernel tuning shown, kept and loaded (`towers_multigpu::tuning`), on the GPU device of the
//! GPU tests, with Burn's autotuning (the `fusion` feature). Each run is a child process (this
//! test binary again) with a tuning database of its own: the working directory and the user
//! cache are a fresh temporary directory, with no `Cargo.toml` above it.
#![cfg(all(feature = "gpu", feature = "fusion"))]

use burn::nn::conv::Conv2dConfig;
use burn::tensor::{Distribution, Tensor};
use towers_multigpu::tuning::{
    TuningReport, load_tuning_bundle, load_tuning_bundle_for, save_tuning_bundle,
    save_tuning_bundle_for, show_tuning, tuning_file,
};
use towers_testing::gpu::gpu_or_skip;

/// The child's part: tuning shown, one convolution trained a step's worth (forward and
/// backward), and what was tuned printed on stdout.
fn tune_a_convolution() {
    assert!(show_tuning(), "the tuning lines are ours to count");
    let Some(gpu) = gpu_or_skip("tuning") else {
        return;
    };
    let device = gpu.device.autodiff();
    let conv = Conv2dConfig::new([3, 8], [3, 3]).init(&device);
    let x = Tensor::<4>::random([4, 3, 12, 12], Distribution::Default, &device);
    let grads = conv.forward(x).sum().backward();
    drop(grads);
    device.sync().unwrap();
    let report = TuningReport::now().expect("counted");
    println!("tuned={} kept={}", report.tuned, report.kept);
    println!("{report}");
}

/// The child's part in [`processes_tuning_on_one_database_at_once_keep_it_and_warn_nothing`]: the
/// database opened as `Towers::new` opens it, once the file `TOWERS_TEST_GO` appears (so that
/// the children open it at the same moment), then a small matrix product tuned.
fn open_together_then_tune() {
    assert!(show_tuning(), "the tuning lines are ours to count");
    let Some(gpu) = gpu_or_skip("tuning") else {
        return;
    };
    let go = std::path::PathBuf::from(std::env::var("TOWERS_TEST_GO").unwrap());
    // At most a minute: a parent that failed before writing the file leaves no child behind.
    let waited = std::time::Instant::now();
    while !go.exists() && waited.elapsed() < std::time::Duration::from_secs(60) {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    towers_multigpu::tuning::open_tuning_database();
    let x = Tensor::<2>::random([16, 16], Distribution::Default, &gpu.device);
    drop(x.clone().matmul(x).into_data());
    let report = TuningReport::now().expect("counted");
    println!("tuned={} kept={}", report.tuned, report.kept);
}

/// The child's part in [`a_bundle_mounted_before_any_device_stays_mounted`]: the bundle at
/// `TOWERS_TEST_BUNDLE` mounted first thing (before CubeCL has read its config), then a matrix
/// product on the GPU, then the file the tuning is kept in printed.
fn mount_then_use_the_gpu() {
    let bundle = std::env::var("TOWERS_TEST_BUNDLE").unwrap();
    load_tuning_bundle(std::path::Path::new(&bundle)).unwrap();
    let Some(gpu) = gpu_or_skip("tuning") else {
        return;
    };
    let x = Tensor::<2>::random([8, 8], Distribution::Default, &gpu.device);
    drop(x.clone().matmul(x).into_data());
    println!("mounted={}", tuning_file().display());
}

/// Runs [`tune_a_convolution`] in a child whose working directory and user cache are `dir`,
/// at CubeCL's `full` autotune log level where `full_log` says so, and returns its stdout and
/// stderr, having checked it succeeded.
fn tune_in(dir: &std::path::Path, name: &str, full_log: bool) -> (String, String) {
    let mut child = towers_testing::child::child(name, "tune", &[], "");
    child
        .current_dir(dir)
        .env("XDG_CACHE_HOME", dir)
        .env_remove("CUBECL_DEBUG_LOG")
        .env_remove("CUBECL_DEBUG_OPTION");
    if full_log {
        child.env("CUBECL_DEBUG_OPTION", "debug");
    }
    succeeded(&mut child)
}

/// The stdout and stderr of `child`, run to its end, having checked it succeeded.
fn succeeded(child: &mut std::process::Command) -> (String, String) {
    let out = child.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{stdout}\n{stderr}");
    (stdout, stderr)
}

/// The child's `tuned=` count and `kept=` flag, from its stdout.
fn tuned_and_kept(stdout: &str, stderr: &str) -> (u64, bool) {
    let field = |name: &str| {
        (stdout.lines())
            // libtest may print the test's name on the same line.
            .find_map(|l| l.split_once(name).map(|(_, rest)| rest))
            .and_then(|l| l.split(' ').next())
            .unwrap_or_else(|| panic!("no {name} field: {stdout}\n{stderr}"))
            .to_string()
    };
    let tuned = field("tuned=").parse().unwrap();
    (tuned, field("kept=") == "true")
}

/// A first run tunes (and says so on stderr, one line per kernel), a second one with the same
/// database tunes nothing.
#[test]
fn a_second_run_loads_what_the_first_tuned() {
    if towers_testing::child::role().is_some() {
        return tune_a_convolution();
    }
    if gpu_or_skip("tuning").is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let name = towers_testing::test_name!("a_second_run_loads_what_the_first_tuned");
    let run = |full_log| {
        let (stdout, stderr) = tune_in(dir.path(), &name, full_log);
        let (tuned, kept) = tuned_and_kept(&stdout, &stderr);
        assert!(kept, "kept: {stdout}\n{stderr}");
        (tuned, stderr)
    };
    let (first, stderr) = run(false);
    assert!(first > 0, "a cold run tunes: {stderr}");
    let lines = stderr.matches("towers: tuning kernel ").count() as u64;
    assert_eq!(lines, first, "one line per tuned kernel: {stderr}");
    assert!(
        dir.path().join("cubecl").join("default.db").is_file(),
        "kept in the user cache's cubecl/default.db"
    );
    // At CubeCL's `full` autotune log level, each result loaded gets a line of its own (its
    // checksum), which is no tuning.
    let (second, stderr) = run(true);
    assert!(
        stderr.contains("validate checksum"),
        "full log level: {stderr}"
    );
    assert_eq!(second, 0, "the second run loads every tuning: {stderr}");
}

/// Processes sharing one tuning database and tuning at the same moment (MPI ranks of one
/// machine, a run and its evaluation) each keep what they tune, without a warning: CubeCL
/// warned each time two measured the device's throughput at once (keeping one measure, which
/// loses nothing), three warnings a process in four `cifar10` runs.
#[test]
fn processes_tuning_on_one_database_at_once_keep_it_and_warn_nothing() {
    if towers_testing::child::role().is_some() {
        return open_together_then_tune();
    }
    if gpu_or_skip("tuning").is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let go = dir.path().join("go");
    let name = towers_testing::test_name!(
        "processes_tuning_on_one_database_at_once_keep_it_and_warn_nothing"
    );
    let children: Vec<_> = (0..3)
        .map(|_| {
            towers_testing::child::child(&name, "open together", &[], "")
                .current_dir(dir.path())
                .env("XDG_CACHE_HOME", dir.path())
                .env("TOWERS_TEST_GO", &go)
                .env_remove("CUBECL_DEBUG_LOG")
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    // Every child is up (its test binary loaded, waiting for the file) within a second.
    std::thread::sleep(std::time::Duration::from_secs(1));
    std::fs::write(&go, b"").unwrap();
    for child in children {
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(out.status.success(), "{stdout}\n{stderr}");
        let (tuned, kept) = tuned_and_kept(&stdout, &stderr);
        assert!(kept, "tuned {tuned}, kept: {stdout}\n{stderr}");
        assert!(
            !stderr.contains("CubeCL warns"),
            "no warning: {stdout}\n{stderr}"
        );
    }
}

/// A process opening the tuning database waits while another holds its lock (`FILE.lock`
/// beside it), which every process opening it through `open_tuning_database` takes: processes
/// that opened it at the same moment raced on creating its tables, and one kept nothing (two
/// MPI ranks on a fresh cache: `Unable to open the Turso cache: Parse error: no such table:
/// meta`).
#[test]
fn a_process_opening_the_database_waits_while_another_opens_it() {
    if towers_testing::child::role().is_some() {
        towers_multigpu::tuning::open_tuning_database();
        return println!("opened");
    }
    let dir = tempfile::tempdir().unwrap();
    let database = dir.path().join("cubecl").join("default.db");
    std::fs::create_dir_all(database.parent().unwrap()).unwrap();
    let lock = std::fs::File::create(dir.path().join("cubecl").join("default.db.lock")).unwrap();
    lock.lock().unwrap();
    let name =
        towers_testing::test_name!("a_process_opening_the_database_waits_while_another_opens_it");
    let mut child = towers_testing::child::child(&name, "open", &[], "")
        .current_dir(dir.path())
        .env("XDG_CACHE_HOME", dir.path())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(3));
    let waiting = child.try_wait().unwrap().is_none();
    drop(lock);
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("opened"),
        "{stdout}"
    );
    assert!(
        waiting,
        "the child opened the database while the lock was held: {stdout}"
    );
    assert!(
        database.is_file(),
        "the child opened it once the lock was free"
    );
}

/// A tuning database CubeCL cannot open (here a directory where `default.db` goes) keeps
/// nothing: the run says so at its end, and shows CubeCL's warnings on stderr, each once,
/// where it used to say it kept everything there.
#[test]
fn a_database_that_keeps_nothing_is_said_so() {
    if towers_testing::child::role().is_some() {
        return tune_a_convolution();
    }
    if gpu_or_skip("tuning").is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("cubecl").join("default.db")).unwrap();
    let name = towers_testing::test_name!("a_database_that_keeps_nothing_is_said_so");
    let (stdout, stderr) = tune_in(dir.path(), &name, false);
    let (tuned, kept) = tuned_and_kept(&stdout, &stderr);
    assert!(tuned > 0 && !kept, "tuned, not kept: {stdout}\n{stderr}");
    assert!(
        stdout.contains("but could not keep them in"),
        "the report says so: {stdout}"
    );
    let warnings: Vec<&str> = (stderr.lines())
        .filter(|l| l.starts_with("towers: tuning: CubeCL warns, "))
        .collect();
    let distinct: std::collections::BTreeSet<&str> = warnings.iter().copied().collect();
    assert!(
        !warnings.is_empty() && warnings.len() == distinct.len() && warnings.len() <= 10,
        "CubeCL's warnings, each once, at most 10: {stderr}"
    );
}

/// A file that is no tuning bundle (garbage, empty, a truncated SQLite header) is refused with
/// an error naming it, and left as it was; CubeCL's own `load` takes any file, after which a
/// run tuned everything again and said it kept it there.
#[test]
fn a_file_that_is_no_tuning_bundle_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &[u8]); 3] = [
        ("garbage.db", b"garbage\n"),
        ("empty.db", b""),
        ("truncated.db", b"SQLite format 3\0"),
    ];
    for (name, bytes) in cases {
        let file = dir.path().join(name);
        std::fs::write(&file, bytes).unwrap();
        let error = load_tuning_bundle(&file).expect_err(name).to_string();
        assert!(
            error.contains(&file.display().to_string()) && error.contains("not a tuning bundle"),
            "{name}: {error}"
        );
        assert_eq!(
            std::fs::read(&file).unwrap(),
            bytes,
            "{name} left as it was"
        );
    }
}

/// A bundle records the GPUs it was tuned on (`save_tuning_bundle_for`), and a run on another
/// GPU is refused before anything is mounted, naming the file and both GPUs: CubeCL would take
/// the other GPU's choices for the same device index.
#[test]
fn a_bundle_tuned_on_another_gpu_is_refused() {
    use cubecl_environment::bundle::{EnvironmentInfo, ExportOptions, SqliteBundle, export};
    let Some(gpu) = gpu_or_skip("a_bundle_tuned_on_another_gpu_is_refused") else {
        return;
    };
    let towers = towers_multigpu::parse_devices(&gpu.entry).unwrap();
    let identity = towers[0].device().identity().expect("a GPU names itself");
    let dir = tempfile::tempdir().unwrap();

    let ours = dir.path().join("ours.db");
    save_tuning_bundle_for(&ours, &towers).unwrap();
    let manifest = SqliteBundle::open(&ours).unwrap().manifest().clone();
    let this_gpu = format!("{} ({})", identity.name, identity.fingerprint);
    let [recorded] = &manifest.environments[..] else {
        panic!("one GPU: {:?}", manifest.environments);
    };
    assert_eq!(recorded.devices, [format!("{}: {this_gpu}", gpu.entry)]);
    assert!(
        recorded.label.starts_with("device-"),
        "its CubeCL key: {recorded:?}"
    );

    let theirs = dir.path().join("theirs.db");
    // With a line of its own crafted in: said escaped, on the error's one line.
    let other_gpu = format!(
        "{}: NVIDIA H100 80GB HBM3 (ptx_sm90)\ntuning: tuned none",
        gpu.entry
    );
    let options = ExportOptions {
        environments: vec![EnvironmentInfo {
            devices: vec![other_gpu],
            ..Default::default()
        }],
        ..Default::default()
    };
    export(&[&ours], &theirs, &options).unwrap();
    let error = load_tuning_bundle_for(&theirs, &towers)
        .expect_err("tuned on another GPU")
        .to_string();
    for named in [
        &theirs.display().to_string(),
        "NVIDIA H100 80GB HBM3 (ptx_sm90)\\ntuning: tuned none",
        &this_gpu,
    ] {
        assert!(error.contains(named), "{named} not in: {error}");
    }
    assert!(!error.contains('\n'), "one line: {error}");
}

/// A run's device that cannot be opened (here a wgpu adapter the machine lacks; on CUDA, an
/// index it lacks), which CubeCL reports by panicking, is an error naming its entry when a
/// bundle is checked against the run's GPUs, not a crash.
#[cfg(feature = "wgpu")]
#[test]
fn a_device_that_cannot_be_opened_is_named() {
    use burn::tensor::{Device, DeviceKind};
    if gpu_or_skip("a_device_that_cannot_be_opened_is_named").is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bundle.db");
    save_tuning_bundle_for(&file, &[]).unwrap();
    let absent = Device::wgpu(DeviceKind::DiscreteGpu(99));
    let tower = towers_multigpu::TowerDevice::new("wgpu:discrete:99", absent);
    let error = load_tuning_bundle_for(&file, &[tower])
        .expect_err("no such adapter")
        .to_string();
    assert!(
        error.contains("`wgpu:discrete:99`") && error.contains("cannot be opened"),
        "{error}"
    );
}

/// Towers note the devices they run on (`devices_run_on`), which a program's tuning report and
/// bundle then cover however the program named them: flags, a config file or its own code.
#[test]
fn towers_note_the_devices_they_run_on() {
    use burn::optim::SgdConfig;
    use towers_multigpu::towers::{Towers, TowersConfig};
    use towers_multigpu::tuning::{devices_run_on, tunes};
    let Some(gpu) = gpu_or_skip("tuning") else {
        return;
    };
    let model = Conv2dConfig::new([3, 8], [3, 3]).init(&burn::tensor::Device::flex().autodiff());
    let tower = towers_multigpu::TowerDevice::new(&gpu.entry, gpu.device.clone());
    Towers::new(
        model,
        SgdConfig::new().init(),
        &[tower],
        TowersConfig::default(),
    )
    .unwrap();
    let ran_on = devices_run_on();
    assert!(
        ran_on.iter().any(|d| d.name() == gpu.entry),
        "{} among {ran_on:?}",
        gpu.entry
    );
    assert!(tunes(&ran_on), "{ran_on:?} tunes");
}

/// A bundle whose tuned entry names as its winner a candidate it never timed (the fixture's
/// convolution entry, its winner 6 rewritten to 99: `tests/data/README.md`) is refused before
/// anything is mounted, naming the file, the kernel and the entry; the bundle as tuned passes
/// the same check. CubeCL indexed its candidates with the winner unchecked, and a run that
/// loaded the bundle ended its first step with `index out of bounds`, naming neither.
#[test]
fn a_bundle_naming_a_winner_it_never_timed_is_refused() {
    use towers_multigpu::tuning::check_tuning_bundle_for;
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let tuned = data.join("tuned_bundle.db");
    check_tuning_bundle_for(&tuned, &[]).expect("the bundle as tuned");
    let stray = data.join("stray_winner_bundle.db");
    let error = check_tuning_bundle_for(&stray, &[])
        .expect_err("a winner never timed")
        .to_string();
    for named in [
        &stray.display().to_string(),
        "candidate 99",
        "entry 1 for `0.11.3/device-100-0-wgpu<wgsl>/burn_cubecl-kernel-conv-forward-tune`",
    ] {
        assert!(error.contains(named), "{named} not in: {error}");
    }
}

/// A bundle mounted before any device is used stays mounted: CubeCL, reading its config at a
/// device's first use, activated the environment the config names, which unmounted the bundle
/// (a library user's run then tuned everything again, into the default database).
#[test]
fn a_bundle_mounted_before_any_device_stays_mounted() {
    if towers_testing::child::role().is_some() {
        return mount_then_use_the_gpu();
    }
    if gpu_or_skip("tuning").is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("bundle.db");
    save_tuning_bundle(&bundle).unwrap();
    let name = towers_testing::test_name!("a_bundle_mounted_before_any_device_stays_mounted");
    let (stdout, stderr) = succeeded(
        towers_testing::child::child(&name, "mount", &[], "")
            .current_dir(dir.path())
            .env("XDG_CACHE_HOME", dir.path())
            .env("TOWERS_TEST_BUNDLE", &bundle),
    );
    let mounted = format!("mounted={}", bundle.display());
    assert!(
        stdout.contains(&mounted),
        "{mounted} not in: {stdout}\n{stderr}"
    );
}

/// A bundle written over one a run has mounted loses that run's index beside it (Turso's
/// `FILE-tshm`, which CubeCL's export leaves): Turso would read it as the new file's.
#[test]
fn a_bundle_written_over_another_loses_the_old_ones_index() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("bundle.db");
    save_tuning_bundle(&bundle).unwrap();
    let index = dir.path().join("bundle.db-tshm");
    std::fs::write(&index, b"the index of the file it replaces").unwrap();
    save_tuning_bundle(&bundle).unwrap();
    assert!(
        !index.exists(),
        "the old index is left beside the new bundle"
    );
}

/// The child's part in [`a_programs_own_warnings_show_beside_the_tuning_lines`].
fn warn_after_show_tuning() {
    assert!(show_tuning(), "the tuning lines are ours to count");
    log::warn!(target: "a_program", "its own warning");
    log::info!(target: "a_program", "its own information");
}

/// The `log` logger `show_tuning` installs (where the program has none) shows every crate's
/// warnings on stderr, not only CubeCL's: it dropped them (towers-learner's among them).
#[test]
fn a_programs_own_warnings_show_beside_the_tuning_lines() {
    if towers_testing::child::role().is_some() {
        return warn_after_show_tuning();
    }
    let name = towers_testing::test_name!("a_programs_own_warnings_show_beside_the_tuning_lines");
    let (_, stderr) = succeeded(
        towers_testing::child::child(&name, "warn", &[], "").env_remove("CUBECL_DEBUG_LOG"),
    );
    assert!(
        stderr.contains("WARN a_program: its own warning"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("its own information"),
        "warnings only: {stderr}"
    );
}
