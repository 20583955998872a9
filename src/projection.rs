//! Change-feed projections: the article's V2/V3 denormalizations (see "How it works" in
//! `docs/ARCHITECTURE.md`).
//!
//! Each change is treated as a *notification*: the projection re-reads the source of truth (the
//! post, the author, the post's pending counts, the feed) and writes what follows from it. A
//! repeated or stale batch therefore re-writes the current state and never an older one, and a
//! username that raced a new post, comment or like is corrected when that item is next seen.
//!
//! - [`plan`]: pure; changed documents plus the facts read for them in, the writes out.
//! - [`gather`]: reads those facts, never older than the change being handled.
//! - [`apply`]: executes writes through the store, retrying transient errors.
//! - [`erase`]: what a deletion implies, shared with the requests that delete.
//!
//! Two lanes over the same two feeds ([`Lane`]), each with its own followers and checkpoints
//! (standalone) or trigger functions and leases (under the Functions host), so that one never
//! waits on the other:
//! - [`Lane::Main`]: the article's projections (counters, the post copies in `users` and the
//!   feed, renames of a user's own items, erasure) and the follow mirrors and counts;
//! - [`Lane::Timeline`]: the personal timelines ([`timeline`]), whose fan-out grows with an
//!   author's audience and runs in bounded steps.
//!
//! [`project_lane`] is the one entry: the standalone pump and the Functions triggers both call
//! it, once per lane; [`project`] runs both lanes on one batch, one after the other.

pub mod apply;
pub mod erase;
pub mod follows;
pub mod gather;
pub mod merged;
pub mod plan;
pub mod relocation;
pub mod timeline;

use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::Value;

pub use apply::apply;
pub use plan::{plan_posts, posts_needs, recheck, FeedEntry, PostsFacts, Write, INCREMENT_GRACE};

use crate::domain::Kind;
use crate::store::{metrics, Container, Query, Store, StoreError, StoreResult};

/// A batch that could not be applied in full.
#[derive(Debug, thiserror::Error)]
#[error("{reason}; not applied: {}", not_applied.join(", "))]
pub struct ProjectionError {
    pub reason: String,
    /// The changed items (`container/pk/id`) whose consequences are not all written.
    pub not_applied: Vec<String>,
}

/// What a projection did.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Report {
    pub changes: usize,
    pub writes: usize,
    /// Posts with a counter change on its way (a pending count younger than
    /// [`INCREMENT_GRACE`]): the driver projects [`recheck`] of each once that has passed. Should
    /// the change have been lost, that is when the counter is corrected.
    pub deferred: Vec<String>,
    /// Posts whose counters this batch found with nothing left to wait for: a recheck a driver
    /// holds for one of them is answered already and can be dropped.
    pub settled: Vec<String>,
}

/// For a driver that keeps nothing between batches (the Functions triggers): project
/// [`recheck`] of each deferred post once [`INCREMENT_GRACE`] has passed, and again for as long as
/// it stays deferred, in a task of its own. Held in memory only: should the process stop first,
/// the counter is corrected by the post's next change.
pub fn recheck_later(store: Arc<dyn Store>, posts: Vec<String>) {
    // One pending recheck per post in this process, however many batches defer it.
    static PENDING: OnceLock<Mutex<HashSet<String>>> = OnceLock::new();
    let pending = PENDING.get_or_init(Default::default);
    let claim = |posts: Vec<String>| -> Vec<String> {
        let mut p = pending.lock().unwrap_or_else(|e| e.into_inner());
        posts
            .into_iter()
            .filter(|id| p.insert(id.clone()))
            .collect()
    };
    let release = |posts: &[String]| {
        let mut p = pending.lock().unwrap_or_else(|e| e.into_inner());
        for id in posts {
            p.remove(id);
        }
    };
    let mut posts = claim(posts);
    if posts.is_empty() {
        return;
    }
    tokio::spawn(async move {
        let mut failures = 0;
        while !posts.is_empty() {
            tokio::time::sleep(INCREMENT_GRACE).await;
            // Released before the look, so a batch deferring a post meanwhile is not lost.
            release(&posts);
            let docs: Vec<Value> = posts.iter().map(|p| recheck(p)).collect();
            match metrics::projecting(project(&*store, Container::Posts, &docs)).await {
                Ok(report) => posts = claim(report.deferred),
                Err(e) if failures < 5 => {
                    failures += 1;
                    tracing::warn!(error = %e, "counter recheck failed; retrying");
                    posts = claim(posts);
                }
                Err(e) => {
                    tracing::error!(error = %e, "counter recheck failed; given up");
                    return;
                }
            }
        }
    });
}

/// A projection lane: which of a feed's consequences a follower of it writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lane {
    /// Counters, post copies, the feed, follow mirrors and counts, renames, erasure.
    Main,
    /// The personal timelines.
    Timeline,
}

