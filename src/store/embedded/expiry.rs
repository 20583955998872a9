//! Removing expired items on a thread of the store's own, in small transactions.
//!
//! Cosmos DB removes an item whose time to live (`ttl`, seconds after its last write) has passed
//! in the background, and so does this store: a deletion's marks expire together, so a mass
//! delete leaves as many marks due at the same second, and removing them in one transaction
//! would hold the one writer (and grow the WAL) for as long as that takes. So no request's write
//! removes anything: this thread looks once a second whether an item is due and removes what
//! is, [`BATCH`] items per transaction, letting other writes in between (they go first: the removal writes at background priority). Like Cosmos DB's, the
//! removal is not in the change feed. An expired item stays readable until it is removed; the
//! items that expire are deletion marks, which every read already treats as absent.

use std::sync::Weak;
use std::time::Duration;

use super::Inner;
use crate::store::WritePriority;

/// Items removed per transaction: enough that a mass delete's marks go in a few seconds, few
/// enough that a write waiting behind one transaction hardly notices it.
pub const BATCH: usize = 500;
/// How often the thread looks whether an item is due.
const LOOK_EVERY: Duration = Duration::from_secs(1);
/// The pause between two batches, in which waiting writes take the writer.
const BETWEEN_BATCHES: Duration = Duration::from_millis(5);

/// Start the thread; it ends once the store is dropped.
pub(super) fn start(store: Weak<Inner>) {
    let spawned = std::thread::Builder::new()
        .name("blog-expiry".into())
        .spawn(move || run(store));
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "no thread to remove expired items; they stay until restart");
    }
}

fn run(store: Weak<Inner>) {
    loop {
        std::thread::sleep(LOOK_EVERY);
        let Some(inner) = store.upgrade() else { return };
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        if inner.next_expiry.load(std::sync::atomic::Ordering::Relaxed) > now {
            continue;
        }
        loop {
            match inner.write(None, WritePriority::Background, |w| {
                w.purge_expired(now, BATCH)
            }) {
                Ok(n) if n == BATCH => std::thread::sleep(BETWEEN_BATCHES),
                Ok(_) => break,
                Err(e) => {
                    tracing::warn!(error = %e, "removing expired items failed; retried later");
                    break;
                }
            }
        }
    }
}
