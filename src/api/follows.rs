//! Follows (docs/timeline.md): the edges in `users`. The edge is written by the request, its
//! mirror, the counters and the timeline entries by the change feed
//! (`crate::projection::timeline`); the timeline they make is read in `super::timeline`.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::Value;

use super::answer::page_response;
use super::schema::PagingParams;
use super::views::{PageView, UserPage, UserView};
use super::{AppState, Paging, PathId, PathIds};
use crate::auth::Caller;
use crate::domain::follows::{edge_tombstone_ops, following_id, Edge, FollowKind, MAX_FOLLOWING};
use crate::domain::{is_deleted, is_live, now, Id, Kind, User};
use crate::error::Problem;
use crate::error::{ApiError, ApiResult};
use crate::store::{Container, Order, Query, Store, StoreError};

/// How often a follow or unfollow is retried when the edge changed between its read and write.
const ATTEMPTS: usize = 5;

/// 403 unless the caller may act as `user` (under `BLOG_AUTH=none` the path names the caller).
fn acts_as(caller: &Caller, user: &Id) -> ApiResult<()> {
    caller.may_act_for(&[user.as_str()], || {
        format!("only user `{user}` may change whom they follow")
    })
}

async fn live_user(store: &dyn Store, id: &Id) -> ApiResult<User> {
    let user = store
        .read(Container::Users, id.as_str(), id.as_str())
        .await?
        .filter(|u| is_live(u, Kind::User))
        .ok_or_else(|| ApiError::not_found("user", id.as_str()))?;
    User::deserialize(&user)
        .map_err(|e| ApiError::internal(format!("a stored user does not read as one: {e}")))
}

/// Whether a stored item is a live edge of `kind`.
fn is_live_edge(item: &Value, kind: FollowKind) -> bool {
    Edge::read(item).is_some_and(|e| e.is_live(kind))
}

/// The query of `user`'s live items of `kind`.
fn of_kind(user: &Id, kind: FollowKind) -> Query {
    Query::partition(user.as_str())
        .eq(Kind::FIELD, kind.as_str())
        .live()
}

