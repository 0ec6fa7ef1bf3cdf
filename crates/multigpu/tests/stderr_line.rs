//! `eprint_line` writes a line in one piece, so that under `mpirun` no other process's output
//! can land inside it. Each `write` to a datagram socket is one datagram, so a child process
//! whose stderr is one shows the writes its line took.

use std::os::fd::OwnedFd;
use std::os::unix::net::UnixDatagram;
use std::time::{Duration, Instant};

use towers_testing::child::{child, role};

/// What the child writes: a line like a rank's last words, made from arguments as they are.
fn rank_line(rank: usize, message: &str) -> String {
    format!("error: rank {rank}: {message}; ending the job on every rank")
}

#[test]
fn a_line_with_arguments_is_one_write() {
    if role().is_some() {
        towers_multigpu::eprint_line(&rank_line(1, "device list entry `nonsense`"));
        return;
    }
    let (ours, theirs) = UnixDatagram::pair().unwrap();
    let mut writer = child(
        &towers_testing::test_name!("a_line_with_arguments_is_one_write"),
        "writer",
        &[],
        "",
    )
    .stdout(std::process::Stdio::null())
    .stderr(OwnedFd::from(theirs))
    .spawn()
    .unwrap();
    // Read while the child writes: a socket holds only so many datagrams unread.
    ours.set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let (mut writes, mut buffer, started) = (Vec::new(), vec![0u8; 1 << 16], Instant::now());
    let exited = loop {
        match ours.recv(&mut buffer) {
            Ok(n) => writes.push(String::from_utf8_lossy(&buffer[..n]).into_owned()),
            Err(_) => match writer.try_wait().unwrap() {
                Some(status) => break status,
                None => assert!(started.elapsed() < Duration::from_secs(60), "child hung"),
            },
        }
    };
    // What it wrote between the last wait and its exit.
    ours.set_nonblocking(true).unwrap();
    while let Ok(n) = ours.recv(&mut buffer) {
        writes.push(String::from_utf8_lossy(&buffer[..n]).into_owned());
    }
    assert!(exited.success(), "the child failed; its writes: {writes:?}");
    let line = format!("{}\n", rank_line(1, "device list entry `nonsense`"));
    assert!(
        writes.contains(&line),
        "the line was not one write; the writes were: {writes:?}"
    );
}
