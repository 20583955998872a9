//! The unit tests' global allocator: the system's, counting per thread what each thread
//! allocates, so a test can tell what a call of its own allocated (other threads' allocations do
//! not count).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
    /// Blocks allocated and freed.
    static CALLS: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
}

struct Counting;

#[global_allocator]
static COUNTING: Counting = Counting;

fn add(bytes: isize, alloc: usize, free: usize) {
    let _ = LIVE.try_with(|live| {
        let now = live.get() + bytes;
        live.set(now);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
    let _ = CALLS.try_with(|c| c.set((c.get().0 + alloc, c.get().1 + free)));
}

// SAFETY: every call is passed to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            add(layout.size() as isize, 1, 0);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        unsafe { System.dealloc(p, layout) };
        add(-(layout.size() as isize), 0, 1);
    }
}

/// What `f` returns, and the most bytes it held at once on this thread.
pub fn peak<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = LIVE.with(Cell::get);
    PEAK.with(|peak| peak.set(base));
    let out = f();
    (out, (PEAK.with(Cell::get) - base).max(0) as usize)
}

/// How many blocks this thread has allocated and freed so far.
pub fn calls() -> (usize, usize) {
    CALLS.with(Cell::get)
}
