//! C3 and Q4: comments (in their post's partition of `posts`).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures::TryFutureExt;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::answer::list;
use super::deletion::{mark_in_post, no_content, Marked};
use super::items::{add_to_post, in_post, Added};
use super::mutes::{muted_by, Reader};
use super::schema::PagingParams;
use super::views::{CommentPage, CommentView, View};
use super::PathIds;
use super::{AppState, JsonBody, Paging, PathId};
use crate::auth::Caller;
use crate::domain::is_live;
use crate::domain::{to_value, Authored, Comment, Id, Kind, Text};
use crate::error::Problem;
use crate::error::{ApiError, ApiResult};
use crate::store::Container;

/// A new comment.
#[derive(Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommentBody {
    /// The commenter: the caller's own user (optional when signed in).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) user_id: Option<String>,
    /// 1 to 2,000 characters, not only white space.
    #[schema(min_length = 1, max_length = 2000)]
    pub(super) content: String,
}

/// C3 `POST /api/posts/{postId}/comments`: author read, batch, increment, the pending count
/// deleted (four operations).
#[utoipa::path(
    post,
    path = "/api/posts/{postId}/comments",
    tag = "posts",
    summary = "Comment on a post",
    params(("postId" = String, Path, description = "The post's id")),
    request_body = CommentBody,
    responses(
        (status = 201, description = "The new comment", body = CommentView,
            links(
                ("ListComments" = (operation_id = "list_comments", parameters(("postId" = "$response.body#/postId")))),
                ("DeleteComment" = (operation_id = "delete_comment", parameters(("postId" = "$response.body#/postId"), ("commentId" = "$response.body#/id")))),
            )),
        (status = 404, description = "No such post", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`userId` names no user", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn create_comment(
    State(s): State<AppState>,
    caller: Caller,
    PathId(post_id): PathId,
    JsonBody(body): JsonBody<CommentBody>,
) -> ApiResult<Response> {
    let user_id = caller.acts_as(body.user_id.as_deref())?;
    let content = Text::comment_content(&body.content)?;
    let username = caller.username(&*s.store, &user_id).await?;
    // A comment's number collides with another only by chance (two comments in the same
    // millisecond drawing the same random part): such a create is tried again with a new one.
    for _ in 0..NUMBER_ATTEMPTS {
        let comment = Comment::new(&post_id, &user_id, username.clone(), &content);
        match add_to_post(&*s.store, &post_id, to_value(&comment), "/commentCount").await? {
            Added::Created(created) => {
                return Ok((
                    StatusCode::CREATED,
                    Json(CommentView::from_stored(created)?),
                )
                    .into_response())
            }
            Added::NoSuchPost => return Err(ApiError::not_found("post", post_id.as_str())),
            Added::AlreadyThere => continue,
        }
    }
    Err(ApiError::Conflict(
        "a comment with this id already exists; retry".into(),
    ))
}

/// Times a comment's creation draws a new number after meeting one that is taken.
const NUMBER_ATTEMPTS: usize = 4;

/// Q4 `GET /api/posts/{postId}/comments`: one query in the post's partition, oldest first.
#[utoipa::path(
    get,
    path = "/api/posts/{postId}/comments",
    operation_id = "list_comments",
    tag = "posts",
    summary = "List a post's comments, oldest first",
    description = "One query in the post's partition: an unknown post has an empty list. The comments of the users the reader has muted are left out (the reader: the signed-in caller, or the user `viewerId` names), so a page may hold fewer than `limit` comments and still have a next page; knowing the reader adds one point read, of their mute list, made alongside the query.",
    params(("postId" = String, Path, description = "The post's id"), ("viewerId" = Option<String>, Query, description = "Read as this user, without the comments of whom they muted: the caller's own user (by default, the signed-in caller's)", example = "a7e2d9c4-1b3f-4e6a-8d5c-9f0e2b7a4c13"), PagingParams),
    responses(
        (status = 200, description = "One page of comments", body = CommentPage,
            headers(("Cache-Control" = String, description = "`no-cache`"))),
        (status = 401, description = "`viewerId` without a valid identity (authentication is on)", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "`viewerId` is not the signed-in caller's user", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn read_comments(
    State(s): State<AppState>,
    PathId(post_id): PathId,
    Reader(reader): Reader,
    paging: Paging,
) -> ApiResult<Response> {
    let q = in_post(&post_id, Kind::Comment, paging);
    let page = s.store.query(Container::Posts, &q).err_into();
    let (mut page, muted) = futures::try_join!(page, muted_by(&*s.store, reader.as_ref()))?;
    // The reader's muted users' comments are left out; the page keeps its place in the list.
    page.items
        .retain(|c| Authored::author_of(c).is_none_or(|a| !muted.contains(&a)));
    list::<CommentPage>(page)
}

/// A post's comments as `reader` reads them, without the comments of whom they muted; as
/// nobody in particular with none (the RealWorld API's list).
pub async fn comments_read_by(
    s: State<AppState>,
    p: PathId,
    reader: Option<Id>,
    paging: Paging,
) -> ApiResult<Response> {
    read_comments(s, p, Reader(reader), paging).await
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
    let author = Authored::author_of(&comment).unwrap_or_default();
    if caller.may_act_for(&[&author], String::new).is_err() {
        // Not the comment's author: the post's author may delete it too (one more read).
        let post = store
            .read(Container::Posts, post_id.as_str(), post_id.as_str())
            .await?;
        let post_author = post.as_ref().and_then(Authored::author_of);
        let post_author: Vec<&str> = post_author.iter().map(String::as_str).collect();
        caller.may_act_for(&post_author, || {
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
        Marked::Now => Ok(no_content()),
        Marked::Already => Err(ApiError::not_found("comment", comment_id.as_str())),
    }
}