impl Lane {
    pub const ALL: [Lane; 2] = [Lane::Main, Lane::Timeline];

    /// `main` or `timeline`.
    pub fn name(self) -> &'static str {
        match self {
            Lane::Main => "main",
            Lane::Timeline => "timeline",
        }
    }
}

/// Project a batch of changed documents from the change feed of `container` (`posts` or
/// `users`; any other container, `timelines` among them, has no projection) in `lane`.
pub async fn project_lane(
    store: &dyn Store,
    lane: Lane,
    container: Container,
    changes: &[Value],
) -> Result<Report, ProjectionError> {
    let timeline = |r: StoreResult<usize>| {
        r.map(|writes| Report {
            changes: changes.len(),
            writes,
            ..Report::default()
        })
        .map_err(|e| failed(container, changes, e))
    };
    match (lane, container) {
        (Lane::Main, Container::Posts) => project_posts(store, changes).await,
        (Lane::Main, Container::Users) => project_users(store, changes).await,
        (Lane::Timeline, Container::Posts) => {
            timeline(timeline::project_posts(store, changes).await)
        }
        (Lane::Timeline, Container::Users) => {
            timeline(timeline::project_users(store, changes).await)
        }
        (_, Container::Feed | Container::Leases | Container::Timelines) => Ok(Report {
            changes: changes.len(),
            ..Report::default()
        }),
    }
}

/// Both lanes on one batch, the main lane first (for tools and tests that drive the
/// projections by hand: the timeline lane's job items come back through the users feed).
pub async fn project(
    store: &dyn Store,
    container: Container,
    changes: &[Value],
) -> Result<Report, ProjectionError> {
    let mut report = project_lane(store, Lane::Main, container, changes).await?;
    let timeline = project_lane(store, Lane::Timeline, container, changes).await?;
    report.writes += timeline.writes;
    Ok(report)
}

fn source_ids(container: Container, changes: &[Value]) -> Vec<String> {
    let pk_field = container.partition_key_field();
    changes
        .iter()
        .map(|d| {
            format!(
                "{}/{}/{}",
                container.name(),
                plan::str_field(d, pk_field).unwrap_or("?"),
                plan::str_field(d, "id").unwrap_or("?")
            )
        })
        .collect()
}

fn failed(container: Container, changes: &[Value], e: impl std::fmt::Display) -> ProjectionError {
    ProjectionError {
        reason: e.to_string(),
        not_applied: source_ids(container, changes),
    }
}

/// The `posts` feed: gather facts, plan, apply. Never waits: a counter behind a young item is
/// left for a later recheck (see [`Report::deferred`]).
async fn project_posts(store: &dyn Store, changes: &[Value]) -> Result<Report, ProjectionError> {
    let needs = posts_needs(changes);
    let facts = gather::posts_facts(store, changes, &needs)
        .await
        .map_err(|e| failed(Container::Posts, changes, e))?;
    let writes = plan_posts(changes, &facts);
    apply(store, &writes).await.map_err(|(i, e)| {
        failed(
            Container::Posts,
            changes,
            format!("{} failed: {e}", writes[i].target()),
        )
    })?;
    // A deleted post's comments and likes go with it, a page each time its mark comes through
    // (the request marked the first page; a full page sends the mark round again). Only the
    // mark's own change sweeps: the marks of its items, which follow it, must not start sweeps
    // of their own, or the sweep would crowd out everything else.
    let mut marked = 0;
    let mut swept = HashSet::new();
    for doc in changes.iter().rev() {
        let Some(post_id) = plan::str_field(doc, "id") else {
            continue;
        };
        if Kind::of(doc) != Some(Kind::Post)
            || plan::is_recheck(doc)
            || !facts.deleted_posts.contains_key(post_id)
            || !swept.insert(post_id)
        {
            continue;
        }
        marked += erase::sweep_post(store, doc)
            .await
            .map_err(|e| failed(Container::Posts, changes, e))?;
    }
    let deferred = plan::deferred(changes, &facts);
    let settled = plan::settled(changes, &facts);
    Ok(Report {
        changes: changes.len(),
        writes: writes.len() + marked,
        deferred,
        settled,
    })
}

/// Items read and patched per step of a rename fan-out: memory stays bounded by this whatever
/// the number of items.
pub const FAN_OUT_PAGE: u32 = 200;
/// Patches of a fan-out in flight at once.
pub const FAN_OUT_CONCURRENCY: usize = 4;
/// Passes over a user's items before a fan-out gives up (and its batch is retried).
const MAX_FAN_OUT_PASSES: u32 = 8;

