//! Tests across processes: `mpirun -np R` on loopback, whose ranks are the calling test binary
//! itself running one (ignored) test, with the scenario in environment variables.
//!
//! Without `mpirun` on the PATH the callers say so loudly and pass, except under CI (the `CI`
//! environment variable), where they fail: CI installs Open MPI.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What `mpirun` said and how it ended.
pub struct Run {
    /// Whether every rank ended well.
    pub success: bool,
    /// stdout, then stderr.
    pub output: String,
    /// How long the job took.
    pub elapsed: Duration,
}

impl Run {
    /// Asserts that the job failed within 25 s and that its output holds every one of `words`
    /// (the failed rank's name, its error).
    pub fn assert_failed_fast_saying(&self, words: &[&str]) {
        assert!(!self.success, "the job went on:\n{}", self.output);
        for w in words {
            assert!(self.output.contains(w), "no `{w}` in:\n{}", self.output);
        }
        assert!(
            self.elapsed < Duration::from_secs(25),
            "ended after {:?}",
            self.elapsed
        );
    }
}

/// `mpirun -np ranks` of this test binary's test `rank_test` (its full name, from
/// [`test_name!`](crate::test_name): an ignored test that reads its scenario from `env`); `None`
/// (after saying so) when there is no `mpirun` and this is not CI. Fails the test if the job
/// outlives 90 s.
pub fn mpirun(ranks: usize, rank_test: &str, env: &[(&str, String)]) -> Option<Run> {
    if Command::new("mpirun").arg("--version").output().is_err() {
        assert!(
            std::env::var_os("CI").is_none(),
            "mpirun is not installed, and CI must run the MPI tests: \
             apt-get install openmpi-bin libopenmpi-dev"
        );
        eprintln!("SKIPPED: no mpirun on the PATH (apt-get install openmpi-bin libopenmpi-dev)");
        return None;
    }
    let start = Instant::now();
    let session = session_dir();
    let mut command = Command::new("mpirun");
    command
        .args(["--oversubscribe", "-np", &ranks.to_string()])
        // TCP on loopback: no shared-memory transport, which containers often restrict.
        .args([
            "--mca",
            "btl",
            "tcp,self",
            "--mca",
            "btl_tcp_if_include",
            "lo",
        ])
        // A session directory per job: jobs started at once raced to create the shared one
        // (`mkdir /tmp/ompi.<host>.0: File exists`, then `orte_init failed`).
        .env("OMPI_MCA_orte_tmpdir_base", &session)
        // Containers and CI run as root, which Open MPI refuses unless told.
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    for (name, value) in env {
        command.args(["-x", name]).env(name, value);
    }
    let mut child = command
        .arg(std::env::current_exe().unwrap())
        .args([
            rank_test,
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mpirun starts");
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let readers = [
        std::thread::spawn(move || read_all(&mut stdout)),
        std::thread::spawn(move || read_all(&mut stderr)),
    ];
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > Duration::from_secs(90) {
            child.kill().unwrap();
            panic!("mpirun did not end within 90 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let output = readers.map(|r| r.join().unwrap()).join("\n");
    let _ = std::fs::remove_dir_all(&session);
    Some(Run {
        success: status.success(),
        output,
        elapsed: start.elapsed(),
    })
}

/// A new directory for one job's Open MPI session files.
fn session_dir() -> std::path::PathBuf {
    static JOBS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let job = JOBS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("towers-mpi-{}-{job}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a session directory for mpirun");
    dir
}

fn read_all(from: &mut impl Read) -> String {
    let mut text = String::new();
    from.read_to_string(&mut text).unwrap();
    text
}
