//! SQLite's own memory, taken from the process's global allocator.
//!
//! SQLite's C code calls the C library's `malloc`. In the static musl package that is musl's
//! allocator, not mimalloc (the global allocator there, see `src/main.rs`): it hands freed
//! blocks back to the kernel at once, so opening the store made dozens of `mmap` and `munmap`
//! calls, and each `munmap` of a process with two threads interrupts the other core to flush its
//! address cache. Through the global allocator SQLite shares mimalloc's reuse with the rest of
//! the process (elsewhere the global allocator is the system's, as before).
//!
//! SQLite also counts its memory by default (`SQLITE_CONFIG_MEMSTATUS`), taking one process-wide
//! lock on every allocation; nothing here reads those counts, so they are off.
//!
//! Both are process-wide settings SQLite takes only before its first connection: [`install`]
//! runs before the store opens one and does nothing after the first call. A process that opened
//! a connection earlier (a test reading a database file itself) keeps SQLite's defaults.

use std::alloc::Layout;
use std::ffi::{c_int, c_void};
use std::sync::OnceLock;

use rusqlite::ffi;

/// Each block starts with its size: SQLite asks for a block's size (`xSize`), and Rust's
/// allocator needs it to free or resize the block. Eight bytes keep the 8-byte alignment SQLite
/// requires.
const HEADER: usize = 8;

/// Route SQLite's allocations through the global allocator and turn its memory statistics off,
/// once per process, if SQLite has not started yet. Returns whether SQLite now uses them.
pub fn install() -> bool {
    static TAKEN: OnceLock<bool> = OnceLock::new();
    *TAKEN.get_or_init(|| {
        let methods = ffi::sqlite3_mem_methods {
            xMalloc: Some(x_malloc),
            xFree: Some(x_free),
            xRealloc: Some(x_realloc),
            xSize: Some(x_size),
            xRoundup: Some(x_roundup),
            xInit: Some(x_init),
            xShutdown: Some(x_shutdown),
            pAppData: std::ptr::null_mut(),
        };
        // SAFETY: `sqlite3_config` copies the methods; before SQLite is initialized nothing else
        // reads the configuration, and after it answers SQLITE_MISUSE and changes nothing.
        unsafe {
            let taken = ffi::sqlite3_config(ffi::SQLITE_CONFIG_MALLOC, &methods) == ffi::SQLITE_OK;
            if taken {
                ffi::sqlite3_config(ffi::SQLITE_CONFIG_MEMSTATUS, 0 as c_int);
            }
            taken
        }
    })
}

// The functions below are SQLite's: it passes them only sizes it checked (below 2 GiB) and blocks
// they returned, each block freed or resized once; a block's header was written by `finish`.

fn layout(size: usize) -> Option<Layout> {
    Layout::from_size_align(size.checked_add(HEADER)?, HEADER).ok()
}

/// The block's start, once its size is written in front of it.
unsafe fn finish(base: *mut u8, size: usize) -> *mut c_void {
    if base.is_null() {
        return std::ptr::null_mut();
    }
    base.cast::<usize>().write(size);
    base.add(HEADER).cast()
}

/// The block's header and its size.
unsafe fn header(p: *mut c_void) -> (*mut u8, usize) {
    let base = p.cast::<u8>().sub(HEADER);
    (base, base.cast::<usize>().read())
}

unsafe extern "C" fn x_malloc(n: c_int) -> *mut c_void {
    match usize::try_from(n).ok().and_then(|n| Some((n, layout(n)?))) {
        Some((n, l)) => finish(std::alloc::alloc(l), n),
        None => std::ptr::null_mut(),
    }
}

unsafe extern "C" fn x_free(p: *mut c_void) {
    if p.is_null() {
        return;
    }
    let (base, size) = header(p);
    std::alloc::dealloc(
        base,
        Layout::from_size_align_unchecked(size + HEADER, HEADER),
    );
}

unsafe extern "C" fn x_realloc(p: *mut c_void, n: c_int) -> *mut c_void {
    if p.is_null() {
        return x_malloc(n);
    }
    let Some(new) = usize::try_from(n).ok().filter(|&n| layout(n).is_some()) else {
        return std::ptr::null_mut();
    };
    let (base, size) = header(p);
    let old = Layout::from_size_align_unchecked(size + HEADER, HEADER);
    finish(std::alloc::realloc(base, old, new + HEADER), new)
}

unsafe extern "C" fn x_size(p: *mut c_void) -> c_int {
    if p.is_null() {
        return 0;
    }
    c_int::try_from(header(p).1).unwrap_or(c_int::MAX)
}

unsafe extern "C" fn x_roundup(n: c_int) -> c_int {
    n.checked_add(7).map_or(n, |m| m & !7)
}

unsafe extern "C" fn x_init(_: *mut c_void) -> c_int {
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_shutdown(_: *mut c_void) {}

#[cfg(test)]
mod tests {
    use rusqlite::Connection;

    use super::*;
    use crate::allocations::calls as counts;

    /// SQLite's first connection in a process ([`install`] must come before it, so the checks
    /// run in a child process of their own, [`installed_before_the_first_connection`]).
    #[cfg(unix)]
    #[test]
    fn sqlite_takes_its_memory_from_the_global_allocator() {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "--ignored", "--test-threads=1", "--nocapture"])
            .arg("store::embedded::memory::tests::installed_before_the_first_connection")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    #[test]
    #[ignore = "a child process of sqlite_takes_its_memory_from_the_global_allocator"]
    fn installed_before_the_first_connection() {
        assert!(
            install(),
            "SQLite takes the methods before its first connection"
        );
        assert!(install(), "and says so again");

        // One block of SQLite's is one allocation of the global allocator, of the size asked,
        // and freeing it frees that allocation.
        // SAFETY: SQLite's own initialization (which allocates), then a block from
        // sqlite3_malloc, freed once by sqlite3_free.
        unsafe {
            assert_eq!(ffi::sqlite3_initialize(), ffi::SQLITE_OK);
            let (allocated, freed) = counts();
            let p = ffi::sqlite3_malloc(1001);
            assert!(!p.is_null());
            assert_eq!(counts(), (allocated + 1, freed));
            assert_eq!(ffi::sqlite3_msize(p), 1001);
            let p = ffi::sqlite3_realloc(p, 70_000);
            assert_eq!(ffi::sqlite3_msize(p), 70_000);
            ffi::sqlite3_free(p);
            let (a, f) = counts();
            assert!(
                a > allocated + 1 && f > freed,
                "realloc and free reach the allocator"
            );
        }

        // A database's worth of blocks of every size comes back intact.
        let c = Connection::open_in_memory().unwrap();
        c.execute_batch("CREATE TABLE t (n INTEGER PRIMARY KEY, body BLOB)")
            .unwrap();
        for n in 0..2_000_i64 {
            let body = vec![(n % 251) as u8; (n as usize * 37) % 9_000];
            c.execute("INSERT INTO t VALUES (?1, ?2)", rusqlite::params![n, body])
                .unwrap();
        }
        let mut read = c.prepare("SELECT n, body FROM t ORDER BY n").unwrap();
        let rows = read
            .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?)))
            .unwrap();
        for row in rows {
            let (n, body) = row.unwrap();
            assert_eq!(
                body,
                vec![(n % 251) as u8; (n as usize * 37) % 9_000],
                "row {n}"
            );
        }

        // SQLite keeps no memory statistics: it would take one lock per allocation for them.
        // SAFETY: plain reads of SQLite's counters.
        assert_eq!(unsafe { ffi::sqlite3_memory_used() }, 0);
    }
}
