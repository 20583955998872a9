//! `handler verify [--repair]` for follows and timelines (`crate::domain::follows`).
//!
//! The source of truth is each user's live `following` edges; from them, the users and the post
//! copies in `users` follow (the timelines are in `timelines`, and, until the timeline lane has
//! moved them, `users` may still hold some an earlier release wrote: both are read then, and
//! of an item in both the one in `timelines` counts):
//! - each edge names a live user, by their current name, and has its mirror (`follower`, by the
//!   follower's current name) in the followee's partition; each mirror has its edge;
//! - `followerCount` / `followingCount` are the numbers of live mirrors / edges;
//! - a timeline holds the newest posts of the users followed (the [`TIMELINE_SIZE`] newest of
//!   their post copies together, by their current name; older ones may have been trimmed), and
//!   no entry whose post is gone or whose author is not followed; an entry holds the post's
//!   rarely-changing part (no counts: entries an earlier release wrote with counts are not
//!   drift); for a merged followee (as their `timelineJob-limit` item records), a merge marker
//!   instead, and no marker for anyone else;
//! - each user is on the side of the fan-out limit their follower count calls for, with
//!   hysteresis, by the limit recorded in the store (`settings.timeline` in `leases`; verify and
//!   repair never use the process's own setting over it). A crossing under way, and the
//!   timelines of its followers, is lag: it is not judged until it is done.
//!
//! - a merged author's [`TIMELINE_SIZE`] newest posts are in the shared partition (`feed`,
//!   partition `merged`), as their copies are, by their current name, and no post of an author
//!   who is not merged (`projection::merged`).
//!
//! The timeline lane's job items (`type: timelineJob`) are its own bookkeeping, not drift.
//!
//! Users are read a page at a time and each one's partition is checked on its own, so memory
//! stays bounded by the largest partition. Repair replays edges and users through the
//! projections (`crate::projection::timeline`), and writes what they do not rewrite: an edge's
//! name, a stale or extra entry, an extra mirror, each re-read right before it is written
//! (`fresh`), so a repair never writes from a stale read.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use super::lag::{Touched, Window};
use crate::domain::follows::{
    follower_id, following_id, marker_id, Edge, FollowKind, LimitJob, MergeMarker, MergedPost,
    TimelineEntry, TimelineItem, TIMELINE, TIMELINE_SIZE,
};
use crate::domain::{is_deleted, is_live, Kind, Post, User};
use crate::projection;
use crate::projection::engine as apply;
use crate::projection::write::Write;
use crate::store::{retry, Container, Order, PatchOp, Query, Store, StoreResult};

/// Items per page of the traversal's queries.
const PAGE: u32 = 100;
/// Examples kept per kind of drift for the report.
const EXAMPLES: usize = 5;

/// What the check found.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Check {
    /// Users, edges, mirrors and timeline entries looked at.
    pub checked: u64,
    /// Drift by kind.
    pub drift: BTreeMap<&'static str, u64>,
    pub examples: BTreeMap<&'static str, Vec<String>>,
    /// `following` edges to project again (mirror or backfill missing, followee gone).
    replay_edges: Vec<Value>,
    /// Merged authors whose items in the shared partition are copied again: (author, name).
    merged_sync: Vec<(String, String)>,
    /// Users projected again through the timeline lane (a crossing of the limit owed).
    replay_users: Vec<Value>,
    /// Users whose counters are recounted.
    recount: BTreeSet<String>,
    /// Writes made as they are.
    writes: Vec<Write>,
    /// Findings left out as lag: the user's follows or timeline had a change in flight, or
    /// changing, at every look (`super::lag`); not drift, and not repaired.
    pub lagging: u64,
    /// Whether lag was judged by the lanes' positions (`super::lag`); without them, by time alone.
    pub lag_known: bool,
    /// The users whose partitions (and posts) the check read: the user, whom they follow, who
    /// follows them.
    sources: BTreeSet<String>,
}

impl Check {
    pub fn is_clean(&self) -> bool {
        self.drift.is_empty()
    }

    /// Findings, one per drifted item.
    pub fn drifted(&self) -> u64 {
        self.drift.values().sum()
    }

