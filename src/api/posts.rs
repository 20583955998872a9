//! C2–C4, Q2, Q4–Q6: posts, comments and likes (in `posts`, partition `postId`) and the feed.

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::conditional::{no_cache, tagged, IfMatch, IfMatchParam, IfNoneMatch, IfNoneMatchParam};
use super::schema::{
    CommentPage, CommentSchema, LikePage, LikeSchema, PagingParams, PostSchema, PostSummaryPage,
};
use super::{json_response, list, list_body, AppState, JsonBody, Paging, PathId};
use crate::auth::Caller;
use crate::domain::{
    self, is_live, public, to_value, tombstone_ops, Comment, Id, Like, Post, Text, FEED_PK,
    FEED_SIZE,
};
use crate::error::Problem;
use crate::error::{ApiError, ApiResult};
use crate::store::{BatchOp, Container, Order, PatchOp, Query, Store, StoreError};

/// A new post, or a post's new title and content.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PostBody {
    /// The author: the caller's own user. Optional when signed in; with `BLOG_AUTH=none` it
    /// says who acts.
    user_id: Option<String>,
    /// 1 to 200 characters, not only white space.
    #[schema(min_length = 1, max_length = 200)]
    title: String,
    /// 1 to 20,000 characters, not only white space.
    #[schema(min_length = 1, max_length = 20000)]
    content: String,
}

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

/// A like.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LikeBody {
    /// Who likes the post: the caller's own user (optional when signed in).
    user_id: Option<String>,
}

