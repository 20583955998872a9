//! The timeline lane: everything that writes the personal timelines (`crate::domain::follows`),
//! kept in the container `timelines`, which nothing projects from, so that a fan-out writes
//! nothing into the users feed but its job items; run apart from the main projections ([`super::Lane::Timeline`]: its own followers of the
//! posts and users feeds, its own checkpoints, its own trigger functions), so that no fan-out
//! holds up the feed, the post copies, the counters or a follow showing in `/followers`.
//!
//! What it reacts to, each change read as a notification (the item is read as it is now):
//! - The author's copy of a post in `users` (written by the main lane): its entry is written
//!   into each follower's timeline, unless the post's job item (`timelineJob-post-<P>`, in the
//!   author's partition) records this very entry content: a like or a comment changes the
//!   copy's counts, which no entry holds, so it writes no timeline item at all.
//! - A post marked deleted (posts feed): its entries are deleted wherever they are.
//! - A follow edge or its mirror: live, with the mirror in place, the followee's newest posts
//!   are brought into the follower's timeline (or a merge marker written, for a merged author);
//!   marked, the followee's entries and marker leave it.
//! - A user: renamed, the edges and entries naming them are patched; their follower count
//!   crossing the fan-out limit, their followers' timelines are switched between copies and
//!   markers; erased, their own timeline goes.
//! - A job item (`type: timelineJob`): the next step of a fan-out.
//!
//! **Bounded steps.** Any work over more followers or entries than one page ([`PAGE`]) runs a
//! page per step: the step records where it stopped in the job item in the author's partition
//! of `users`,
//! whose change comes back through the users feed behind the changes written meanwhile, so
//! other authors' posts interleave with a big fan-out, a crash resumes from the last recorded
//! step, and a newer change of the same post or user supersedes the job (a step whose job item
//! changed since it was delivered does nothing: the newer version's own change carries on).
//!
//! **Ordering with the main lane.** A post and a follow made at once both reach the timeline:
//! a fan-out is set off by the author's copy and reads the mirrors after it; a backfill is set
//! off by the mirror (or the edge, once the mirror is there) and reads the copies after it; so
//! at least one of the two sees the other's write. An unfollow is read from the edge itself:
//! after each page of a fan-out one query asks which of the page's followers still hold a live
//! edge, and the entry written for any who does not is taken back; a post deleted meanwhile is
//! looked up once a page the same way.
//!
//! **The fan-out limit.** An author with more followers than the limit `L` ([`limit_in_force`],
//! recorded in the store) is *merged*: their posts are not copied; each follower's timeline
//! holds a marker (`follows::merge_marker`) and a read merges their newest posts in. Hysteresis:
//! an author is merged once their followers exceed `L`, and copied again only once they fall
//! below 80% of `L` ([`merges`], [`unmerges`]), so follower churn around the limit does not
//! switch every timeline back and forth. The author's state is the job item
//! `timelineJob-limit`: going over, the markers are written (a page a step) and only then does
//! copying stop; coming back, copying resumes first, then each follower's marker is removed and
//! the posts copied. A merged author's newest posts are kept in one shared partition
//! ([`merged`]): each change of one of their posts upserts its item there (one write), crossing
//! up copies their [`TIMELINE_SIZE`] newest there before any marker is written, crossing down
//! removes them once every follower's posts are copied back; a deleted post and an erased
//! author take theirs out, and a rename reaches them with the post copies' changes.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{json, Value};

use super::apply;
use super::follows::{delete_matching, live_user, newest_edge};
use super::gather;
use super::merged;
use super::plan::{self, str_field, Write};
use super::relocation;
use crate::domain::follows::{
    entry_content, following_id, is_live_of, marker_id, merge_marker, stored_entry_content,
    timeline_id, trims, FOLLOWER, FOLLOWING, MERGE, REF_USER, TIMELINE, TIMELINE_KEEP,
    TIMELINE_SIZE,
};
use crate::domain::{is_deleted, Kind, Post};
use crate::store::{retry, Container, Order, Query, Store, StoreError, StoreResult};

/// Recount `user_id`'s follows (as the main lane does) and carry out, now, whatever the timeline
/// lane then owes the user: a crossing of the fan-out limit is run step after step to its end
/// (for tools and repairs that want the timelines in line when they return, rather than a step
/// per change of the job item). Returns the writes made.
pub async fn recount(store: &dyn Store, user_id: &str) -> StoreResult<usize> {
    let mut written = super::follows::recount(store, user_id).await?;
    let mut batch = Batch::default();
    written += user_changed(store, &[], user_id, &mut batch).await?;
    let mut last: Option<String> = None;
    loop {
        let Some(job) = read_job(store, user_id, LIMIT_JOB).await? else {
            return Ok(written);
        };
        let etag = str_field(&job, "_etag").map(String::from);
        if job.get("target").is_none_or(Value::is_null) || etag == last {
            return Ok(written);
        }
        last = etag;
        written += job_step(store, user_id, &job, &mut batch).await?;
    }
}

/// What one batch of the lane reads once, when it first needs it.
#[derive(Debug, Default)]
struct Batch {
    limit: Option<u64>,
    moving: Option<bool>,
    /// Writes made starting the move of timeline items (`relocation`).
    started: usize,
}

impl Batch {
    /// The fan-out limit in force ([`limit_in_force`]).
    async fn limit(&mut self, store: &dyn Store) -> StoreResult<u64> {
        if let Some(l) = self.limit {
            return Ok(l);
        }
        let l = limit_in_force(store).await?;
        self.limit = Some(l);
        Ok(l)
    }

