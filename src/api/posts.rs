//! C2–C4, Q2, Q4–Q6: posts, comments and likes (in `posts`, partition `postId`) and the feed.

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::Value;

use super::{json_response, list, list_body, AppState, JsonBody, Paging, PathId};
use crate::auth::Caller;
use crate::domain::{self, public, to_value, Comment, Id, Like, Post, Text, FEED_PK, FEED_SIZE};
use crate::error::{ApiError, ApiResult};
use crate::store::{BatchOp, Container, Order, PatchOp, Query, Store, StoreError};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PostBody {
    user_id: Option<String>,
    title: String,
    content: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommentBody {
    user_id: Option<String>,
    content: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LikeBody {
    user_id: Option<String>,
}

/// C2 `POST /api/posts`: read the author's name, then create the post (two operations).
pub async fn create(
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
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, format!("/api/posts/{id}"))],
        Json(public(stored)),
    )
        .into_response())
}

/// C2 `PUT /api/posts/{postId}`: read the post (its author), then patch title and content, so a
/// concurrent counter change is never overwritten (two operations).
pub async fn update(
    State(s): State<AppState>,
    caller: Caller,
    PathId(id): PathId,
    JsonBody(body): JsonBody<PostBody>,
) -> ApiResult<Json<Value>> {
    let user_id = caller.acts_as(body.user_id.as_deref())?;
    let title = Text::title(&body.title)?;
    let content = Text::post_content(&body.content)?;
    let post = read_post(&*s.store, &id).await?;
    if post["userId"].as_str() != Some(user_id.as_str()) {
        return Err(ApiError::Forbidden(format!(
            "only the author may edit post `{id}`"
        )));
    }
    let ops = [
        PatchOp::set("/title", title.as_str()),
        PatchOp::set("/content", content.as_str()),
    ];
    match s
        .store
        .patch(Container::Posts, id.as_str(), id.as_str(), &ops, None)
        .await
    {
        Ok(post) => Ok(Json(public(post))),
        Err(StoreError::NotFound) => Err(ApiError::not_found("post", id.as_str())),
        Err(e) => Err(e.into()),
    }
}

async fn read_post(store: &dyn Store, id: &Id) -> ApiResult<Value> {
    match store
        .read(Container::Posts, id.as_str(), id.as_str())
        .await?
    {
        Some(post) if post["type"] == "post" => Ok(post),
        _ => Err(ApiError::not_found("post", id.as_str())),
    }
}

/// Q2 `GET /api/posts/{postId}`: one point read; name and counters are on the post.
pub async fn get(State(s): State<AppState>, PathId(id): PathId) -> ApiResult<Json<Value>> {
    Ok(Json(public(read_post(&*s.store, &id).await?)))
}

/// What adding a comment or like to a post came to.
enum Added {
    /// Stored (and counted); the stored item.
    Created(Value),
    /// The post does not exist; nothing was written.
    NoSuchPost,
    /// An item with this id is already in the post (a repeat like); nothing was written.
    AlreadyThere,
}

/// Create `item` in the post's partition only if the post exists, atomically (one batch of
/// read + create), then bump the post's counter with a server-side increment. The increment
/// makes the count fresh at once; the change feed's recount corrects it should the process die
/// between the two writes.
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
        // Acknowledging is right: the item is stored and the recount will count it.
        tracing::warn!(error = %e, post = %post_id, counter, "counter increment failed; the change feed recount will fix it");
    }
    Ok(Added::Created(created))
}

/// C3 `POST /api/posts/{postId}/comments`: author read, batch, increment (three operations).
pub async fn comment(
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
pub async fn like(
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
            let existing = s
                .store
                .read(Container::Posts, post_id.as_str(), &like.id)
                .await?
                .ok_or_else(|| ApiError::Conflict("the like changed concurrently; retry".into()))?;
            Ok((StatusCode::OK, Json(public(existing))).into_response())
        }
    }
}

fn in_post(post_id: &Id, kind: &str, paging: Paging) -> Query {
    Query::partition(post_id.as_str())
        .eq("type", kind)
        .order_by_creation(Order::Asc)
        .limit(paging.limit)
        .continuation(paging.continuation)
}

/// Q4 `GET /api/posts/{postId}/comments`: one query in the post's partition, oldest first.
pub async fn comments(
    State(s): State<AppState>,
    PathId(post_id): PathId,
    paging: Paging,
) -> ApiResult<Response> {
    let q = in_post(&post_id, "comment", paging);
    Ok(list(s.store.query(Container::Posts, &q).await?))
}

/// Q5 `GET /api/posts/{postId}/likes`: one query in the post's partition, oldest first.
pub async fn likes(
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
pub async fn feed(State(s): State<AppState>, paging: Paging) -> ApiResult<Response> {
    let first = paging.continuation.is_none();
    if first {
        if let Some(body) = s.feed.get(paging.limit) {
            return Ok(json_response(body));
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
    Ok(json_response(body))
}