    /// Take in the findings and repairs of another user's check.
    fn absorb(&mut self, other: Check) {
        for (kind, n) in other.drift {
            *self.drift.entry(kind).or_default() += n;
        }
        for (kind, examples) in other.examples {
            let ex = self.examples.entry(kind).or_default();
            let room = EXAMPLES.saturating_sub(ex.len());
            ex.extend(examples.into_iter().take(room));
        }
        self.replay_edges.extend(other.replay_edges);
        self.merged_sync.extend(other.merged_sync);
        self.replay_users.extend(other.replay_users);
        self.recount.extend(other.recount);
        self.writes.extend(other.writes);
    }

    fn found(&mut self, kind: &'static str, what: String) {
        *self.drift.entry(kind).or_default() += 1;
        let examples = self.examples.entry(kind).or_default();
        if examples.len() < EXAMPLES {
            examples.push(what);
        }
    }

    /// The lines of the report.
    pub fn render(&self) -> String {
        let mut out = format!("follows and timelines: {} items checked", self.checked);
        if self.lagging > 0 {
            out.push_str(&format!(
                ", {} lagging (a change still on its way through the change feed at every look; \
                 not drift)",
                self.lagging
            ));
        }
        if self.is_clean() {
            out.push_str(", no drift\n");
            return out;
        }
        out.push('\n');
        for (kind, n) in &self.drift {
            out.push_str(&format!("  {kind}: {n}\n"));
            for e in &self.examples[kind] {
                out.push_str(&format!("    {e}\n"));
            }
        }
        out
    }
}

/// Check every user's follows and timeline. Each look runs inside a [`Window`] (`super::lag`):
/// a user whose check read a partition (theirs, a followee's, a follower's) or an author with a
/// change in flight or made during the look is lagging at that look. What is wrong is looked at
/// again, `settle` later, up to [`LATER_LOOKS`] times, and reported as drift at the first look
/// that finds it wrong and not lagging; still lagging at the last look, it is counted as lag
/// ([`Check::lagging`]), and a repair leaves it to the change feed. Where the lanes' positions
/// are not known (the Functions host), what is still wrong `settle` later is drift. `settle`
/// zero judges the first look alone.
pub async fn verify(store: &dyn Store, settle: Duration) -> StoreResult<Check> {
    let window = Window::open(store).await?;
    let (mut check, suspects) = check_all(store).await?;
    let touched = window.close(store).await?;
    check.lag_known = touched.known();
    let mut pending = Vec::new();
    for (user, one) in suspects {
        if !settle.is_zero() {
            pending.push((user, one));
        } else if lagging(&touched, &user, &one) {
            check.lagging += one.drifted();
        } else {
            check.absorb(one);
        }
    }
    for _ in 0..LATER_LOOKS {
        if pending.is_empty() {
            break;
        }
        tokio::time::sleep(settle).await;
        let limit = projection::timeline::limit_to_judge_by(store).await?;
        let moving = projection::relocation::moving(store).await?;
        let window = Window::open(store).await?;
        let mut looked = Vec::new();
        for (user, _) in &pending {
            let Some(user) = live_user(store, user).await? else {
                continue;
            };
            let mut one = Check::default();
            check_user(store, &user, limit, moving, &mut one).await?;
            if !one.is_clean() {
                looked.push((user.user.user_id, one));
            }
        }
        let touched = window.close(store).await?;
        pending = Vec::new();
        for (user, one) in looked {
            if touched.known() && lagging(&touched, &user, &one) {
                pending.push((user, one));
            } else {
                check.absorb(one);
            }
        }
    }
    check.lagging += pending.iter().map(|(_, one)| one.drifted()).sum::<u64>();
    Ok(check)
}

/// Looks after the first at what drifted, each `settle` after the one before.
const LATER_LOOKS: usize = super::verify::LATER_LOOKS;

fn lagging(touched: &Touched, user: &str, one: &Check) -> bool {
    let users = std::iter::once(user).chain(one.sources.iter().map(String::as_str));
    touched.users_lagging(users)
}

/// Every user's check: the counts of all, and each user whose check found something (their id
/// and check).
async fn check_all(store: &dyn Store) -> StoreResult<(Check, Vec<(String, Check)>)> {
    let mut check = Check::default();
    let mut suspects = Vec::new();
    let limit = projection::timeline::limit_to_judge_by(store).await?;
    let moving = projection::relocation::moving(store).await?;
    let mut q = Query::cross_partition()
        .of_kind(Kind::User)
        .live()
        .limit(PAGE);
    loop {
        let page = retry(|| store.query(Container::Users, &q)).await?;
        for item in &page.items {
            let Some(user) = Live::read(item) else {
                continue;
            };
            let mut one = Check::default();
            check_user(store, &user, limit, moving, &mut one).await?;
            check.checked += one.checked;
            if !one.is_clean() {
                suspects.push((user.user.user_id, one));
            }
        }
        match page.continuation {
            Some(t) => q.continuation = Some(t),
            None => return Ok((check, suspects)),
        }
    }
}

