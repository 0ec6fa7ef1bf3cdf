//! One long-lived worker thread per tower: started with the towers, joined when they drop.
//!
//! # Why persistent threads
//!
//! Burn's fusion backends (wgpu, CUDA, ...) queue each thread's operations on a stream of that
//! thread. A tower that ran on a new thread every step put its replica's long-lived tensors
//! on a new stream every step, and each first use crossed streams. On a worker of its own a
//! tower keeps one stream (and its allocations) from step to step, as a CUDA rank of
//! PyTorch DDP keeps its stream.
//!
//! # Borrowed work on persistent threads
//!
//! A step hands each worker a task that borrows the step's batch and loss function
//! ([`Workers::run`]), as `std::thread::scope` lets scoped threads do. No crate does this for
//! threads pinned to an index: `rayon`'s `ThreadPool::broadcast` comes closest, but a pool's
//! thread sends every rayon call made on it to that pool, so flex's own parallel kernels
//! inside a tower's forward pass would run on the towers' threads instead of the global pool.
//! The borrows are sound for the reason scoped threads are: [`Workers::run`] returns (or
//! unwinds) only after every task it handed out has run and been dropped, which each worker
//! reports through a [`Finished`] guard after the task is gone.
//!
//! # Towers that never finish
//!
//! A device call that hangs (a remote server gone silent, a GPU driver stuck) cannot be
//! interrupted, and the step cannot return while a worker still borrows its batch. So
//! [`Workers::run`] names the towers still running each time the deadline passes, and after
//! the timeout, when one is set, ends the process with an error naming them, as PyTorch's
//! NCCL watchdog does: the job's supervisor (mpirun, a scheduler) then sees it fail instead of
//! hang.

use std::panic::{self, AssertUnwindSafe};
use std::sync::Mutex;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use crate::devices::TowerDevice;
use crate::error::{Error, Result};
use crate::stderr_line::eprint_line;

/// The exit code of a process ended by [`TowersConfig::tower_timeout`]: `EX_SOFTWARE` of
/// `sysexits.h`. The temporary files listed by `towers_multigpu::list_scratch` are removed
/// first.
///
/// [`TowersConfig::tower_timeout`]: super::TowersConfig::tower_timeout
pub const HUNG_TOWER_EXIT_CODE: i32 = 70;

/// A tower's work for one step, which may borrow the step's data.
pub(super) type Work<'a, R> = Box<dyn FnOnce() -> R + Send + 'a>;

/// A task with its borrows erased, and the guard that reports its end.
struct Task {
    run: Box<dyn FnOnce() + Send + 'static>,
    finished: Finished,
}

/// Tells [`Workers::run`] that task `.0` has ended and been dropped, however it ended.
struct Finished(usize, Sender<usize>);

impl Drop for Finished {
    fn drop(&mut self) {
        let _ = self.1.send(self.0);
    }
}

/// One thread per tower, each running the tasks sent to it in order.
pub(super) struct Workers {
    tasks: Vec<Sender<Task>>,
    threads: Vec<JoinHandle<()>>,
}

/// How long [`Workers::run`] waits before it names the towers still running, and before it
/// ends the process.
#[derive(Clone, Copy, Debug)]
pub(super) struct Patience {
    pub(super) deadline: Duration,
    pub(super) timeout: Option<Duration>,
}

impl Workers {
    /// Starts one worker per tower, named `tower-{i}`.
    pub(super) fn start(towers: &[TowerDevice]) -> Result<Self> {
        let mut workers = Self {
            tasks: Vec::with_capacity(towers.len()),
            threads: Vec::with_capacity(towers.len()),
        };
        for (i, tower) in towers.iter().enumerate() {
            let (send, tasks) = mpsc::channel::<Task>();
            let thread = thread::Builder::new()
                .name(format!("tower-{i}"))
                .spawn(move || work(tasks))
                .map_err(|error| Error::Spawn {
                    tower: i,
                    device: tower.name().to_string(),
                    error,
                })?;
            workers.tasks.push(send);
            workers.threads.push(thread);
        }
        Ok(workers)
    }

