//! C4 and Q5: likes (in their post's partition of `posts`; a like's id is its user's).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::answer::list;
use super::deletion::{mark_in_post, no_content};
use super::items::{add_to_post, announce, change_counter, in_post, withdraw, Added};
use super::schema::PagingParams;
use super::views::{LikePage, LikeView, View};
use super::PathIds;
use super::{AppState, JsonBody, Paging, PathId};
use crate::auth::Caller;
use crate::domain::favorites::Favorite;
use crate::domain::{self, is_live, to_value, Id, Kind, Like};
use crate::error::Problem;
use crate::error::{ApiError, ApiResult};
use crate::store::{Container, Store, StoreError};

/// A like.
#[derive(Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LikeBody {
    /// Who likes the post: the caller's own user (optional when signed in).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) user_id: Option<String>,
}

/// C4 `POST /api/posts/{postId}/likes`: the like's id is derived from the user, so a repeat is
/// a conflict; it answers 200 with the existing like and leaves the count alone.
#[utoipa::path(
    post,
    path = "/api/posts/{postId}/likes",
    tag = "posts",
    summary = "Like a post",
    params(("postId" = String, Path, description = "The post's id")),
    request_body = LikeBody,
    responses(
        (status = 201, description = "The new like", body = LikeView,
            links(
                ("ListLikes" = (operation_id = "list_likes", parameters(("postId" = "$response.body#/postId")))),
                ("DeleteLike" = (operation_id = "delete_like", parameters(("postId" = "$response.body#/postId"), ("userId" = "$response.body#/userId")))),
            )),
        (status = 200, description = "The user already likes the post: the same like, the count unchanged", body = LikeView),
        (status = 404, description = "No such post", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The like changed concurrently; retry", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`userId` names no user", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn create_like(
    State(s): State<AppState>,
    caller: Caller,
    PathId(post_id): PathId,
    JsonBody(body): JsonBody<LikeBody>,
) -> ApiResult<Response> {
    let user_id = caller.acts_as(body.user_id.as_deref())?;
    let resp = like(&s, &caller, &post_id, &user_id).await?;
    // The liker's side of the like, once the like is there (a repeat mends an edge a failure
    // between the two writes left out).
    let edge = Favorite::new(user_id.as_str(), post_id.as_str());
    s.store
        .upsert(Container::Users, user_id.as_str(), to_value(&edge))
        .await?;
    Ok(resp)
}

/// The like of C4 in the post's partition (the answer without the liker's edge).
async fn like(s: &AppState, caller: &Caller, post_id: &Id, user_id: &Id) -> ApiResult<Response> {
    let user_id = user_id.clone();
    let post_id = post_id.clone();
    let username = caller.username(&*s.store, &user_id).await?;
    let like = Like::new(&post_id, &user_id, username);
    match add_to_post(&*s.store, &post_id, to_value(&like), "/likeCount").await? {
        Added::Created(created) => {
            Ok((StatusCode::CREATED, Json(LikeView::from_stored(created)?)).into_response())
        }
        Added::NoSuchPost => Err(ApiError::not_found("post", post_id.as_str())),
        Added::AlreadyThere => {
            let changed = || ApiError::Conflict("the like changed concurrently; retry".into());
            let existing = s
                .store
                .read(Container::Posts, post_id.as_str(), &like.id)
                .await?
                .ok_or_else(changed)?;
            if domain::is_deleted(&existing) {
                if let Some(created) =
                    like_again(&*s.store, &post_id, &existing, to_value(&like)).await?
                {
                    return Ok((StatusCode::CREATED, Json(LikeView::from_stored(created)?))
                        .into_response());
                }
                let now = s
                    .store
                    .read(Container::Posts, post_id.as_str(), &like.id)
                    .await?
                    .filter(|l| is_live(l, Kind::Like))
                    .ok_or_else(changed)?;
                return Ok((StatusCode::OK, Json(LikeView::from_stored(now)?)).into_response());
            }
            Ok((StatusCode::OK, Json(LikeView::from_stored(existing)?)).into_response())
        }
    }
}

/// A like again after an unlike: the like's id is the user's, so its deleted predecessor is
/// still there until its time to live; it is replaced by the new like (if still the deleted
/// version read, so two concurrent likes count once) once the post is known to be live.
/// `None` when the existing like is live after all (a repeat like).
async fn like_again(
    store: &dyn Store,
    post_id: &Id,
    existing: &Value,
    like: Value,
) -> ApiResult<Option<Value>> {
    let post = store
        .read(Container::Posts, post_id.as_str(), post_id.as_str())
        .await?;
    if !post.as_ref().is_some_and(|p| is_live(p, Kind::Post)) {
        return Err(ApiError::not_found("post", post_id.as_str()));
    }
    let id = existing["id"].as_str().unwrap_or_default();
    let etag = existing["_etag"].as_str();
    let pending = announce(store, post_id.as_str()).await?;
    match store
        .replace(Container::Posts, post_id.as_str(), id, like, etag)
        .await
    {
        Ok(created) => {
            change_counter(store, post_id.as_str(), "/likeCount", 1, &pending).await;
            Ok(Some(created))
        }
        // Someone else liked (or unliked) it meanwhile: answer with what is there now.
        Err(StoreError::PreconditionFailed | StoreError::NotFound) => {
            withdraw(store, post_id.as_str(), &pending).await;
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

/// Q5 `GET /api/posts/{postId}/likes`: one query in the post's partition, oldest first.
#[utoipa::path(
    get,
    path = "/api/posts/{postId}/likes",
    tag = "posts",
    summary = "List a post's likes, oldest first",
    description = "One query in the post's partition: an unknown post has an empty list.",
    params(("postId" = String, Path, description = "The post's id"), PagingParams),
    responses(
        (status = 200, description = "One page of likes", body = LikePage,
            headers(("Cache-Control" = String, description = "`no-cache`"))),
    )
)]
pub async fn list_likes(
    State(s): State<AppState>,
    PathId(post_id): PathId,
    paging: Paging,
) -> ApiResult<Response> {
    let q = in_post(&post_id, Kind::Like, paging);
    list::<LikePage>(s.store.query(Container::Posts, &q).await?)
}

/// `GET /api/posts/{postId}/likes/{userId}`: whether the user likes the post, in one point read
/// (the like's id is derived from its user): the like, or 404.
#[utoipa::path(
    get,
    path = "/api/posts/{postId}/likes/{userId}",
    tag = "posts",
    summary = "Read a user's like of a post (does that user like it?)",
    description = "One point read: the like's id is derived from its user. 404 when the user does not like the post, or there is no such post or user.",
    params(
        ("postId" = String, Path, description = "The post's id"),
        ("userId" = String, Path, description = "The user's id"),
    ),
    responses(
        (status = 200, description = "The user likes the post: the like", body = LikeView,
            headers(("Cache-Control" = String, description = "`no-cache`"))),
        (status = 404, description = "The user does not like the post (or there is no such post)", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn get_like(
    State(s): State<AppState>,
    PathIds(post_id, user_id): PathIds,
) -> ApiResult<Response> {
    let id = Like::id_of(user_id.as_str());
    let like = s
        .store
        .read(Container::Posts, post_id.as_str(), &id)
        .await?
        .filter(|l| is_live(l, Kind::Like))
        .ok_or_else(|| {
            ApiError::NotFound(format!("user `{user_id}` does not like post `{post_id}`"))
        })?;
    Ok(super::conditional::no_cache(
        Json(LikeView::from_stored(like)?).into_response(),
    ))
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
    mark_in_post(&*s.store, post_id.as_str(), &id, Kind::Like, None).await?;
    match s
        .store
        .delete(
            Container::Users,
            user_id.as_str(),
            &Favorite::id_of(post_id.as_str()),
        )
        .await
    {
        Ok(()) | Err(StoreError::NotFound) => Ok(no_content()),
        Err(e) => Err(e.into()),
    }
}