/// Every live item of `type` `kind` in `user`'s partition of `c`.
async fn all_of(
    store: &dyn Store,
    c: Container,
    user: &str,
    kind: &str,
) -> StoreResult<Vec<Value>> {
    let mut q = Query::partition(user).eq("type", kind).live().limit(PAGE);
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

/// What any stored item carries: its id.
#[derive(Deserialize)]
struct Id {
    id: String,
}

/// A live user: the item as stored (what the timeline lane reads its side of the limit from,
/// and replays) and as read.
struct Live {
    item: Value,
    user: User,
}

impl Live {
    fn read(item: &Value) -> Option<Live> {
        let user = User::deserialize(item).ok()?;
        Some(Live {
            item: item.clone(),
            user,
        })
    }
}

async fn live_user(store: &dyn Store, id: &str) -> StoreResult<Option<Live>> {
    let user = retry(|| store.read(Container::Users, id, id)).await?;
    Ok(user
        .filter(|u| is_live(u, Kind::User))
        .as_ref()
        .and_then(Live::read))
}

/// Every live edge of `kind` in `user`'s partition, each as read and as stored (what a replay
/// hands the projections).
async fn edges_of(
    store: &dyn Store,
    user: &str,
    kind: FollowKind,
) -> StoreResult<Vec<(Edge, Value)>> {
    let items = all_of(store, Container::Users, user, kind.as_str()).await?;
    Ok(items
        .into_iter()
        .filter_map(|i| Some((Edge::read(&i).filter(|e| e.is_live(kind))?, i)))
        .collect())
}

/// Whether the edge `id` in `owner`'s partition is a live `following` edge.
async fn follows(store: &dyn Store, owner: &str, id: &str) -> StoreResult<bool> {
    let edge = retry(|| store.read(Container::Users, owner, id)).await?;
    Ok(edge
        .and_then(|e| Edge::read(&e))
        .is_some_and(|e| e.is_live(FollowKind::Following)))
}

/// `user`'s timeline items, each with the container it is in and as read (`Err`: what it does
/// not read as): those in `timelines`, and while the move is not done (`moving`) those in
/// `users` that `timelines` does not hold too.
async fn timeline_items(
    store: &dyn Store,
    user: &str,
    moving: bool,
) -> StoreResult<Vec<(Container, String, Result<TimelineItem, String>)>> {
    let read = |c: Container, items: Vec<Value>| {
        items.into_iter().filter_map(move |i| {
            let id = Id::deserialize(&i).ok()?.id;
            Some((c, id, TimelineItem::read(&i)))
        })
    };
    let mut items: Vec<_> = read(
        Container::Timelines,
        all_of(store, Container::Timelines, user, TIMELINE).await?,
    )
    .collect();
    if moving {
        let held: BTreeSet<String> = items.iter().map(|(_, id, _)| id.clone()).collect();
        let old = all_of(store, Container::Users, user, TIMELINE).await?;
        items.extend(read(Container::Users, old).filter(|(_, id, _)| !held.contains(id)));
    }
    Ok(items)
}

/// The newest live posts of `author` (their copies in `users`, at most [`TIMELINE_SIZE`]), by
/// the name `name`.
async fn newest_posts(store: &dyn Store, author: &str, name: &str) -> StoreResult<Vec<Post>> {
    let q = Query::partition(author)
        .of_kind(Kind::Post)
        .live()
        .order_by_creation(Order::Desc)
        .limit(TIMELINE_SIZE as u32);
    let copies = retry(|| store.query(Container::Users, &q)).await?;
    Ok(copies
        .items
        .iter()
        .filter_map(|c| Post::deserialize(c).ok())
        .map(|mut p| {
            p.user_username = name.to_string();
            p
        })
        .collect())
}

async fn check_user(
    store: &dyn Store,
    live: &Live,
    limit: u64,
    moving: bool,
    check: &mut Check,
) -> StoreResult<()> {
    let user = &live.user;
    let u = user.user_id.as_str();
    check.checked += 1;
    check.sources.insert(u.to_string());
    let edges = edges_of(store, u, FollowKind::Following).await?;
    let mirrors = edges_of(store, u, FollowKind::Follower).await?;
    let mut markers = Vec::new();
    let mut entries = Vec::new();
    for (c, id, item) in timeline_items(store, u, moving).await? {
        match item {
            Ok(TimelineItem::Marker(m)) => markers.push((c, m)),
            Ok(TimelineItem::Entry(e)) => entries.push((c, id, Some(e))),
            Err(_) => entries.push((c, id, None)),
        }
    }
    let mut marked: BTreeMap<String, Container> = markers
        .iter()
        .map(|(c, m)| (m.ref_user_id.clone(), *c))
        .collect();
    check.checked += markers.len() as u64;
    check.checked += (edges.len() + mirrors.len() + entries.len()) as u64;

    // Counters.
    if user.following_count != edges.len() as u64 || user.follower_count != mirrors.len() as u64 {
        check.found("counter", format!("users/{u}/{u}"));
        check.recount.insert(u.to_string());
    }
    // Their side of the fan-out limit.
    let followers = mirrors.len() as u64;
    let state = projection::timeline::limit_state(store, u, Some(&live.item)).await?;
    let side = state.side();
    if (!side && projection::timeline::merges(followers, limit))
        || (side && projection::timeline::unmerges(followers, limit))
    {
        check.found(
            "fan-out limit crossing owed",
            format!("users/{u}/{u} ({followers} followers, limit {limit})"),
        );
        check.replay_users.push(live.item.clone());
    }
    if state.target.is_none() {
        check_merged(store, u, &user.username, state.merged, check).await?;
    }

    // Edges: a live followee by their current name, with a mirror by this user's current name;
    // their newest posts in the timeline.
    let mut followed: BTreeMap<String, String> = BTreeMap::new();
    let mut wanted: BTreeMap<String, Post> = BTreeMap::new();
    for (e, stored) in &edges {
        let x = e.ref_user_id.as_str();
        check.sources.insert(x.to_string());
        let where_ = format!("users/{u}/{}", following_id(x));
        let Some(followee) = live_user(store, x).await? else {
            check.found("edge to an erased user", where_);
            check.replay_edges.push(stored.clone());
            continue;
        };
        let name = followee.user.username.clone();
        if e.user_username != name {
            check.found("edge name", where_.clone());
            check.writes.push(Write::Patch {
                container: Container::Users,
                pk: u.into(),
                id: following_id(x),
                ops: vec![PatchOp::set("/userUsername", name.as_str())],
                if_match: None,
            });
        }
        let mirror_id = follower_id(u);
        let mirror = retry(|| store.read(Container::Users, x, &mirror_id)).await?;
        let mirror_ok = mirror
            .and_then(|m| Edge::read(&m))
            .is_some_and(|m| m.is_live(FollowKind::Follower) && m.user_username == user.username);
        if !mirror_ok {
            check.found(
                "mirror missing or stale",
                format!("users/{x}/{}", follower_id(u)),
            );
            check.replay_edges.push(stored.clone());
        }
        followed.insert(x.to_string(), name.clone());
        let state = projection::timeline::limit_state(store, x, Some(&followee.item)).await?;
        if state.target.is_some() {
            // A crossing under way: its markers and copies are lag, not drift.
            marked.remove(x);
            continue;
        }
        if state.merged {
            if marked.remove(x).is_none() {
                check.found(
                    "timeline marker missing",
                    format!("timelines/{u}/{}", marker_id(x)),
                );
                check.writes.push(Write::Upsert {
                    container: Container::Timelines,
                    pk: u.into(),
                    item: crate::domain::to_value(&MergeMarker::new(u, x)),
                });
            }
            continue;
        }
        for p in newest_posts(store, x, &name).await? {
            wanted.insert(p.id.clone(), p);
        }
    }
    // Markers for anyone not followed, or not merged.
    for (x, c) in marked {
        check.found(
            "timeline marker extra",
            format!("{}/{u}/{}", c.name(), marker_id(&x)),
        );
        check.writes.push(delete_entry(c, u, &marker_id(&x)));
    }

    // Mirrors: each has its edge.
    for (m, _) in &mirrors {
        let f = m.ref_user_id.as_str();
        check.sources.insert(f.to_string());
        if !follows(store, f, &following_id(u)).await? {
            check.found(
                "mirror without its edge",
                format!("users/{u}/{}", follower_id(f)),
            );
            check.writes.push(Write::Delete {
                container: Container::Users,
                pk: u.into(),
                id: follower_id(f),
            });
        }
    }

    // Timeline entries: of a followed author's live post, as the post is now.
    let mut present = BTreeSet::new();
    for (c, id, entry) in &entries {
        let where_ = format!("{}/{u}/{id}", c.name());
        let Some(entry) = entry else {
            check.found("timeline entry extra", where_);
            check.writes.push(delete_entry(*c, u, id));
            continue;
        };
        let shown = &entry.post;
        present.insert(shown.id.clone());
        check.sources.insert(shown.user_id.clone());
        let post = retry(|| store.read(Container::Posts, &shown.id, &shown.id)).await?;
        let post = post
            .filter(|p| !is_deleted(p))
            .and_then(|p| Post::deserialize(&p).ok());
        let author_name = followed.get(&shown.user_id);
        let (Some(mut post), Some(name)) = (post, author_name) else {
            check.found("timeline entry extra", where_);
            check.writes.push(delete_entry(*c, u, id));
            continue;
        };
        post.user_username = name.clone();
        let should_be = TimelineEntry::new(u, &post);
        if entry.post != should_be.post {
            check.found("timeline entry stale", where_);
            // Written to `timelines`; one still in `users` then goes with the move.
            check.writes.push(Write::Upsert {
                container: Container::Timelines,
                pk: u.into(),
                item: should_be.to_item(),
            });
        }
    }
    // Only the newest posts across the authors followed need an entry: a timeline is trimmed to
    // its newest entries, so an older post's entry may be gone.
    let mut wanted: Vec<Post> = wanted.into_values().collect();
    wanted.sort_by(|a, b| (&b.creation_date, &b.id).cmp(&(&a.creation_date, &a.id)));
    wanted.truncate(TIMELINE_SIZE);
    for p in &wanted {
        if !present.contains(&p.id) {
            check.found(
                "timeline entry missing",
                format!("timelines/{u}/timeline-{}", p.id),
            );
            check.writes.push(Write::Upsert {
                container: Container::Timelines,
                pk: u.into(),
                item: TimelineEntry::new(u, p).to_item(),
            });
        }
    }
    Ok(())
}

/// A merged author's newest posts in the shared partition (`projection::merged`), as their
/// post copies are now, by their current name; nothing of an author who is not merged.
async fn check_merged(
    store: &dyn Store,
    u: &str,
    name: &str,
    merged: bool,
    check: &mut Check,
) -> StoreResult<()> {
    use projection::merged as shared;
    let q = shared::of_author(u).limit(TIMELINE_SIZE as u32 + shared::PAGE);
    let held = retry(|| store.query(Container::Feed, &q)).await?.items;
    check.checked += held.len() as u64;
    let mut wanted: BTreeMap<String, MergedPost> = BTreeMap::new();
    if merged {
        for p in newest_posts(store, u, name).await? {
            wanted.insert(p.id.clone(), MergedPost::new(&p));
        }
    }
    let mut drifted = false;
    for item in &held {
        let Ok(Id { id }) = Id::deserialize(item) else {
            continue;
        };
        let id = id.as_str();
        match wanted.remove(id) {
            Some(w) if MergedPost::deserialize(item).is_ok_and(|m| m == w) => {}
            Some(_) => {
                check.found("merged copy stale", format!("feed/merged/{id}"));
                drifted = true;
            }
            None => {
                check.found("merged copy extra", format!("feed/merged/{id}"));
                check.writes.push(Write::Delete {
                    container: Container::Feed,
                    pk: shared::PARTITION.into(),
                    id: id.to_string(),
                });
            }
        }
    }
    for id in wanted.keys() {
        check.found("merged copy missing", format!("feed/merged/{id}"));
        drifted = true;
    }
    if drifted {
        check.merged_sync.push((u.to_string(), name.to_string()));
    }
    Ok(())
}

/// The removal of timeline item `id` of `user`'s partition of `c`.
fn delete_entry(c: Container, user: &str, id: &str) -> Write {
    Write::Delete {
        container: c,
        pk: user.into(),
        id: id.into(),
    }
}

/// What a repair did.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Mended {
    pub replayed: usize,
    pub written: usize,
    pub failed: Vec<String>,
}

