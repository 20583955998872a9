//! What comments and likes share: they live in their post's partition, are created only while
//! the post exists, change the post's counter (announced by a pending count), and are listed
//! oldest first.

use serde_json::Value;

use super::Paging;
use crate::domain::pending::pending_count;
use crate::domain::{self, tombstone_ops, Id, Kind};
use crate::store::{BatchOp, Container, Order, PatchOp, Query, Store, StoreError};

/// What adding a comment or like to a post came to.
pub(super) enum Added {
    /// Stored (and counted); the stored item.
    Created(Value),
    /// The post does not exist or is deleted; nothing visible was written.
    NoSuchPost,
    /// An item with this id is already in the post (a repeat like); nothing was written.
    AlreadyThere,
}

/// Create `item` in the post's partition only if the post exists, atomically (one batch of
/// read + create, which also creates a pending count: see [`crate::domain::pending`]), then bump
/// the post's counter with a server-side increment and delete the pending count. The increment
/// makes the count fresh at once; should the process die before it lands, the pending count
/// left behind makes the posts projection recount the post. Should the batch find the post
/// deleted, the new item is marked deleted at once (a batch cannot make a create depend on a
/// property of another item).
pub(super) async fn add_to_post(
    store: &dyn Store,
    post_id: &Id,
    item: Value,
    counter: &str,
) -> Result<Added, StoreError> {
    const READ_POST: usize = 0;
    const CREATE_ITEM: usize = 1;
    let pending = pending_count(post_id.as_str(), &domain::now());
    let pending_id = pending["id"].as_str().unwrap_or_default().to_string();
    let batch = store
        .batch(
            Container::Posts,
            post_id.as_str(),
            vec![
                BatchOp::Read {
                    id: post_id.to_string(),
                },
                BatchOp::Create { item },
                BatchOp::Create { item: pending },
            ],
        )
        .await;
    let created = match batch {
        Ok(results) if results.get(READ_POST).is_some_and(domain::is_deleted) => {
            let item = &results[CREATE_ITEM];
            if let (Some(kind), Some(id)) = (Kind::of(item), item["id"].as_str()) {
                store
                    .patch(
                        Container::Posts,
                        post_id.as_str(),
                        id,
                        &tombstone_ops(kind),
                        None,
                    )
                    .await?;
            }
            // Its pending count goes with the post (the posts projection deletes it).
            return Ok(Added::NoSuchPost);
        }
        Ok(results) => results.into_iter().nth(CREATE_ITEM).unwrap_or(Value::Null),
        Err(StoreError::BatchFailed { index, source }) => match (index, *source) {
            (READ_POST, StoreError::NotFound) => return Ok(Added::NoSuchPost),
            (CREATE_ITEM, StoreError::Conflict) => return Ok(Added::AlreadyThere),
            (index, source) => {
                return Err(StoreError::BatchFailed {
                    index,
                    source: Box::new(source),
                })
            }
        },
        Err(e) => return Err(e),
    };
    change_counter(store, post_id.as_str(), counter, 1, &pending_id).await;
    Ok(Added::Created(created))
}

/// Announce a change of a post's counter that is about to be made: create a pending count in
/// its partition. Returns its id, for [`change_counter`].
pub(super) async fn announce(store: &dyn Store, post_id: &str) -> Result<String, StoreError> {
    let pending = pending_count(post_id, &domain::now());
    let id = pending["id"].as_str().unwrap_or_default().to_string();
    store.create(Container::Posts, post_id, pending).await?;
    Ok(id)
}

/// Delete pending count `pending_id`, announced for a change that was not made after all. Best
/// effort: one left behind costs one recount of the post.
pub(super) async fn withdraw(store: &dyn Store, post_id: &str, pending_id: &str) {
    match store.delete(Container::Posts, post_id, pending_id).await {
        Ok(()) | Err(StoreError::NotFound) => {}
        Err(e) => {
            tracing::warn!(error = %e, post = %post_id, "unneeded pending count not deleted; the change feed will recount the post");
        }
    }
}

/// Change a post's counter by `by` (server-side, so concurrent changes never overwrite each
/// other) once the item's own write has landed, then delete the pending count `pending_id`
/// that announced it. Best effort: on a failure the pending count stays and the posts
/// projection recounts the post, so a failure is logged, not answered. A pending count already
/// gone was taken by a recount that decided this change lost: a new one is made, so the post is
/// recounted again with the change in place.
pub(super) async fn change_counter(
    store: &dyn Store,
    post_id: &str,
    counter: &str,
    by: i64,
    pending_id: &str,
) {
    let ops = [PatchOp::incr(counter, by)];
    if let Err(e) = store
        .patch(Container::Posts, post_id, post_id, &ops, None)
        .await
    {
        tracing::warn!(error = %e, post = %post_id, counter, "counter change failed; the change feed will recount the post");
        return;
    }
    match store.delete(Container::Posts, post_id, pending_id).await {
        Ok(()) => {}
        Err(StoreError::NotFound) => {
            if let Err(e) = announce(store, post_id).await {
                tracing::warn!(error = %e, post = %post_id, counter, "counter change landed after a recount and could not be announced again");
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, post = %post_id, counter, "pending count not deleted; the change feed will recount the post");
        }
    }
}

pub(super) fn in_post(post_id: &Id, kind: Kind, paging: Paging) -> Query {
    Query::partition(post_id.as_str())
        .of_kind(kind)
        .live()
        .order_by_creation(Order::Asc)
        .limit(paging.limit)
        .continuation(paging.continuation)
}
