//! Follows and timelines (`crate::domain::follows`): what the change feeds project.
//!
//! - A `following` edge changed (users feed): read it as it is now. Live: write its mirror in the
//!   followee's partition, then copy the followee's newest posts into the follower's timeline.
//!   Marked deleted: remove the mirror and every entry of the followee's from the timeline. Then
//!   recount both users' counters. A stale or repeated change re-reads the edge, so it writes the
//!   present state whatever order the changes come in.
//! - A post changed (posts feed): its entry is upserted in the timeline of each follower of its
//!   author, a page of followers at a time, unless the author's copy records that very content
//!   fanned out already ([`plan::timeline_copies`]); a copy for someone who stopped following
//!   while it was written is taken back ([`drop_unfollowed`]); about one copy in
//!   [`crate::domain::follows::TRIM_EVERY`] trims its timeline to the newest entries ([`trim`]).
//!   A deleted post's entries are deleted wherever they are.
//! - A user changed (users feed): their counters are recounted (a recount's patch is conditional
//!   on the user's version; a user changed meanwhile comes through the feed again).
//! - A user erased: their own edges and the edges others hold to them are marked (whose
//!   projection then cleans the mirrors and timelines), their mirrors and timeline deleted.
//!
//! An author with more followers than the fan-out limit ([`fanout_limit`]) is *merged*: their
//! posts are not copied into their followers' timelines; each follower's timeline holds a marker
//! (`follows::merge_marker`) instead, and a timeline read merges the newest posts of each marked
//! author in, one query in the author's partition each. Whether an author's followers hold
//! markers is recorded on the author (`timelineMerged`), so that crossing the limit either way is
//! carried out (markers written, or removed and the posts copied) by the recount that sees it,
//! and again by the next one if that was cut short.
//!
//! A post and a follow made at once both reach the timeline: the posts projection writes the
//! author's copy before it reads the followers, and this one writes the mirror before it reads
//! the copies, so at least one of the two sees the other's write.
//!
//! One file: edges, copies, markers and counters are one protocol, whose ordering between the
//! two feeds' projections (above) is what makes it correct, so it is read in one place.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;

use super::apply;
use super::gather;
use super::plan::{self, str_field, PostsFacts, Write};
use crate::domain::follows::{
    edge, edge_tombstone_ops, follower_id, following_id, is_live_of, marker_id, merge_marker,
    timeline_entry, timeline_id, trims, FOLLOWER, FOLLOWING, MERGE, REF_USER, TIMELINE,
    TIMELINE_KEEP, TIMELINE_SIZE,
};
use crate::domain::{is_deleted, is_live, Kind, Post};
use crate::store::{retry, Container, Order, PatchOp, Query, Store, StoreError, StoreResult};

/// The fan-out limit when `BLOG_TIMELINE_FANOUT_LIMIT` is not set.
pub const DEFAULT_FANOUT_LIMIT: u64 = crate::settings::DEFAULT_TIMELINE_FANOUT_LIMIT;

static FANOUT_LIMIT: AtomicU64 = AtomicU64::new(DEFAULT_FANOUT_LIMIT);

/// Set the fan-out limit for this process (from `BLOG_TIMELINE_FANOUT_LIMIT`, at start-up): an
/// author with more followers than this is merged at read time instead of copied.
pub fn set_fanout_limit(limit: u64) {
    FANOUT_LIMIT.store(limit, Ordering::Relaxed);
}

pub fn fanout_limit() -> u64 {
    FANOUT_LIMIT.load(Ordering::Relaxed)
}

/// Whether `user`'s posts are merged into their followers' timelines rather than copied.
pub fn is_merged(user: &Value) -> bool {
    user.get("followerCount")
        .and_then(Value::as_u64)
        .is_some_and(|n| n > fanout_limit())
}

/// The property on a user recording that their followers' timelines hold markers for them.
const MERGED_FIELD: &str = "timelineMerged";

