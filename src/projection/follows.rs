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

use super::apply;
use super::gather;
use super::plan::{str_field, Write};
use crate::domain::follows::{
    edge, edge_tombstone_ops, follower_id, following_id, is_live_of, FOLLOWER, FOLLOWING, REF_USER,
};
use crate::domain::{is_deleted, is_live, Kind};
use crate::store::{retry, Container, PatchOp, Query, Store, StoreError, StoreResult};

/// Items read and written per step.
pub const PAGE: u32 = 200;
/// Writes in flight at once.
pub const CONCURRENCY: usize = 8;

/// The users feed: the edges and users in `changes`. Returns the writes made.
pub async fn project_users(store: &dyn Store, changes: &[Value]) -> StoreResult<usize> {
    let mut written = 0;
    let mut recount_users: BTreeSet<String> = BTreeSet::new();
    let mut seen = BTreeSet::new();
    for doc in changes {
        match doc.get("type").and_then(Value::as_str) {
            Some(FOLLOWING) => {
                let (Some(f), Some(x)) = (str_field(doc, "userId"), str_field(doc, REF_USER))
                else {
                    continue;
                };
                if !seen.insert((f.to_string(), x.to_string())) {
                    continue;
                }
                written += edge_changed(store, changes, f, x).await?;
                recount_users.insert(f.into());
                recount_users.insert(x.into());
            }
            Some("user") => {
                if let Some(u) = str_field(doc, "userId") {
                    recount_users.insert(u.into());
                }
            }
            _ => {}
        }
    }
    for u in &recount_users {
        written += recount(store, u).await?;
    }
    Ok(written)
}

/// The newest delivered version of the edge `f` → `x` among `changes`.
pub(super) fn newest_edge<'a>(changes: &'a [Value], id: &str, f: &str) -> Option<&'a Value> {
    changes
        .iter()
        .filter(|d| str_field(d, "id") == Some(id) && str_field(d, "userId") == Some(f))
        .reduce(|a, b| match gather::compare_versions(a, b) {
            Some(std::cmp::Ordering::Less) => b,
            _ => a,
        })
}

pub(super) async fn live_user(store: &dyn Store, id: &str) -> StoreResult<Option<Value>> {
    let user = retry(|| store.read(Container::Users, id, id)).await?;
    Ok(user.filter(|u| is_live(u, Kind::User)))
}

/// Project the edge `f` → `x` as it is now: its mirror written or removed.
async fn edge_changed(
    store: &dyn Store,
    changes: &[Value],
    f: &str,
    x: &str,
) -> StoreResult<usize> {
    let id = following_id(x);
    let changed = newest_edge(changes, &id, f);
    let current = gather::read_not_older(store, Container::Users, f, &id, changed).await?;
    let mut written = 0;
    if let Some(e) = current.as_ref().filter(|e| is_live_of(e, FOLLOWING)) {
        let follower = live_user(store, f).await?;
        let followee = live_user(store, x).await?;
        match (follower, followee) {
            (Some(follower), Some(_)) => {
                let name = str_field(&follower, "username").unwrap_or_default();
                let date = str_field(e, "creationDate").unwrap_or_default();
                // Left alone when it holds this already (a redelivered batch): the timeline lane
                // backfills on the edge's change as on the mirror's, whichever finds both.
                let mirror = edge(FOLLOWER, x, f, name, date);
                let mirror_id = follower_id(f);
                let stored = retry(|| store.read(Container::Users, x, &mirror_id)).await?;
                if stored.as_ref().map(super::plan::content) == Some(mirror.clone()) {
                    return Ok(0);
                }
                apply::apply_one(
                    store,
                    &Write::Upsert {
                        container: Container::Users,
                        pk: x.into(),
                        item: mirror,
                    },
                )
                .await?;
                return Ok(1);
            }
            // One of the two is gone (erased, or the follow raced an erasure): so is the edge.
            _ => {
                apply::apply_one(
                    store,
                    &Write::Patch {
                        container: Container::Users,
                        pk: f.into(),
                        id: id.clone(),
                        ops: edge_tombstone_ops(),
                        if_match: str_field(e, "_etag").map(String::from),
                    },
                )
                .await?;
                written += 1;
            }
        }
    }
    apply::apply_one(
        store,
        &Write::Delete {
            container: Container::Users,
            pk: x.into(),
            id: follower_id(f),
        },
    )
    .await?;
    Ok(written + 1)
}

async fn count_edges(store: &dyn Store, user_id: &str, kind: &str) -> StoreResult<u64> {
    let q = Query::partition(user_id).eq("type", kind).live();
    retry(|| store.count(Container::Users, &q)).await
}

