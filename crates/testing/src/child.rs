//! Child processes for tests that need a process of their own (a signal, a file-size limit,
//! a mount): the test binary runs itself again with only the named test, and an environment
//! variable tells that test which part to play.

use std::process::Command;

const ROLE: &str = "TOWERS_TEST_CHILD";

/// The part this process plays when a test started it as a child.
pub fn role() -> Option<String> {
    std::env::var(ROLE).ok()
}

/// A command that runs test `test` of this binary (its full name, from
/// [`test_name!`](crate::test_name)) in a child process playing `role`, through `sh -c SCRIPT`
/// (which ends by running the test; e.g. `ulimit -f 8` before it), itself started by `wrapper`
/// (e.g. `unshare -rm`) when not empty.
pub fn child(test: &str, role: &str, wrapper: &[&str], script: &str) -> Command {
    let exe = std::env::current_exe().expect("the test binary's path");
    let (program, wrapper_args) = match wrapper {
        [program, args @ ..] => (*program, args),
        [] => ("sh", &[][..]),
    };
    let mut command = Command::new(program);
    if !wrapper.is_empty() {
        command.args(wrapper_args).arg("sh");
    }
    command
        .arg("-c")
        .arg(format!("{script}\nexec \"$0\" \"$@\""))
        .arg(exe)
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(ROLE, role);
    command
}
