//! What every projection does the same way, written once: applying writes (retrying transient
//! errors), reading an item never older than its change, sweeping a query page by page, and
//! bounded steps recorded in job items.
//!
//! - **Writes** are planned as [`Write`]s and applied by [`apply_one`], [`apply`] (in order)
//!   or [`apply_unordered`] (independent ones, a few at a time). A patch or delete of an item
//!   that is gone is moot, and so is a conditional patch of an item changed since it was read:
//!   its newer change is projected in turn.
//! - **Idempotence.** A change is a notification: [`read_not_older`] reads the item as it is
//!   now, never older than the version the change feed delivered.
//! - **Paging.** [`query_all`] reads every page of a query; [`sweep`] writes what each page of a
//!   query implies until none is left, the writes making the items stop matching (so each page
//!   is the query's first), and stops, rather than spins, if they do not.
//! - **Bounded steps.** Work over more items than one page runs a page per step: the step
//!   records where it stopped in a job item ([`save_job`]) in `users`, whose change comes back
//!   through the users feed behind the changes written meanwhile; a step whose job item changed
//!   since it was delivered does nothing ([`current_job`]): the newer version's own change
//!   carries on.

use std::cmp::Ordering;

use futures::future::BoxFuture;
use futures::stream::{self, TryStreamExt};
use serde_json::Value;

use super::change::{Change, ChangeKind};
use super::write::{str_field, Write};
use super::{ProjectionError, Report};
use crate::domain::{Kind, Meta};
use crate::store::{retry, Container, Query, Store, StoreError, StoreResult};

/// Apply one write. A patch or delete of an item that no longer exists is moot, and so is a
/// conditional patch of an item that changed since it was read (its newer change is projected
/// in turn).
pub async fn apply_one(store: &dyn Store, w: &Write) -> Result<(), StoreError> {
    let result = retry(|| async {
        match w {
            Write::Upsert {
                container,
                pk,
                item,
            } => store.upsert(*container, pk, item.clone()).await.map(drop),
            Write::Patch {
                container,
                pk,
                id,
                ops,
                if_match,
            } => match store
                .patch(*container, pk, id, ops, if_match.as_deref())
                .await
            {
                Err(StoreError::PreconditionFailed) if if_match.is_some() => Ok(()),
                other => other.map(drop),
            },
            Write::Delete { container, pk, id } => store.delete(*container, pk, id).await,
        }
    })
    .await;
    match result {
        Ok(()) | Err(StoreError::NotFound) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Apply planned writes in order; on failure, the index of the write that failed.
pub async fn apply(store: &dyn Store, writes: &[Write]) -> Result<(), (usize, StoreError)> {
    for (i, w) in writes.iter().enumerate() {
        apply_one(store, w).await.map_err(|e| (i, e))?;
    }
    Ok(())
}

/// Apply writes that do not depend on each other, at most `concurrency` at a time.
pub async fn apply_unordered(
    store: &dyn Store,
    writes: &[Write],
    concurrency: usize,
) -> Result<(), (usize, StoreError)> {
    stream::iter(writes.iter().enumerate().map(Ok))
        .try_for_each_concurrent(concurrency, |(i, w)| async move {
            apply_one(store, w).await.map_err(|e| (i, e))
        })
        .await
}

/// [`apply_unordered`], failing with the first error alone.
pub async fn apply_all(store: &dyn Store, writes: &[Write], concurrency: usize) -> StoreResult<()> {
    apply_unordered(store, writes, concurrency)
        .await
        .map_err(|(_, e)| e)
}

// ---------------------------------------------------------------------------------------------
// The shape of a projection.

/// A projection: what it watches, reads and writes, and how it projects a batch. Each is one
/// module (`posts`, `rename`, `cascade`, `follows`, `timeline`, ...) exporting its `Unit`; the
/// lanes run them in the order of their table (`super::UNITS`), each given only the changes of
/// the kinds it watches ([`Unit::changes`]). What it reads and writes is held to what it does by
/// a test that runs it over a store recording what it touches.
pub struct Unit {
    pub name: &'static str,
    /// The feed it follows (`posts` or `users`).
    pub feed: Container,
    /// The kinds of change of that feed it reacts to: it is handed only those.
    pub watches: &'static [ChangeKind],
    /// The containers it reads.
    pub reads: &'static [Container],
    /// The containers it writes.
    pub writes: &'static [Container],
    /// Project the changes of one batch that it watches: the writes made (`Report::changes` is
    /// the lane's).
    pub project: Project,
}

/// How a [`Unit`] projects the changes of a batch it watches.
pub type Project =
    for<'a> fn(&'a dyn Store, &'a [&'a Change]) -> BoxFuture<'a, Result<Report, ProjectionError>>;

