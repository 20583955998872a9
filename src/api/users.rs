//! C1, Q1, Q3: users and a user's posts (all in `users`, partition `userId`).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::answer::list;
use super::conditional::{IfMatch, IfMatchParam, IfNoneMatch, IfNoneMatchParam};
use super::deletion::no_content;
use super::schema::PagingParams;
use super::views::{PostSummaryPage, UserView};
use super::{AppState, JsonBody, Paging, PathId};
use crate::auth::Caller;
use crate::domain::tombstone_ops;
use crate::domain::{is_deleted, is_live, to_value, Kind, User, Username};
use crate::error::Problem;
use crate::error::{ApiError, ApiResult};
use crate::projection::cascade;
use crate::projection::engine::PAGE;
use crate::store::{Container, Order, PatchOp, Query, StoreError};

/// A new user, or a user's new name.
#[derive(Serialize, Deserialize, ToSchema)]
pub struct UserBody {
    /// Trimmed; then 1 to 64 characters without control characters.
    #[schema(min_length = 1)]
    pub(super) username: String,
}

/// C1 `POST /api/users`: one create. A signed-in caller creates their own user (its id derived
/// from the identity), so a second one is a conflict.
#[utoipa::path(
    post,
    path = "/api/users",
    tag = "users",
    summary = "Create a user",
    request_body = UserBody,
    responses(
        (status = 201, description = "The new user", body = UserView,
            headers(
                ("Location" = String, description = "`/api/users/{id}`"),
                ("ETag" = String, description = "The user's version, for `If-None-Match` / `If-Match`"),
            ),
            links(
                ("GetUser" = (operation_id = "get_user", parameters(("userId" = "$response.body#/id")))),
                ("RenameUser" = (operation_id = "rename_user", parameters(("userId" = "$response.body#/id")))),
                ("ListUserPosts" = (operation_id = "list_user_posts", parameters(("userId" = "$response.body#/id")))),
                ("DeleteUser" = (operation_id = "delete_user", parameters(("userId" = "$response.body#/id")))),
            )),
        (status = 409, description = "The signed-in caller already has a user (`detail` names its id)", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn create_user(
    State(s): State<AppState>,
    caller: Caller,
    JsonBody(body): JsonBody<UserBody>,
) -> ApiResult<Response> {
    let username = Username::parse(&body.username)?;
    let id = caller.new_user_id();
    let user = User::new(&id, &username);
    let stored = match s
        .store
        .create(Container::Users, id.as_str(), to_value(&user))
        .await
    {
        Ok(stored) => stored,
        Err(StoreError::Conflict) => recreate(&*s.store, &caller, &id, &user).await?,
        Err(e) => return Err(e.into()),
    };
    let mut resp = super::answer::view_response::<UserView>(StatusCode::CREATED, stored)?;
    super::answer::set_location(&mut resp, &format!("/api/users/{id}"));
    Ok(resp)
}

/// The id is taken: by a live user (409), or by an erased one. An erasure is complete once the
/// users projection has marked the tombstone `erased`; then the identity may start afresh (the
/// tombstone is replaced, if unchanged since read). Before that, 409 with `Retry-After`.
async fn recreate(
    store: &dyn crate::store::Store,
    caller: &Caller,
    id: &crate::domain::Id,
    user: &User,
) -> ApiResult<serde_json::Value> {
    let existing = store
        .read(Container::Users, id.as_str(), id.as_str())
        .await?;
    let Some(existing) = existing.filter(is_deleted) else {
        return Err(caller.user_exists(id));
    };
    let erasing = || ApiError::Erasing(format!("user `{id}` is being erased; retry shortly"));
    if existing.get(crate::projection::ERASED) != Some(&serde_json::Value::Bool(true)) {
        return Err(erasing());
    }
    let etag = existing.get("_etag").and_then(serde_json::Value::as_str);
    match store
        .replace(
            Container::Users,
            id.as_str(),
            id.as_str(),
            to_value(user),
            etag,
        )
        .await
    {
        Ok(stored) => Ok(stored),
        Err(StoreError::PreconditionFailed | StoreError::NotFound) => Err(caller.user_exists(id)),
        Err(e) => Err(e.into()),
    }
}

/// C1 `PUT /api/users/{userId}`: one server-side patch that sets the name and bumps the rename
/// version; the users change feed fans the name out. With an `If-Match` tag, the user is read
/// first and the patch made only while the user is as read (two operations).
#[utoipa::path(
    put,
    path = "/api/users/{userId}",
    tag = "users",
    summary = "Rename a user",
    description = "One server-side patch; the change feed then carries the new name to every post, comment, like and copy. With `If-Match`, only while the user is still at that version.",
    params(("userId" = String, Path, description = "The user's id"), IfMatchParam),
    request_body = UserBody,
    responses(
        (status = 200, description = "The renamed user", body = UserView,
            headers(("ETag" = String, description = "The user's new version"))),
        (status = 404, description = "No such user", body = Problem, content_type = "application/problem+json"),
        (status = 412, description = "The user changed since the version `If-Match` names", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn rename_user(
    State(s): State<AppState>,
    caller: Caller,
    PathId(id): PathId,
    if_match: Option<IfMatch>,
    JsonBody(body): JsonBody<UserBody>,
) -> ApiResult<Response> {
    caller.may_rename(&id)?;
    let username = Username::parse(&body.username)?;
    let ops = [
        PatchOp::set("/username", username.as_str()),
        PatchOp::incr("/renameVersion", 1),
    ];
    let user = match if_match.as_ref().and_then(IfMatch::etag) {
        Some(tag) => {
            let store = &*s.store;
            let user = super::stored::read_item(store, Container::Users, &id)
                .await?
                .filter(|u| is_live(u, Kind::User))
                .ok_or_else(|| ApiError::not_found("user", id.as_str()))?;
            super::stored::patch_if_match::<UserView>(store, Container::Users, &id, user, tag, &ops)
                .await?
        }
        None => match s
            .store
            .patch(Container::Users, id.as_str(), id.as_str(), &ops, None)
            .await
        {
            Ok(user) => user,
            Err(StoreError::NotFound) => return Err(ApiError::not_found("user", id.as_str())),
            Err(e) => return Err(e.into()),
        },
    };
    super::deletion::refuse_if_deleted(&*s.store, Container::Users, &id, &user, Kind::User).await?;
    super::answer::view_response::<UserView>(StatusCode::OK, user)
}

/// Q1 `GET /api/users/{userId}`: one point read (conditional on `If-None-Match`).
#[utoipa::path(
    get,
    path = "/api/users/{userId}",
    tag = "users",
    summary = "Read a user",
    params(("userId" = String, Path, description = "The user's id"), IfNoneMatchParam),
    responses(
        (status = 200, description = "The user", body = UserView,
            headers(
                ("ETag" = String, description = "The user's version"),
                ("Cache-Control" = String, description = "`no-cache`: revalidate with `If-None-Match`"),
            )),
        (status = 304, description = "The version `If-None-Match` names is current (no body)",
            headers(("ETag" = String, description = "The user's version"))),
        (status = 404, description = "No such user", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn get_user(
    State(s): State<AppState>,
    PathId(id): PathId,
    if_none_match: Option<IfNoneMatch>,
) -> ApiResult<Response> {
    let read = super::stored::read_item(&*s.store, Container::Users, &id).await?;
    super::answer::item_response::<UserView>(read, |user| is_live(user, Kind::User), if_none_match)?
        .ok_or_else(|| ApiError::not_found("user", id.as_str()))
}

/// Q3 `GET /api/users/{userId}/posts`: one query in the user's partition, newest first.
#[utoipa::path(
    get,
    path = "/api/users/{userId}/posts",
    tag = "users",
    summary = "List a user's posts, newest first, in short form",
    description = "One query in the user's partition: an unknown user has an empty list.",
    params(("userId" = String, Path, description = "The user's id"), PagingParams),
    responses(
        (status = 200, description = "One page of the user's posts", body = PostSummaryPage,
            headers(("Cache-Control" = String, description = "`no-cache`"))),
    )
)]
pub async fn list_user_posts(
    State(s): State<AppState>,
    PathId(id): PathId,
    paging: Paging,
) -> ApiResult<Response> {
    let q = Query::partition(id.as_str())
        .of_kind(Kind::Post)
        .order_by_creation(Order::Desc)
        .limit(paging.limit)
        .continuation(paging.continuation);
    list::<PostSummaryPage>(s.store.query(Container::Users, &q).await?)
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
    let user = store
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
    cascade::user_steps(store, uid, PAGE as usize).await?;
    release_guards(store, &user).await?;
    s.feed.forget();
    s.counts.forget();
    Ok(no_content())
}

/// An erased local account's guards go (they hold its email's and name's traces and its
/// password's hash): its username and email are free at once. A guard held by another user
/// (taken back after a crash) is left alone.
async fn release_guards(
    store: &dyn crate::store::Store,
    user: &serde_json::Value,
) -> ApiResult<()> {
    use crate::domain::accounts::{email_id, handle_id};
    let Ok(user) = <User as serde::Deserialize>::deserialize(user) else {
        return Ok(());
    };
    let guards = [
        Some(handle_id(&user.username)),
        user.email.as_deref().map(email_id),
    ];
    for id in guards.into_iter().flatten() {
        let guard = store.read(Container::Users, &id, &id).await?;
        if guard.as_ref().and_then(|g| g["owner"].as_str()) != Some(user.user_id.as_str()) {
            continue;
        }
        match store.delete(Container::Users, &id, &id).await {
            Ok(()) | Err(StoreError::NotFound) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}
