//! `GET /api/me` (the caller's own user) and `GET /api/config` (how clients sign in).

use axum::extract::State;
use axum::Json;
use serde_json::Value;

use super::AppState;
use crate::auth::Caller;
use crate::domain::public;
use crate::error::{ApiError, ApiResult};
use crate::store::Container;

/// `GET /api/me`: one point read of the caller's user (its id is derived from the identity).
/// 401 anonymous, 404 when the caller has not created a user yet.
pub async fn me(State(s): State<AppState>, caller: Caller) -> ApiResult<Json<Value>> {
    let id = caller.own_user_id()?;
    match s
        .store
        .read(Container::Users, id.as_str(), id.as_str())
        .await?
    {
        Some(user) if user["type"] == "user" => Ok(Json(public(user))),
        _ => Err(ApiError::NotFound(
            "the signed-in caller has no user yet: create it with `POST /api/users`".into(),
        )),
    }
}

/// `GET /api/config`: anonymous; the public values a client needs to sign in.
pub async fn config(State(s): State<AppState>) -> Json<Value> {
    Json(s.auth.client_config())
}
