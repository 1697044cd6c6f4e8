//! A global-allocator wrapper that counts the bytes live on the heap, for
//! memory investigations (issue 6: the three-site Janus point's RSS grew
//! by gigabytes while the structures it measured fell; live bytes next to
//! RSS tell growing data from a fragmented heap). Off unless a binary
//! installs it (`tessera-cli`'s `count-alloc` feature); [`live`] is then
//! the bytes allocated and not yet freed, else 0.

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicI64, Ordering};

static LIVE: AtomicI64 = AtomicI64::new(0);

/// Bytes allocated and not freed through a [`Counting`] allocator.
pub fn live() -> i64 {
    LIVE.load(Ordering::Relaxed)
}

/// `A`, counting the bytes it holds in [`live`].
pub struct Counting<A>(pub A);

// SAFETY: every call is forwarded to `A` unchanged; only a counter is
// updated beside it.
unsafe impl<A: GlobalAlloc> GlobalAlloc for Counting<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is `A`'s.
        let p = unsafe { self.0.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { self.0.dealloc(ptr, layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as above.
        let p = unsafe { self.0.alloc_zeroed(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
        }
        p
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as above.
        let p = unsafe { self.0.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_add(new_size as i64 - layout.size() as i64, Ordering::Relaxed);
        }
        p
    }
}