/// Items read and written per step: memory stays bounded whatever the number of followers.
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
fn newest_edge<'a>(changes: &'a [Value], id: &str, f: &str) -> Option<&'a Value> {
    changes
        .iter()
        .filter(|d| str_field(d, "id") == Some(id) && str_field(d, "userId") == Some(f))
        .reduce(|a, b| match gather::compare_versions(a, b) {
            Some(std::cmp::Ordering::Less) => b,
            _ => a,
        })
}

async fn live_user(store: &dyn Store, id: &str) -> StoreResult<Option<Value>> {
    let user = retry(|| store.read(Container::Users, id, id)).await?;
    Ok(user.filter(|u| is_live(u, Kind::User)))
}

/// Project the edge `f` → `x` as it is now.
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
            (Some(follower), Some(followee)) => {
                let name = |u: &Value| str_field(u, "username").unwrap_or_default().to_string();
                let date = str_field(e, "creationDate").unwrap_or_default();
                let mirror = edge(FOLLOWER, x, f, &name(&follower), date);
                apply::apply_one(
                    store,
                    &Write::Upsert {
                        container: Container::Users,
                        pk: x.into(),
                        item: mirror,
                    },
                )
                .await?;
                return Ok(1 + copy_or_mark(store, f, x, &followee).await?);
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
    Ok(written + 1 + remove_entries(store, f, Some(x)).await?)
}

/// Bring `x`'s posts into `f`'s timeline: a marker when `x` is merged, else the posts copied
/// (and any marker removed).
async fn copy_or_mark(store: &dyn Store, f: &str, x: &str, followee: &Value) -> StoreResult<usize> {
    if is_merged(followee) {
        let marker = Write::Upsert {
            container: Container::Users,
            pk: f.into(),
            item: merge_marker(f, x),
        };
        apply::apply_one(store, &marker).await?;
        return Ok(1);
    }
    let unmark = Write::Delete {
        container: Container::Users,
        pk: f.into(),
        id: marker_id(x),
    };
    apply::apply_one(store, &unmark).await?;
    let name = str_field(followee, "username").unwrap_or_default();
    Ok(1 + backfill(store, f, x, name).await?)
}

/// Copy the [`TIMELINE_SIZE`] newest posts of `x` (called `name` now) into `f`'s timeline, from
/// the short-form copies in `x`'s partition.
async fn backfill(store: &dyn Store, f: &str, x: &str, name: &str) -> StoreResult<usize> {
    let q = Query::partition(x)
        .of_kind(Kind::Post)
        .live()
        .order_by_creation(Order::Desc)
        .limit(TIMELINE_SIZE as u32);
    let page = retry(|| store.query(Container::Users, &q)).await?;
    let writes: Vec<Write> = page
        .items
        .into_iter()
        .filter_map(|item| serde_json::from_value::<Post>(item).ok())
        .filter(|p| p.user_id == x)
        .map(|mut p| {
            p.user_username = name.to_string();
            Write::Upsert {
                container: Container::Users,
                pk: f.into(),
                item: timeline_entry(f, &p),
            }
        })
        .collect();
    apply::apply_unordered(store, &writes, CONCURRENCY)
        .await
        .map_err(|(_, e)| e)?;
    // Up to a hundred entries at once: the timeline is trimmed now rather than by later copies.
    Ok(writes.len() + trim(store, f).await?)
}

