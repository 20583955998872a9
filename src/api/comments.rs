//! C3 and Q4: comments (in their post's partition of `posts`).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use utoipa::ToSchema;

use super::items::{add_to_post, in_post, Added};
use super::schema::{CommentPage, CommentSchema, PagingParams};
use super::{list, AppState, JsonBody, Paging, PathId};
use crate::auth::Caller;
use crate::domain::{public, to_value, Comment, Kind, Text};
use crate::error::Problem;
use crate::error::{ApiError, ApiResult};
use crate::store::Container;

/// A new comment.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommentBody {
    /// The commenter: the caller's own user (optional when signed in).
    user_id: Option<String>,
    /// 1 to 2,000 characters, not only white space.
    #[schema(min_length = 1, max_length = 2000)]
    content: String,
}

/// C3 `POST /api/posts/{postId}/comments`: author read, batch, increment (three operations).
#[utoipa::path(
    post,
    path = "/api/posts/{postId}/comments",
    tag = "posts",
    summary = "Comment on a post",
    params(("postId" = String, Path, description = "The post's id")),
    request_body = CommentBody,
    responses(
        (status = 201, description = "The new comment", body = CommentSchema,
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
    let comment = Comment::new(&post_id, &user_id, username, &content);
    match add_to_post(&*s.store, &post_id, to_value(&comment), "/commentCount").await? {
        Added::Created(created) => Ok((StatusCode::CREATED, Json(public(created))).into_response()),
        Added::NoSuchPost => Err(ApiError::not_found("post", post_id.as_str())),
        // A fresh random id: a collision is a store-level surprise, not the caller's doing.
        Added::AlreadyThere => Err(ApiError::Conflict(
            "a comment with this id already exists; retry".into(),
        )),
    }
}

/// Q4 `GET /api/posts/{postId}/comments`: one query in the post's partition, oldest first.
#[utoipa::path(
    get,
    path = "/api/posts/{postId}/comments",
    tag = "posts",
    summary = "List a post's comments, oldest first",
    description = "One query in the post's partition: an unknown post has an empty list.",
    params(("postId" = String, Path, description = "The post's id"), PagingParams),
    responses(
        (status = 200, description = "One page of comments", body = CommentPage,
            headers(("Cache-Control" = String, description = "`no-cache`"))),
    )
)]
pub async fn list_comments(
    State(s): State<AppState>,
    PathId(post_id): PathId,
    paging: Paging,
) -> ApiResult<Response> {
    let q = in_post(&post_id, Kind::Comment, paging);
    Ok(list(s.store.query(Container::Posts, &q).await?))
}
