//! [`StopFlag`]: how a run is asked to stop early (Ctrl-C, SIGTERM, or a test).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use crate::error::{Error, Result};

/// A shared request to stop. The trainer checks it between steps, then writes a checkpoint,
/// stops the input pipeline and joins its threads before returning.
#[derive(Debug, Clone, Default)]
pub struct StopFlag(Arc<AtomicBool>);

impl StopFlag {
    /// A flag nobody has raised.
    pub fn new() -> Self {
        Self::default()
    }

    /// Asks the run to stop after the current step.
    pub fn request(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether a stop was asked for.
    pub fn is_requested(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    /// The flag that SIGINT (Ctrl-C), SIGTERM (what SLURM and Kubernetes send before they
    /// kill) and SIGHUP raise. A second signal exits at once with status 130, after removing
    /// the temporary files the crates made (`towers_multigpu::exit_now`: the built-in data, a
    /// checkpoint half-written under its temporary name). The handler is installed once per
    /// process; later calls return the same flag.
    pub fn ctrl_c() -> Result<Self> {
        // The handler is installed once: its error too is kept, shared, for every later call.
        static FLAG: OnceLock<std::result::Result<StopFlag, Arc<ctrlc::Error>>> = OnceLock::new();
        FLAG.get_or_init(|| {
            let flag = StopFlag::new();
            let raised = flag.clone();
            // ctrlc's `termination` feature adds SIGTERM and SIGHUP to SIGINT.
            ctrlc::set_handler(move || {
                if raised.is_requested() {
                    eprintln!("\nsecond signal: exiting now, without a checkpoint of this step");
                    // Not through the threads that hold the temporary files (one may be
                    // stuck in a device call): the files listed for this go with the exit.
                    towers_multigpu::exit_now(130);
                }
                eprintln!(
                    "\nsignal: stopping after this step and writing a checkpoint of it (none \
                     before the first step; an evaluation after training stops after its \
                     batch; signal again, or Ctrl-C, to quit now)"
                );
                raised.request();
            })
            .map(|()| flag)
            .map_err(Arc::new)
        })
        .clone()
        .map_err(Error::Signals)
    }
}