impl Unit {
    /// The changes of a decoded batch this unit watches, in the batch's order; a document of a
    /// kind it watches that did not decode is the batch's failure, naming the kind, the item and
    /// this unit.
    pub fn changes<'a>(
        &self,
        batch: &'a [Result<Change, super::change::Undecodable>],
    ) -> Result<Vec<&'a Change>, ProjectionError> {
        let mut out = Vec::new();
        for d in batch {
            match d {
                Ok(c) if c.item.kind().is_some_and(|k| self.watches.contains(&k)) => out.push(c),
                Ok(_) => {}
                Err(u) if self.watches.iter().any(|k| k.type_name() == u.type_name) => {
                    return Err(ProjectionError {
                        unit: self.name,
                        reason: format!("a `{}` change does not decode: {}", u.type_name, u.error),
                        not_applied: vec![u.label.clone()],
                    })
                }
                Err(_) => {}
            }
        }
        Ok(out)
    }
}

/// A [`Report`] of `writes` writes (for a unit that reports nothing else).
pub fn wrote(writes: usize) -> Report {
    Report {
        writes,
        ..Report::default()
    }
}

/// A unit's store error as the batch's failure: every change of the batch is named as not
/// applied.
pub fn failed(feed: Container, changes: &[&Change], e: impl std::fmt::Display) -> ProjectionError {
    ProjectionError {
        unit: "",
        reason: e.to_string(),
        not_applied: changes.iter().map(|c| c.label(feed)).collect(),
    }
}

// ---------------------------------------------------------------------------------------------
// Reading, never older than the change.

/// Which of two versions of one item was written later, by the store's stamps: `_ts` (whole
/// seconds) when they differ, else `_lsn` when both carry it. `None` when the stamps cannot tell.
pub fn compare_versions(a: &Value, b: &Value) -> Option<Ordering> {
    let stamp = |v: &Value, f: &str| v.get(f).and_then(Value::as_i64);
    match (stamp(a, "_ts"), stamp(b, "_ts")) {
        (Some(x), Some(y)) if x != y => Some(x.cmp(&y)),
        _ => match (stamp(a, "_lsn"), stamp(b, "_lsn")) {
            (Some(x), Some(y)) => Some(x.cmp(&y)),
            _ => None,
        },
    }
}

/// The newest of the versions `changes` holds of one item (those `matches` picks), as delivered.
pub fn newest<'a>(changes: &[&'a Change], matches: impl Fn(&Change) -> bool) -> Option<&'a Value> {
    changes
        .iter()
        .filter(|c| matches(c))
        .map(|c| &c.doc)
        .reduce(|a, b| match compare_versions(a, b) {
            Some(Ordering::Less) => b,
            _ => a,
        })
}

/// The newest version of item `id` (of the given kind) among the changes.
pub fn newest_change<'a>(changes: &[&'a Change], kind: ChangeKind, id: &str) -> Option<&'a Value> {
    newest(changes, |c| {
        c.item.kind() == Some(kind) && Meta::of(&c.doc).id == Some(id)
    })
}

