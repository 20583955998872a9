//! The embedded store: the containers in one SQLite file.
//!
//! One table of items keyed by `(container, pk, id)` holds each JSON body plus the columns the
//! queries use (`type`, `creation_date`, `user_id`, `deleted`; [`query`]), `expires` for items
//! with a time to live ([`writer`]), and `lsn`, a database-wide, strictly increasing number
//! bumped on every write. The change feed is "items of this container with `lsn` above the
//! checkpoint, in `lsn` order": because a write moves the item to a new `lsn`, each changed item
//! appears once, in its latest state, in commit order (Cosmos "latest version" mode).
//!
//! WAL with `synchronous = NORMAL`: a committed write is in the WAL before the call returns, so an
//! acknowledged write survives a killed process. One writer connection (SQLite serializes writers
//! anyway) and a few readers; all calls run on the blocking pool, never on the async runtime.
//!
//! Every write goes through this process, so the store knows when a container changed: after each
//! commit it bumps that container's [`ChangeNotifier`], which wakes the change-feed pump at once
//! (no polling delay) and tells snapshot readers (the feed answer) that their copy is stale.
//!
//! SQLite takes its memory from the process's global allocator, not the C library's ([`memory`]).

use std::path::Path;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use async_trait::async_trait;
use rusqlite::{params, params_from_iter, Connection, OpenFlags, TransactionBehavior};
use serde_json::Value;
use tokio::sync::watch;

use super::priority::write_priority;
use super::{
    metrics, BatchOp, ChangeNotifier, ChangePage, Container, Page, PatchOp, Query, Store,
    StoreError, StoreResult, WritePriority,
};

mod checkpoint;
mod errors;
mod expiry;
mod items;
pub(crate) mod memory;
mod query;
pub mod schema;
mod turns;
mod writer;

use checkpoint::{Checkpointer, Due};
use errors::{poisoned, sql};
use items::{parse_body, read_item};
use query::{run_query, where_clause};
use turns::Turns;
use writer::Writer;

const READERS: usize = 4;

/// The SQLite-backed store. Cheap to clone (clones share the connections).
#[derive(Clone)]
pub struct EmbeddedStore {
    inner: Arc<Inner>,
}

struct Inner {
    path: std::path::PathBuf,
    writer: Mutex<Connection>,
    /// Whose write takes the writer next ([`turns`]); a write holds its turn, then the lock.
    turns: Turns,
    /// Opened on first use, or by [`EmbeddedStore::open_first_reader`].
    readers: Vec<OnceLock<Mutex<Connection>>>,
    /// Held while reader `i` is being opened, so that a second caller waits for it rather than
    /// opening (and then closing) a connection of its own.
    opening: Vec<Mutex<()>>,
    next_reader: AtomicUsize,
    /// Commits per container, in [`Container::ALL`] order.
    committed: [watch::Sender<u64>; Container::ALL.len()],
    /// When the next item expires (unix seconds; `i64::MAX`: none; `i64::MIN`: not known yet):
    /// the expiry thread removes what expired once it is past ([`expiry`]).
    next_expiry: AtomicI64,
    /// Copies the WAL into the database file off the write path ([`checkpoint`]).
    checkpointer: Checkpointer,
}

impl Inner {
    /// Reader connection `i`, opened on first use.
    fn reader(&self, i: usize) -> StoreResult<&Mutex<Connection>> {
        if let Some(reader) = self.readers[i].get() {
            return Ok(reader);
        }
        let _opening = self.opening[i].lock().map_err(|_| poisoned())?;
        if let Some(reader) = self.readers[i].get() {
            return Ok(reader);
        }
        // Never creating the file: the writer did. A reader opened after a failed start removed
        // the new file (the first one opens while the start goes on) must not bring it back.
        let flags = OpenFlags::default().difference(OpenFlags::SQLITE_OPEN_CREATE);
        let c = Connection::open_with_flags(&self.path, flags).map_err(sql)?;
        configure(&c).map_err(sql)?;
        Ok(self.readers[i].get_or_init(|| Mutex::new(c)))
    }
}

