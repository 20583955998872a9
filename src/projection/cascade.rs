//! What a deletion implies, done by the request that deletes (so every read hides it at once)
//! and again by the projections when the tombstone arrives through the change feed (so it is
//! complete even if that request was cut short). Every step is idempotent: it marks only live
//! items and deletes copies that may already be gone.
//!
//! - a post: the post is marked and its copies in `users` and `feed` go; its comments and likes
//!   are marked a page at a time ([`sweep_post`]): the request marks the first page, and each
//!   time the posts projection sees the post's mark it marks the next page and, if more may
//!   remain, touches the mark so that it comes round again behind the changes written
//!   meanwhile. A post of any size therefore holds the posts feed for one page at a time, and
//!   other posts' changes are projected in between;
//! - a user: the user is marked; then, a bounded step at a time ([`user_step`]), each of their
//!   posts goes as above, their comments and likes on other posts are marked (a pending
//!   count in each of those posts has the posts projection recount it), and leftover copies go: the request takes
//!   the first step, and the users projection one step each time the user's mark comes through,
//!   touching the mark while more remains, as for a post's items.

use std::collections::BTreeSet;

use serde_json::Value;

use super::change::{Change, ChangeKind};
use super::engine::{apply_all, apply_one, user, wrote, Unit, CONCURRENCY, PAGE};
use super::follows;
use super::write::{str_field, Write};
use crate::domain::pending::{is_pending_count, pending_count};
use crate::domain::{tombstone_ops, Kind, Meta, FEED_PK};
use crate::store::{retry, Container, Query, Store, StoreResult};

/// Erasures of accounts, main lane ([`project_accounts`]).
pub const ACCOUNTS: Unit = Unit {
    name: "erasure",
    feed: Container::Users,
    watches: &[ChangeKind::User],
    reads: &[Container::Users, Container::Posts],
    writes: &[Container::Posts, Container::Users, Container::Feed],
    project: |store, changes| {
        Box::pin(async move { project_accounts(store, changes).await.map(wrote) })
    },
};

/// The write that marks `item` (an item of `container`) deleted; a pending count (see
/// [`crate::domain::pending`]) is deleted outright: its post's counters go with the post.
pub fn tombstone(container: Container, item: &Value) -> Option<Write> {
    if is_pending_count(item) {
        return Some(Write::delete(
            container,
            str_field(item, container.partition_key_field())?,
            Meta::of(item).id?,
        ));
    }
    Some(Write::patch(
        container,
        str_field(item, container.partition_key_field())?,
        Meta::of(item).id?,
        match (Kind::of(item), str_field(item, Kind::FIELD)) {
            (Some(kind), _) => tombstone_ops(kind),
            // A bookmark, in its post's partition: marked as an edge is.
            (None, Some(crate::domain::bookmarks::BOOKMARK)) => {
                crate::domain::follows::edge_tombstone_ops()
            }
            _ => return None,
        },
    ))
}

/// Delete post `post_id` by `user_id`: mark it, remove its copies, and mark the first page of
/// its comments and likes (all of them, for most posts); the posts projection marks the rest
/// ([`sweep_post`]). Returns the writes made.
pub async fn post(store: &dyn Store, post_id: &str, user_id: &str) -> StoreResult<usize> {
    let mark = Write::patch(
        Container::Posts,
        post_id,
        post_id,
        tombstone_ops(Kind::Post),
    );
    apply_one(store, &mark).await?;
    for w in remove_copies(post_id, user_id) {
        apply_one(store, &w).await?;
    }
    let items = tombstone_page(store, Container::Posts, Query::partition(post_id)).await?;
    Ok(1 + 2 + items)
}

/// Mark the live items of one page of what `q` finds. Returns how many: fewer than [`PAGE`]
/// means none is left.
pub async fn tombstone_page(
    store: &dyn Store,
    container: Container,
    q: Query,
) -> StoreResult<usize> {
    let q = q.live().limit(PAGE);
    let page = retry(|| store.query(container, &q)).await?;
    let writes: Vec<Write> = page
        .items
        .iter()
        .filter_map(|i| tombstone(container, i))
        .collect();
    apply_all(store, &writes, CONCURRENCY).await?;
    Ok(writes.len())
}