/// The `users` feed: fan each user's current name out to every item of theirs that carries
/// another one (their posts and their copies; the edges and timeline entries naming them are
/// the timeline lane's), then record the rename version that fan-out stands for.
async fn project_users(store: &dyn Store, changes: &[Value]) -> Result<Report, ProjectionError> {
    let mut total = 0;
    for user_id in plan::users_needs(changes) {
        total += fan_out(store, changes, &user_id)
            .await
            .map_err(|e| ProjectionError {
                reason: e.to_string(),
                not_applied: vec![format!("users/{user_id}/{user_id}")],
            })?;
    }
    total += follows::project_users(store, changes)
        .await
        .map_err(|e| failed(Container::Users, changes, e))?;
    Ok(Report {
        changes: changes.len(),
        writes: total,
        ..Report::default()
    })
}

async fn fan_out(store: &dyn Store, changes: &[Value], user_id: &str) -> Result<usize, StoreError> {
    let Some(user) = gather::user(store, changes, user_id).await? else {
        return Ok(0);
    };
    if crate::domain::is_deleted(&user) {
        return erase_user(store, user_id, &user).await;
    }
    let Some(owed) = plan::fan_out_owed(&user) else {
        return Ok(0);
    };
    let targets = [
        (
            Container::Posts,
            Query::cross_partition().eq("userId", user_id),
        ),
        (
            Container::Users,
            Query::partition(user_id).of_kind(Kind::Post),
        ),
    ];
    let mut written = 0;
    for (container, q) in targets {
        let q = q
            .ne("userUsername", owed.username)
            .live()
            .limit(FAN_OUT_PAGE);
        // Page by page, patching each page before reading the next. Patched items stop matching,
        // which may shift what a continuation token points at, so passes repeat until one finds
        // nothing left to patch.
        let mut pass = 0;
        loop {
            if pass > 0 && renamed_since(store, user_id, owed.version).await? {
                // A newer rename's (or the erasure's) own change fans out in turn; this one's name
                // is stale, and racing it (and the copies it writes) would never settle.
                return Ok(written);
            }
            let mut patched = 0;
            let mut page_q = q.clone();
            loop {
                let page = crate::store::retry(|| store.query(container, &page_q)).await?;
                let writes = plan::plan_rename(container, owed.username, &page.items);
                apply::apply_unordered(store, &writes, FAN_OUT_CONCURRENCY)
                    .await
                    .map_err(|(_, e)| e)?;
                patched += writes.len();
                match page.continuation {
                    Some(t) => page_q.continuation = Some(t),
                    None => break,
                }
            }
            written += patched;
            pass += 1;
            if patched == 0 {
                break;
            }
            if pass >= MAX_FAN_OUT_PASSES {
                return Err(StoreError::Other(format!(
                    "items in `{}` still carry another name after {pass} passes",
                    container.name()
                )));
            }
        }
    }
    let etag = plan::str_field(&user, "_etag");
    apply::apply_one(store, &plan::mark_fanned_out(user_id, owed.version, etag)).await?;
    Ok(written)
}

/// An erased user (their item is a tombstone): everything of theirs goes, a bounded step each
/// time the tombstone comes through the users feed (a step that leaves more to do touches the
/// tombstone, which sends it round again behind the changes written meanwhile); the step that
/// finds nothing left records the erasure (`erased: true`), after which the account's identity
/// may create a user again.
async fn erase_user(store: &dyn Store, user_id: &str, user: &Value) -> Result<usize, StoreError> {
    if user.get(ERASED) == Some(&Value::Bool(true)) {
        return Ok(0);
    }
    let (mut written, more) = erase::user_steps(store, user_id, erase::PAGE as usize).await?;
    let ops = if more {
        let sweeps = user.get(erase::SWEEPS).and_then(Value::as_u64).unwrap_or(0);
        vec![crate::store::PatchOp::set(
            &format!("/{}", erase::SWEEPS),
            sweeps + 1,
        )]
    } else {
        // Their follows go last, once their own items are gone (the edges' marks then take
        // their posts out of their followers' timelines, in the timeline lane).
        written += follows::erase_user(store, user_id).await?;
        vec![crate::store::PatchOp::set(&format!("/{ERASED}"), true)]
    };
    let done = Write::Patch {
        container: Container::Users,
        pk: user_id.into(),
        id: user_id.into(),
        ops,
        if_match: None,
    };
    apply::apply_one(store, &done).await?;
    Ok(written + 1)
}

/// Set on a user's tombstone once everything of theirs is deleted.
pub const ERASED: &str = "erased";

/// Whether the rename of `version` is superseded: the user was renamed again after it, or erased
/// (one point read).
async fn renamed_since(store: &dyn Store, user_id: &str, version: u64) -> Result<bool, StoreError> {
    let user = crate::store::retry(|| store.read(Container::Users, user_id, user_id)).await?;
    Ok(match user {
        // Erased (or gone) meanwhile: the erasure's own change takes the user's items over, and
        // patching names it is changing would never settle.
        None => true,
        Some(u) if crate::domain::is_deleted(&u) => true,
        Some(u) => u
            .get("renameVersion")
            .and_then(Value::as_u64)
            .is_some_and(|v| v > version),
    })
}