fn slot(c: Container) -> usize {
    match c {
        Container::Users => 0,
        Container::Posts => 1,
        Container::Feed => 2,
        Container::Leases => 3,
        Container::Timelines => 4,
    }
}

impl EmbeddedStore {
    /// Open (creating when missing) the database file at `path`, and its parent directory.
    pub fn open(path: &Path) -> anyhow::Result<Self> {
        memory::install();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let mut writer = Connection::open(path)?;
        configure(&writer)?;
        // WAL mode and the schema; a new file is created without waiting for the disk.
        let was = schema::prepare(&mut writer)?;
        // Writes do not checkpoint; the checkpoint thread does (see `checkpoint`).
        writer.wal_hook(Some(checkpoint::note_wal_pages));
        let next_expiry = AtomicI64::new(i64::MIN);
        let store = EmbeddedStore {
            inner: Arc::new(Inner {
                path: path.to_path_buf(),
                writer: Mutex::new(writer),
                turns: Turns::default(),
                readers: (0..READERS).map(|_| OnceLock::new()).collect(),
                opening: (0..READERS).map(|_| Mutex::new(())).collect(),
                next_reader: AtomicUsize::new(0),
                committed: std::array::from_fn(|_| watch::Sender::new(0)),
                // Unknown until the expiry thread first looks.
                next_expiry,
                checkpointer: Checkpointer::new(path.to_path_buf()),
            }),
        };
        if was == 0 {
            // A new file: every item is where this release keeps it (see `LAYOUT_ID`).
            let layout = crate::store::layout::new_store_layout();
            store
                .inner
                .write(Some(Container::Leases), WritePriority::First, |w| {
                    w.write(Container::Leases, crate::store::LAYOUT_ID, layout)
                        .map(drop)
                })?;
        }
        expiry::start(Arc::downgrade(&store.inner));
        Ok(store)
    }

    /// Open the reader connection the first read uses, unless it is open. `handler` calls this on
    /// its start-up thread once it has handed the store over, so that the first request does not
    /// wait for a connection to open. The other readers open on first use: opening all four then
    /// competed with the first request for the CPU and delayed its answer.
    pub fn open_first_reader(&self) -> StoreResult<()> {
        let first = self.inner.next_reader.load(Ordering::Relaxed) % self.inner.readers.len();
        self.inner.reader(first).map(drop)
    }

    /// Run `f` on a reader connection, on the blocking pool. A read whose caller stops waiting
    /// (its future dropped: a request answered or timed out) stops: its statement is
    /// interrupted, or, not started yet, never runs, so its connection is free for the next.
    async fn with_reader<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    ) -> StoreResult<T> {
        let inner = self.inner.clone();
        metrics::record(0.0);
        let running = Arc::new(Mutex::new(Running::default()));
        let _stop = StopOnDrop(running.clone());
        tokio::task::spawn_blocking(move || {
            let n = inner.readers.len();
            let turn = inner.next_reader.fetch_add(1, Ordering::Relaxed) % n;
            // An open connection that is free now, starting with the one whose turn it is; only
            // when all are busy, wait for that one (opening it on first use). Waiting in turn
            // alone kept a read queued behind a long one while another connection idled.
            for i in (0..n).map(|k| (turn + k) % n) {
                if let Some(Ok(conn)) = inner.readers[i].get().map(Mutex::try_lock) {
                    return interruptible(&conn, &running, f);
                }
            }
            let conn = inner.reader(turn)?.lock().map_err(|_| poisoned())?;
            interruptible(&conn, &running, f)
        })
        .await
        .map_err(|e| StoreError::Other(format!("store task failed: {e}")))?
    }

    /// Run `f` in one write transaction on `c`, committed only when `f` succeeds, at the
    /// priority of the work calling ([`write_priority`]); a commit bumps `c`'s change notifier.
    async fn with_writer<T: Send + 'static>(
        &self,
        c: Container,
        f: impl FnOnce(&mut Writer<'_>) -> StoreResult<T> + Send + 'static,
    ) -> StoreResult<T> {
        let inner = self.inner.clone();
        metrics::record(0.0);
        let p = write_priority();
        tokio::task::spawn_blocking(move || inner.write(Some(c), p, f))
            .await
            .map_err(|e| StoreError::Other(format!("store task failed: {e}")))?
    }
}