/// Write the fixes `check` found: edges replayed through the projection, counters recounted,
/// the rest written as found.
pub async fn repair(store: &dyn Store, check: &Check) -> Mended {
    let mut done = Mended::default();
    if !check.replay_edges.is_empty() {
        match projection::project(store, Container::Users, &check.replay_edges).await {
            Ok(_) => done.replayed += check.replay_edges.len(),
            Err(e) => done.failed.push(e.to_string()),
        }
    }
    for (u, name) in &check.merged_sync {
        match projection::merged::copy_author(store, u, name).await {
            Ok(n) => done.written += n,
            Err(e) => done.failed.push(format!("feed/merged ({u}): {e}")),
        }
    }
    // A crossing owed: started by the timeline lane, which then carries it out a step per change
    // of its job item (projected here until done, so the check after the repair sees it done).
    for user in &check.replay_users {
        match replay_user(store, user).await {
            Ok(n) => {
                done.replayed += 1;
                done.written += n;
            }
            Err(e) => done.failed.push(e.to_string()),
        }
    }
    for w in &check.writes {
        let written = match fresh(store, w).await {
            Ok(Some(w)) => apply::apply_one(store, &w).await.map(|()| 1),
            Ok(None) => Ok(0),
            Err(e) => Err(e),
        };
        match written {
            Ok(n) => done.written += n,
            Err(e) => done.failed.push(format!("{}: {e}", w.target())),
        }
    }
    for u in &check.recount {
        match projection::timeline::recount(store, u).await {
            Ok(n) => done.written += n,
            Err(e) => done.failed.push(format!("users/{u}/{u}: {e}")),
        }
    }
    done
}

