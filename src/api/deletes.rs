//! Deletes: unlike, delete a comment, delete a post, erase an account.
//!
//! Nothing is removed outright: the item is marked deleted (see `crate::domain::deletion`), so
//! the change feed carries the deletion to the projections. The request itself does what makes
//! every read hide the deletion at once (the marks, the post's copies, the counter), and the
//! projections repeat what follows when the mark arrives, so a request cut short still ends
//! complete. A comment or like written while its post or author is being deleted goes too (the
//! posts projection marks it when it sees it).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::{AppState, PathId, PathIds};
use crate::auth::Caller;
use crate::domain::{is_deleted, is_live, tombstone_ops, Id, Kind, Like};
use crate::error::Problem;
use crate::error::{ApiError, ApiResult};
use crate::projection::erase;
use crate::projection::plan::Counted;
use crate::store::{Container, PatchOp, Query, Store, StoreError};

/// How often a mark is retried when the item changed between its read and the mark.
const MARK_ATTEMPTS: usize = 5;

/// What marking an item deleted came to.
enum Marked {
    /// This request marked it.
    Now,
    /// It was not there, or another request marked it first.
    Already,
}

/// Mark item `id` of partition `pk` in `posts` deleted, conditional on the version read, so that
/// of two concurrent deletes only one counts as the deletion (and recounts the post).
/// `read`: the item as the caller just read it, if it did (saves reading it again).
async fn mark_in_post(
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
async fn recount(store: &dyn Store, post_id: &str, counted: Counted) {
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

fn no_content() -> Response {
    StatusCode::NO_CONTENT.into_response()
}

/// `DELETE /api/posts/{postId}/likes/{userId}`: the user no longer likes the post. Idempotent.
#[utoipa::path(
    delete,
    path = "/api/posts/{postId}/likes/{userId}",
    tag = "posts",
    summary = "Unlike a post (that user only)",
    description = "Idempotent: 204 whether or not the user liked the post. The like leaves the likes list and `likeCount` at once.",
    params(
        ("postId" = String, Path, description = "The post's id"),
        ("userId" = String, Path, description = "The user whose like goes: the caller's own user"),
    ),
    responses(
        (status = 204, description = "The user does not like the post (any more)"),
        (status = 403, description = "The like is not the signed-in caller's", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The like kept changing while being deleted; retry", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn delete_like(
    State(s): State<AppState>,
    caller: Caller,
    PathIds(post_id, user_id): PathIds,
) -> ApiResult<Response> {
    caller.may_act_for(&[user_id.as_str()], || {
        format!("only user `{user_id}` may take back their like")
    })?;
    let id = Like::id_of(user_id.as_str());
    if let Marked::Now = mark_in_post(&*s.store, post_id.as_str(), &id, Kind::Like, None).await? {
        recount(&*s.store, post_id.as_str(), Counted::Likes).await;
    }
    Ok(no_content())
}

/// `DELETE /api/posts/{postId}/comments/{commentId}`: by the comment's author or the post's.
#[utoipa::path(
    delete,
    path = "/api/posts/{postId}/comments/{commentId}",
    tag = "posts",
    summary = "Delete a comment (its author or the post's author)",
    description = "The comment leaves the comments list and `commentCount` at once.",
    params(
        ("postId" = String, Path, description = "The post's id"),
        ("commentId" = String, Path, description = "The comment's id"),
    ),
    responses(
        (status = 204, description = "The comment is deleted"),
        (status = 403, description = "The signed-in caller wrote neither the comment nor the post", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such comment on this post (or it is deleted already)", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The comment kept changing while being deleted; retry", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn delete_comment(
    State(s): State<AppState>,
    caller: Caller,
    PathIds(post_id, comment_id): PathIds,
) -> ApiResult<Response> {
    let store = &*s.store;
    let comment = store
        .read(Container::Posts, post_id.as_str(), comment_id.as_str())
        .await?
        .filter(|c| is_live(c, Kind::Comment))
        .ok_or_else(|| ApiError::not_found("comment", comment_id.as_str()))?;
    let author = comment["userId"].as_str().unwrap_or_default().to_string();
    if caller.may_act_for(&[&author], String::new).is_err() {
        // Not the comment's author: the post's author may delete it too (one more read).
        let post = store
            .read(Container::Posts, post_id.as_str(), post_id.as_str())
            .await?;
        let post_author = post.as_ref().and_then(|p| p["userId"].as_str());
        caller.may_act_for(&post_author.into_iter().collect::<Vec<_>>(), || {
            format!("only its author or the post's author may delete comment `{comment_id}`")
        })?;
    }
    match mark_in_post(
        store,
        post_id.as_str(),
        comment_id.as_str(),
        Kind::Comment,
        Some(comment),
    )
    .await?
    {
        Marked::Now => {
            recount(store, post_id.as_str(), Counted::Comments).await;
            Ok(no_content())
        }
        Marked::Already => Err(ApiError::not_found("comment", comment_id.as_str())),
    }
}

/// `DELETE /api/posts/{postId}`: by its author; its comments and likes go with it.
#[utoipa::path(
    delete,
    path = "/api/posts/{postId}",
    tag = "posts",
    summary = "Delete a post with its comments and likes (its author only)",
    description = "The post answers 404 at once and leaves its author's posts and the feed. Its comments and likes leave their lists at once too, up to 200 of them; beyond that, a page at a time shortly after (the change feed marks the rest without holding up other posts).",
    params(("postId" = String, Path, description = "The post's id")),
    responses(
        (status = 204, description = "The post is deleted"),
        (status = 403, description = "The signed-in caller is not the post's author", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such post (or it is deleted already)", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn delete_post(
    State(s): State<AppState>,
    caller: Caller,
    PathId(post_id): PathId,
) -> ApiResult<Response> {
    let store = &*s.store;
    let post = store
        .read(Container::Posts, post_id.as_str(), post_id.as_str())
        .await?
        .filter(|p| is_live(p, Kind::Post))
        .ok_or_else(|| ApiError::not_found("post", post_id.as_str()))?;
    let author = post["userId"].as_str().unwrap_or_default();
    caller.may_act_for(&[author], || {
        format!("only the author may delete post `{post_id}`")
    })?;
    erase::post(store, post_id.as_str(), author).await?;
    s.feed.forget();
    Ok(no_content())
}

/// `DELETE /api/users/{userId}`: the user themself; everything of theirs goes.
#[utoipa::path(
    delete,
    path = "/api/users/{userId}",
    tag = "users",
    summary = "Erase an account (that user only)",
    description = "The user answers 404 at once; their posts (with every comment and like on them) and their comments and likes on other posts are deleted, their name blanked on all of it. Once the change feed has carried the erasure everywhere, the same identity may create a user again.",
    params(("userId" = String, Path, description = "The user's id: the caller's own user")),
    responses(
        (status = 204, description = "The account is erased"),
        (status = 403, description = "The user is not the signed-in caller's", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such user (or it is erased already)", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn delete_user(
    State(s): State<AppState>,
    caller: Caller,
    PathId(user_id): PathId,
) -> ApiResult<Response> {
    caller.may_act_for(&[user_id.as_str()], || {
        format!("only its owner may erase user `{user_id}`")
    })?;
    let store = &*s.store;
    let uid = user_id.as_str();
    store
        .read(Container::Users, uid, uid)
        .await?
        .filter(|u| is_live(u, Kind::User))
        .ok_or_else(|| ApiError::not_found("user", uid))?;
    // The user first: from here their writes are refused, and the change feed carries the
    // erasure even if this request goes no further.
    match store
        .patch(Container::Users, uid, uid, &tombstone_ops(Kind::User), None)
        .await
    {
        Ok(_) => {}
        Err(StoreError::NotFound) => return Err(ApiError::not_found("user", uid)),
        Err(e) => return Err(e.into()),
    }
    // The first steps, a page's worth of writes (most accounts are gone after them); the users
    // projection takes the rest a step at a time, so an account of any size holds up no one
    // else's changes.
    erase::user_steps(store, uid, erase::PAGE as usize).await?;
    s.feed.forget();
    Ok(no_content())
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
