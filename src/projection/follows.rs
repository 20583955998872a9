//! Follows in the main lane (`crate::domain::follows`): what a follow or a user change implies
//! that readers of `/followers` and the counters wait on. Timelines are not here: the timeline
//! lane ([`super::timeline`]) keeps them, so that no fan-out holds a follow up.
//!
//! - A `following` edge changed (users feed): read it as it is now. Live: write its mirror in the
//!   followee's partition. Marked deleted (or one of the two users gone): remove the mirror. Then
//!   recount both users' counters. A stale or repeated change re-reads the edge, so it writes the
//!   present state whatever order the changes come in.
//! - A user changed: their counters are recounted (a recount's patch is conditional on the
//!   user's version; a user changed meanwhile comes through the feed again).
//! - A user erased: their own edges and the edges others hold to them are marked (whose
//!   projection then removes the mirrors, and the timeline lane the timelines), their mirrors
//!   deleted.

use std::collections::BTreeSet;

use serde_json::Value;

use super::change::{Change, ChangeKind, Item};
use super::engine::{
    apply_one, delete_matching, failed, live_user, newest, read_not_older, sweep, wrote, Sweep,
    Unit, CONCURRENCY, PAGE,
};
use super::write::{content, Write};
use crate::domain::follows::{
    edge_tombstone_ops, follower_id, following_id, Edge, FollowKind, FOLLOWER, FOLLOWING, REF_USER,
};
use crate::domain::is_deleted;
use crate::domain::Meta;
use crate::store::{retry, Container, PatchOp, Query, Store, StoreResult};

/// Follow mirrors and counts, main lane.
pub const UNIT: Unit = Unit {
    name: "follows",
    feed: Container::Users,
    watches: &[ChangeKind::Following, ChangeKind::User],
    reads: &[Container::Users],
    writes: &[Container::Users],
    project: |store, changes| {
        Box::pin(async move {
            project_users(store, changes)
                .await
                .map(wrote)
                .map_err(|e| failed(Container::Users, changes, e))
        })
    },
};

/// The users feed: the edges and users in `changes`. Returns the writes made.
pub async fn project_users(store: &dyn Store, changes: &[&Change]) -> StoreResult<usize> {
    let mut written = 0;
    let mut recount_users: BTreeSet<String> = BTreeSet::new();
    let mut seen = BTreeSet::new();
    for c in changes {
        match &c.item {
            Item::Following(e) => {
                let (f, x) = (e.user_id.as_str(), e.ref_user_id.as_str());
                if !seen.insert((f, x)) {
                    continue;
                }
                written += edge_changed(store, changes, f, x).await?;
                recount_users.insert(f.into());
                recount_users.insert(x.into());
            }
            Item::User(u) => {
                recount_users.insert(u.user_id.clone());
            }
            _ => {}
        }
    }
    for u in &recount_users {
        written += set_follow_counts(store, u).await?;
    }
    Ok(written)
}

/// The newest delivered version of the edge `f` → `x` among `changes`.
pub(super) fn newest_edge<'a>(changes: &[&'a Change], id: &str, f: &str) -> Option<&'a Value> {
    newest(changes, |c| match &c.item {
        Item::Following(e) | Item::Follower(e) => e.id == id && e.user_id == f,
        _ => false,
    })
}