/// The fix `w` as it should be written now, or `None` when it is no longer wanted: what the check
/// read is read again right before the write, so a repair never writes from a stale read (a post
/// deleted, an author renamed, unfollowed or merged, an edge made since the check). An entry is
/// written from the post and the author's name as they are now; a deletion is skipped when what
/// made the item extra has changed.
async fn fresh(store: &dyn Store, w: &Write) -> StoreResult<Option<Write>> {
    let users = Container::Users;
    match w {
        Write::Upsert { pk: u, item, .. } => match TimelineItem::read(item) {
            Ok(TimelineItem::Marker(m)) => Ok(merged_followee(store, u, &m.ref_user_id)
                .await?
                .then(|| w.clone())),
            Ok(TimelineItem::Entry(e)) => {
                Ok(wanted_entry(store, u, &e.post.id)
                    .await?
                    .map(|post| Write::Upsert {
                        container: Container::Timelines,
                        pk: u.clone(),
                        item: TimelineEntry::new(u, &post).to_item(),
                    }))
            }
            Err(_) => Ok(None),
        },
        Write::Patch { pk: u, id, .. } => {
            let Some(x) = id.strip_prefix(&following_id("")) else {
                return Ok(Some(w.clone()));
            };
            if !follows(store, u, id).await? {
                return Ok(None);
            }
            Ok(live_user(store, x).await?.map(|followee| Write::Patch {
                container: users,
                pk: u.clone(),
                id: id.clone(),
                ops: vec![PatchOp::set(
                    "/userUsername",
                    followee.user.username.as_str(),
                )],
                if_match: None,
            }))
        }
        Write::Delete {
            container,
            pk: u,
            id,
            ..
        } => {
            if let Some(f) = id.strip_prefix(&follower_id("")) {
                // A mirror goes only while its edge is still missing.
                let has_edge = follows(store, f, &following_id(u)).await?;
                return Ok((!has_edge).then(|| w.clone()));
            }
            let Some(item) = retry(|| store.read(*container, u, id)).await? else {
                return Ok(None);
            };
            if is_deleted(&item) {
                return Ok(None);
            }
            let still_wanted = match TimelineItem::read(&item) {
                Ok(TimelineItem::Marker(m)) => merged_followee(store, u, &m.ref_user_id).await?,
                Ok(TimelineItem::Entry(e)) => wanted_entry(store, u, &e.post.id).await?.is_some(),
                Err(_) => false,
            };
            Ok((!still_wanted).then(|| w.clone()))
        }
    }
}

