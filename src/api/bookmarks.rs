//! Bookmarks (docs/api.md): the bookmark in its post's partition of `posts`, written by the
//! request; its copy in the user's partition of `users` and the post's `bookmarkCount` are the
//! change feed's (`crate::projection::bookmarks`), and the list reads the copies.

use axum::extract::State;
use axum::response::Response;
use serde::Deserialize;

use super::answer::page_response;
use super::deletion::no_content;
use super::schema::PagingParams;
use super::views::{PageView, PostSummaryPage, PostSummaryView, View};
use super::{AppState, Paging, PathId, PathIds};
use crate::auth::Caller;
use crate::domain::bookmarks::{Bookmark, Bookmarked, BOOKMARKED};
use crate::domain::follows::edge_tombstone_ops;
use crate::domain::{to_value, Id, Kind};
use crate::error::Problem;
use crate::error::{ApiError, ApiResult};
use crate::store::{Container, Order, Query, Store, StoreError};

/// 404 unless item `id` (of `kind`) is live in its own partition of `c`.
async fn must_exist(store: &dyn Store, c: Container, kind: Kind, id: &Id) -> ApiResult<()> {
    let item = super::stored::read_item(store, c, id).await?;
    item.map(drop)
        .ok_or_else(|| ApiError::not_found(kind.as_str(), id.as_str()))
}

/// `user`'s bookmark of `post`, if live (one point read).
async fn live(store: &dyn Store, user: &Id, post: &Id) -> ApiResult<Option<Bookmark>> {
    let id = Bookmark::id_of(user.as_str());
    let item = store.read(Container::Posts, post.as_str(), &id).await?;
    Ok(item.as_ref().and_then(Bookmark::live))
}

/// `PUT /api/users/{userId}/bookmarks/{postId}`: reads the user, the post and the bookmark, then
/// writes the bookmark unless it is live already (a repeat keeps its date). Idempotent.
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
    )
)]
pub async fn bookmark(
    State(s): State<AppState>,
    caller: Caller,
    PathIds(user, post): PathIds,
) -> ApiResult<Response> {
    // As for follows: only the user themself (under `BLOG_AUTH=none` the path names the caller).
    caller.may_act_for(&[user.as_str()], || {
        format!("only user `{user}` may change their bookmarks")
    })?;
    let store = &*s.store;
    let (_, _, existing) = futures::try_join!(
        must_exist(store, Container::Users, Kind::User, &user),
        must_exist(store, Container::Posts, Kind::Post, &post),
        live(store, &user, &post),
    )?;
    if existing.is_none() {
        let item = to_value(&Bookmark::new(post.as_str(), user.as_str()));
        store.upsert(Container::Posts, post.as_str(), item).await?;
    }
    Ok(no_content())
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
    )
)]
pub async fn unbookmark(
    State(s): State<AppState>,
    caller: Caller,
    PathIds(user, post): PathIds,
) -> ApiResult<Response> {
    caller.may_act_for(&[user.as_str()], || {
        format!("only user `{user}` may change their bookmarks")
    })?;
    if live(&*s.store, &user, &post).await?.is_some() {
        let (id, ops) = (Bookmark::id_of(user.as_str()), edge_tombstone_ops());
        let marked = s
            .store
            .patch(Container::Posts, post.as_str(), &id, &ops, None);
        match marked.await {
            Ok(_) | Err(StoreError::NotFound) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(no_content())
}

/// `GET /api/users/{userId}/bookmarks`: one query in the user's partition (the copies), then
/// the counts of each post shown, read from the post (at most `limit` point reads).
#[utoipa::path(
    get,
    path = "/api/users/{userId}/bookmarks",
    tag = "users",
    summary = "List a user's bookmarked posts, newest bookmark first, in short form",
    description = "The user's own: with authentication on, only that user may list them (401 anonymous, 403 for another signed-in user); with `BLOG_AUTH=none`, anyone. At most 1 + `limit` store operations: one query in the user's partition, kept by the change feed (a bookmark shows here a moment after it is made, and its post as it is edited), and at most one point read per post shown for its `commentCount` and `likeCount`, which are read from the post itself when shown (from a per-process snapshot while it holds, as on the timeline). A post deleted meanwhile is left out, so a page may hold fewer than `limit` posts and still have a next page. An unknown user has an empty list.",
    security(("bearer" = [])),
    params(("userId" = String, Path, description = "Whose bookmarks: the caller's own user"), PagingParams),
    responses(
        (status = 200, description = "One page of the bookmarked posts", body = PostSummaryPage,
            headers(("Cache-Control" = String, description = "`no-cache`"))),
        (status = 401, description = "No valid identity (authentication is on and the list is its owner's)", body = Problem, content_type = "application/problem+json",
            headers(("WWW-Authenticate" = String, description = "`Bearer` (with the error when a token was refused)"))),
        (status = 403, description = "The user is not the signed-in caller's", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn list_bookmarks(
    State(s): State<AppState>,
    caller: Caller,
    PathId(user): PathId,
    paging: Paging,
) -> ApiResult<Response> {
    // A user's bookmarks are theirs alone to read, as to change (anyone's under `BLOG_AUTH=none`).
    caller.may_act_for(&[user.as_str()], || {
        format!("only user `{user}` may list their bookmarks")
    })?;
    let q = Query::partition(user.as_str())
        .eq(Kind::FIELD, BOOKMARKED)
        .live()
        .order_by_creation(Order::Desc)
        .limit(paging.limit)
        .continuation(paging.continuation);
    let page = s.store.query(Container::Users, &q).await?;
    // Each copy holds the post as the list shows it, but for its counts, read from the post.
    let posts = page
        .items
        .iter()
        .map(|c| {
            Bookmarked::deserialize(c)
                .map(|b| PostSummaryView::from_domain(b.post))
                .map_err(|e| {
                    ApiError::internal(format!("a stored bookmark copy does not read: {e}"))
                })
        })
        .collect::<ApiResult<Vec<_>>>()?;
    let items = s.counts.shown(&*s.store, posts).await?;
    Ok(page_response(&PostSummaryPage::new(
        items,
        page.continuation,
    )))
}
