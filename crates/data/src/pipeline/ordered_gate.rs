//! [`OrderedGate`]: lets parallel workers pass one at a time in sequence-number order.

use std::sync::{Condvar, Mutex};

use crate::error::{Error, Result};

/// Workers holding runs of items numbered 0, 1, 2, ... call [`OrderedGate::pass`] with the
/// first number and the length of their run; each call blocks until all lower numbers have
/// passed, so whatever the workers do inside `pass` happens in number order.
/// [`OrderedGate::cancel`] wakes every waiter with an error.
#[derive(Debug, Default)]
pub(crate) struct OrderedGate {
    state: Mutex<(u64, bool)>, // (next number to pass, cancelled)
    turn: Condvar,
}

impl OrderedGate {
    /// Waits for `seq`'s turn, runs `f`, then lets `seq + count` through. `Cancelled` if the
    /// gate is cancelled before the turn comes.
    pub fn pass<R>(&self, seq: u64, count: u64, f: impl FnOnce() -> R) -> Result<R> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        while state.0 != seq && !state.1 {
            state = self.turn.wait(state).unwrap_or_else(|p| p.into_inner());
        }
        if state.1 {
            return Err(Error::Cancelled);
        }
        drop(state);
        let out = f();
        self.state.lock().unwrap_or_else(|p| p.into_inner()).0 += count;
        self.turn.notify_all();
        Ok(out)
    }

    /// Wakes every waiter; they and all later callers get `Cancelled`.
    pub fn cancel(&self) {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).1 = true;
        self.turn.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn passes_in_number_order_whatever_the_arrival_order() {
        let gate = Arc::new(OrderedGate::default());
        let log = Arc::new(Mutex::new(Vec::new()));
        // Runs: [0], [1, 2], [3], [4, 5, 6], [7]
        let handles: Vec<_> = [(3u64, 1u64), (1, 2), (7, 1), (4, 3), (0, 1)]
            .into_iter()
            .map(|(seq, count)| {
                let (gate, log) = (Arc::clone(&gate), Arc::clone(&log));
                std::thread::spawn(move || {
                    gate.pass(seq, count, || log.lock().unwrap().push(seq))
                        .unwrap()
                })
            })
            .collect();
        handles.into_iter().for_each(|h| h.join().unwrap());
        assert_eq!(*log.lock().unwrap(), vec![0, 1, 3, 4, 7]);
    }

    #[test]
    fn cancel_wakes_a_waiter() {
        let gate = Arc::new(OrderedGate::default());
        let g = Arc::clone(&gate);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(g.pass(5, 1, || ())).unwrap());
        assert!(
            rx.recv_timeout(Duration::from_millis(100)).is_err(),
            "seq 5 must wait for 0..5"
        );
        gate.cancel();
        let got = rx.recv_timeout(Duration::from_secs(5)).expect("woken");
        assert!(matches!(got, Err(Error::Cancelled)));
    }
}