/// Point-read an item, and never return a version older than `changed` (a version of the same
/// item delivered by the change feed). Under scale-out a read may go through another session
/// than the write and see an older version, or none yet: it is read once more, and if it is
/// still older the changed document itself is the newer truth. `Ok(None)` when the item does
/// not exist and no change of it was delivered.
pub async fn read_not_older(
    store: &dyn Store,
    c: Container,
    pk: &str,
    id: &str,
    changed: Option<&Value>,
) -> StoreResult<Option<Value>> {
    let older =
        |read: &Value| changed.is_some_and(|ch| compare_versions(read, ch) == Some(Ordering::Less));
    let read = retry(|| store.read(c, pk, id)).await?;
    // Missing although the feed delivered it: not yet visible to this session (users and posts
    // are never removed outright, only marked deleted and removed days later by their time to
    // live). Read once more, then take the change as the truth.
    let missing = read.is_none() && changed.is_some();
    match read {
        Some(v) if !older(&v) => Ok(Some(v)),
        None if !missing => Ok(None),
        _ => {
            let again = retry(|| store.read(c, pk, id)).await?;
            Ok(match again {
                Some(v) if !older(&v) => Some(v),
                _ => changed.cloned(),
            })
        }
    }
}

/// The user item as a projection of the users feed sees it: never older than its change in
/// the batch.
pub async fn user(
    store: &dyn Store,
    changes: &[&Change],
    user_id: &str,
) -> StoreResult<Option<Value>> {
    let changed = newest_change(changes, ChangeKind::User, user_id);
    read_not_older(store, Container::Users, user_id, user_id, changed).await
}

/// User `id`, unless they are gone or marked deleted (one point read).
pub async fn live_user(store: &dyn Store, id: &str) -> StoreResult<Option<Value>> {
    let user = retry(|| store.read(Container::Users, id, id)).await?;
    Ok(user.filter(|u| crate::domain::is_live(u, Kind::User)))
}

/// A user item read as a [`User`](crate::domain::User) (one written by any release reads).
pub fn as_user(item: &Value) -> StoreResult<crate::domain::User> {
    use serde::Deserialize as _;
    crate::domain::User::deserialize(item)
        .map_err(|e| StoreError::Other(format!("a user item does not read: {e}")))
}

// ---------------------------------------------------------------------------------------------
// Paging.

/// Every item `q` finds in `c`, page after page.
pub async fn query_all(store: &dyn Store, c: Container, mut q: Query) -> StoreResult<Vec<Value>> {
    let mut out = Vec::new();
    loop {
        let page = retry(|| store.query(c, &q)).await?;
        out.extend(page.items);
        match page.continuation {
            Some(t) => q.continuation = Some(t),
            None => return Ok(out),
        }
    }
}

/// Items read and written per step of a projection (a page of its query), for every projection:
/// memory, and the time one step holds its lane, stay bounded whatever the number of items.
pub const PAGE: u32 = 200;
/// Writes of one step in flight at once, for every projection.
pub const CONCURRENCY: usize = 8;

/// A query swept by [`sweep`]: each page's writes make its items stop matching.
pub struct Sweep<'a> {
    pub container: Container,
    /// The query, with the page size as its limit.
    pub query: Query,
    /// Items at the head of each page that stay (the newest a trim keeps): the first one after
    /// them is the one that must not come back.
    pub keep: usize,
    /// Pages at most; more may match after them.
    pub pages: usize,
    pub concurrency: usize,
    /// What the writes do, for the error when they do not take ("deleted", "marked", ...).
    pub what: &'a str,
}

