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
//! - a user: the user is marked; each of their posts goes as above; their comments and likes
//!   on other posts are marked (the posts projection then lowers those posts' counters).

use serde_json::Value;

use super::apply;
use super::plan::{str_field, Write};
use crate::domain::{tombstone_ops, Kind, FEED_PK};
use crate::store::{retry, Container, Query, Store, StoreError, StoreResult};

/// Items marked per step: memory stays bounded whatever the number of items.
pub const PAGE: u32 = 200;
/// Marks in flight at once.
pub const CONCURRENCY: usize = 8;

/// The write that marks `item` (an item of `container`) deleted.
pub fn tombstone(container: Container, item: &Value) -> Option<Write> {
    Some(Write::Patch {
        container,
        pk: str_field(item, container.partition_key_field())?.into(),
        id: str_field(item, "id")?.into(),
        ops: tombstone_ops(Kind::of(item)?),
        if_match: None,
    })
}

/// Mark every live item `q` finds in `container`, a page at a time. Marked items stop matching,
/// so each page is the query's first; it ends when a page comes back empty. Returns how many.
pub async fn tombstone_matching(
    store: &dyn Store,
    container: Container,
    q: Query,
) -> StoreResult<usize> {
    let q = q.live().limit(PAGE);
    let mut marked = 0;
    let mut last_first: Option<String> = None;
    loop {
        let page = retry(|| store.query(container, &q)).await?;
        let Some(first) = page.items.first().and_then(|i| str_field(i, "id")) else {
            return Ok(marked);
        };
        // A page starting where the last one did means marking did not take: stop, not spin.
        if last_first.as_deref() == Some(first) {
            return Err(StoreError::Other(format!(
                "items in `{}` stay live after being marked deleted",
                container.name()
            )));
        }
        last_first = Some(first.to_string());
        let writes: Vec<Write> = page
            .items
            .iter()
            .filter_map(|i| tombstone(container, i))
            .collect();
        apply::apply_unordered(store, &writes, CONCURRENCY)
            .await
            .map_err(|(_, e)| e)?;
        marked += writes.len();
    }
}

/// The copies of post `post_id` by `user_id`: in the author's partition of `users` and in the
/// feed.
pub fn remove_copies(post_id: &str, user_id: &str) -> [Write; 2] {
    [
        Write::Delete {
            container: Container::Users,
            pk: user_id.into(),
            id: post_id.into(),
        },
        Write::Delete {
            container: Container::Feed,
            pk: FEED_PK.into(),
            id: post_id.into(),
        },
    ]
}

/// Delete post `post_id` by `user_id`: mark it, remove its copies, and mark the first page of
/// its comments and likes (all of them, for most posts); the posts projection marks the rest
/// ([`sweep_post`]). Returns the writes made.
pub async fn post(store: &dyn Store, post_id: &str, user_id: &str) -> StoreResult<usize> {
    let mark = Write::Patch {
        container: Container::Posts,
        pk: post_id.into(),
        id: post_id.into(),
        ops: tombstone_ops(Kind::Post),
        if_match: None,
    };
    apply::apply_one(store, &mark).await?;
    for w in remove_copies(post_id, user_id) {
        apply::apply_one(store, &w).await?;
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
    apply::apply_unordered(store, &writes, CONCURRENCY)
        .await
        .map_err(|(_, e)| e)?;
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
    let Some(post_id) = str_field(post, "id") else {
        return Ok(0);
    };
    let marked = tombstone_page(store, Container::Posts, Query::partition(post_id)).await?;
    if marked < PAGE as usize {
        return Ok(marked);
    }
    let sweeps = post.get(SWEEPS).and_then(Value::as_u64).unwrap_or(0);
    let touch = Write::Patch {
        container: Container::Posts,
        pk: post_id.into(),
        id: post_id.into(),
        ops: vec![crate::store::PatchOp::set(
            &format!("/{SWEEPS}"),
            sweeps + 1,
        )],
        if_match: None,
    };
    apply::apply_one(store, &touch).await?;
    Ok(marked + 1)
}

/// Everything of user `user_id` (already marked deleted): their posts with all in them, then
/// their comments and likes on other posts. Returns the writes made.
pub async fn user_items(store: &dyn Store, user_id: &str) -> StoreResult<usize> {
    let mut written = 0;
    let their_posts = Query::cross_partition()
        .eq("userId", user_id)
        .of_kind(Kind::Post)
        .live()
        .limit(PAGE);
    loop {
        let page = retry(|| store.query(Container::Posts, &their_posts)).await?;
        if page.items.is_empty() {
            break;
        }
        for p in &page.items {
            if let Some(id) = str_field(p, "id") {
                written += post(store, id, user_id).await?;
            }
        }
    }
    written += tombstone_matching(
        store,
        Container::Posts,
        Query::cross_partition().eq("userId", user_id),
    )
    .await?;
    // Copies of posts that are gone already (a post deleted while its copy was being written).
    let copies = Query::partition(user_id).of_kind(Kind::Post).limit(PAGE);
    loop {
        let page = retry(|| store.query(Container::Users, &copies)).await?;
        if page.items.is_empty() {
            break;
        }
        for c in &page.items {
            if let Some(id) = str_field(c, "id") {
                for w in remove_copies(id, user_id) {
                    apply::apply_one(store, &w).await?;
                    written += 1;
                }
            }
        }
    }
    Ok(written)
}