/// Project the edge `f` → `x` as it is now: its mirror written or removed.
async fn edge_changed(
    store: &dyn Store,
    changes: &[&Change],
    f: &str,
    x: &str,
) -> StoreResult<usize> {
    let id = following_id(x);
    let changed = newest_edge(changes, &id, f);
    let current = read_not_older(store, Container::Users, f, &id, changed).await?;
    let mut written = 0;
    let live = current
        .as_ref()
        .and_then(|c| Some((c, Edge::read(c)?)))
        .filter(|(_, e)| e.is_live(FollowKind::Following));
    if let Some((stored_edge, e)) = live {
        let follower = live_user(store, f).await?;
        let followee = live_user(store, x).await?;
        match (follower, followee) {
            (Some(follower), Some(_)) => {
                let follower = super::engine::as_user(&follower)?;
                let name = follower.username.as_str();
                // Left alone when it holds this already (a redelivered batch): the timeline lane
                // backfills on the edge's change as on the mirror's, whichever finds both.
                let mirror =
                    Edge::new(FollowKind::Follower, x, f, name, &e.creation_date).to_item();
                let mirror_id = follower_id(f);
                let stored = retry(|| store.read(Container::Users, x, &mirror_id)).await?;
                if stored.as_ref().map(content) == Some(mirror.clone()) {
                    return Ok(0);
                }
                apply_one(store, &Write::upsert(Container::Users, x, mirror)).await?;
                return Ok(1);
            }
            // One of the two is gone (erased, or the follow raced an erasure): so is the edge.
            _ => {
                apply_one(
                    store,
                    &Write::patch(Container::Users, f, id.clone(), edge_tombstone_ops())
                        .if_match(Meta::of(stored_edge).etag),
                )
                .await?;
                written += 1;
            }
        }
    }
    apply_one(store, &Write::delete(Container::Users, x, follower_id(f))).await?;
    Ok(written + 1)
}

async fn count_edges(store: &dyn Store, user_id: &str, kind: &str) -> StoreResult<u64> {
    let q = Query::partition(user_id).eq("type", kind).live();
    retry(|| store.count(Container::Users, &q)).await
}

/// Set `user_id`'s `followerCount` and `followingCount` to the numbers of their live edges, if
/// they differ, and only if the user is still at the version read. The timeline lane reads the
/// count this writes to decide whether the user's posts are copied or merged.
pub async fn set_follow_counts(store: &dyn Store, user_id: &str) -> StoreResult<usize> {
    let Some(user) = live_user(store, user_id).await? else {
        return Ok(0);
    };
    let following = count_edges(store, user_id, FOLLOWING).await?;
    let followers = count_edges(store, user_id, FOLLOWER).await?;
    let mut ops = Vec::new();
    for (field, n) in [("followingCount", following), ("followerCount", followers)] {
        if user.get(field).and_then(Value::as_u64) != Some(n) {
            ops.push(PatchOp::set(&format!("/{field}"), n));
        }
    }
    if ops.is_empty() {
        return Ok(0);
    }
    let patch =
        Write::patch(Container::Users, user_id, user_id, ops).if_match(Meta::of(&user).etag);
    apply_one(store, &patch).await?;
    Ok(1)
}

/// Mark every live edge `q` finds in `users`, a page at a time. Returns how many.
async fn mark_edges(store: &dyn Store, q: Query) -> StoreResult<usize> {
    let s = Sweep {
        container: Container::Users,
        query: q.live().limit(PAGE),
        keep: 0,
        pages: usize::MAX,
        concurrency: CONCURRENCY,
        what: "marked deleted",
    };
    let marked = sweep(store, s, |e| {
        let (pk, id) = (Meta::of(e).user_id?, Meta::of(e).id?);
        (!is_deleted(e)).then(|| Write::patch(Container::Users, pk, id, edge_tombstone_ops()))
    })
    .await?;
    Ok(marked.0)
}

/// An erased user: whom they follow and who follows them are unfollowed (the marks' own
/// projections clean the mirrors and, in the timeline lane, the timelines), their mirrors
/// deleted. Their own timeline is the timeline lane's (`super::timeline::erase_step`).
pub async fn erase_edges(store: &dyn Store, user_id: &str) -> StoreResult<usize> {
    let mut written = mark_edges(store, Query::partition(user_id).eq("type", FOLLOWING)).await?;
    written += mark_edges(
        store,
        Query::cross_partition()
            .eq("type", FOLLOWING)
            .eq(REF_USER, user_id),
    )
    .await?;
    loop {
        let q = Query::partition(user_id).eq("type", FOLLOWER);
        let (n, more) = delete_matching(store, Container::Users, q, usize::MAX).await?;
        written += n;
        if !more {
            return Ok(written);
        }
    }
}