    /// Runs `tasks[i]` on worker `i`, all at once, and returns each one's result (`Err` with
    /// the panic when it panicked) once every one has ended. `towers` names them while
    /// `patience` runs out. With `first_here`, `tasks[0]` runs on the calling thread instead,
    /// while the others run, and worker 0, idle meanwhile, watches it with the same patience.
    pub(super) fn run<'a, R: Send + 'a>(
        &self,
        tasks: Vec<Work<'a, R>>,
        towers: &[TowerDevice],
        patience: Patience,
        first_here: bool,
    ) -> Vec<thread::Result<R>> {
        assert!(tasks.len() <= self.tasks.len(), "a task per worker at most");
        let slots: Vec<Mutex<Option<thread::Result<R>>>> =
            tasks.iter().map(|_| Mutex::new(None)).collect();
        let (finished, ends) = mpsc::channel();
        // Declared after `slots`, so dropped before them: waits for every task that borrows
        // them, even when this thread unwinds.
        let ends = AllEnded(ends);
        // Declared after `ends`, so dropped before it: `ends` waits for every sender.
        let finished = finished;
        let mut tasks = tasks.into_iter();
        let here = first_here.then(|| tasks.next()).flatten();
        let on_workers = usize::from(here.is_some())..slots.len();
        for (i, task) in on_workers.zip(tasks) {
            let slot = &slots[i];
            let run = Box::new(move || {
                let result = panic::catch_unwind(AssertUnwindSafe(task));
                *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(result);
            });
            // SAFETY: `run` borrows `slots` and data that lives for 'a; this call waits for
            // its `Finished` through `ends` before it returns or unwinds.
            unsafe { self.send(i, run, &finished) };
        }
        if let Some(task) = here {
            // Ends worker 0's watch (by disconnecting) however the task ends.
            let (task_done, task_ends) = mpsc::channel::<usize>();
            let watch = Box::new(move || name_late_towers(&task_ends, (towers, vec![0]), patience));
            // SAFETY: `watch` borrows `towers`; this call waits for its `Finished` through
            // `ends` before it returns or unwinds.
            unsafe { self.send(0, watch, &finished) };
            *slots[0].lock().unwrap_or_else(|e| e.into_inner()) =
                Some(panic::catch_unwind(AssertUnwindSafe(task)));
            drop(task_done);
        }
        drop(finished);
        name_late_towers(&ends.0, (towers, (0..slots.len()).collect()), patience);
        drop(ends);
        (slots.into_iter())
            .map(|slot| {
                let result = slot.into_inner().unwrap_or_else(|e| e.into_inner());
                result.unwrap_or_else(|| Err(Box::new("the tower's worker thread is gone")))
            })
            .collect()
    }

    /// Sends `run` to worker `i`, with a [`Finished`] guard that reports `i` to `finished`'s
    /// receiver once `run` has run and been dropped (or been dropped here, when the worker is
    /// gone: a task that borrows a slot then leaves it empty).
    ///
    /// # Safety
    ///
    /// `run`'s borrows are erased: the caller must not return or unwind, nor let what `run`
    /// borrows go, before that receiver has received `i` from this guard (as [`AllEnded`]
    /// waits when dropped).
    unsafe fn send(&self, i: usize, run: Box<dyn FnOnce() + Send + '_>, finished: &Sender<usize>) {
        // SAFETY: the caller keeps what `run` borrows until the guard below is dropped, which
        // happens only after `run` has run and been dropped (see the contract above).
        let run: Box<dyn FnOnce() + Send + 'static> = unsafe { std::mem::transmute(run) };
        let finished = Finished(i, finished.clone());
        let _ = self.tasks[i].send(Task { run, finished });
    }
}

