//! The global allocator of the binaries linking this crate (feature `mimalloc`, on by default):
//! mimalloc, told to keep the memory a training step frees.
//!
//! A step frees and allocates the same tensors, megabytes to gigabytes each, step after step.
//! glibc's malloc returns them to the kernel and faults them in again (the CIFAR-10 step is
//! 1.18x faster with mimalloc); mimalloc still returns ("purges") memory left free for a
//! second, which Inception's 13-second steps hit on every large tensor. With purging off,
//! `bench_models` measured 231 against 496 ms per image for Inception v3's forward+backward
//! and 0.62 against 0.70 for the CIFAR-10 net, at a peak resident size of 4.4 against 4.1 GB
//! (bench/HISTORY.md, "Models"). Users keep the last word: `MIMALLOC_PURGE_DELAY` in the
//! environment wins, and `default-features = false` leaves the allocator to the binary.

use std::alloc::{GlobalAlloc, Layout};
use std::sync::Once;

use mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay` (mimalloc.h's option enum; the crate exports no constant
/// for it).
const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// [`MiMalloc`] with purging off unless the environment says otherwise.
pub(crate) struct TowersAllocator;

static CONFIGURE: Once = Once::new();

/// Turns purging off, once, before the first allocation. Reads the environment with libc's
/// `getenv`: std's `env::var` allocates, and this runs inside the allocator.
fn configure() {
    CONFIGURE.call_once(|| {
        // SAFETY: a NUL-terminated name; `getenv` only reads the environment. mimalloc's
        // option setter takes any value for this option (-1: never purge).
        unsafe {
            if libc::getenv(c"MIMALLOC_PURGE_DELAY".as_ptr()).is_null() {
                libmimalloc_sys::mi_option_set(PURGE_DELAY, -1);
            }
        }
    });
}

// SAFETY: every call forwards to `MiMalloc`, whose `GlobalAlloc` implementation upholds the
// contract; `configure` allocates nothing.
unsafe impl GlobalAlloc for TowersAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        configure();
        // SAFETY: the caller keeps `GlobalAlloc::alloc`'s contract, which `MiMalloc`'s shares.
        unsafe { MiMalloc.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        configure();
        // SAFETY: as in `alloc`.
        unsafe { MiMalloc.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, which is `MiMalloc`, with `layout`.
        unsafe { MiMalloc.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as in `dealloc`, and the caller keeps `realloc`'s contract for `new_size`.
        unsafe { MiMalloc.realloc(ptr, layout, new_size) }
    }
}
