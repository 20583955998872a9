//! C1, Q1, Q3: users and a user's posts (all in `users`, partition `userId`).

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;

use super::{list, AppState, JsonBody, Paging, PathId};
use crate::auth::Caller;
use crate::domain::{public, to_value, User, Username};
use crate::error::{ApiError, ApiResult};
use crate::store::{Container, Order, PatchOp, Query, StoreError};

#[derive(Deserialize)]
pub struct UserBody {
    username: String,
}

/// C1 `POST /api/users`: one create. A signed-in caller creates their own user (its id derived
/// from the identity), so a second one is a conflict.
pub async fn create(
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
        Err(StoreError::Conflict) => return Err(caller.user_exists(&id)),
        Err(e) => return Err(e.into()),
    };
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, format!("/api/users/{id}"))],
        Json(public(stored)),
    )
        .into_response())
}

/// C1 `PUT /api/users/{userId}`: one server-side patch that sets the name and bumps the rename
/// version; the users change feed fans the name out.
pub async fn rename(
    State(s): State<AppState>,
    caller: Caller,
    PathId(id): PathId,
    JsonBody(body): JsonBody<UserBody>,
) -> ApiResult<Json<serde_json::Value>> {
    caller.may_rename(&id)?;
    let username = Username::parse(&body.username)?;
    let ops = [
        PatchOp::set("/username", username.as_str()),
        PatchOp::incr("/renameVersion", 1),
    ];
    match s
        .store
        .patch(Container::Users, id.as_str(), id.as_str(), &ops, None)
        .await
    {
        Ok(user) => Ok(Json(public(user))),
        Err(StoreError::NotFound) => Err(ApiError::not_found("user", id.as_str())),
        Err(e) => Err(e.into()),
    }
}

/// Q1 `GET /api/users/{userId}`: one point read.
pub async fn get(
    State(s): State<AppState>,
    PathId(id): PathId,
) -> ApiResult<Json<serde_json::Value>> {
    match s
        .store
        .read(Container::Users, id.as_str(), id.as_str())
        .await?
    {
        Some(user) if user["type"] == "user" => Ok(Json(public(user))),
        _ => Err(ApiError::not_found("user", id.as_str())),
    }
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
