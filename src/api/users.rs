//! C1, Q1, Q3: users and a user's posts (all in `users`, partition `userId`).

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;

use super::conditional::{tagged, IfMatch, IfNoneMatch};
use super::{list, AppState, JsonBody, Paging, PathId};
use crate::domain::{public, to_value, Id, User, Username};
use crate::error::{ApiError, ApiResult};
use crate::store::{Container, Order, PatchOp, Query, StoreError};

#[derive(Deserialize)]
pub struct UserBody {
    username: String,
}

/// C1 `POST /api/users`: one create.
pub async fn create(
    State(s): State<AppState>,
    JsonBody(body): JsonBody<UserBody>,
) -> ApiResult<Response> {
    let username = Username::parse(&body.username)?;
    let id = Id::new();
    let user = User::new(&id, &username);
    let stored = s
        .store
        .create(Container::Users, id.as_str(), to_value(&user))
        .await?;
    let resp = (
        StatusCode::CREATED,
        [(header::LOCATION, format!("/api/users/{id}"))],
        Json(public(stored.clone())),
    )
        .into_response();
    Ok(tagged(resp, &stored))
}

/// C1 `PUT /api/users/{userId}`: one server-side patch (conditional on `If-Match`); the change
/// feed fans the name out.
pub async fn rename(
    State(s): State<AppState>,
    PathId(id): PathId,
    if_match: Option<IfMatch>,
    JsonBody(body): JsonBody<UserBody>,
) -> ApiResult<Response> {
    let username = Username::parse(&body.username)?;
    let ops = [PatchOp::set("/username", username.as_str())];
    let etag = if_match.as_ref().and_then(IfMatch::etag);
    match s
        .store
        .patch(Container::Users, id.as_str(), id.as_str(), &ops, etag)
        .await
    {
        Ok(user) => Ok(tagged(Json(public(user.clone())).into_response(), &user)),
        Err(StoreError::NotFound) => Err(ApiError::not_found("user", id.as_str())),
        Err(e) => Err(e.into()),
    }
}

/// Q1 `GET /api/users/{userId}`: one point read (conditional on `If-None-Match`).
pub async fn get(
    State(s): State<AppState>,
    PathId(id): PathId,
    if_none_match: Option<IfNoneMatch>,
) -> ApiResult<Response> {
    let read = super::read_item(&*s.store, Container::Users, &id, if_none_match).await?;
    super::item_response(read, |user| user["type"] == "user")
        .ok_or_else(|| ApiError::not_found("user", id.as_str()))
}

/// Q3 `GET /api/users/{userId}/posts`: one query in the user's partition, newest first.
pub async fn posts(
    State(s): State<AppState>,
    PathId(id): PathId,
    paging: Paging,
) -> ApiResult<Response> {
    let q = Query::partition(id.as_str())
        .eq("type", "post")
        .order_by_creation(Order::Desc)
        .limit(paging.limit)
        .continuation(paging.continuation);
    Ok(list(s.store.query(Container::Users, &q).await?))
}
