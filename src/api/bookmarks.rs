//! Bookmarks (docs/api.md): the bookmark in its post's partition of `posts`, written by the
//! request; its copy in the user's partition of `users` and the post's `bookmarkCount` are the
//! change feed's (`crate::projection::bookmarks`), and the list reads the copies.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::Value;

use super::schema::PagingParams;
use super::views::{PageView, PostSummaryPage, PostSummaryView, View};
use super::{page_response, AppState, Paging, PathId, PathIds};
use crate::auth::Caller;
use crate::domain::{is_live, to_value, Id, Kind};
use crate::error::Problem;
use crate::error::{ApiError, ApiResult};
use crate::projection::bookmarks::{tombstone_ops, Bookmark, Bookmarked, BOOKMARKED};
use crate::store::{Container, Order, Query, Store, StoreError};

/// How often a bookmark is retried when it changed between its read and write.
const ATTEMPTS: usize = 5;

/// 403 unless the caller may act as `user`, as for follows (under `BLOG_AUTH=none` the path
/// names the caller).
fn acts_as(caller: &Caller, user: &Id) -> ApiResult<()> {
    caller.may_act_for(&[user.as_str()], || {
        format!("only user `{user}` may change their bookmarks")
    })
}

/// 404 unless `id` of `kind` is live in its own partition of `c`.
async fn must_exist(store: &dyn Store, c: Container, kind: Kind, id: &Id) -> ApiResult<()> {
    let item = store.read(c, id.as_str(), id.as_str()).await?;
    if !item.is_some_and(|i| is_live(&i, kind)) {
        return Err(ApiError::not_found(kind.as_str(), id.as_str()));
    }
    Ok(())
}

fn no_content() -> ApiResult<Response> {
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `PUT /api/users/{userId}/bookmarks/{postId}`: reads the user and the post, then creates the
/// bookmark (or revives its mark). Idempotent.
#[utoipa::path(
    put,
    path = "/api/users/{userId}/bookmarks/{postId}",
    tag = "users",
    summary = "Bookmark a post",
    description = "Idempotent: 204 whether or not the user bookmarked the post already (a repeat keeps its place in the list). The change feed then puts the post in the user's bookmarks and recounts the post's `bookmarkCount`.",
    params(
        ("userId" = String, Path, description = "Who bookmarks: the caller's own user"),
        ("postId" = String, Path, description = "The post"),
    ),
    responses(
        (status = 204, description = "The user has the post bookmarked"),
        (status = 403, description = "The user is not the signed-in caller's", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such user or post", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The bookmark kept changing meanwhile; retry", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn bookmark(
    State(s): State<AppState>,
    caller: Caller,
    PathIds(user, post): PathIds,
) -> ApiResult<Response> {
    acts_as(&caller, &user)?;
    let store = &*s.store;
    futures::try_join!(
        must_exist(store, Container::Users, Kind::User, &user),
        must_exist(store, Container::Posts, Kind::Post, &post),
    )?;
    let item = to_value(&Bookmark::new(post.as_str(), user.as_str()));
    let id = Bookmark::id_of(user.as_str());
    for _ in 0..ATTEMPTS {
        match store
            .create(Container::Posts, post.as_str(), item.clone())
            .await
        {
            Ok(_) => return no_content(),
            Err(StoreError::Conflict) => {}
            Err(e) => return Err(e.into()),
        }
        // Bookmarked before: nothing to do, unless that bookmark was taken back.
        let Some(existing) = store.read(Container::Posts, post.as_str(), &id).await? else {
            continue;
        };
        if Bookmark::read(&existing).is_some_and(|b| !b.deleted) {
            return no_content();
        }
        let etag = existing.get("_etag").and_then(Value::as_str);
        match store
            .replace(Container::Posts, post.as_str(), &id, item.clone(), etag)
            .await
        {
            Ok(_) => return no_content(),
            Err(StoreError::PreconditionFailed | StoreError::NotFound) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(ApiError::Conflict(format!(
        "the bookmark of `{post}` kept changing; retry"
    )))
}

/// `DELETE /api/users/{userId}/bookmarks/{postId}`: marks the bookmark deleted (the change
/// feed removes the copy and recounts). Idempotent.
#[utoipa::path(
    delete,
    path = "/api/users/{userId}/bookmarks/{postId}",
    tag = "users",
    summary = "Take a bookmark back",
    description = "Idempotent: 204 whether or not the user had the post bookmarked. The change feed then takes the post out of the user's bookmarks and recounts `bookmarkCount`.",
    params(
        ("userId" = String, Path, description = "Whose bookmark: the caller's own user"),
        ("postId" = String, Path, description = "The post"),
    ),
    responses(
        (status = 204, description = "The user does not have the post bookmarked (any more)"),
        (status = 403, description = "The user is not the signed-in caller's", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The bookmark kept changing meanwhile; retry", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn unbookmark(
    State(s): State<AppState>,
    caller: Caller,
    PathIds(user, post): PathIds,
) -> ApiResult<Response> {
    acts_as(&caller, &user)?;
    let id = Bookmark::id_of(user.as_str());
    for _ in 0..ATTEMPTS {
        let Some(existing) = s.store.read(Container::Posts, post.as_str(), &id).await? else {
            return no_content();
        };
        if !Bookmark::read(&existing).is_some_and(|b| !b.deleted) {
            return no_content();
        }
        let etag = existing.get("_etag").and_then(Value::as_str);
        let ops = tombstone_ops();
        match s
            .store
            .patch(Container::Posts, post.as_str(), &id, &ops, etag)
            .await
        {
            Ok(_) | Err(StoreError::NotFound) => return no_content(),
            Err(StoreError::PreconditionFailed) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(ApiError::Conflict(format!(
        "the bookmark of `{post}` kept changing; retry"
    )))
}

/// `GET /api/users/{userId}/bookmarks`: one query in the user's partition (the copies).
#[utoipa::path(
    get,
    path = "/api/users/{userId}/bookmarks",
    tag = "users",
    summary = "List a user's bookmarked posts, newest bookmark first, in short form",
    description = "One query in the user's partition, kept by the change feed: a bookmark shows here a moment after it is made, and its post as it is edited. An unknown user has an empty list.",
    params(("userId" = String, Path, description = "The user's id"), PagingParams),
    responses(
        (status = 200, description = "One page of the bookmarked posts", body = PostSummaryPage,
            headers(("Cache-Control" = String, description = "`no-cache`"))),
    )
)]
pub async fn list_bookmarks(
    State(s): State<AppState>,
    PathId(user): PathId,
    paging: Paging,
) -> ApiResult<Response> {
    let q = Query::partition(user.as_str())
        .eq(Kind::FIELD, BOOKMARKED)
        .live()
        .order_by_creation(Order::Desc)
        .limit(paging.limit)
        .continuation(paging.continuation);
    let page = s.store.query(Container::Users, &q).await?;
    let posts = page
        .items
        .iter()
        .map(|c| {
            Bookmarked::deserialize(c)
                .map(|b| PostSummaryView::from_domain(b.post))
                .map_err(|e| ApiError::internal(format!("a stored bookmark does not read: {e}")))
        })
        .collect::<ApiResult<_>>()?;
    Ok(page_response(&PostSummaryPage::new(
        posts,
        page.continuation,
    )))
}
