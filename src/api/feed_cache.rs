//! A per-process snapshot of the feed's first pages (`GET /api/feed`, no continuation token),
//! kept as the encoded JSON answer.
//!
//! The feed is eventually consistent by design: it follows the posts through the change feed.
//! A snapshot therefore adds no staleness a client could not already see, as long as it is
//! dropped when the feed changes:
//!
//! - on a store that signals its commits (the embedded one), a snapshot holds exactly until the
//!   next commit to `feed` (the projection's write); it is never older than the store;
//! - elsewhere (Cosmos DB, written by other instances too), a snapshot holds for at most
//!   `BLOG_FEED_CACHE_MS`, so each instance queries the feed at most a few times a second
//!   whatever its request rate.
//!
//! A deletion in this process drops the snapshots at once ([`FeedCache::forget`]): a deleted post
//! must not show in a later answer, even from a snapshot.
//!
//! A maximum age of 0 turns snapshots off on every store (the bench measures the query that way).
//!
//! An answer from the snapshot made no store call, and says so: `x-store-operations: 0`.
//!
//! One query fills a snapshot at a time: readers that miss together wait for it and share its
//! answer, so a burst of readers after a change costs one query, not one each.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use axum::body::Bytes;

use crate::store::{ChangeNotifier, Container, Store};

/// The default of `BLOG_FEED_CACHE_MS`.
pub const DEFAULT_MAX_AGE: Duration = crate::settings::DEFAULT_FEED_CACHE_MAX_AGE;

pub struct FeedCache {
    /// Commits to `feed`, where the store signals them.
    changes: Option<ChangeNotifier>,
    /// How long a snapshot holds where the store does not signal commits; 0: no snapshots.
    max_age: Duration,
    /// First pages by `limit` (1..=100, so at most 100 entries).
    pages: Mutex<HashMap<u32, Snapshot>>,
    /// Bumped by [`FeedCache::forget`]: a snapshot stamped before is dropped.
    forgotten: AtomicU64,
    /// Held while a query fills a snapshot.
    filling: tokio::sync::Mutex<()>,
}

/// When a page was read: taken *before* the query, so that a commit during the query makes
/// the snapshot stale rather than hiding behind it.
#[derive(Debug, Clone, Copy)]
struct Stamp {
    version: u64,
    forgotten: u64,
    at: Instant,
}

struct Snapshot {
    stamp: Stamp,
    body: Bytes,
    /// `body` gzip-compressed, made by the first reader that takes gzip.
    gzip: Arc<OnceLock<Bytes>>,
}

impl FeedCache {
    pub fn new(store: &dyn Store, max_age: Duration) -> Self {
        FeedCache {
            changes: store.change_notifier(Container::Feed),
            max_age,
            pages: Mutex::new(HashMap::new()),
            forgotten: AtomicU64::new(0),
            filling: tokio::sync::Mutex::new(()),
        }
    }

    /// Whether snapshots are kept at all.
    fn enabled(&self) -> bool {
        !self.max_age.is_zero()
    }

    fn version(&self) -> u64 {
        self.changes.as_ref().map_or(0, |c| *c.borrow())
    }

    fn holds(&self, stamp: &Stamp) -> bool {
        if stamp.forgotten != self.forgotten.load(Ordering::Acquire) {
            return false;
        }
        match &self.changes {
            Some(_) => stamp.version == self.version(),
            None => stamp.at.elapsed() < self.max_age,
        }
    }

    /// The first page of `limit` items: the snapshot if it holds, else what `read` answers (kept
    /// as the new snapshot). A reader that finds a query filling a snapshot waits for it, then
    /// looks again before querying.
    pub async fn first_page<F, Fut, E>(&self, limit: u32, read: F) -> Result<Bytes, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Bytes, E>>,
    {
        if !self.enabled() {
            return read().await;
        }
        if let Some(body) = self.get(limit) {
            return Ok(body);
        }
        let _filling = self.filling.lock().await;
        if let Some(body) = self.get(limit) {
            return Ok(body);
        }
        let stamp = self.stamp();
        let body = read().await?;
        self.put(limit, stamp, body.clone());
        Ok(body)
    }

    /// The snapshot of the first page of `limit` items, if it still holds.
    fn get(&self, limit: u32) -> Option<Bytes> {
        if !self.enabled() {
            return None;
        }
        let pages = self.pages.lock().expect("feed cache lock");
        pages
            .get(&limit)
            .filter(|s| self.holds(&s.stamp))
            .map(|s| s.body.clone())
    }

    /// Taken before querying the feed; handed to [`FeedCache::put`] with the answer.
    fn stamp(&self) -> Stamp {
        Stamp {
            version: self.version(),
            forgotten: self.forgotten.load(Ordering::Acquire),
            at: Instant::now(),
        }
    }

    /// Drop every snapshot, and any a query already under way would keep: call after deleting
    /// a post, whose feed entry the request itself removed.
    pub fn forget(&self) {
        self.forgotten.fetch_add(1, Ordering::AcqRel);
        self.pages.lock().expect("feed cache lock").clear();
    }

    /// Keep `body`, the first page of `limit` items read after `stamp` was taken.
    fn put(&self, limit: u32, stamp: Stamp, body: Bytes) {
        let mut pages = self.pages.lock().expect("feed cache lock");
        // Of two concurrent readers, the one that started later has the fresher page.
        if pages.get(&limit).is_some_and(|s| s.stamp.at > stamp.at) {
            return;
        }
        pages.insert(
            limit,
            Snapshot {
                stamp,
                body,
                gzip: Arc::default(),
            },
        );
    }

    /// `body` gzip-compressed when it is the snapshot of the first page of `limit` items and
    /// the snapshot still holds: compressed once per snapshot, by the first reader that asks,
    /// and shared by the others. `None` otherwise (the layer then compresses the answer).
    pub fn gzipped(&self, limit: u32, body: &Bytes) -> Option<Bytes> {
        let cell = {
            let pages = self.pages.lock().expect("feed cache lock");
            let snapshot = pages
                .get(&limit)
                .filter(|s| self.holds(&s.stamp) && s.body == *body)?;
            snapshot.gzip.clone()
        };
        Some(cell.get_or_init(|| crate::compression::gzip(body)).clone())
    }
}
