//! What comments and likes share: they live in their post's partition, are created only while
//! the post exists, bump the post's counter, and are listed oldest first.

use serde_json::Value;

use super::Paging;
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
/// read + create), then bump the post's counter with a server-side increment. The increment
/// makes the count fresh at once; the change feed's recount corrects it should the process die
/// between the two writes. Should the batch find the post deleted, the new item is marked
/// deleted at once (a batch cannot make a create depend on a property of another item).
pub(super) async fn add_to_post(
    store: &dyn Store,
    post_id: &Id,
    item: Value,
    counter: &str,
) -> Result<Added, StoreError> {
    const READ_POST: usize = 0;
    const CREATE_ITEM: usize = 1;
    let batch = store
        .batch(
            Container::Posts,
            post_id.as_str(),
            vec![
                BatchOp::Read {
                    id: post_id.to_string(),
                },
                BatchOp::Create { item },
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
    increment(store, post_id, counter).await;
    Ok(Added::Created(created))
}

/// Bump a post's counter after one of its items was stored. Best effort: the item is stored and
/// the change feed's recount will count it, so a failure is logged, not answered.
pub(super) async fn increment(store: &dyn Store, post_id: &Id, counter: &str) {
    let ops = [PatchOp::incr(counter, 1)];
    if let Err(e) = store
        .patch(
            Container::Posts,
            post_id.as_str(),
            post_id.as_str(),
            &ops,
            None,
        )
        .await
    {
        tracing::warn!(error = %e, post = %post_id, counter, "counter increment failed; the change feed recount will fix it");
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