/// `PUT /api/users/{userId}/following/{followeeId}`: reads both users, then creates the edge
/// (or revives its tombstone). Idempotent.
#[utoipa::path(
    put,
    path = "/api/users/{userId}/following/{followeeId}",
    tag = "follows",
    summary = "Follow a user",
    description = "Idempotent: 204 whether or not the user followed them already. A user may follow at most 1,000 users: a new follow beyond that answers 409 and writes nothing. The change feed then copies the followee's newest posts into the follower's timeline and recounts `followerCount` and `followingCount`.",
    params(
        ("userId" = String, Path, description = "Who follows: the caller's own user"),
        ("followeeId" = String, Path, description = "Whom they follow"),
    ),
    responses(
        (status = 204, description = "The user follows the followee"),
        (status = 400, description = "A user cannot follow themselves", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "The user is not the signed-in caller's", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such user or followee", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The user follows 1,000 users already (the most one may follow), or the follow kept changing meanwhile (retry)", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn follow(
    State(s): State<AppState>,
    caller: Caller,
    PathIds(user, followee): PathIds,
) -> ApiResult<Response> {
    acts_as(&caller, &user)?;
    if user == followee {
        return Err(ApiError::invalid(
            crate::error::Place::Path,
            "followeeId",
            "`followeeId` must be another user: a user cannot follow themselves",
        ));
    }
    let store = &*s.store;
    let follows = of_kind(&user, FollowKind::Following);
    let (_, target, followed) = futures::try_join!(
        live_user(store, &user),
        live_user(store, &followee),
        async { Ok(store.count(Container::Users, &follows).await?) },
    )?;
    let item = Edge::new(
        FollowKind::Following,
        user.as_str(),
        followee.as_str(),
        &target.username,
        &now(),
    )
    .to_item();
    let id = following_id(followee.as_str());
    if followed >= MAX_FOLLOWING as u64 {
        // Only a follow already made may be repeated.
        let existing = store.read(Container::Users, user.as_str(), &id).await?;
        if existing.is_some_and(|e| is_live_edge(&e, FollowKind::Following)) {
            return Ok(StatusCode::NO_CONTENT.into_response());
        }
        return Err(ApiError::Conflict(format!(
            "user `{user}` follows {followed} users, the most one may follow ({MAX_FOLLOWING}); unfollow someone first"
        )));
    }
    for _ in 0..ATTEMPTS {
        match store
            .create(Container::Users, user.as_str(), item.clone())
            .await
        {
            Ok(_) => return Ok(StatusCode::NO_CONTENT.into_response()),
            Err(StoreError::Conflict) => {}
            Err(e) => return Err(e.into()),
        }
        // Followed before: nothing to do, unless that follow was taken back.
        let Some(existing) = store.read(Container::Users, user.as_str(), &id).await? else {
            continue;
        };
        if !is_deleted(&existing) {
            return Ok(StatusCode::NO_CONTENT.into_response());
        }
        let etag = existing.get("_etag").and_then(Value::as_str);
        match store
            .replace(Container::Users, user.as_str(), &id, item.clone(), etag)
            .await
        {
            Ok(_) => return Ok(StatusCode::NO_CONTENT.into_response()),
            Err(StoreError::PreconditionFailed | StoreError::NotFound) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(ApiError::Conflict(format!(
        "the follow of `{followee}` kept changing; retry"
    )))
}

/// `GET /api/users/{userId}/following/{followeeId}`: whether the user follows the followee, in
/// one point read (the edge's id is derived from the followee): the followee as the user's
/// following list shows them, or 404.
#[utoipa::path(
    get,
    path = "/api/users/{userId}/following/{followeeId}",
    tag = "follows",
    summary = "Read a user's follow of another (does that user follow them?)",
    description = "One point read: the follow's id is derived from the followee. 404 when the user does not follow them, or there is no such user.",
    params(
        ("userId" = String, Path, description = "Who may follow"),
        ("followeeId" = String, Path, description = "Whom they may follow"),
    ),
    responses(
        (status = 200, description = "The user follows the followee: the followee, as the user's following list shows them", body = UserView,
            headers(("Cache-Control" = String, description = "`no-cache`"))),
        (status = 404, description = "The user does not follow the followee (or there is no such user)", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn get_following(
    State(s): State<AppState>,
    PathIds(user, followee): PathIds,
) -> ApiResult<Response> {
    let edge = s
        .store
        .read(
            Container::Users,
            user.as_str(),
            &following_id(followee.as_str()),
        )
        .await?
        .filter(|e| is_live_edge(e, FollowKind::Following))
        .ok_or_else(|| ApiError::NotFound(format!("user `{user}` does not follow `{followee}`")))?;
    Ok(super::conditional::no_cache(
        axum::Json(UserView::of_edge(&edge)?).into_response(),
    ))
}

/// `DELETE /api/users/{userId}/following/{followeeId}`: marks the edge deleted (the change feed
/// carries the mark to the mirror, the timeline and the counters). Idempotent.
#[utoipa::path(
    delete,
    path = "/api/users/{userId}/following/{followeeId}",
    tag = "follows",
    summary = "Unfollow a user",
    description = "Idempotent: 204 whether or not the user followed them. The change feed then removes the followee's posts from the follower's timeline and recounts.",
    params(
        ("userId" = String, Path, description = "Who unfollows: the caller's own user"),
        ("followeeId" = String, Path, description = "Whom they stop following"),
    ),
    responses(
        (status = 204, description = "The user does not follow the followee (any more)"),
        (status = 403, description = "The user is not the signed-in caller's", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The follow kept changing meanwhile; retry", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn unfollow(
    State(s): State<AppState>,
    caller: Caller,
    PathIds(user, followee): PathIds,
) -> ApiResult<Response> {
    acts_as(&caller, &user)?;
    let id = following_id(followee.as_str());
    for _ in 0..ATTEMPTS {
        let Some(existing) = s.store.read(Container::Users, user.as_str(), &id).await? else {
            return Ok(StatusCode::NO_CONTENT.into_response());
        };
        if !is_live_edge(&existing, FollowKind::Following) {
            return Ok(StatusCode::NO_CONTENT.into_response());
        }
        let etag = existing.get("_etag").and_then(Value::as_str);
        match s
            .store
            .patch(
                Container::Users,
                user.as_str(),
                &id,
                &edge_tombstone_ops(),
                etag,
            )
            .await
        {
            Ok(_) | Err(StoreError::NotFound) => return Ok(StatusCode::NO_CONTENT.into_response()),
            Err(StoreError::PreconditionFailed) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(ApiError::Conflict(format!(
        "the follow of `{followee}` kept changing; retry"
    )))
}

/// One page of `user`'s edges of `kind`, newest first, as users: one query in their partition.
async fn edges(s: &AppState, user: &Id, kind: FollowKind, paging: Paging) -> ApiResult<Response> {
    let q = of_kind(user, kind)
        .order_by_creation(Order::Desc)
        .limit(paging.limit)
        .continuation(paging.continuation);
    let page = s.store.query(Container::Users, &q).await?;
    let users = page
        .items
        .iter()
        .map(UserView::of_edge)
        .collect::<ApiResult<_>>()?;
    Ok(page_response(&UserPage::new(users, page.continuation)))
}

/// `GET /api/users/{userId}/following`: one query in the user's partition.
#[utoipa::path(
    get,
    path = "/api/users/{userId}/following",
    tag = "follows",
    summary = "List whom a user follows, newest follow first",
    description = "One query in the user's partition: an unknown user follows nobody.",
    params(("userId" = String, Path, description = "The user's id"), PagingParams),
    responses(
        (status = 200, description = "One page of the users they follow", body = UserPage,
            headers(("Cache-Control" = String, description = "`no-cache`"))),
    )
)]
pub async fn list_following(
    State(s): State<AppState>,
    PathId(user): PathId,
    paging: Paging,
) -> ApiResult<Response> {
    edges(&s, &user, FollowKind::Following, paging).await
}

/// `GET /api/users/{userId}/followers`: one query in the user's partition (the mirrors).
#[utoipa::path(
    get,
    path = "/api/users/{userId}/followers",
    tag = "follows",
    summary = "List a user's followers, newest follow first",
    description = "One query in the user's partition, kept by the change feed: a follow shows here a moment after it is made.",
    params(("userId" = String, Path, description = "The user's id"), PagingParams),
    responses(
        (status = 200, description = "One page of the users following them", body = UserPage,
            headers(("Cache-Control" = String, description = "`no-cache`"))),
    )
)]
pub async fn list_followers(
    State(s): State<AppState>,
    PathId(user): PathId,
    paging: Paging,
) -> ApiResult<Response> {
    edges(&s, &user, FollowKind::Follower, paging).await
}
