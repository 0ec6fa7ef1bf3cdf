//! [`current_tower`]: which tower a loss function is running for.
//!
//! Burn's CPU generators are global per backend, so two towers on one backend drawing random
//! numbers (dropout masks) at once get them in whatever order the threads arrive: a run would
//! not repeat itself. Knowing its tower, a loss can draw from a stream of its own instead
//! (see `towers_models::with_dropout_seed`).

use std::cell::Cell;

thread_local! {
    static TOWER: Cell<Option<usize>> = const { Cell::new(None) };
}

/// The index of the tower whose loss runs on this thread, inside [`Towers::step`]'s loss
/// function; `None` elsewhere.
///
/// [`Towers::step`]: crate::Towers::step
pub fn current_tower() -> Option<usize> {
    TOWER.get()
}

/// Runs `f` as tower `tower`'s work on this thread.
pub(crate) fn on_tower<R>(tower: usize, f: impl FnOnce() -> R) -> R {
    /// Clears the index however `f` ends (a tower may panic; the thread may run on).
    struct Reset(Option<usize>);
    impl Drop for Reset {
        fn drop(&mut self) {
            TOWER.set(self.0);
        }
    }
    let _reset = Reset(TOWER.replace(Some(tower)));
    f()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_index_holds_inside_and_is_cleared_after_even_a_panic() {
        assert_eq!(current_tower(), None);
        assert_eq!(on_tower(3, current_tower), Some(3));
        assert_eq!(current_tower(), None);
        let _ = std::panic::catch_unwind(|| on_tower(1, || panic!("a tower fails")));
        assert_eq!(current_tower(), None);
    }
}