/// Write what `plan` makes of each item of each page of `s.query` (past the first `s.keep`),
/// reading the query's first page again after each, until a page leaves nothing to write or
/// comes back short, or `s.pages` pages are done. The same item (partition and id) first again
/// means the writes did not take: an error, not a spin. (The same item, not the same id: a
/// query across partitions answers one partition key range per page, so the next page may
/// start with an item of the same id in another partition.) Returns the writes made, and
/// whether more may match (`s.pages` pages were full).
pub async fn sweep(
    store: &dyn Store,
    s: Sweep<'_>,
    plan: impl Fn(&Value) -> Option<Write>,
) -> StoreResult<(usize, bool)> {
    let c = s.container;
    let limit = s.query.limit as usize;
    let key = |i: &Value| {
        Some((
            str_field(i, c.partition_key_field())?.to_string(),
            Meta::of(i).id?.to_string(),
        ))
    };
    let mut written = 0;
    let mut last_first = None;
    for _ in 0..s.pages {
        let page = retry(|| store.query(c, &s.query)).await?;
        let writes: Vec<Write> = page.items.iter().skip(s.keep).filter_map(&plan).collect();
        if writes.is_empty() {
            return Ok((written, false));
        }
        let first = page.items.get(s.keep).and_then(key);
        if first.is_some() && first == last_first {
            return Err(StoreError::Other(format!(
                "items in `{}` stay after being {}",
                c.name(),
                s.what
            )));
        }
        last_first = first;
        apply_all(store, &writes, s.concurrency).await?;
        written += writes.len();
        if page.continuation.is_none() && page.items.len() < limit {
            return Ok((written, false));
        }
    }
    Ok((written, true))
}

/// Delete every item `q` finds in `c`, a page of [`PAGE`] at a time (deleted items stop
/// matching, so each page is the query's first), at most `pages` pages. Returns how many, and whether the last page was full (more may match).
pub async fn delete_matching(
    store: &dyn Store,
    c: Container,
    q: Query,
    pages: usize,
) -> StoreResult<(usize, bool)> {
    let s = Sweep {
        container: c,
        query: q.limit(PAGE),
        keep: 0,
        pages,
        concurrency: CONCURRENCY,
        what: "deleted",
    };
    sweep(store, s, |i| {
        Some(Write::delete(
            c,
            str_field(i, c.partition_key_field())?,
            Meta::of(i).id?,
        ))
    })
    .await
}

// ---------------------------------------------------------------------------------------------
// Bounded steps: job items.

pub use crate::domain::jobs::{Job, Work, JOB};

/// Job item `id` of `user_id`'s partition, if any (one point read); an item there that does not
/// read as a job item is an error.
pub async fn read_job(store: &dyn Store, user_id: &str, id: &str) -> StoreResult<Option<Job>> {
    let item = retry(|| store.read(Container::Users, user_id, id)).await?;
    item.map(|i| Job::read(&i).map_err(StoreError::Other))
        .transpose()
}

