//! Lines on stderr that arrive whole when several processes share one terminal.
//!
//! Rust's stderr is unbuffered, and `eprintln!` makes one `write` per piece of its format
//! string: the text before an argument, the argument, the text after it. Under `mpirun` each
//! rank's stderr is forwarded by Open MPI piece by piece, so another process's output can land
//! between the pieces of one line: on CI, mpirun's own `MPI_ABORT` notice split a rank's
//! `error: rank 1: …` after its first words. A line written with [`eprint_line`] is one `write`
//! (a pipe keeps writes of up to 4 KiB whole), so it reads as one line wherever it goes.

use std::io::Write;

/// Writes `line` and a newline to stderr in one `write`. A stderr that cannot be written to
/// (closed, or a full disk behind it) loses the line instead of ending the process: these are
/// warnings and last words before an exit, which should not turn into a panic of their own.
pub fn eprint_line(line: &str) {
    let whole = format!("{line}\n");
    let _ = std::io::stderr().lock().write_all(whole.as_bytes());
}
