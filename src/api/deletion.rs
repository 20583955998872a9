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

use crate::domain::{is_deleted, is_live, tombstone_ops, Id, Kind};
use crate::error::{ApiError, ApiResult};
use crate::projection::plan::Counted;
use crate::store::{Container, PatchOp, Query, Store, StoreError};

/// How often a mark is retried when the item changed between its read and the mark.
const MARK_ATTEMPTS: usize = 5;

/// What marking an item deleted came to.
pub(super) enum Marked {
    /// This request marked it.
    Now,
    /// It was not there, or another request marked it first.
    Already,
}

/// Mark item `id` of partition `pk` in `posts` deleted, conditional on the version read, so that
/// of two concurrent deletes only one counts as the deletion (and recounts the post).
/// `read`: the item as the caller just read it, if it did (saves reading it again).
pub(super) async fn mark_in_post(
    store: &dyn Store,
    pk: &str,
    id: &str,
    kind: Kind,
    mut read: Option<Value>,
) -> ApiResult<Marked> {
    for _ in 0..MARK_ATTEMPTS {
        let item = match read.take() {
            Some(item) => Some(item),
            None => store.read(Container::Posts, pk, id).await?,
        };
        let Some(item) = item else {
            return Ok(Marked::Already);
        };
        if !is_live(&item, kind) {
            return Ok(Marked::Already);
        }
        let etag = item.get("_etag").and_then(Value::as_str);
        match store
            .patch(Container::Posts, pk, id, &tombstone_ops(kind), etag)
            .await
        {
            Ok(_) => return Ok(Marked::Now),
            Err(StoreError::NotFound) => return Ok(Marked::Already),
            // Changed meanwhile (a rename reached it, or another delete): look again.
            Err(StoreError::PreconditionFailed) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(ApiError::Conflict(format!(
        "`{id}` kept changing while being deleted; retry"
    )))
}

/// Make the post's counter right after this request deleted one of its items: set it to the
/// number of live items, as the posts projection's recount does. A set, not a decrement: the
/// projection may see the mark first and recount already, and two decrements would count the
/// deletion twice. Only if the post is still at the version read (a concurrent increment wins
/// and is recounted in turn). Best effort, like the increment: the recount repeats it.
pub(super) async fn recount(store: &dyn Store, post_id: &str, counted: Counted) {
    let result = async {
        let Some(post) = store.read(Container::Posts, post_id, post_id).await? else {
            return Ok(());
        };
        let q = Query::partition(post_id).of_kind(counted.kind()).live();
        let n = store.count(Container::Posts, &q).await?;
        let field = counted.path().trim_start_matches('/');
        if post.get(field).and_then(Value::as_u64) == Some(n) {
            return Ok(());
        }
        let etag = post.get("_etag").and_then(Value::as_str);
        let ops = [PatchOp::set(counted.path(), n)];
        match store
            .patch(Container::Posts, post_id, post_id, &ops, etag)
            .await
        {
            Ok(_) | Err(StoreError::PreconditionFailed | StoreError::NotFound) => Ok(()),
            Err(e) => Err(e),
        }
    }
    .await;
    if let Err(e) = result {
        tracing::warn!(error = %e, post = post_id, counter = counted.path(), "counter recount failed; the change feed recount will fix it");
    }
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