/// Counts the pages swept on a deleted post's mark; setting it is what sends the mark round the
/// change feed again.
pub const SWEEPS: &str = "sweeps";

/// One step of deleting the items of deleted post `post` (its mark, as read): mark a page of
/// its live comments and likes; if that was a full page, touch the mark (bump [`SWEEPS`]) so that
/// the change feed brings it back, behind whatever was written meanwhile, for the next page.
/// Returns the writes made.
pub async fn sweep_post(store: &dyn Store, post: &Value) -> StoreResult<usize> {
    let Some(post_id) = Meta::of(post).id else {
        return Ok(0);
    };
    let marked = tombstone_page(store, Container::Posts, Query::partition(post_id)).await?;
    if marked < PAGE as usize {
        return Ok(marked);
    }
    let sweeps = post.get(SWEEPS).and_then(Value::as_u64).unwrap_or(0);
    let touch = Write::patch(
        Container::Posts,
        post_id,
        post_id,
        vec![crate::store::PatchOp::set(
            &format!("/{SWEEPS}"),
            sweeps + 1,
        )],
    );
    apply_one(store, &touch).await?;
    Ok(marked + 1)
}

/// Posts of an erased user deleted per step of the erasure: each starts a sweep of its own
/// comments and likes in the posts feed ([`sweep_post`]), so a few at a time keep what one step
/// puts ahead of other users' changes small.
pub const POSTS_PER_STEP: u32 = 10;

/// One step of erasing user `user_id` (already marked deleted), bounded whatever the account's
/// size: a few of their posts are deleted (each post's mark and copies; its comments and likes
/// follow through the posts projection's sweep); once none is left, a page of their comments and
/// likes on other posts is marked; once none is left either, a page of copies left in their
/// partition goes. Returns the writes made and whether anything may remain (`false`: the
/// erasure is complete).
pub async fn user_step(store: &dyn Store, user_id: &str) -> StoreResult<(usize, bool)> {
    let their_posts = Query::cross_partition()
        .eq("userId", user_id)
        .of_kind(Kind::Post)
        .live()
        .limit(POSTS_PER_STEP);
    let page = retry(|| store.query(Container::Posts, &their_posts)).await?;
    if !page.items.is_empty() {
        let mut writes = Vec::new();
        for post in &page.items {
            let Some(id) = Meta::of(post).id else {
                continue;
            };
            writes.extend(tombstone(Container::Posts, post));
            writes.extend(remove_copies(id, user_id));
        }
        apply_all(store, &writes, CONCURRENCY).await?;
        return Ok((writes.len(), true));
    }
    // Their comments and likes elsewhere. Nothing lowers those posts' counters as the marks
    // are made: a pending count in each post's partition has the posts projection recount it
    // once the grace is past. One is filed before the marks (should the step be cut short) and
    // one after (should the marks take longer than the grace).
    let q = Query::cross_partition()
        .eq("userId", user_id)
        .live()
        .limit(PAGE);
    let page = retry(|| store.query(Container::Posts, &q)).await?;
    let marks: Vec<Write> = page
        .items
        .iter()
        .filter_map(|i| tombstone(Container::Posts, i))
        .collect();
    if !marks.is_empty() {
        let posts: BTreeSet<&str> = page
            .items
            .iter()
            .filter(|i| matches!(Kind::of(i), Some(Kind::Comment | Kind::Like)))
            .filter_map(|i| Meta::of(i).post_id)
            .collect();
        let announce = || {
            posts
                .iter()
                .map(|p| {
                    Write::upsert(
                        Container::Posts,
                        p.to_string(),
                        pending_count(p, &crate::domain::now()),
                    )
                })
                .collect::<Vec<_>>()
        };
        let (before, after) = (announce(), announce());
        for writes in [&before, &marks, &after] {
            apply_all(store, writes, CONCURRENCY).await?;
        }
        return Ok((before.len() + marks.len() + after.len(), true));
    }
    // Copies of posts that are gone already (a post deleted while its copy was being written).
    let copies = Query::partition(user_id).of_kind(Kind::Post).limit(PAGE);
    let page = retry(|| store.query(Container::Users, &copies)).await?;
    let writes: Vec<Write> = page
        .items
        .iter()
        .filter_map(|c| Meta::of(c).id)
        .flat_map(|id| remove_copies(id, user_id))
        .collect();
    apply_all(store, &writes, CONCURRENCY).await?;
    Ok((writes.len(), !writes.is_empty()))
}

