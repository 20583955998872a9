//! WAL checkpoints on a thread of their own.
//!
//! SQLite copies the WAL back into the database file (a checkpoint) inside the commit that takes
//! the WAL past 1,000 pages, and a checkpoint syncs the WAL and the database file: that commit
//! returns only after two syncs to disk. With every post's projection writing several items,
//! one write in a few dozen paid for it, an acknowledged write or the projection that makes a
//! post visible in the feed; on a disk shared with other jobs a sync can take milliseconds, and
//! those writes were the tail of both.
//!
//! So the writer connection does not checkpoint by itself: its WAL hook ([`note_wal_pages`])
//! replaces SQLite's automatic checkpoint and only records the WAL's size. A commit that leaves it
//! at [`CHECKPOINT_PAGES`] or more asks the [`Checkpointer`], whose thread runs the same passive
//! checkpoint SQLite would have run, on a connection of its own, while writes go on (a passive
//! checkpoint never blocks a writer or a reader). Durability does not change: a commit is in the
//! WAL either way.
//!
//! The WAL starts over from its beginning only when a write begins after a checkpoint has copied
//! all of it. Under writes without a pause that never happens: each checkpoint ends behind the
//! newest commits. So past [`WRITER_CHECKPOINT_PAGES`] the committing write checkpoints itself, as
//! SQLite did at 1,000, and nothing is appended while it does: the WAL then starts over, and
//! stays bounded.

use std::cell::Cell;
use std::path::PathBuf;
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use rusqlite::hooks::Wal;
use rusqlite::Connection;

/// WAL pages from which a checkpoint is due: SQLite's own threshold for its automatic one.
pub const CHECKPOINT_PAGES: i32 = 1000;
/// WAL pages from which the committing write checkpoints itself (the checkpoint thread has not
/// caught up with the writes).
pub const WRITER_CHECKPOINT_PAGES: i32 = 4 * CHECKPOINT_PAGES;

thread_local! {
    /// The WAL's size in pages after this thread's last commit (set by [`note_wal_pages`], which
    /// SQLite calls on the committing thread before the commit returns).
    static WAL_PAGES: Cell<i32> = const { Cell::new(0) };
}

/// The writer connection's WAL hook: it records the WAL's size and, by being installed, turns off
/// SQLite's automatic checkpoint (which is itself a WAL hook).
pub fn note_wal_pages(_: &Wal, pages: std::ffi::c_int) -> rusqlite::Result<()> {
    WAL_PAGES.set(pages);
    Ok(())
}

/// What the commit this thread just made leaves to do.
#[derive(Debug, PartialEq, Eq)]
pub enum Due {
    Nothing,
    /// Ask the checkpoint thread.
    Checkpoint,
    /// Checkpoint now, before the next write.
    CheckpointHere,
}

/// What the commit this thread just made leaves to do (and forget it: the next commit reports
/// afresh).
pub fn due_after_commit() -> Due {
    match WAL_PAGES.replace(0) {
        p if p >= WRITER_CHECKPOINT_PAGES => Due::CheckpointHere,
        p if p >= CHECKPOINT_PAGES => Due::Checkpoint,
        _ => Due::Nothing,
    }
}

/// Runs checkpoints of one database file on a thread started on the first request.
pub struct Checkpointer {
    path: PathBuf,
    requests: OnceLock<Option<SyncSender<()>>>,
}

impl Checkpointer {
    pub fn new(path: PathBuf) -> Self {
        Checkpointer {
            path,
            requests: OnceLock::new(),
        }
    }

    /// Ask for a checkpoint. Requests made while one is pending are the same request. `false`
    /// when there is no thread to run it (it could not be started): the caller checkpoints.
    pub fn request(&self) -> bool {
        let Some(requests) = self.requests.get_or_init(|| self.start()) else {
            return false;
        };
        // Full: one is pending already. Disconnected: the thread is gone (it logged why).
        match requests.try_send(()) {
            Ok(()) | Err(std::sync::mpsc::TrySendError::Full(())) => true,
            Err(std::sync::mpsc::TrySendError::Disconnected(())) => false,
        }
    }

    fn start(&self) -> Option<SyncSender<()>> {
        let (tx, rx) = sync_channel::<()>(1);
        let path = self.path.clone();
        let started = std::thread::Builder::new()
            .name("blog-checkpoint".into())
            .spawn(move || {
                let conn = match Connection::open(&path) {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::error!(error = %e, "cannot open the checkpoint connection; writes checkpoint themselves");
                        return;
                    }
                };
                // Ends when the store is dropped (the sender with it).
                while rx.recv().is_ok() {
                    if let Err(e) = checkpoint(&conn) {
                        tracing::warn!(error = %e, "WAL checkpoint failed; the next commit asks again");
                    }
                }
            });
        match started {
            Ok(_) => Some(tx),
            Err(e) => {
                tracing::error!(error = %e, "cannot start the checkpoint thread; writes checkpoint themselves");
                None
            }
        }
    }
}

/// A passive checkpoint: what SQLite's automatic checkpoint runs. `false` when it did nothing
/// because another connection was running one (SQLite allows one at a time).
pub fn checkpoint(conn: &Connection) -> rusqlite::Result<bool> {
    conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| {
        Ok(r.get::<_, i64>(0)? == 0)
    })
}

