//! [`OrderedGate`]: parallel workers hand their results on in sequence-number order, without
//! waiting for one another.

use std::collections::BTreeMap;
use std::sync::{Condvar, Mutex};

use crate::error::{Error, Result};

/// Workers holding runs of items numbered 0, 1, 2, ... call [`OrderedGate::pass`] with the
/// first number and the length of their run and its output; outputs are delivered in number
/// order. A worker whose run is not next parks its output and goes back to work; the worker
/// that delivers the next run also delivers the parked runs that follow it. At most `ahead`
/// runs are parked (memory stays bounded): a worker finding the parking full waits for room.
/// [`OrderedGate::cancel`] wakes every waiter with an error.
#[derive(Debug)]
pub(crate) struct OrderedGate<T> {
    state: Mutex<State<T>>,
    turn: Condvar,
    ahead: usize,
}

#[derive(Debug)]
struct State<T> {
    /// The number of the next run to deliver.
    next: u64,
    cancelled: bool,
    /// Runs that arrived early: first number -> (length, output).
    parked: BTreeMap<u64, (u64, T)>,
}

impl<T> OrderedGate<T> {
    /// A gate parking at most `ahead` early runs.
    pub(super) fn new(ahead: usize) -> Self {
        Self {
            state: Mutex::new(State {
                next: 0,
                cancelled: false,
                parked: BTreeMap::new(),
            }),
            turn: Condvar::new(),
            ahead,
        }
    }

    /// Delivers `output` (the run `seq..seq + count`) with `deliver` when its turn has come,
    /// then the parked runs that follow; otherwise parks it. `deliver` runs outside the lock
    /// (it may block, e.g. on a full queue). `Cancelled` if the gate is cancelled first.
    pub(super) fn pass(
        &self,
        seq: u64,
        count: u64,
        output: T,
        mut deliver: impl FnMut(T) -> Result<()>,
    ) -> Result<()> {
        let mut state = self.lock();
        loop {
            if state.cancelled {
                return Err(Error::Cancelled);
            }
            if state.next == seq {
                break;
            }
            if state.parked.len() < self.ahead {
                state.parked.insert(seq, (count, output));
                return Ok(());
            }
            state = self.turn.wait(state).unwrap_or_else(|p| p.into_inner());
        }
        let mut run = Some((count, output));
        while let Some((count, output)) = run {
            drop(state);
            deliver(output)?;
            state = self.lock();
            state.next += count;
            let next = state.next;
            run = state.parked.remove(&next);
            // Room in the parking, or a waiting worker's turn.
            self.turn.notify_all();
        }
        Ok(())
    }

    /// Wakes every waiter; they and all later callers get `Cancelled`.
    pub(super) fn cancel(&self) {
        self.lock().cancelled = true;
        self.turn.notify_all();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn delivers_in_number_order_whatever_the_arrival_order() {
        let gate = Arc::new(OrderedGate::new(4));
        let log = Arc::new(Mutex::new(Vec::new()));
        // Runs: [0], [1, 2], [3], [4, 5, 6], [7], arriving in another order.
        let handles: Vec<_> = [(3u64, 1u64), (1, 2), (7, 1), (4, 3), (0, 1)]
            .into_iter()
            .map(|(seq, count)| {
                let (gate, log) = (Arc::clone(&gate), Arc::clone(&log));
                std::thread::spawn(move || {
                    gate.pass(seq, count, seq, |s| {
                        log.lock().unwrap().push(s);
                        Ok(())
                    })
                    .unwrap()
                })
            })
            .collect();
        handles.into_iter().for_each(|h| h.join().unwrap());
        assert_eq!(*log.lock().unwrap(), vec![0, 1, 3, 4, 7]);
    }

    #[test]
    fn an_early_run_is_parked_without_waiting_and_delivered_by_the_next_one() {
        let gate = OrderedGate::new(1);
        let mut log = Vec::new();
        gate.pass(1, 1, "b", |_| panic!("run 1 is not next"))
            .unwrap();
        gate.pass(0, 1, "a", |s| {
            log.push(s);
            Ok(())
        })
        .unwrap();
        assert_eq!(log, ["a", "b"], "run 0's worker delivers the parked run 1");
    }

    #[test]
    fn a_full_parking_waits_and_cancel_wakes_it() {
        let gate = Arc::new(OrderedGate::new(1));
        gate.pass(5, 1, (), |_| Ok(())).unwrap(); // parked: the parking is full
        let g = Arc::clone(&gate);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(g.pass(6, 1, (), |_| Ok(()))).unwrap());
        assert!(
            rx.recv_timeout(Duration::from_millis(100)).is_err(),
            "run 6 must wait for room"
        );
        gate.cancel();
        let got = rx.recv_timeout(Duration::from_secs(5)).expect("woken");
        assert!(matches!(got, Err(Error::Cancelled)));
    }
}