/// Steps of erasing user `user_id` ([`user_step`]) until it is complete or about `budget` writes
/// are made. Returns the writes made and whether anything may remain.
pub async fn user_steps(
    store: &dyn Store,
    user_id: &str,
    budget: usize,
) -> StoreResult<(usize, bool)> {
    let mut written = 0;
    loop {
        let (n, more) = user_step(store, user_id).await?;
        written += n;
        if !more || written >= budget {
            return Ok((written, more));
        }
    }
}

/// Erasures (main lane, `users` feed): each erased user changed in `changes` gets one bounded
/// step ([`account_step`]). Returns the writes made; a user whose step fails fails the batch,
/// naming the user.
pub async fn project_accounts(
    store: &dyn Store,
    changes: &[&Change],
) -> Result<usize, super::ProjectionError> {
    let mut total = 0;
    for user_id in super::rename::users_changed(changes) {
        let step = async {
            match user(store, changes, &user_id).await? {
                Some(u) if crate::domain::is_deleted(&u) => account_step(store, &user_id, &u).await,
                _ => Ok(0),
            }
        };
        total += step.await.map_err(|e| super::ProjectionError {
            unit: "",
            reason: e.to_string(),
            not_applied: vec![format!("users/{user_id}/{user_id}")],
        })?;
    }
    Ok(total)
}

/// An erased user (their item is a tombstone): everything of theirs goes, a bounded step each
/// time the tombstone comes through the users feed (a step that leaves more to do touches the
/// tombstone, which sends it round again behind the changes written meanwhile); the step that
/// finds nothing left records the erasure (`erased: true`), after which the account's identity
/// may create a user again.
async fn account_step(store: &dyn Store, user_id: &str, user: &Value) -> StoreResult<usize> {
    if user.get(ERASED) == Some(&Value::Bool(true)) {
        return Ok(0);
    }
    let (mut written, more) = user_steps(store, user_id, PAGE as usize).await?;
    let ops = if more {
        let sweeps = user.get(SWEEPS).and_then(Value::as_u64).unwrap_or(0);
        vec![crate::store::PatchOp::set(
            &format!("/{SWEEPS}"),
            sweeps + 1,
        )]
    } else {
        // Their follows go last, once their own items are gone (the edges' marks then take
        // their posts out of their followers' timelines, in the timeline lane).
        written += follows::erase_edges(store, user_id).await?;
        // And their mute list, one item in their partition.
        let mutes = crate::domain::follows::MuteList::id_of(user_id);
        written += super::engine::delete_item(store, Container::Users, user_id, &mutes).await?;
        vec![crate::store::PatchOp::set(&format!("/{ERASED}"), true)]
    };
    let done = Write::patch(Container::Users, user_id, user_id, ops);
    apply_one(store, &done).await?;
    Ok(written + 1)
}

/// Set on a user's tombstone once everything of theirs is deleted.
pub const ERASED: &str = "erased";

/// The copies of post `post_id` by `user_id`: in the author's partition of `users` and in the
/// feed.
pub fn remove_copies(post_id: &str, user_id: &str) -> [Write; 2] {
    [
        Write::delete(Container::Users, user_id, post_id),
        Write::delete(Container::Feed, FEED_PK, post_id),
    ]
}