/// A read on the blocking pool, as its caller sees it: whether the caller stopped waiting, and
/// how to interrupt the connection while the read runs on it (and only then).
#[derive(Default)]
struct Running {
    dropped: bool,
    on: Option<rusqlite::InterruptHandle>,
}

/// Stops the read when its caller's future is dropped before the read ends.
struct StopOnDrop(Arc<Mutex<Running>>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        if let Ok(mut r) = self.0.lock() {
            r.dropped = true;
            if let Some(handle) = r.on.take() {
                handle.interrupt();
            }
        }
    }
}

/// `f` on `conn`, interruptible by [`StopOnDrop`] while it runs: the handle is set before and
/// taken after, under the same lock, so no later read on the connection is interrupted.
fn interruptible<T>(
    conn: &Connection,
    running: &Mutex<Running>,
    f: impl FnOnce(&Connection) -> StoreResult<T>,
) -> StoreResult<T> {
    {
        let mut r = running.lock().map_err(|_| poisoned())?;
        if r.dropped {
            return Err(StoreError::Other(
                "the read's caller stopped waiting".into(),
            ));
        }
        r.on = Some(conn.get_interrupt_handle());
    }
    let out = f(conn);
    running.lock().map_err(|_| poisoned())?.on = None;
    out
}

impl Inner {
    /// Run `f` in one write transaction, committed only when `f` succeeds, once its turn at
    /// priority `p` has come; a commit bumps `c`'s change notifier (`None`: a write that is no
    /// change, such as removing expired items).
    fn write<T>(
        &self,
        c: Option<Container>,
        p: WritePriority,
        f: impl FnOnce(&mut Writer<'_>) -> StoreResult<T>,
    ) -> StoreResult<T> {
        let _turn = self.turns.take(p);
        let mut conn = self.writer.lock().map_err(|_| poisoned())?;
        // IMMEDIATE: the write lock is taken at the start, where SQLite waits for it (the busy
        // timeout). A deferred transaction reads first and takes the lock at its first write;
        // if another connection holds it for a moment then (an operations command writing,
        // or a reader that met a half-written WAL index and takes the lock to read it again),
        // SQLite fails at once with "database is locked" rather than wait, and the request
        // answered 503.
        let out = {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(sql)?;
            let mut w = Writer {
                tx,
                next_expiry: &self.next_expiry,
            };
            let out = f(&mut w)?;
            w.tx.commit().map_err(sql)?;
            out
        };
        if let Some(c) = c {
            self.committed[slot(c)].send_modify(|n| *n += 1);
        }
        let here = match checkpoint::due_after_commit() {
            Due::Nothing => false,
            // Without a checkpoint thread, here, as SQLite would have.
            Due::Checkpoint => !self.checkpointer.request(),
            Due::CheckpointHere => true,
        };
        if here {
            if let Err(e) = checkpoint::checkpoint_here(&conn) {
                tracing::warn!(error = %e, "WAL checkpoint failed");
            }
        }
        Ok(out)
    }
}

/// Every connection keeps its prepared statements ([`Connection::prepare_cached`]): the point
/// reads and writes that every request makes, and the queries, whose text repeats per shape.
/// Preparing a statement (parsing, planning against every index of `items`, compiling the
/// triggers a write sets off) costs more than running a point read, so it is done once per
/// connection and shape, up to this many shapes.
const STATEMENT_CACHE: usize = 64;

fn configure(c: &Connection) -> rusqlite::Result<()> {
    c.pragma_update(None, "synchronous", "NORMAL")?;
    c.busy_timeout(std::time::Duration::from_secs(10))?;
    c.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    Ok(())
}

#[async_trait]
impl Store for EmbeddedStore {
    fn kind(&self) -> &'static str {
        "embedded"
    }

