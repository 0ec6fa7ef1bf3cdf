//! [`current_tower`] and [`current_first_example`]: which tower a loss function is running
//! for, and where its part starts in the batch.
//!
//! Burn's CPU generators are global per backend, so two towers on one backend drawing random
//! numbers (dropout masks) at once get them in whatever order the threads arrive: a run would
//! not repeat itself. Knowing its tower, a loss can draw from a stream of its own instead
//! (`towers_models::with_dropout_seed`); knowing its examples' place in the batch, one stream
//! per example, the same whatever the number of towers (`towers_models::with_example_dropout`).

use std::cell::Cell;

thread_local! {
    /// The tower and the index of its part's first example in the batch.
    static TOWER: Cell<Option<(usize, usize)>> = const { Cell::new(None) };
}

/// The index of the tower whose loss runs on this thread, inside [`Towers::step`]'s loss
/// function; `None` elsewhere.
///
/// [`Towers::step`]: crate::Towers::step
pub fn current_tower() -> Option<usize> {
    TOWER.get().map(|(tower, _)| tower)
}

/// The index in the step's batch (the micro-batch, under accumulation) of the first example
/// of the part whose loss runs on this thread, inside [`Towers::step`]'s loss function;
/// `None` elsewhere.
///
/// [`Towers::step`]: crate::Towers::step
pub fn current_first_example() -> Option<usize> {
    TOWER.get().map(|(_, first)| first)
}

/// Runs `f` as tower `tower`'s work on this thread, on the part that starts at the batch's
/// example `first_example`.
pub(crate) fn on_tower<R>(tower: usize, first_example: usize, f: impl FnOnce() -> R) -> R {
    /// Clears the index however `f` ends (a tower may panic; the thread may run on).
    struct Reset(Option<(usize, usize)>);
    impl Drop for Reset {
        fn drop(&mut self) {
            TOWER.set(self.0);
        }
    }
    let _reset = Reset(TOWER.replace(Some((tower, first_example))));
    f()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_index_holds_inside_and_is_cleared_after_even_a_panic() {
        assert_eq!(current_tower(), None);
        assert_eq!(on_tower(3, 12, current_tower), Some(3));
        assert_eq!(on_tower(3, 12, current_first_example), Some(12));
        assert_eq!(current_tower(), None);
        let _ = std::panic::catch_unwind(|| on_tower(1, 0, || panic!("a tower fails")));
        assert_eq!(current_tower(), None);
    }
}