/// Whether `u` follows `x` now, and `x` is merged (their followers hold a marker for them).
async fn merged_followee(store: &dyn Store, u: &str, x: &str) -> StoreResult<bool> {
    if !follows(store, u, &following_id(x)).await? {
        return Ok(false);
    }
    Ok(match live_user(store, x).await? {
        Some(followee) => settled_side(store, x, &followee).await? == Some(true),
        None => false,
    })
}

/// The post `post_id` as `u`'s timeline should show it now (by its author's current name), if
/// it should: the post is live, and `u` follows its author, who is live and not merged.
async fn wanted_entry(store: &dyn Store, u: &str, post_id: &str) -> StoreResult<Option<Post>> {
    let post = retry(|| store.read(Container::Posts, post_id, post_id)).await?;
    let Some(mut post) = post
        .filter(|p| !is_deleted(p))
        .and_then(|p| Post::deserialize(&p).ok())
    else {
        return Ok(None);
    };
    let author = post.user_id.clone();
    if !follows(store, u, &following_id(&author)).await? {
        return Ok(None);
    }
    let Some(a) = live_user(store, &author).await? else {
        return Ok(None);
    };
    match settled_side(store, &author, &a).await? {
        Some(false) => {
            post.user_username = a.user.username;
            Ok(Some(post))
        }
        _ => Ok(None),
    }
}