    /// The containers timeline items may be in ([`relocation::places`]): learning that some may
    /// still be in `users` starts their move, unless it is under way.
    async fn places(&mut self, store: &dyn Store) -> StoreResult<&'static [Container]> {
        if let Some(m) = self.moving {
            return Ok(relocation::places(m));
        }
        let m = relocation::moving(store).await?;
        if m {
            self.started += relocation::start(store).await?;
        }
        self.moving = Some(m);
        Ok(relocation::places(m))
    }
}

/// Followers (or entries) read and written per step: memory and the time one step holds the
/// lane stay bounded whatever the audience.
pub const PAGE: u32 = 200;
/// Followers per step of a crossing back under the limit: each is a backfill of up to
/// [`TIMELINE_SIZE`] entries, so a step writes at most `BACKFILL_PAGE × TIMELINE_SIZE`.
pub const BACKFILL_PAGE: u32 = 20;
/// Writes in flight at once.
pub const CONCURRENCY: usize = 8;

/// `type` of a job item (internal, in `users`, in the partition of the user it works for: its
/// changes are what carries a job on, through the users feed).
pub const JOB: &str = relocation::JOB_TYPE;

// ---------------------------------------------------------------------------------------------
// The fan-out limit, kept with the data.

/// The fan-out limit when none is recorded and the process sets none.
pub const DEFAULT_FANOUT_LIMIT: u64 = crate::settings::DEFAULT_TIMELINE_FANOUT_LIMIT;

/// The `leases` item recording the limit in force (partition key = id).
pub const LIMIT_ID: &str = "settings.timeline";

const UNSET: u64 = u64::MAX;
static CONFIGURED: AtomicU64 = AtomicU64::new(UNSET);

/// The limit this process was configured with (`BLOG_TIMELINE_FANOUT_LIMIT`, at start-up): the
/// timeline lane records it in the store when the store holds another, and every process then
/// uses the recorded one.
pub fn set_fanout_limit(limit: u64) {
    CONFIGURED.store(limit, Ordering::Relaxed);
}

/// Forget the configured limit: the recorded one (or the default) is used.
pub fn clear_fanout_limit() {
    CONFIGURED.store(UNSET, Ordering::Relaxed);
}

/// The limit this process was configured with, or the default.
pub fn fanout_limit() -> u64 {
    configured().unwrap_or(DEFAULT_FANOUT_LIMIT)
}

fn configured() -> Option<u64> {
    Some(CONFIGURED.load(Ordering::Relaxed)).filter(|&l| l != UNSET)
}

/// The limit recorded in the store, if any (one point read).
pub async fn stored_limit(store: &dyn Store) -> StoreResult<Option<u64>> {
    let item = retry(|| store.read(Container::Leases, LIMIT_ID, LIMIT_ID)).await?;
    Ok(item.and_then(|i| i.get("fanoutLimit").and_then(Value::as_u64)))
}

/// The limit in force: the process's configured one, recorded in the store first if the store
/// holds another; else the recorded one; else the default. Read when the timeline lane needs it
/// (once per batch that changes a user), never at start-up.
pub async fn limit_in_force(store: &dyn Store) -> StoreResult<u64> {
    let stored = stored_limit(store).await?;
    match (configured(), stored) {
        (Some(c), s) if s != Some(c) => {
            let item = json!({ "id": LIMIT_ID, "fanoutLimit": c });
            retry(|| store.upsert(Container::Leases, LIMIT_ID, item.clone())).await?;
            Ok(c)
        }
        (_, Some(s)) => Ok(s),
        (c, None) => Ok(c.unwrap_or(DEFAULT_FANOUT_LIMIT)),
    }
}

/// The limit verify and repair judge by: the recorded one, else the process's, else the
/// default. Writes nothing.
pub async fn limit_to_judge_by(store: &dyn Store) -> StoreResult<u64> {
    Ok(stored_limit(store).await?.unwrap_or_else(fanout_limit))
}

/// Whether an author with `followers` who is copied is merged: more followers than the limit.
pub fn merges(followers: u64, limit: u64) -> bool {
    followers > limit
}

/// Whether a merged author with `followers` is copied again: fewer followers than 80% of the
/// limit.
pub fn unmerges(followers: u64, limit: u64) -> bool {
    u128::from(followers) * 5 < u128::from(limit) * 4
}

// ---------------------------------------------------------------------------------------------
// Job items.

fn job_id(kind: &str, key: Option<&str>) -> String {
    match key {
        Some(k) => format!("{JOB}-{kind}-{k}"),
        None => format!("{JOB}-{kind}"),
    }
}

/// The job item recording a post's fan-out.
pub fn post_job_id(post_id: &str) -> String {
    job_id("post", Some(post_id))
}

fn delete_job_id(post_id: &str) -> String {
    job_id("delete", Some(post_id))
}

/// The job item recording an author's side of the fan-out limit.
pub const LIMIT_JOB: &str = "timelineJob-limit";
const RENAME_JOB: &str = "timelineJob-rename";
const ERASE_JOB: &str = "timelineJob-erase";

async fn read_job(store: &dyn Store, user_id: &str, id: &str) -> StoreResult<Option<Value>> {
    retry(|| store.read(Container::Users, user_id, id)).await
}

