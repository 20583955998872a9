//! What the deletes share (each delete's handler lives with its resource: `likes`, `comments`,
//! `posts`, `users`).
//!
//! Nothing is removed outright: the item is marked deleted (see `crate::domain::deletion`), so
//! the change feed carries the deletion to the projections. The request itself does what makes
//! every read hide the deletion at once (the marks, the post's copies, the counter), and the
//! projections repeat what follows when the mark arrives, so a request cut short still ends
//! complete. A comment or like written while its post or author is being deleted goes too (the
//! posts projection marks it when it sees it).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::items::{announce, change_counter, withdraw};
use crate::domain::{is_deleted, is_live, tombstone_ops, Id, Kind};
use crate::error::{ApiError, ApiResult};
use crate::store::{Container, Store, StoreError};

/// How often a mark is retried when the item changed between its read and the mark.
const MARK_ATTEMPTS: usize = 5;

/// What marking an item deleted came to.
pub(super) enum Marked {
    /// This request marked it (and lowered its post's counter).
    Now,
    /// It was not there, or another request marked it first.
    Already,
}

/// Mark comment or like `id` of post `pk` deleted, conditional on the version read, so that of
/// two concurrent deletes only one counts as the deletion, and lower the post's counter by one.
/// The counter change is announced before the mark (a pending count, see
/// [`crate::domain::pending`]), so a process that dies between the mark and the decrement
/// leaves the post to be recounted. `read`: the item as the caller just read it, if it did
/// (saves reading it again).
pub(super) async fn mark_in_post(
    store: &dyn Store,
    pk: &str,
    id: &str,
    kind: Kind,
    mut read: Option<Value>,
) -> ApiResult<Marked> {
    let counter = match kind {
        Kind::Comment => "/commentCount",
        _ => "/likeCount",
    };
    let mut pending = None;
    let mut outcome = Err(ApiError::Conflict(format!(
        "`{id}` kept changing while being deleted; retry"
    )));
    for _ in 0..MARK_ATTEMPTS {
        let item = match read.take() {
            Some(item) => Some(item),
            None => store.read(Container::Posts, pk, id).await?,
        };
        let Some(item) = item.filter(|item| is_live(item, kind)) else {
            outcome = Ok(Marked::Already);
            break;
        };
        let pending_id = match &pending {
            Some(p) => p,
            None => pending.insert(announce(store, pk).await?),
        };
        let etag = item.get("_etag").and_then(Value::as_str);
        match store
            .patch(Container::Posts, pk, id, &tombstone_ops(kind), etag)
            .await
        {
            Ok(_) => {
                change_counter(store, pk, counter, -1, pending_id).await;
                return Ok(Marked::Now);
            }
            Err(StoreError::NotFound) => {
                outcome = Ok(Marked::Already);
                break;
            }
            // Changed meanwhile (a rename reached it, or another delete): look again.
            Err(StoreError::PreconditionFailed) => continue,
            Err(e) => {
                outcome = Err(e.into());
                break;
            }
        }
    }
    if let Some(p) = pending {
        withdraw(store, pk, &p).await;
    }
    outcome
}

pub(super) fn no_content() -> Response {
    StatusCode::NO_CONTENT.into_response()
}

/// After a write that patched a user or post without reading it first: if the item turned out
/// to be deleted (the write raced its deletion), blank it again and answer 404.
pub async fn refuse_if_deleted(
    store: &dyn Store,
    container: Container,
    id: &Id,
    written: &Value,
    kind: Kind,
) -> ApiResult<()> {
    if !is_deleted(written) {
        return Ok(());
    }
    let ops = tombstone_ops(kind);
    store
        .patch(container, id.as_str(), id.as_str(), &ops, None)
        .await?;
    Err(ApiError::not_found(kind.as_str(), id.as_str()))
}