    fn idle_poll(&self) -> std::time::Duration {
        // Only a fallback: every commit wakes the followers through `change_notifier`. The poll
        // still picks up a write made by another process on the same file.
        std::time::Duration::from_millis(500)
    }

    fn change_notifier(&self, c: Container) -> Option<ChangeNotifier> {
        Some(self.inner.committed[slot(c)].subscribe())
    }

    async fn read(&self, c: Container, pk: &str, id: &str) -> StoreResult<Option<Value>> {
        let (pk, id) = (pk.to_string(), id.to_string());
        self.with_reader(move |conn| read_item(conn, c, &pk, &id))
            .await
    }

    async fn create(&self, c: Container, pk: &str, item: Value) -> StoreResult<Value> {
        let pk = pk.to_string();
        self.with_writer(c, move |w| w.create(c, &pk, item)).await
    }

    async fn upsert(&self, c: Container, pk: &str, item: Value) -> StoreResult<Value> {
        let pk = pk.to_string();
        self.with_writer(c, move |w| w.write(c, &pk, item)).await
    }

    async fn replace(
        &self,
        c: Container,
        pk: &str,
        id: &str,
        item: Value,
        if_match: Option<&str>,
    ) -> StoreResult<Value> {
        let (pk, id, etag) = (pk.to_string(), id.to_string(), if_match.map(str::to_string));
        self.with_writer(c, move |w| w.replace(c, &pk, &id, item, etag.as_deref()))
            .await
    }

    async fn delete(&self, c: Container, pk: &str, id: &str) -> StoreResult<()> {
        let (pk, id) = (pk.to_string(), id.to_string());
        self.with_writer(c, move |w| w.delete(c, &pk, &id)).await
    }

    async fn delete_if_match(
        &self,
        c: Container,
        pk: &str,
        id: &str,
        etag: &str,
    ) -> StoreResult<()> {
        let (pk, id, etag) = (pk.to_string(), id.to_string(), etag.to_string());
        self.with_writer(c, move |w| w.delete_if_match(c, &pk, &id, &etag))
            .await
    }

    async fn patch(
        &self,
        c: Container,
        pk: &str,
        id: &str,
        ops: &[PatchOp],
        if_match: Option<&str>,
    ) -> StoreResult<Value> {
        let (pk, id, ops) = (pk.to_string(), id.to_string(), ops.to_vec());
        let etag = if_match.map(str::to_string);
        self.with_writer(c, move |w| w.patch(c, &pk, &id, &ops, etag.as_deref()))
            .await
    }

    async fn query(&self, c: Container, q: &Query) -> StoreResult<Page> {
        let q = q.clone();
        self.with_reader(move |conn| run_query(conn, c, &q)).await
    }

    async fn count(&self, c: Container, q: &Query) -> StoreResult<u64> {
        let q = q.clone();
        self.with_reader(move |conn| {
            let (sql_where, args) = where_clause(c, &q)?;
            let text = format!("SELECT COUNT(*) FROM items WHERE {sql_where}");
            let n: i64 = conn
                .prepare_cached(&text)
                .map_err(sql)?
                .query_row(params_from_iter(args), |r| r.get(0))
                .map_err(sql)?;
            Ok(n as u64)
        })
        .await
    }