/// Write job item `job` (in `user_id`'s partition): created when `read` is `None`, else
/// replaced if still at the version read. `false` when someone else wrote it first (their
/// change carries on from there).
async fn save_job(
    store: &dyn Store,
    user_id: &str,
    read: Option<&Value>,
    mut job: Value,
) -> StoreResult<bool> {
    job["type"] = JOB.into();
    job["userId"] = user_id.into();
    let id = str_field(&job, "id").unwrap_or_default().to_string();
    let result = match read.and_then(|r| str_field(r, "_etag")) {
        Some(etag) => {
            retry(|| store.replace(Container::Users, user_id, &id, job.clone(), Some(etag))).await
        }
        None if read.is_some() => {
            retry(|| store.upsert(Container::Users, user_id, job.clone())).await
        }
        None => retry(|| store.create(Container::Users, user_id, job.clone())).await,
    };
    match result {
        Ok(_) => Ok(true),
        Err(StoreError::PreconditionFailed | StoreError::Conflict | StoreError::NotFound) => {
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

/// Delete item `id` of `user_id`'s partition of `c` (a job item in `users`, a timeline item in
/// `timelines`); nothing when it is not there.
async fn delete_item(
    store: &dyn Store,
    c: Container,
    user_id: &str,
    id: &str,
) -> StoreResult<usize> {
    let w = Write::Delete {
        container: c,
        pk: user_id.into(),
        id: id.into(),
    };
    apply::apply_one(store, &w).await?;
    Ok(1)
}

/// An author's side of the fan-out limit, as their job item records it.
#[derive(Debug, Clone, Default)]
pub struct LimitState {
    /// Their posts are not copied (their followers' timelines hold markers).
    pub merged: bool,
    /// A crossing under way: `Some(true)` writing the markers, `Some(false)` removing them.
    pub target: Option<bool>,
    cursor: Option<String>,
    item: Option<Value>,
}

impl LimitState {
    /// Whether a new follower gets a marker rather than copies.
    pub fn marks(&self) -> bool {
        self.merged || self.target == Some(true)
    }

    /// The side the author is on or crossing to.
    pub fn side(&self) -> bool {
        self.target.unwrap_or(self.merged)
    }
}

/// Author `user_id`'s side of the limit. Without a job item, what an earlier release recorded
/// on the user (`timelineMerged`).
pub async fn limit_state(
    store: &dyn Store,
    user_id: &str,
    user: Option<&Value>,
) -> StoreResult<LimitState> {
    let item = read_job(store, user_id, LIMIT_JOB).await?;
    Ok(match item {
        Some(i) => LimitState {
            merged: i.get("merged") == Some(&Value::Bool(true)),
            target: i.get("target").and_then(Value::as_bool),
            cursor: str_field(&i, "cursor").map(String::from),
            item: Some(i),
        },
        None => LimitState {
            merged: user.is_some_and(|u| u.get("timelineMerged") == Some(&Value::Bool(true))),
            ..LimitState::default()
        },
    })
}

// ---------------------------------------------------------------------------------------------
// The lane's entries.

/// The posts feed, timeline lane: each post marked deleted has its entries deleted, a page now
/// and a page per step after; any other change is passed over without a read. Returns the
/// writes made.
pub async fn project_posts(store: &dyn Store, changes: &[Value]) -> StoreResult<usize> {
    let mut written = 0;
    let mut seen = BTreeSet::new();
    let mut batch = Batch::default();
    for doc in changes {
        if Kind::of(doc) != Some(Kind::Post) || plan::is_recheck(doc) {
            continue;
        }
        let (Some(post_id), Some(author)) = (str_field(doc, "postId"), str_field(doc, "userId"))
        else {
            continue;
        };
        // Only a deletion's mark: a deleted post stays deleted, and a change of a live post
        // (an edit, its counts) reaches the timelines through its author's copy.
        if !is_deleted(doc) || !seen.insert(post_id) {
            continue;
        }
        written += merged::remove_post(store, post_id).await?;
        let job = read_job(store, author, &delete_job_id(post_id)).await?;
        let places = batch.places(store).await?;
        written += delete_step(store, places, author, post_id, job.as_ref()).await?;
    }
    Ok(written + batch.started)
}

/// One page of deleted post `post_id`'s entries deleted; the job item records that more may be
/// left (its change brings the next step), or goes with the post's own job item once none is.
async fn delete_step(
    store: &dyn Store,
    places: &[Container],
    author: &str,
    post_id: &str,
    job: Option<&Value>,
) -> StoreResult<usize> {
    let q = Query::cross_partition()
        .eq("type", TIMELINE)
        .eq("postId", post_id);
    let (mut written, mut more) = (0, false);
    for &c in places {
        let (n, m) = delete_matching(store, c, q.clone(), 1).await?;
        written += n;
        more |= m;
    }
    if more {
        let steps = job.and_then(|j| j.get("steps")).and_then(Value::as_u64);
        let next = json!({
            "id": delete_job_id(post_id), "job": "delete", "postId": post_id,
            "steps": steps.unwrap_or(0) + 1,
        });
        save_job(store, author, job, next).await?;
        return Ok(written + 1);
    }
    written += delete_item(store, Container::Users, author, &post_job_id(post_id)).await?;
    if job.is_some() {
        written += delete_item(store, Container::Users, author, &delete_job_id(post_id)).await?;
    }
    Ok(written)
}

/// The users feed, timeline lane. Returns the writes made.
pub async fn project_users(store: &dyn Store, changes: &[Value]) -> StoreResult<usize> {
    let mut written = 0;
    let mut pairs = BTreeSet::new();
    let mut copies = BTreeSet::new();
    let mut users = BTreeSet::new();
    let mut jobs: BTreeMap<(String, String), &Value> = BTreeMap::new();
    for doc in changes {
        let (Some(pk), Some(id)) = (str_field(doc, "userId"), str_field(doc, "id")) else {
            continue;
        };
        match str_field(doc, "type") {
            Some(FOLLOWING) => {
                if let Some(x) = str_field(doc, REF_USER) {
                    pairs.insert((pk.to_string(), x.to_string(), false));
                }
            }
            Some(FOLLOWER) => {
                if let Some(f) = str_field(doc, REF_USER) {
                    pairs.insert((f.to_string(), pk.to_string(), true));
                }
            }
            Some(JOB) => {
                // The newest delivered version of each job item.
                let key = (pk.to_string(), id.to_string());
                let newer = jobs.get(&key).is_none_or(|old| {
                    gather::compare_versions(old, doc) == Some(std::cmp::Ordering::Less)
                });
                if newer {
                    jobs.insert(key, doc);
                }
            }
            _ if Kind::of(doc) == Some(Kind::Post) => {
                copies.insert((pk.to_string(), id.to_string()));
            }
            _ if Kind::of(doc) == Some(Kind::User) => {
                users.insert(pk.to_string());
            }
            _ => {}
        }
    }
    let mut batch = Batch::default();
    for (f, x, from_mirror) in &pairs {
        written += follow_changed(store, changes, f, x, *from_mirror, &mut batch).await?;
    }
    for (author, post_id) in &copies {
        written += copy_changed(store, author, post_id).await?;
    }
    for u in &users {
        written += user_changed(store, changes, u, &mut batch).await?;
    }
    for ((pk, _), job) in jobs {
        written += job_step(store, &pk, job, &mut batch).await?;
    }
    Ok(written + batch.started)
}

// ---------------------------------------------------------------------------------------------
// Follows: backfill and removal.

/// The follow `f` → `x` as it is now. Marked (or gone): `x`'s entries and marker leave `f`'s
/// timeline. Live with its mirror in place: `x`'s posts are brought in (or the marker written).
/// A live edge whose mirror is not there yet waits for the mirror's own change.
async fn follow_changed(
    store: &dyn Store,
    changes: &[Value],
    f: &str,
    x: &str,
    from_mirror: bool,
    batch: &mut Batch,
) -> StoreResult<usize> {
    let id = following_id(x);
    let delivered = if from_mirror {
        None
    } else {
        newest_edge(changes, &id, f)
    };
    let edge = gather::read_not_older(store, Container::Users, f, &id, delivered).await?;
    let places = batch.places(store).await?;
    if !edge.as_ref().is_some_and(|e| is_live_of(e, FOLLOWING)) {
        let q = Query::partition(f).eq("type", TIMELINE).eq(REF_USER, x);
        let mut removed = 0;
        for &c in places {
            removed += delete_matching(store, c, q.clone(), usize::MAX).await?.0;
        }
        return Ok(removed);
    }
    let mirror_id = crate::domain::follows::follower_id(f);
    let mirror = retry(|| store.read(Container::Users, x, &mirror_id)).await?;
    if !mirror.as_ref().is_some_and(|m| is_live_of(m, FOLLOWER)) {
        return Ok(0);
    }
    let (Some(followee), Some(_)) = (live_user(store, x).await?, live_user(store, f).await?) else {
        return Ok(0);
    };
    let state = limit_state(store, x, Some(&followee)).await?;
    copy_or_mark(store, places, f, x, &followee, &state).await
}

/// Bring `x`'s posts into `f`'s timeline: a marker when new followers of `x` get one, else the
/// posts copied (and any marker removed).
async fn copy_or_mark(
    store: &dyn Store,
    places: &[Container],
    f: &str,
    x: &str,
    followee: &Value,
    state: &LimitState,
) -> StoreResult<usize> {
    if state.marks() {
        let marker = Write::Upsert {
            container: Container::Timelines,
            pk: f.into(),
            item: merge_marker(f, x),
        };
        apply::apply_one(store, &marker).await?;
        return Ok(1);
    }
    let name = str_field(followee, "username").unwrap_or_default();
    backfill(store, places, f, x, name).await
}

/// Make `f`'s timeline hold the [`TIMELINE_SIZE`] newest posts of `x` (called `name` now), from
/// the short-form copies in `x`'s partition, and no marker for `x` (in any of `places`, see
/// [`relocation::places`]): only the entries missing or differing are written, so a follow
/// projected again (its edge, then its mirror, a redelivered batch) costs two queries and no
/// write.
async fn backfill(
    store: &dyn Store,
    places: &[Container],
    f: &str,
    x: &str,
    name: &str,
) -> StoreResult<usize> {
    let q = Query::partition(x)
        .of_kind(Kind::Post)
        .live()
        .order_by_creation(Order::Desc)
        .limit(TIMELINE_SIZE as u32);
    let page = retry(|| store.query(Container::Users, &q)).await?;
    let held_q = Query::partition(f)
        .eq("type", TIMELINE)
        .eq(REF_USER, x)
        .limit(TIMELINE_KEEP as u32 + PAGE);
    let held = query_all(store, Container::Timelines, held_q).await?;
    let held: BTreeMap<&str, &Value> = held
        .iter()
        .filter_map(|i| Some((str_field(i, "id")?, i)))
        .collect();
    let mut written = 0;
    for &c in places {
        // Where the move has yet to look, the marker may be there unseen.
        if c != Container::Timelines || held.contains_key(marker_id(x).as_str()) {
            written += delete_item(store, c, f, &marker_id(x)).await?;
        }
    }
    let writes: Vec<Write> = page
        .items
        .into_iter()
        .filter_map(|item| serde_json::from_value::<Post>(item).ok())
        .filter(|p| p.user_id == x)
        .filter_map(|mut p| {
            p.user_username = name.to_string();
            let content = entry_content(&p);
            let same = held
                .get(timeline_id(&p.id).as_str())
                .is_some_and(|h| stored_entry_content(h) == content);
            (!same).then(|| Write::Upsert {
                container: Container::Timelines,
                pk: f.into(),
                item: entry(f, &content),
            })
        })
        .collect();
    apply::apply_unordered(store, &writes, CONCURRENCY)
        .await
        .map_err(|(_, e)| e)?;
    written += writes.len();
    // Up to a hundred entries at once: the timeline is trimmed now rather than by later copies.
    if !writes.is_empty() {
        written += trim(store, f).await?;
    }
    Ok(written)
}

/// The entry holding `content` (see [`entry_content`]) in `owner`'s timeline.
fn entry(owner: &str, content: &Value) -> Value {
    let mut e = content.clone();
    let post_id = str_field(content, "postId").unwrap_or_default();
    e["id"] = timeline_id(post_id).into();
    e["type"] = TIMELINE.into();
    e["userId"] = owner.into();
    e
}

async fn query_all(store: &dyn Store, c: Container, mut q: Query) -> StoreResult<Vec<Value>> {
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

/// Delete the entries of `f`'s timeline beyond its [`TIMELINE_KEEP`] newest (merge markers are
/// not entries: the query leaves them out and they stay), a page at a time. Never deletes one of
/// the newest, whatever runs concurrently: an entry beyond the newest of what was read is beyond
/// the newest of the whole. Only `timelines` is trimmed: entries an earlier release left in
/// `users` are trimmed once moved. Returns how many.
pub async fn trim(store: &dyn Store, f: &str) -> StoreResult<usize> {
    let q = Query::partition(f)
        .eq("type", TIMELINE)
        .not_true(MERGE)
        .order_by_creation(Order::Desc)
        .limit(TIMELINE_KEEP as u32 + PAGE);
    let mut deleted = 0;
    let mut last_first: Option<String> = None;
    loop {
        let page = retry(|| store.query(Container::Timelines, &q)).await?;
        let writes: Vec<Write> = page
            .items
            .iter()
            .skip(TIMELINE_KEEP)
            .filter_map(|i| {
                Some(Write::Delete {
                    container: Container::Timelines,
                    pk: f.into(),
                    id: str_field(i, "id")?.into(),
                })
            })
            .collect();
        // The first entry beyond the kept ones again means the deletes did not take: stop, not
        // spin (as the sweeps do).
        let first = page
            .items
            .get(TIMELINE_KEEP)
            .and_then(|i| str_field(i, "id"))
            .map(str::to_string);
        if first.is_some() && first == last_first {
            return Err(StoreError::Other(
                "timeline entries stay after being trimmed".into(),
            ));
        }
        last_first = first;
        apply::apply_unordered(store, &writes, CONCURRENCY)
            .await
            .map_err(|(_, e)| e)?;
        deleted += writes.len();
        // Another page only when this one was full and gave up entries.
        if page.continuation.is_none() || writes.is_empty() {
            return Ok(deleted);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Posts: the fan-out.

/// The author's copy of post `post_id` changed: unless its job item records this entry content,
/// the post's fan-out starts over with it (its first page now). Should the job item change
/// while this runs (another delivery of the same change), it is looked at again.
async fn copy_changed(store: &dyn Store, author: &str, post_id: &str) -> StoreResult<usize> {
    let mut written = 0;
    for _ in 0..4 {
        match copy_changed_once(store, author, post_id).await? {
            (n, true) => return Ok(written + n),
            (n, false) => written += n,
        }
    }
    Err(StoreError::Other(format!(
        "the fan-out record of post {post_id} kept changing while it was written"
    )))
}

/// [`copy_changed`] once: the writes made, and whether the job item was recorded (`false`:
/// someone else wrote it meanwhile).
async fn copy_changed_once(
    store: &dyn Store,
    author: &str,
    post_id: &str,
) -> StoreResult<(usize, bool)> {
    let copy = retry(|| store.read(Container::Users, author, post_id)).await?;
    let Some(post) = copy
        .filter(|c| !is_deleted(c))
        .and_then(|c| serde_json::from_value::<Post>(c).ok())
        .filter(|p| p.user_id == author && p.kind == Kind::Post)
    else {
        return Ok((0, true));
    };
    let content = entry_content(&post);
    let job = read_job(store, author, &post_job_id(post_id)).await?;
    if job.as_ref().and_then(|j| j.get("entry")) == Some(&content) {
        // This content reached every follower, or its fan-out is under way.
        return Ok((0, true));
    }
    let Some(user) = live_user(store, author).await? else {
        return Ok((0, true));
    };
    let state = limit_state(store, author, Some(&user)).await?;
    // A marker makes a reader look in the shared partition: while any may be there, the post
    // is kept there too.
    let mut written = if state.marks() {
        merged::upsert_post(store, &post).await?
    } else {
        0
    };
    let cursor = if state.merged {
        None
    } else {
        let (n, cursor) = fan_out_page(store, author, &content, None).await?;
        written += n;
        cursor
    };
    let next = post_job(post_id, &content, cursor.as_deref());
    let saved = save_job(store, author, job.as_ref(), next).await?;
    Ok((written + usize::from(saved), saved))
}

fn post_job(post_id: &str, content: &Value, cursor: Option<&str>) -> Value {
    json!({
        "id": post_job_id(post_id), "job": "post", "postId": post_id,
        "entry": content, "cursor": cursor, "done": cursor.is_none(),
    })
}

/// Write the entry holding `content` into the timelines of one page of the author's followers
/// (from `cursor`), take back those whose follower left or whose post went meanwhile, and trim
/// about one timeline in [`crate::domain::follows::TRIM_EVERY`]. Returns the writes made and
/// where the next page starts (`None`: this was the last).
async fn fan_out_page(
    store: &dyn Store,
    author: &str,
    content: &Value,
    cursor: Option<&str>,
) -> StoreResult<(usize, Option<String>)> {
    let post_id = str_field(content, "postId").unwrap_or_default().to_string();
    let q = Query::partition(author)
        .eq("type", FOLLOWER)
        .live()
        .limit(PAGE)
        .continuation(cursor.map(String::from));
    let page = retry(|| store.query(Container::Users, &q)).await?;
    let followers: Vec<&str> = page
        .items
        .iter()
        .filter_map(|m| str_field(m, REF_USER))
        .collect();
    let writes: Vec<Write> = followers
        .iter()
        .map(|f| Write::Upsert {
            container: Container::Timelines,
            pk: (*f).into(),
            item: entry(f, content),
        })
        .collect();
    apply::apply_unordered(store, &writes, CONCURRENCY)
        .await
        .map_err(|(_, e)| e)?;
    let mut written = writes.len();
    if followers.is_empty() {
        return Ok((0, page.continuation));
    }
    // The post deleted meanwhile: its deletion's sweep may have run before these copies landed.
    let post = retry(|| store.read(Container::Posts, &post_id, &post_id)).await?;
    if post.as_ref().is_none_or(is_deleted) {
        for f in &followers {
            written += delete_item(store, Container::Timelines, f, &timeline_id(&post_id)).await?;
        }
        return Ok((written, None));
    }
    written += drop_unfollowed(store, author, &post_id, &followers).await?;
    for f in followers.iter().filter(|f| trims(f, &post_id)) {
        written += trim(store, f).await?;
    }
    Ok((written, page.continuation))
}

/// After a post's entries went to a page of `followers` (read from the mirrors before), take the
/// entry back from each who no longer follows the author. An unfollow's projection in this lane
/// removes the followee's entries once the edge is marked: an entry written after that would
/// stay. One query finds whose edges are still live: a live edge means the removal is still to
/// come (and finds the entry) or the follow was made again (its backfill owns the entry); for
/// the others the entry goes.
async fn drop_unfollowed(
    store: &dyn Store,
    author: &str,
    post_id: &str,
    followers: &[&str],
) -> StoreResult<usize> {
    let q = Query::cross_partition()
        .eq("id", following_id(author))
        .any_of("userId", followers.iter().map(|f| f.to_string()))
        .live()
        .limit(followers.len() as u32);
    let still = query_all(store, Container::Users, q).await?;
    let still: BTreeSet<&str> = still
        .iter()
        .filter_map(|e| str_field(e, "userId"))
        .collect();
    let mut removed = 0;
    for f in followers.iter().filter(|f| !still.contains(**f)) {
        removed += delete_item(store, Container::Timelines, f, &timeline_id(post_id)).await?;
    }
    Ok(removed)
}

// ---------------------------------------------------------------------------------------------
// Users: renames, the limit, erasure.

async fn user_changed(
    store: &dyn Store,
    changes: &[Value],
    user_id: &str,
    batch: &mut Batch,
) -> StoreResult<usize> {
    let Some(user) = gather::user(store, changes, user_id).await? else {
        return Ok(0);
    };
    // Learning whether timeline items may still be in `users` starts their move if it is owed:
    // a store that has one has users changing.
    batch.places(store).await?;
    if is_deleted(&user) {
        let job = read_job(store, user_id, ERASE_JOB).await?;
        return erase_step(store, user_id, job.as_ref()).await;
    }
    let mut written = 0;
    // A rename: the edges and entries naming the user, unless this rename's version is recorded.
    let version = user
        .get("renameVersion")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let rename = read_job(store, user_id, RENAME_JOB).await?;
    let done = rename
        .as_ref()
        .and_then(|j| j.get("version"))
        .and_then(Value::as_u64)
        .unwrap_or(0);
    if version > done {
        let name = str_field(&user, "username").unwrap_or_default();
        written += rename_step(store, user_id, name, version, rename.as_ref()).await?;
    }
    // The limit: a crossing starts when the count calls for one.
    let followers = user
        .get("followerCount")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let state = limit_state(store, user_id, Some(&user)).await?;
    let side = state.side();
    let cross_to = if !side && merges(followers, batch.limit(store).await?) {
        Some(true)
    } else if side && unmerges(followers, batch.limit(store).await?) {
        Some(false)
    } else {
        None
    };
    if let Some(target) = cross_to {
        // Going over, copying goes on until every marker is written, and their newest posts are
        // in the shared partition before the first one; coming back, copying resumes at once
        // (the markers then go, and the posts are copied, a page of followers a step).
        if target {
            let name = str_field(&user, "username").unwrap_or_default();
            written += merged::copy_author(store, user_id, name).await?;
        }
        let merged = target && state.merged;
        let job = json!({
            "id": LIMIT_JOB, "job": "limit", "merged": merged, "target": target,
            "cursor": null,
        });
        if !save_job(store, user_id, state.item.as_ref(), job).await? {
            return Err(StoreError::Other(format!(
                "the fan-out limit record of user {user_id} changed while it was written"
            )));
        }
        written += 1;
    }
    Ok(written)
}

/// One page of the edges (in `users`) and of the entries (in `timelines`, and in `users` those
/// still to be moved there) in other users' partitions still carrying another name than `name`
/// patched; the job item records the rename `version` as done once both pages come back short,
/// or is written again (its change brings the next pages). Patched items stop matching, so each
/// page is the query's first.
async fn rename_step(
    store: &dyn Store,
    user_id: &str,
    name: &str,
    version: u64,
    job: Option<&Value>,
) -> StoreResult<usize> {
    let q = naming(user_id).ne("userUsername", name).live().limit(PAGE);
    let mut writes = Vec::new();
    let mut more = false;
    // `users` holds the edges, and entries an earlier release wrote until they are moved.
    for c in [Container::Users, Container::Timelines] {
        let page = retry(|| store.query(c, &q)).await?;
        more |= page.continuation.is_some() || page.items.len() >= PAGE as usize;
        writes.extend(plan::plan_rename(c, name, &page.items));
    }
    if job.is_none_or(|j| j.get("renaming").and_then(Value::as_u64) != Some(version)) {
        // The first step of this rename: the author's items in the shared partition too (at
        // most TIMELINE_SIZE, so one page).
        let (c, q) = merged::naming(user_id);
        let q = q.ne("userUsername", name).limit(PAGE);
        let stale = retry(|| store.query(c, &q)).await?;
        writes.extend(plan::plan_rename(c, name, &stale.items));
    }
    apply::apply_unordered(store, &writes, CONCURRENCY)
        .await
        .map_err(|(_, e)| e)?;
    let steps = job.and_then(|j| j.get("steps")).and_then(Value::as_u64);
    let (version_done, steps) = if more {
        (
            job.and_then(|j| j.get("version")).cloned(),
            steps.unwrap_or(0) + 1,
        )
    } else {
        (Some(version.into()), 0)
    };
    let next = json!({
        "id": RENAME_JOB, "job": "rename", "version": version_done.unwrap_or(0.into()),
        "renaming": version, "username": name, "steps": steps, "done": !more,
    });
    let saved = save_job(store, user_id, job, next).await?;
    Ok(writes.len() + usize::from(saved))
}

/// One step of an erased user's own timeline going (entries and markers in `timelines`; job
/// items, and timeline items still to be moved, in `users`), a page of each at a time; the
/// erase job item records that more may be left, and goes once nothing is.
async fn erase_step(store: &dyn Store, user_id: &str, job: Option<&Value>) -> StoreResult<usize> {
    let theirs = Query::partition(user_id)
        .any_of("type", [TIMELINE.to_string(), JOB.to_string()])
        .ne("id", ERASE_JOB);
    let (mut written, mut more) = delete_matching(store, Container::Users, theirs, 1).await?;
    let timeline = Query::partition(user_id).eq("type", TIMELINE);
    let (n, m) = delete_matching(store, Container::Timelines, timeline, 1).await?;
    written += n;
    more |= m;
    if job.is_none() {
        // At most TIMELINE_SIZE items of theirs in the shared partition.
        written += merged::remove_author(store, user_id).await?;
    }
    if more {
        let steps = job.and_then(|j| j.get("steps")).and_then(Value::as_u64);
        let next = json!({ "id": ERASE_JOB, "job": "erase", "steps": steps.unwrap_or(0) + 1 });
        let saved = save_job(store, user_id, job, next).await?;
        return Ok(written + usize::from(saved));
    }
    if job.is_some() {
        return Ok(written + delete_item(store, Container::Users, user_id, ERASE_JOB).await?);
    }
    Ok(written)
}

/// The query of the edges (in `users`) and entries (in `timelines`) in other users' partitions
/// that name `user_id` (and so carry their name): a rename's fan-out patches these.
pub fn naming(user_id: &str) -> Query {
    Query::cross_partition().eq(REF_USER, user_id)
}

// ---------------------------------------------------------------------------------------------
// Steps of jobs.

/// The next step of the job `delivered` (a job item as the users feed delivered it): nothing if
/// the item changed since (its newer version's change carries on) or is done.
async fn job_step(
    store: &dyn Store,
    user_id: &str,
    delivered: &Value,
    batch: &mut Batch,
) -> StoreResult<usize> {
    let Some(id) = str_field(delivered, "id") else {
        return Ok(0);
    };
    let Some(job) = read_job(store, user_id, id).await? else {
        return Ok(0);
    };
    if str_field(delivered, "_etag").is_some()
        && str_field(delivered, "_etag") != str_field(&job, "_etag")
    {
        return Ok(0);
    }
    if job.get("done") == Some(&Value::Bool(true)) {
        return Ok(0);
    }
    match str_field(&job, "job") {
        Some("post") => post_step(store, user_id, &job).await,
        Some("delete") => {
            let post_id = str_field(&job, "postId").unwrap_or_default().to_string();
            let places = batch.places(store).await?;
            delete_step(store, places, user_id, &post_id, Some(&job)).await
        }
        Some("rename") => {
            let Some(user) = live_user(store, user_id).await? else {
                return Ok(0);
            };
            let version = user
                .get("renameVersion")
                .and_then(Value::as_u64)
                .unwrap_or(0);
            let name = str_field(&user, "username").unwrap_or_default();
            rename_step(store, user_id, name, version, Some(&job)).await
        }
        Some("limit") => {
            let places = batch.places(store).await?;
            limit_step(store, places, user_id, &job).await
        }
        Some("erase") => erase_step(store, user_id, Some(&job)).await,
        Some("move") => relocation::step(store, &job, author_marks).await,
        _ => Ok(0),
    }
}

/// Whether new followers of `author` get a marker ([`LimitState::marks`]); `false` for an
/// author who is gone.
fn author_marks<'a>(
    store: &'a dyn Store,
    author: &'a str,
) -> futures::future::BoxFuture<'a, StoreResult<bool>> {
    Box::pin(async move {
        let Some(user) = live_user(store, author).await? else {
            return Ok(false);
        };
        Ok(limit_state(store, author, Some(&user)).await?.marks())
    })
}

async fn post_step(store: &dyn Store, author: &str, job: &Value) -> StoreResult<usize> {
    let (Some(post_id), Some(content)) = (str_field(job, "postId"), job.get("entry")) else {
        return Ok(0);
    };
    let cursor = str_field(job, "cursor");
    let (written, next) = fan_out_page(store, author, content, cursor).await?;
    let saved = save_job(
        store,
        author,
        Some(job),
        post_job(post_id, content, next.as_deref()),
    )
    .await?;
    Ok(written + usize::from(saved))
}

/// One page of followers switched to the side the author is crossing to: markers written, or
/// markers removed and the posts copied ([`BACKFILL_PAGE`] followers). The last page records
/// the crossing done (`merged` set to its target).
async fn limit_step(
    store: &dyn Store,
    places: &[Container],
    user_id: &str,
    job: &Value,
) -> StoreResult<usize> {
    let Some(target) = job.get("target").and_then(Value::as_bool) else {
        return Ok(0);
    };
    let Some(user) = live_user(store, user_id).await? else {
        return Ok(0);
    };
    let state = LimitState {
        merged: job.get("merged") == Some(&Value::Bool(true)),
        target: Some(target),
        cursor: str_field(job, "cursor").map(String::from),
        item: Some(job.clone()),
    };
    let q = Query::partition(user_id)
        .eq("type", FOLLOWER)
        .live()
        .limit(if target { PAGE } else { BACKFILL_PAGE })
        .continuation(state.cursor.clone());
    let mut written = 0;
    if target && state.cursor.is_none() {
        // Going over: their newest posts in the shared partition before the first marker.
        let name = str_field(&user, "username").unwrap_or_default();
        written += merged::copy_author(store, user_id, name).await?;
    }
    let page = retry(|| store.query(Container::Users, &q)).await?;
    for m in &page.items {
        if let Some(f) = str_field(m, REF_USER) {
            written += copy_or_mark(store, places, f, user_id, &user, &state).await?;
        }
    }
    if !target && page.continuation.is_none() {
        // Coming back: every follower holds the posts again; the shared copies go.
        written += merged::remove_author(store, user_id).await?;
    }
    let next = match &page.continuation {
        Some(c) => json!({
            "id": LIMIT_JOB, "job": "limit", "merged": state.merged, "target": target,
            "cursor": c,
        }),
        None => json!({ "id": LIMIT_JOB, "job": "limit", "merged": target, "done": true }),
    };
    let saved = save_job(store, user_id, Some(job), next).await?;
    Ok(written + usize::from(saved))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::domain::follows::MARKER_DATE;
    use crate::store::embedded::EmbeddedStore;

    /// A timeline following more authors over the fan-out limit than a trim reads at once still
    /// has its entries trimmed: the markers (newest first by their date) are not entries.
    #[tokio::test]
    async fn markers_filling_a_page_do_not_hide_the_entries_from_the_trim() {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(&dir.path().join("blog.db")).unwrap();
        let owner = "ana";
        for i in 0..TIMELINE_KEEP as u32 + PAGE {
            let marker = merge_marker(owner, &format!("author{i}"));
            assert_eq!(marker["creationDate"], MARKER_DATE);
            store
                .create(Container::Timelines, owner, marker)
                .await
                .unwrap();
        }
        let entries = TIMELINE_KEEP + 10;
        for i in 0..entries {
            let entry = json!({
                "id": timeline_id(&format!("post{i:04}")),
                "type": TIMELINE,
                "userId": owner,
                REF_USER: "bob",
                "creationDate": format!("2026-01-01T00:{:02}:{:02}.000Z", i / 60, i % 60),
            });
            store
                .create(Container::Timelines, owner, entry)
                .await
                .unwrap();
        }
        assert_eq!(trim(&store, owner).await.unwrap(), entries - TIMELINE_KEEP);
        let left = Query::partition(owner).eq("type", TIMELINE).not_true(MERGE);
        assert_eq!(
            store.count(Container::Timelines, &left).await.unwrap(),
            TIMELINE_KEEP as u64
        );
    }

    #[test]
    fn the_limit_has_hysteresis() {
        let l = 10_000;
        assert!(!merges(l, l), "at the limit: still copied");
        assert!(merges(l + 1, l));
        assert!(!unmerges(l, l), "back at the limit: still merged");
        assert!(!unmerges(8_000, l), "at 80%: still merged");
        assert!(unmerges(7_999, l));
        assert!(
            !unmerges(0, 0) && merges(1, 0),
            "a limit of 0 copies no one"
        );
    }
}