/// C2 `POST /api/posts`: read the author's name, then create the post (two operations).
#[utoipa::path(
    post,
    path = "/api/posts",
    tag = "posts",
    summary = "Create a post",
    request_body = PostBody,
    responses(
        (status = 201, description = "The new post: no comments or likes yet, the author's username set", body = PostSchema,
            headers(
                ("Location" = String, description = "`/api/posts/{id}`"),
                ("ETag" = String, description = "The post's version, for `If-None-Match` / `If-Match`"),
            ),
            links(
                ("GetPost" = (operation_id = "get_post", parameters(("postId" = "$response.body#/id")))),
                ("UpdatePost" = (operation_id = "update_post", parameters(("postId" = "$response.body#/id")))),
                ("ListComments" = (operation_id = "list_comments", parameters(("postId" = "$response.body#/id")))),
                ("CreateComment" = (operation_id = "create_comment", parameters(("postId" = "$response.body#/id")),
                    request_body = json!({"userId": "$response.body#/userId", "content": "First!"}))),
                ("ListLikes" = (operation_id = "list_likes", parameters(("postId" = "$response.body#/id")))),
                ("CreateLike" = (operation_id = "create_like", parameters(("postId" = "$response.body#/id")),
                    request_body = json!({"userId": "$response.body#/userId"}))),
                ("DeletePost" = (operation_id = "delete_post", parameters(("postId" = "$response.body#/id")))),
            )),
        (status = 422, description = "`userId` names no user", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn create_post(
    State(s): State<AppState>,
    caller: Caller,
    JsonBody(body): JsonBody<PostBody>,
) -> ApiResult<Response> {
    let user_id = caller.acts_as(body.user_id.as_deref())?;
    let title = Text::title(&body.title)?;
    let content = Text::post_content(&body.content)?;
    let username = caller.username(&*s.store, &user_id).await?;
    let id = Id::new();
    let post = Post {
        id: id.to_string(),
        kind: "post".into(),
        post_id: id.to_string(),
        user_id: user_id.to_string(),
        user_username: username,
        title: title.as_str().into(),
        content: content.as_str().into(),
        comment_count: 0,
        like_count: 0,
        creation_date: domain::now(),
    };
    let stored = s
        .store
        .create(Container::Posts, id.as_str(), to_value(&post))
        .await?;
    let resp = (
        StatusCode::CREATED,
        [(header::LOCATION, format!("/api/posts/{id}"))],
        Json(public(stored.clone())),
    )
        .into_response();
    Ok(tagged(resp, &stored))
}

/// C2 `PUT /api/posts/{postId}`: read the post (its author), then patch title and content, so a
/// concurrent counter change is never overwritten (two operations). With `If-Match`, the patch
/// is conditional on the post's `_etag`, checked by the store itself.
#[utoipa::path(
    put,
    path = "/api/posts/{postId}",
    tag = "posts",
    summary = "Edit a post (its author only)",
    description = "With `If-Match`, only while the post is still at that version. Who may edit is checked before the version, so someone else gets 403 whatever the tag.",
    params(("postId" = String, Path, description = "The post's id"), IfMatchParam),
    request_body = PostBody,
    responses(
        (status = 200, description = "The edited post", body = PostSchema,
            headers(("ETag" = String, description = "The post's new version"))),
        (status = 403, description = "`userId` is not the post's author (also when it names no user)", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such post", body = Problem, content_type = "application/problem+json"),
        (status = 412, description = "The post changed since the version `If-Match` names", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn update_post(
    State(s): State<AppState>,
    caller: Caller,
    PathId(id): PathId,
    if_match: Option<IfMatch>,
    JsonBody(body): JsonBody<PostBody>,
) -> ApiResult<Response> {
    let user_id = caller.acts_as(body.user_id.as_deref())?;
    let title = Text::title(&body.title)?;
    let content = Text::post_content(&body.content)?;
    let post = read_post(&*s.store, &id).await?;
    if post["userId"].as_str() != Some(user_id.as_str()) {
        return Err(ApiError::Forbidden(format!(
            "only the author may edit post `{id}`"
        )));
    }
    let etag = if_match.as_ref().and_then(IfMatch::etag);
    if etag.is_some() && etag != post["_etag"].as_str() {
        return Err(StoreError::PreconditionFailed.into());
    }
    let ops = [
        PatchOp::set("/title", title.as_str()),
        PatchOp::set("/content", content.as_str()),
    ];
    match s
        .store
        .patch(Container::Posts, id.as_str(), id.as_str(), &ops, etag)
        .await
    {
        Ok(post) => {
            super::deletes::refuse_if_deleted(&*s.store, Container::Posts, &id, &post, "post")
                .await?;
            Ok(tagged(Json(public(post.clone())).into_response(), &post))
        }
        Err(StoreError::NotFound) => Err(ApiError::not_found("post", id.as_str())),
        Err(e) => Err(e.into()),
    }
}

async fn read_post(store: &dyn Store, id: &Id) -> ApiResult<Value> {
    match store
        .read(Container::Posts, id.as_str(), id.as_str())
        .await?
    {
        Some(post) if is_live(&post, "post") => Ok(post),
        _ => Err(ApiError::not_found("post", id.as_str())),
    }
}

/// Q2 `GET /api/posts/{postId}`: one point read (conditional on `If-None-Match`); name and
/// counters are on the post.
#[utoipa::path(
    get,
    path = "/api/posts/{postId}",
    tag = "posts",
    summary = "Read a post with its author's username and both counts",
    params(("postId" = String, Path, description = "The post's id"), IfNoneMatchParam),
    responses(
        (status = 200, description = "The post", body = PostSchema,
            headers(
                ("ETag" = String, description = "The post's version (it changes with the counts too)"),
                ("Cache-Control" = String, description = "`no-cache`: revalidate with `If-None-Match`"),
            )),
        (status = 304, description = "The version `If-None-Match` names is current (no body)",
            headers(("ETag" = String, description = "The post's version"))),
        (status = 404, description = "No such post", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn get_post(
    State(s): State<AppState>,
    PathId(id): PathId,
    if_none_match: Option<IfNoneMatch>,
) -> ApiResult<Response> {
    let read = super::read_item(&*s.store, Container::Posts, &id, if_none_match).await?;
    super::item_response(read, |post| is_live(post, "post"))
        .ok_or_else(|| ApiError::not_found("post", id.as_str()))
}

/// What adding a comment or like to a post came to.
enum Added {
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
async fn add_to_post(
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
            let kind = item["type"].as_str().unwrap_or_default();
            if let Some(id) = item["id"].as_str() {
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
async fn increment(store: &dyn Store, post_id: &Id, counter: &str) {
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
    if !post.as_ref().is_some_and(|p| is_live(p, "post")) {
        return Err(ApiError::not_found("post", post_id.as_str()));
    }
    let id = existing["id"].as_str().unwrap_or_default();
    let etag = existing["_etag"].as_str();
    match store
        .replace(Container::Posts, post_id.as_str(), id, like, etag)
        .await
    {
        Ok(created) => {
            increment(store, post_id, "/likeCount").await;
            Ok(Some(created))
        }
        // Someone else liked (or unliked) it meanwhile: answer with what is there now.
        Err(StoreError::PreconditionFailed | StoreError::NotFound) => Ok(None),
        Err(e) => Err(e.into()),
    }
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
    let comment = Comment {
        id: Id::new().to_string(),
        kind: "comment".into(),
        post_id: post_id.to_string(),
        user_id: user_id.to_string(),
        user_username: username,
        content: content.as_str().into(),
        creation_date: domain::now(),
    };
    match add_to_post(&*s.store, &post_id, to_value(&comment), "/commentCount").await? {
        Added::Created(created) => Ok((StatusCode::CREATED, Json(public(created))).into_response()),
        Added::NoSuchPost => Err(ApiError::not_found("post", post_id.as_str())),
        // A fresh random id: a collision is a store-level surprise, not the caller's doing.
        Added::AlreadyThere => Err(ApiError::Conflict(
            "a comment with this id already exists; retry".into(),
        )),
    }
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
        (status = 201, description = "The new like", body = LikeSchema,
            links(
                ("ListLikes" = (operation_id = "list_likes", parameters(("postId" = "$response.body#/postId")))),
                ("DeleteLike" = (operation_id = "delete_like", parameters(("postId" = "$response.body#/postId"), ("userId" = "$response.body#/userId")))),
            )),
        (status = 200, description = "The user already likes the post: the same like, the count unchanged", body = LikeSchema),
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
    let username = caller.username(&*s.store, &user_id).await?;
    let like = Like {
        id: domain::like_id(user_id.as_str()),
        kind: "like".into(),
        post_id: post_id.to_string(),
        user_id: user_id.to_string(),
        user_username: username,
        creation_date: domain::now(),
    };
    match add_to_post(&*s.store, &post_id, to_value(&like), "/likeCount").await? {
        Added::Created(created) => Ok((StatusCode::CREATED, Json(public(created))).into_response()),
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
                    return Ok((StatusCode::CREATED, Json(public(created))).into_response());
                }
                let now = s
                    .store
                    .read(Container::Posts, post_id.as_str(), &like.id)
                    .await?
                    .filter(|l| is_live(l, "like"))
                    .ok_or_else(changed)?;
                return Ok((StatusCode::OK, Json(public(now))).into_response());
            }
            Ok((StatusCode::OK, Json(public(existing))).into_response())
        }
    }
}

fn in_post(post_id: &Id, kind: &str, paging: Paging) -> Query {
    Query::partition(post_id.as_str())
        .eq("type", kind)
        .live()
        .order_by_creation(Order::Asc)
        .limit(paging.limit)
        .continuation(paging.continuation)
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
    let q = in_post(&post_id, "comment", paging);
    Ok(list(s.store.query(Container::Posts, &q).await?))
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
    let q = in_post(&post_id, "like", paging);
    Ok(list(s.store.query(Container::Posts, &q).await?))
}

/// Q6 `GET /api/feed?limit=x`: one query in the feed's single partition, newest first, never
/// paging past the [`FEED_SIZE`] newest (while two projections insert at once the container can
/// briefly hold more; the next projection trims it). The continuation token carries how many
/// entries earlier pages served: `<served>.<store token>`. A first page may come from the
/// process's snapshot of the feed (no store call, see `feed_cache`).
#[utoipa::path(
    get,
    path = "/api/feed",
    tag = "feed",
    summary = "The newest posts (at most 100), newest first, in short form",
    params(PagingParams),
    responses(
        (status = 200, description = "One page of the feed", body = PostSummaryPage,
            headers(("Cache-Control" = String, description = "`no-cache`"))),
    )
)]
pub async fn get_feed(State(s): State<AppState>, paging: Paging) -> ApiResult<Response> {
    let first = paging.continuation.is_none();
    if first {
        if let Some(body) = s.feed.get(paging.limit) {
            return Ok(no_cache(json_response(body)));
        }
    }
    let stamp = s.feed.stamp();
    let (served, inner) = match paging.continuation.as_deref() {
        None => (0, None),
        Some(token) => token
            .split_once('.')
            .and_then(|(n, t)| Some((n.parse::<usize>().ok()?, t)))
            .filter(|(n, t)| *n < FEED_SIZE && !t.is_empty())
            .map(|(n, t)| (n, Some(t.to_string())))
            .ok_or_else(|| ApiError::BadRequest("`continuationToken` is not valid".into()))?,
    };
    let q = Query::partition(FEED_PK)
        .eq("type", "post")
        .order_by_creation(Order::Desc)
        .limit(paging.limit.min((FEED_SIZE - served) as u32))
        .continuation(inner);
    let mut page = s.store.query(Container::Feed, &q).await?;
    let served = served + page.items.len();
    page.continuation = page
        .continuation
        .filter(|_| served < FEED_SIZE)
        .map(|t| format!("{served}.{t}"));
    let body = list_body(page);
    if first {
        s.feed.put(paging.limit, stamp, body.clone());
    }
    Ok(no_cache(json_response(body)))
}