/// Whether author `x` is merged (`Some(true)`) or copied (`Some(false)`), as their limit job
/// records it; `None` while a crossing is under way (the timeline lane writes the markers and
/// copies then, and a repair leaves them to it).
async fn settled_side(store: &dyn Store, x: &str, author: &Live) -> StoreResult<Option<bool>> {
    let state = projection::timeline::limit_state(store, x, Some(&author.item)).await?;
    Ok(state.target.is_none().then_some(state.merged))
}

/// Project `user` through the timeline lane, then each change of their limit job item until the
/// crossing it starts is done.
async fn replay_user(store: &dyn Store, user: &Value) -> Result<usize, String> {
    use projection::{project_lane, Lane};
    let u = User::deserialize(user)
        .map_err(|e| format!("a stored user does not read as one: {e}"))?
        .user_id;
    let mut written = project_lane(
        store,
        Lane::Timeline,
        Container::Users,
        std::slice::from_ref(user),
    )
    .await
    .map_err(|e| e.to_string())?
    .writes;
    let mut last_etag: Option<String> = None;
    loop {
        let job = retry(|| store.read(Container::Users, &u, projection::timeline::LIMIT_JOB))
            .await
            .map_err(|e| e.to_string())?;
        let Some(job) = job else {
            return Ok(written);
        };
        let state = LimitJob::deserialize(&job).unwrap_or_default();
        if state.target.is_none() {
            return Ok(written);
        }
        // A step that did not move the job on (its user gone, say) ends the replay.
        if state.etag.is_some() && state.etag == last_etag {
            return Ok(written);
        }
        last_etag = state.etag;
        written += project_lane(store, Lane::Timeline, Container::Users, &[job])
            .await
            .map_err(|e| e.to_string())?
            .writes;
    }
}

/// A check, and with `--repair` the repair and the check after it.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub before: Check,
    pub repair: Option<(Mended, Check)>,
}

impl Outcome {
    /// The state the database was left in.
    pub fn last(&self) -> &Check {
        self.repair.as_ref().map_or(&self.before, |(_, c)| c)
    }

    pub fn render(&self) -> String {
        let mut out = self.before.render();
        if let Some((done, after)) = &self.repair {
            out.push_str(&format!(
                "repair: {} follow edges replayed through the projections, {} items written\n",
                done.replayed, done.written
            ));
            for f in &done.failed {
                out.push_str(&format!("  not repaired: {f}\n"));
            }
            out.push_str("after repair: ");
            out.push_str(&after.render());
        }
        out
    }
}

/// Check, and with `repair` mend and check again.
pub async fn verify_and_repair(
    store: &dyn Store,
    repair: bool,
    settle: Duration,
) -> StoreResult<Outcome> {
    let before = verify(store, settle).await?;
    let repair = if repair && !before.is_clean() {
        let done = self::repair(store, &before).await;
        let after = verify(store, settle).await?;
        Some((done, after))
    } else {
        None
    };
    Ok(Outcome { before, repair })
}