/// How long the writer waits for another connection's checkpoint before it gives up its own.
const OTHER_CHECKPOINT_WAIT: Duration = Duration::from_secs(10);

/// The committing write's own checkpoint, at [`WRITER_CHECKPOINT_PAGES`]: it waits for a
/// checkpoint running on another connection (the checkpoint thread's, another process's) to end
/// and then runs its own. The writer holds the write lock meanwhile, so nothing is appended: the
/// WAL starts over at the next write (unless a reader still reads an older state of it).
pub fn checkpoint_here(conn: &Connection) -> rusqlite::Result<()> {
    let deadline = Instant::now() + OTHER_CHECKPOINT_WAIT;
    while !checkpoint(conn)? {
        if Instant::now() >= deadline {
            tracing::warn!(
                "another connection's WAL checkpoint is still running after {OTHER_CHECKPOINT_WAIT:?}; \
                 the WAL grows past its bound until one completes"
            );
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use serde_json::json;

    use crate::store::embedded::EmbeddedStore;
    use crate::store::{Container, Store};

    /// A WAL frame: a page and its header.
    const FRAME: u64 = 4096 + 24;

    /// The most the WAL may grow to under writes without a pause. The writer checkpoints from
    /// `WRITER_CHECKPOINT_PAGES` on; the commit that reached them adds its frames past them (up to
    /// 17 in these tests), and the next write starts the WAL over, unless it meets another
    /// connection's checkpoint holding a lock for a moment: a few commits past the limit at most.
    /// The WAL's own header is 32 bytes.
    fn wal_bound() -> u64 {
        32 + (super::WRITER_CHECKPOINT_PAGES as u64 + 128) * FRAME
    }

    fn wal_len(path: &std::path::Path) -> u64 {
        std::fs::metadata(path.with_extension("db-wal"))
            .map(|m| m.len())
            .unwrap_or(0)
    }

    /// The writer connection does not checkpoint inside its commits (SQLite's automatic
    /// checkpoint is off on it), yet the WAL is copied into the database file once it passes the
    /// threshold, by the checkpoint thread; and under writes without a pause it stays bounded.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn writes_leave_checkpoints_to_the_checkpoint_thread() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("blog.db");
        let store = EmbeddedStore::open(&path).unwrap();
        let automatic: i64 = store
            .inner
            .writer
            .lock()
            .unwrap()
            .pragma_query_value(None, "wal_autocheckpoint", |r| r.get(0))
            .unwrap();
        assert_eq!(automatic, 0, "the writer checkpoints inside its commits");

        let page = 4096;
        let threshold = super::CHECKPOINT_PAGES as u64 * page;
        let body = "x".repeat(3000);
        let mut n = 0;
        while wal_len(&path) < threshold + 64 * page {
            let id = format!("u{n}");
            let user = json!({"id": id, "userId": id, "type": "user", "username": id, "bio": body});
            store.create(Container::Users, &id, user).await.unwrap();
            n += 1;
        }
        // The database file holds the items once a checkpoint has copied them there.
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::fs::metadata(&path).unwrap().len() < (n * body.len() / 2) as u64 {
            assert!(Instant::now() < deadline, "no checkpoint after {n} writes");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Writes without a pause, as much again ten times over: the WAL stays within the limit
        // from which the writer checkpoints (without checkpoints it would pass it twice over).
        for i in 0..10 * n {
            let id = format!("v{i}");
            let user = json!({"id": id, "userId": id, "type": "user", "username": id, "bio": body});
            store.create(Container::Users, &id, user).await.unwrap();
        }
        assert!(
            wal_len(&path) <= wal_bound(),
            "the WAL grew to {} bytes",
            wal_len(&path)
        );
        assert!(store
            .read(Container::Users, "u0", "u0")
            .await
            .unwrap()
            .is_some());
    }

    /// A checkpoint already running on another connection (the checkpoint thread's, another
    /// process's) when the WAL reaches the writer's limit makes the writer's own checkpoint do
    /// nothing; the writer waits for it to end rather than go on appending to the WAL.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_wal_stays_bounded_while_another_connection_checkpoints() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("blog.db");
        let store = EmbeddedStore::open(&path).unwrap();
        // Another connection checkpointing without a pause.
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let other = {
            let (path, stop) = (path.clone(), stop.clone());
            std::thread::spawn(move || {
                let c = rusqlite::Connection::open(path).unwrap();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    super::checkpoint(&c).unwrap();
                }
            })
        };
        let body = "x".repeat(3000);
        let mut most = 0;
        for i in 0..3 * super::WRITER_CHECKPOINT_PAGES {
            let id = format!("u{i}");
            let user = json!({"id": id, "userId": id, "type": "user", "username": id, "bio": body});
            store.create(Container::Users, &id, user).await.unwrap();
            most = most.max(wal_len(&path));
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        other.join().unwrap();
        // Without the writer waiting for the other checkpoint, the WAL grows past the bound.
        assert!(most <= wal_bound(), "the WAL grew to {most} bytes");
    }
}