/// Delete the entries of `f`'s timeline beyond its [`TIMELINE_KEEP`] newest (merge markers are
/// not entries: the query leaves them out and they stay), a page at a time. Never deletes one of
/// the newest, whatever runs concurrently: an entry beyond the newest of what was read is beyond
/// the newest of the whole. Returns how many.
pub async fn trim(store: &dyn Store, f: &str) -> StoreResult<usize> {
    let q = Query::partition(f)
        .eq("type", TIMELINE)
        .not_true(MERGE)
        .order_by_creation(Order::Desc)
        .limit(TIMELINE_KEEP as u32 + PAGE);
    let mut deleted = 0;
    let mut last_first: Option<String> = None;
    loop {
        let page = retry(|| store.query(Container::Users, &q)).await?;
        let writes: Vec<Write> = page
            .items
            .iter()
            .skip(TIMELINE_KEEP)
            .filter_map(|i| {
                Some(Write::Delete {
                    container: Container::Users,
                    pk: f.into(),
                    id: str_field(i, "id")?.into(),
                })
            })
            .collect();
        // The first entry beyond the kept ones again means the deletes did not take: stop, not
        // spin (as the sweeps below do).
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

/// An item of `users` as the store knows it: its partition key and its id. An id alone names
/// no item across partitions: a post's timeline entries all have the id `timeline-<post>`, one
/// in each follower's partition, and the edges held to a user all `following-<user>`.
fn item_key(item: &Value) -> Option<(&str, &str)> {
    Some((str_field(item, "userId")?, str_field(item, "id")?))
}

/// Delete every item `q` finds in `users`, a page at a time (deleted items stop matching, so
/// each page is the query's first). Returns how many.
async fn delete_matching(store: &dyn Store, q: Query) -> StoreResult<usize> {
    let q = q.limit(PAGE);
    let mut deleted = 0;
    let mut last_first: Option<(String, String)> = None;
    loop {
        let page = retry(|| store.query(Container::Users, &q)).await?;
        let Some(first) = page.items.first().and_then(item_key) else {
            return Ok(deleted);
        };
        // A page starting with the item the last one did means the deletes did not take: stop,
        // not spin. The same item, not the same id: a query across partitions answers one
        // partition key range per page (Cosmos DB, and its SDK's emulator, in the order of the
        // ranges), so the next page may start with an item of the same id in another partition.
        let first = (first.0.to_string(), first.1.to_string());
        if last_first.as_ref() == Some(&first) {
            return Err(StoreError::Other(
                "timeline items stay after being deleted".into(),
            ));
        }
        last_first = Some(first);
        let writes: Vec<Write> = page
            .items
            .iter()
            .filter_map(|i| {
                Some(Write::Delete {
                    container: Container::Users,
                    pk: str_field(i, "userId")?.into(),
                    id: str_field(i, "id")?.into(),
                })
            })
            .collect();
        apply::apply_unordered(store, &writes, CONCURRENCY)
            .await
            .map_err(|(_, e)| e)?;
        deleted += writes.len();
    }
}

/// Delete the entries of `author`'s posts (of everyone's, for `None`) from `f`'s timeline.
async fn remove_entries(store: &dyn Store, f: &str, author: Option<&str>) -> StoreResult<usize> {
    let mut q = Query::partition(f).eq("type", TIMELINE);
    if let Some(x) = author {
        q = q.eq(REF_USER, x);
    }
    delete_matching(store, q).await
}

async fn count_edges(store: &dyn Store, user_id: &str, kind: &str) -> StoreResult<u64> {
    let q = Query::partition(user_id).eq("type", kind).live();
    retry(|| store.count(Container::Users, &q)).await
}

/// Set `user_id`'s `followerCount` and `followingCount` to the numbers of their live edges, if
/// they differ, and only if the user is still at the version read. When the follower count
/// crosses the fan-out limit, the followers' timelines are brought in line, in the order that
/// leaves no post out: going over, the markers are written before the count that stops the
/// copying; coming back, the count that resumes the copying is written before the markers are
/// removed and the posts copied, and `timelineMerged` is cleared last.
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
    let merged = followers > fanout_limit();
    let marked = user.get(MERGED_FIELD) == Some(&Value::Bool(true));
    let mut counted = user.clone();
    counted["followerCount"] = followers.into();
    let patch = |ops: Vec<PatchOp>, if_match: Option<String>| Write::Patch {
        container: Container::Users,
        pk: user_id.into(),
        id: user_id.into(),
        ops,
        if_match,
    };
    let etag = str_field(&user, "_etag").map(String::from);
    let mut written = 0;
    if merged && !marked {
        written += cross_limit(store, user_id, &counted).await?;
        ops.push(PatchOp::set(&format!("/{MERGED_FIELD}"), true));
    }
    if !ops.is_empty() {
        apply::apply_one(store, &patch(ops, etag)).await?;
        written += 1;
    }
    if !merged && marked {
        // Only once the stored count resumes the copying (a patch made moot by a newer change of
        // the user leaves it to that change's recount).
        let resumed = live_user(store, user_id)
            .await?
            .is_some_and(|u| !is_merged(&u));
        if resumed {
            written += cross_limit(store, user_id, &counted).await?;
            let done = vec![PatchOp::set(&format!("/{MERGED_FIELD}"), false)];
            apply::apply_one(store, &patch(done, None)).await?;
            written += 1;
        }
    }
    Ok(written)
}

/// `user` crossed the fan-out limit: bring each follower's timeline in line with it (markers
/// written, or removed and the posts copied), a page of followers at a time.
async fn cross_limit(store: &dyn Store, user_id: &str, user: &Value) -> StoreResult<usize> {
    let mut q = Query::partition(user_id)
        .eq("type", FOLLOWER)
        .live()
        .limit(PAGE);
    let mut written = 0;
    loop {
        let page = retry(|| store.query(Container::Users, &q)).await?;
        for m in &page.items {
            if let Some(f) = str_field(m, REF_USER) {
                written += copy_or_mark(store, f, user_id, user).await?;
            }
        }
        match page.continuation {
            Some(t) => q.continuation = Some(t),
            None => return Ok(written),
        }
    }
}

/// The posts feed, after the post's own writes: each changed post's entry upserted in its
/// author's followers' timelines; each deleted post's entries deleted. Returns the writes made.
pub async fn project_posts(
    store: &dyn Store,
    changes: &[Value],
    facts: &PostsFacts,
) -> StoreResult<usize> {
    let changed: BTreeSet<&str> = changes
        .iter()
        .filter(|d| Kind::of(d) == Some(Kind::Post))
        .filter_map(|d| str_field(d, "postId"))
        .collect();
    let mut written = 0;
    for post_id in changed {
        if facts.deleted_posts.contains_key(post_id) {
            written += remove_post(store, post_id).await?;
        }
    }
    // Only the posts whose copy does not record this content fanned out already.
    for post in plan::timeline_copies(changes, facts) {
        written += fan_out(store, &post).await?;
    }
    Ok(written)
}

/// Upsert `post`'s entry in the timeline of each follower of its author, a page at a time, then
/// mark the author's copy fanned out; nothing for a merged author (their followers' timelines
/// read their posts where they are).
async fn fan_out(store: &dyn Store, post: &Post) -> StoreResult<usize> {
    let author = live_user(store, &post.user_id).await?;
    if author.as_ref().is_none_or(is_merged) {
        return Ok(0);
    }
    let mut q = Query::partition(post.user_id.as_str())
        .eq("type", FOLLOWER)
        .live()
        .limit(PAGE);
    let mut written = 0;
    loop {
        let page = retry(|| store.query(Container::Users, &q)).await?;
        let followers: Vec<&str> = page
            .items
            .iter()
            .filter_map(|m| str_field(m, REF_USER))
            .collect();
        let writes: Vec<Write> = followers
            .iter()
            .map(|f| Write::Upsert {
                container: Container::Users,
                pk: (*f).into(),
                item: timeline_entry(f, post),
            })
            .collect();
        apply::apply_unordered(store, &writes, CONCURRENCY)
            .await
            .map_err(|(_, e)| e)?;
        written += writes.len();
        written += drop_unfollowed(store, post, &followers).await?;
        for f in followers.iter().filter(|f| trims(f, &post.id)) {
            written += trim(store, f).await?;
        }
        match page.continuation {
            Some(t) => q.continuation = Some(t),
            None => break,
        }
    }
    // Only now is the author's copy marked as fanned out (a fan-out cut short leaves it pending,
    // and the redelivered change fans out again). With no follower nothing was written, and the
    // mark is not worth a write.
    if written > 0 {
        written += mark_fanned_out(store, post).await?;
    }
    Ok(written)
}

/// Mark `post`'s copy in its author's partition as fanned out, if it still holds what was
/// fanned out (one read, and a patch conditional on the version read). A copy changed meanwhile
/// (a rename's patch, say) stays pending: its own change fans out again.
async fn mark_fanned_out(store: &dyn Store, post: &Post) -> StoreResult<usize> {
    let copy = retry(|| store.read(Container::Users, &post.user_id, &post.id)).await?;
    let Some(copy) = copy else {
        return Ok(0);
    };
    let summary = crate::domain::to_value(&post.summary());
    if copy.get(plan::TIMELINE_PENDING) == Some(&Value::Bool(false))
        || plan::without_pending(&plan::content(&copy)) != summary
    {
        return Ok(0);
    }
    let done = Write::Patch {
        container: Container::Users,
        pk: post.user_id.clone(),
        id: post.id.clone(),
        ops: vec![PatchOp::set(&format!("/{}", plan::TIMELINE_PENDING), false)],
        if_match: str_field(&copy, "_etag").map(String::from),
    };
    apply::apply_one(store, &done).await?;
    Ok(1)
}

/// After `post`'s copies went to a page of `followers` (read from the mirrors before), take the
/// copy back from each who stopped following meanwhile. An unfollow's projection deletes the
/// mirror, then the followee's entries: a copy written after that would stay. One query finds
/// which of the page's mirrors are still there: a mirror still there means the unfollow's
/// removal of entries is still to come, and finds the copy; a mirror gone means it may have
/// come already, so the copy goes unless the follow is live again (followed anew: its own
/// projection copies the newest posts, this one among them). One query a page, plus a read and
/// a delete per follower who left.
async fn drop_unfollowed(store: &dyn Store, post: &Post, followers: &[&str]) -> StoreResult<usize> {
    if followers.is_empty() {
        return Ok(0);
    }
    let q = Query::partition(post.user_id.as_str())
        .eq("type", FOLLOWER)
        .live()
        .any_of(REF_USER, followers.iter().map(|f| f.to_string()))
        .limit(followers.len() as u32);
    let still = retry(|| store.query(Container::Users, &q)).await?;
    let still: BTreeSet<&str> = still
        .items
        .iter()
        .filter_map(|m| str_field(m, REF_USER))
        .collect();
    let edge_id = following_id(&post.user_id);
    let mut removed = 0;
    for f in followers.iter().filter(|f| !still.contains(**f)) {
        let edge = retry(|| store.read(Container::Users, f, &edge_id)).await?;
        if edge.as_ref().is_some_and(|e| is_live_of(e, FOLLOWING)) {
            continue;
        }
        let copy = Write::Delete {
            container: Container::Users,
            pk: (*f).into(),
            id: timeline_id(&post.id),
        };
        apply::apply_one(store, &copy).await?;
        removed += 1;
    }
    Ok(removed)
}

/// Delete every timeline entry of post `post_id` (one cross-partition query a page).
pub async fn remove_post(store: &dyn Store, post_id: &str) -> StoreResult<usize> {
    delete_matching(
        store,
        Query::cross_partition()
            .eq("type", TIMELINE)
            .eq("postId", post_id),
    )
    .await
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
/// projection cleans the mirrors and timelines), their mirrors and timeline deleted.
pub async fn erase_user(store: &dyn Store, user_id: &str) -> StoreResult<usize> {
    let mut written = mark_edges(store, Query::partition(user_id).eq("type", FOLLOWING)).await?;
    written += mark_edges(
        store,
        Query::cross_partition()
            .eq("type", FOLLOWING)
            .eq(REF_USER, user_id),
    )
    .await?;
    written += delete_matching(store, Query::partition(user_id).eq("type", FOLLOWER)).await?;
    written += remove_entries(store, user_id, None).await?;
    Ok(written)
}

/// The query of the edges and entries in other users' partitions that name `user_id` (and so
/// carry their name): a rename's fan-out patches these too.
pub fn naming(user_id: &str) -> Query {
    Query::cross_partition().eq(REF_USER, user_id)
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
            store.create(Container::Users, owner, marker).await.unwrap();
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
            store.create(Container::Users, owner, entry).await.unwrap();
        }
        assert_eq!(trim(&store, owner).await.unwrap(), entries - TIMELINE_KEEP);
        let left = Query::partition(owner).eq("type", TIMELINE).not_true(MERGE);
        assert_eq!(
            store.count(Container::Users, &left).await.unwrap(),
            TIMELINE_KEEP as u64
        );
    }
}