    async fn batch(&self, c: Container, pk: &str, ops: Vec<BatchOp>) -> StoreResult<Vec<Value>> {
        let pk = pk.to_string();
        self.with_writer(c, move |w| {
            ops.into_iter()
                .enumerate()
                .map(|(index, op)| {
                    w.batch_op(c, &pk, op).map_err(|e| StoreError::BatchFailed {
                        index,
                        source: Box::new(e),
                    })
                })
                .collect()
        })
        .await
    }

    async fn changes(
        &self,
        c: Container,
        continuation: Option<&str>,
        max_items: u32,
    ) -> StoreResult<ChangePage> {
        let from: i64 = match continuation {
            None => 0,
            Some(t) => t
                .parse()
                .map_err(|_| StoreError::BadContinuation("not a change feed position".into()))?,
        };
        self.with_reader(move |conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT body, lsn FROM items WHERE container = ?1 AND lsn > ?2
                     ORDER BY lsn LIMIT ?3",
                )
                .map_err(sql)?;
            let rows = stmt
                .query_map(params![c.name(), from, max_items.max(1)], |r| {
                    Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))
                })
                .map_err(sql)?
                .collect::<Result<Vec<_>, _>>()
                .map_err(sql)?;
            let last = rows.last().map(|r| r.1).unwrap_or(from);
            let items = rows
                .iter()
                .map(|(b, _)| parse_body(b))
                .collect::<StoreResult<Vec<_>>>()?;
            Ok(ChangePage {
                items,
                continuation: last.to_string(),
            })
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// A read whose caller stops waiting (a search whose request timed out or was answered) stops,
    /// and its connection serves the next read: with every reader connection running a
    /// statement that would never end on its own, each dropped, a point read is answered.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_dropped_read_stops_and_frees_its_connection() {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(&dir.path().join("blog.db")).unwrap();
        let user = serde_json::json!({"id": "u1", "userId": "u1", "type": "user"});
        store.create(Container::Users, "u1", user).await.unwrap();
        let endless = |conn: &Connection| {
            conn.query_row(
                "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) \
                 SELECT count(*) FROM n",
                [],
                |r| r.get::<_, i64>(0),
            )
            .map_err(sql)
        };
        for _ in 0..store.inner.readers.len() {
            let dropped = tokio::time::timeout(
                std::time::Duration::from_millis(100),
                store.with_reader(endless),
            )
            .await;
            assert!(dropped.is_err(), "the statement never ends on its own");
        }
        let read = tokio::time::timeout(
            std::time::Duration::from_secs(2),
            store.read(Container::Users, "u1", "u1"),
        )
        .await;
        assert!(
            read.is_ok(),
            "a point read waited for the dropped statements"
        );
    }

    /// A read whose turn falls on a busy connection is served by a free one. (The deadline only
    /// ends the test should the read wait for the busy connection, which is held until then.)
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_read_takes_a_free_connection_rather_than_wait_for_a_busy_one() {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(&dir.path().join("blog.db")).unwrap();
        let user = serde_json::json!({"id": "u1", "userId": "u1", "type": "user"});
        store.create(Container::Users, "u1", user).await.unwrap();
        let n = store.inner.readers.len();
        let turn = store.inner.next_reader.load(Ordering::Relaxed) % n;
        store.inner.reader((turn + 1) % n).unwrap();
        let (held, release) = (mpsc::channel(), mpsc::channel::<()>());
        let inner = store.inner.clone();
        let busy = std::thread::spawn(move || {
            let _conn = inner.reader(turn).unwrap().lock().unwrap();
            held.0.send(()).unwrap();
            release.1.recv().unwrap();
        });
        held.1.recv().unwrap();
        let read = tokio::time::timeout(
            std::time::Duration::from_secs(60),
            store.read(Container::Users, "u1", "u1"),
        )
        .await;
        release.0.send(()).unwrap();
        busy.join().unwrap();
        let item = read
            .expect("the read waited for the busy connection")
            .unwrap();
        assert_eq!(item.unwrap()["id"], "u1");
    }
}