/// Write job item `next` (in its user's partition): created when `read` is `None`, else
/// replaced if still at the version read. `false` when someone else wrote it first (their
/// change carries on from there).
pub async fn save_job(store: &dyn Store, read: Option<&Job>, next: Job) -> StoreResult<bool> {
    let (user_id, id, item) = (&next.user_id, &next.id, next.to_item());
    let result = match read.map(|r| r.etag.as_deref()) {
        Some(Some(etag)) => {
            retry(|| store.replace(Container::Users, user_id, id, item.clone(), Some(etag))).await
        }
        Some(None) => retry(|| store.upsert(Container::Users, user_id, item.clone())).await,
        None => retry(|| store.create(Container::Users, user_id, item.clone())).await,
    };
    match result {
        Ok(_) => Ok(true),
        Err(StoreError::PreconditionFailed | StoreError::Conflict | StoreError::NotFound) => {
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

/// Delete item `id` of `pk`'s partition of `c` (a job item in `users`, a copy elsewhere);
/// nothing when it is not there. Returns the writes made (one).
pub async fn delete_item(
    store: &dyn Store,
    c: Container,
    pk: &str,
    id: &str,
) -> StoreResult<usize> {
    apply_one(store, &Write::delete(c, pk, id)).await?;
    Ok(1)
}

/// The job item `delivered` (as the users feed delivered it) as stored now, if its step is
/// still to run: `None` if it is gone, changed since (its newer version's change carries on),
/// or done.
pub async fn current_job(store: &dyn Store, delivered: &Job) -> StoreResult<Option<Job>> {
    let Some(job) = read_job(store, &delivered.user_id, &delivered.id).await? else {
        return Ok(None);
    };
    if delivered.etag.is_some() && delivered.etag != job.etag {
        return Ok(None);
    }
    Ok(Some(job).filter(|j| !j.done))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn versions_compare_by_whole_seconds_then_by_lsn() {
        let a = json!({"_lsn": 5, "_ts": 100});
        let b = json!({"_lsn": 7, "_ts": 100});
        assert_eq!(compare_versions(&a, &b), Some(Ordering::Less));
        assert_eq!(compare_versions(&b, &a), Some(Ordering::Greater));
        let c = json!({"_lsn": 1, "_ts": 101});
        assert_eq!(compare_versions(&a, &c), Some(Ordering::Less));
        // The same second without a sequence number: cannot tell.
        assert_eq!(compare_versions(&json!({"_ts": 100}), &a), None);
        assert_eq!(compare_versions(&json!({}), &a), None);
    }

    #[test]
    fn the_newest_change_of_an_item_wins() {
        let post = |id: &str, lsn: u64, title: &str| json!({"id":id,"type":"post","postId":id,"userId":"u1","_lsn":lsn,"title":title});
        let docs = [
            post("p1", 9, "new"),
            post("p1", 3, "old"),
            post("p2", 10, ""),
        ];
        let changes = super::super::change::decoded(Container::Posts, &docs).unwrap();
        let changes: Vec<&Change> = changes.iter().collect();
        // The whole document of the newest version, as delivered.
        assert_eq!(
            newest_change(&changes, ChangeKind::Post, "p1"),
            Some(&docs[0])
        );
        assert!(newest_change(&changes, ChangeKind::User, "p1").is_none());
    }

    async fn store_with(n: usize) -> (tempfile::TempDir, crate::store::embedded::EmbeddedStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::embedded::EmbeddedStore::open(&dir.path().join("b.db")).unwrap();
        for i in 0..n {
            let item = json!({ "id": format!("t{i:04}"), "type": "timeline", "userId": "ana" });
            store
                .create(Container::Timelines, "ana", item)
                .await
                .unwrap();
        }
        (dir, store)
    }

    fn all_of_ana() -> Sweep<'static> {
        Sweep {
            container: Container::Timelines,
            query: Query::partition("ana").eq("type", "timeline").limit(PAGE),
            keep: 0,
            pages: usize::MAX,
            concurrency: CONCURRENCY,
            what: "deleted",
        }
    }

    /// More items than a page: each page's writes make its items stop matching, and the sweep
    /// goes on until none is left.
    #[tokio::test]
    async fn a_sweep_writes_every_page_until_nothing_matches() {
        let (_dir, store) = store_with(2 * PAGE as usize + 50).await;
        let delete = |i: &Value| Some(Write::delete(Container::Timelines, "ana", Meta::of(i).id?));
        let (n, more) = sweep(&store, all_of_ana(), delete).await.unwrap();
        assert_eq!((n, more), (2 * PAGE as usize + 50, false));
        let left = Query::partition("ana").eq("type", "timeline");
        assert_eq!(store.count(Container::Timelines, &left).await.unwrap(), 0);
    }

    /// Writes that leave the items matching (a store that ignores them, a plan that misses the
    /// query's condition) end the sweep with an error instead of reading the same page forever.
    #[tokio::test]
    async fn a_sweep_whose_writes_do_not_take_stops() {
        let (_dir, store) = store_with(PAGE as usize + 1).await;
        let touch = |i: &Value| {
            let ops = vec![crate::store::PatchOp::set("/touched", true)];
            Some(Write::patch(
                Container::Timelines,
                "ana",
                Meta::of(i).id?,
                ops,
            ))
        };
        let bounded = Sweep {
            pages: 5,
            ..all_of_ana()
        };
        let e = sweep(&store, bounded, touch).await.unwrap_err();
        assert!(e.to_string().contains("stay after being deleted"), "{e}");
    }
}