impl Drop for Workers {
    /// Closes every worker's queue, then joins it.
    fn drop(&mut self) {
        self.tasks.clear();
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// A worker's life: each task in turn, its `Finished` dropped after it, until the queue
/// closes.
fn work(tasks: Receiver<Task>) {
    for Task { run, finished } in tasks {
        run();
        drop(finished);
    }
}

/// Waits, when dropped, until every `Finished` of a [`Workers::run`] call has been dropped.
struct AllEnded(Receiver<usize>);

impl Drop for AllEnded {
    fn drop(&mut self) {
        while self.0.recv().is_ok() {}
    }
}

/// Waits for the towers `running` to end, naming those still running each time
/// `patience.deadline` passes, and ending the process past `patience.timeout` (see the module
/// docs).
fn name_late_towers(
    ends: &Receiver<usize>,
    (towers, mut running): (&[TowerDevice], Vec<usize>),
    patience: Patience,
) {
    let mut waited = Duration::ZERO;
    while !running.is_empty() {
        let wait = match patience.timeout {
            Some(timeout) => patience.deadline.min(timeout.saturating_sub(waited)),
            None => patience.deadline,
        };
        match ends.recv_timeout(wait) {
            Ok(i) => running.retain(|&r| r != i),
            Err(RecvTimeoutError::Timeout) => {
                waited += wait;
                let late: Vec<String> = (running.iter())
                    .map(|&i| format!("tower {i} ({})", towers[i].name()))
                    .collect();
                let late = late.join(", ");
                if patience.timeout.is_some_and(|timeout| waited >= timeout) {
                    eprint_line(&format!(
                        "error: towers: {late} still running its step after {waited:?} \
                         (TowersConfig::tower_timeout): ending the process, since a tower's \
                         device call cannot be interrupted"
                    ));
                    crate::scratch::exit_now(HUNG_TOWER_EXIT_CODE);
                }
                eprint_line(&format!(
                    "warning: towers: {late} still running its step after {waited:?}; waiting on"
                ));
            }
            // Every task has ended.
            Err(RecvTimeoutError::Disconnected) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::Device;

    fn towers(n: usize) -> Vec<TowerDevice> {
        (0..n)
            .map(|i| TowerDevice::new(format!("cpu{i}"), Device::default()))
            .collect()
    }

    const PATIENT: Patience = Patience {
        deadline: Duration::from_secs(60),
        timeout: None,
    };

    #[test]
    fn each_task_runs_on_its_own_worker_every_time() {
        let towers = towers(3);
        let workers = Workers::start(&towers).unwrap();
        let names = |_: ()| {
            let tasks: Vec<Work<'_, String>> = (0..3)
                .map(|_| Box::new(|| format!("{:?}", thread::current().id())) as Work<'_, String>)
                .collect();
            (workers.run(tasks, &towers, PATIENT, false).into_iter())
                .map(|r| r.unwrap())
                .collect::<Vec<_>>()
        };
        let first = names(());
        assert_eq!(first, names(()), "a tower keeps its thread across steps");
        assert_ne!(first[0], first[1]);
        assert_ne!(first[0], format!("{:?}", thread::current().id()));
    }

    #[test]
    fn tasks_borrow_the_callers_data_and_a_panic_comes_back_as_its_result() {
        let towers = towers(2);
        let workers = Workers::start(&towers).unwrap();
        let batch = [1, 2, 3, 4];
        let halves: Vec<&[i32]> = batch.chunks(2).collect();
        let tasks: Vec<Work<'_, i32>> = vec![
            Box::new(|| halves[0].iter().sum()),
            Box::new(|| panic!("tower 1 fails")),
        ];
        let results = workers.run(tasks, &towers, PATIENT, false);
        assert_eq!(*results[0].as_ref().unwrap(), 3);
        let panic = results[1].as_ref().unwrap_err();
        assert_eq!(panic.downcast_ref::<&str>(), Some(&"tower 1 fails"));
        // The worker that panicked still serves the next step.
        let tasks: Vec<Work<'_, i32>> = vec![Box::new(|| 0), Box::new(|| halves[1].iter().sum())];
        assert_eq!(
            *workers.run(tasks, &towers, PATIENT, false)[1]
                .as_ref()
                .unwrap(),
            7
        );
    }

    #[test]
    fn the_first_task_runs_on_the_calling_thread_while_the_others_run_on_their_workers() {
        let towers = towers(3);
        let workers = Workers::start(&towers).unwrap();
        let id = || format!("{:?}", thread::current().id());
        let (started, waits) = mpsc::channel::<()>();
        let tasks: Vec<Work<'_, String>> = vec![
            // Ends only once tower 2 has started: the others run meanwhile.
            Box::new(move || {
                waits.recv().unwrap();
                id()
            }),
            Box::new(id),
            Box::new(move || {
                started.send(()).unwrap();
                id()
            }),
        ];
        let ids: Vec<String> = (workers.run(tasks, &towers, PATIENT, true).into_iter())
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(ids[0], id(), "the first task on the calling thread");
        assert!(
            ids[1] != ids[0] && ids[2] != ids[0] && ids[1] != ids[2],
            "{ids:?}"
        );
        // A panic there comes back as the first task's result too.
        let tasks: Vec<Work<'_, i32>> = vec![Box::new(|| panic!("tower 0 fails")), Box::new(|| 1)];
        let results = workers.run(tasks, &towers, PATIENT, true);
        let panic = results[0].as_ref().unwrap_err();
        assert_eq!(panic.downcast_ref::<&str>(), Some(&"tower 0 fails"));
        assert_eq!(*results[1].as_ref().unwrap(), 1);
    }
}