/// Set `user_id`'s `followerCount` and `followingCount` to the numbers of their live edges, if
/// they differ, and only if the user is still at the version read. The timeline lane reads the
/// count this writes to decide whether the user's posts are copied or merged.
pub async fn recount(store: &dyn Store, user_id: &str) -> StoreResult<usize> {
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
    let patch = Write::Patch {
        container: Container::Users,
        pk: user_id.into(),
        id: user_id.into(),
        ops,
        if_match: str_field(&user, "_etag").map(String::from),
    };
    apply::apply_one(store, &patch).await?;
    Ok(1)
}

/// An item of `users` as the store knows it: its partition key and its id. An id alone names
/// no item across partitions: a post's timeline entries all have the id `timeline-<post>`, one
/// in each follower's partition, and the edges held to a user all `following-<user>`.
pub(super) fn item_key(item: &Value) -> Option<(&str, &str)> {
    Some((str_field(item, "userId")?, str_field(item, "id")?))
}

/// Delete every item `q` finds in `c` (`users` or `timelines`, both partitioned by `userId`), a
/// page at a time (deleted items stop matching, so each page is the query's first), at most
/// `pages` pages. Returns how many, and whether the last page was full (more may match).
pub(super) async fn delete_matching(
    store: &dyn Store,
    c: Container,
    q: Query,
    pages: usize,
) -> StoreResult<(usize, bool)> {
    let q = q.limit(PAGE);
    let mut deleted = 0;
    let mut last_first: Option<(String, String)> = None;
    for _ in 0..pages {
        let page = retry(|| store.query(c, &q)).await?;
        let Some(first) = page.items.first().and_then(item_key) else {
            return Ok((deleted, false));
        };
        // A page starting with the item the last one did means the deletes did not take: stop,
        // not spin. The same item, not the same id: a query across partitions answers one
        // partition key range per page (Cosmos DB, and its SDK's emulator, in the order of the
        // ranges), so the next page may start with an item of the same id in another partition.
        let first = (first.0.to_string(), first.1.to_string());
        if last_first.as_ref() == Some(&first) {
            return Err(StoreError::Other(format!(
                "items in `{}` stay after being deleted",
                c.name()
            )));
        }
        last_first = Some(first);
        let writes: Vec<Write> = page
            .items
            .iter()
            .filter_map(|i| {
                Some(Write::Delete {
                    container: c,
                    pk: str_field(i, "userId")?.into(),
                    id: str_field(i, "id")?.into(),
                })
            })
            .collect();
        apply::apply_unordered(store, &writes, CONCURRENCY)
            .await
            .map_err(|(_, e)| e)?;
        deleted += writes.len();
        if page.continuation.is_none() && page.items.len() < PAGE as usize {
            return Ok((deleted, false));
        }
    }
    Ok((deleted, true))
}

/// Mark every live edge `q` finds in `users`, a page at a time. Returns how many.
async fn mark_edges(store: &dyn Store, q: Query) -> StoreResult<usize> {
    let q = q.live().limit(PAGE);
    let mut marked = 0;
    let mut last_first: Option<(String, String)> = None;
    loop {
        let page = retry(|| store.query(Container::Users, &q)).await?;
        let Some(first) = page.items.first().and_then(item_key) else {
            return Ok(marked);
        };
        // As in `delete_matching`: the same item (partition and id) again means the marks did
        // not take; the same id may be another follower's edge.
        let first = (first.0.to_string(), first.1.to_string());
        if last_first.as_ref() == Some(&first) {
            return Err(StoreError::Other(
                "edges stay live after being marked deleted".into(),
            ));
        }
        last_first = Some(first);
        let writes: Vec<Write> = page
            .items
            .iter()
            .filter(|e| !is_deleted(e))
            .filter_map(|e| {
                Some(Write::Patch {
                    container: Container::Users,
                    pk: str_field(e, "userId")?.into(),
                    id: str_field(e, "id")?.into(),
                    ops: edge_tombstone_ops(),
                    if_match: None,
                })
            })
            .collect();
        apply::apply_unordered(store, &writes, CONCURRENCY)
            .await
            .map_err(|(_, e)| e)?;
        marked += writes.len();
    }
}

/// An erased user: whom they follow and who follows them are unfollowed (the marks' own
/// projections clean the mirrors and, in the timeline lane, the timelines), their mirrors
/// deleted. Their own timeline is the timeline lane's (`super::timeline::erase_step`).
pub async fn erase_user(store: &dyn Store, user_id: &str) -> StoreResult<usize> {
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
