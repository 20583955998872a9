//! `GET /api/me` (the caller's own user) and `GET /api/config` (how clients sign in).

use axum::extract::State;
use axum::Json;

use super::views::{ClientConfigView, UserView, View};
use super::AppState;
use crate::auth::Caller;
use crate::domain::Kind;
use crate::error::{ApiError, ApiResult, Problem};
use crate::store::Container;

/// `GET /api/me`: one point read of the caller's user (its id is derived from the identity).
/// 401 anonymous, 404 when the caller has not created a user yet.
#[utoipa::path(
    get,
    path = "/api/me",
    tag = "users",
    summary = "The signed-in caller's own user",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The caller's user", body = UserView),
        (status = 401, description = "No valid identity (always so with `BLOG_AUTH=none`)", body = Problem, content_type = "application/problem+json",
            headers(("WWW-Authenticate" = String, description = "`Bearer` (with the error when a token was refused)"))),
        (status = 404, description = "The caller has no user yet: create it with `POST /api/users`", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn get_me(State(s): State<AppState>, caller: Caller) -> ApiResult<Json<UserView>> {
    let id = caller.own_user_id()?;
    match s
        .store
        .read(Container::Users, id.as_str(), id.as_str())
        .await?
    {
        Some(user) if crate::domain::is_live(&user, Kind::User) => {
            Ok(Json(UserView::from_stored(user)?))
        }
        _ => Err(ApiError::NotFound(
            "the signed-in caller has no user yet: create it with `POST /api/users`".into(),
        )),
    }
}

/// `GET /api/config`: anonymous; the public values a client needs to sign in.
#[utoipa::path(
    get,
    path = "/api/config",
    tag = "meta",
    summary = "How clients sign in to this deployment",
    responses((status = 200, description = "The authentication mode and the public values of the issuer", body = ClientConfigView)),
)]
pub async fn get_config(State(s): State<AppState>) -> Json<ClientConfigView> {
    Json(s.auth.client_config().into())
}
