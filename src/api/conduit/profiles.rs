//! Profiles: a user found by its handle, and following them.
//!
//! Store operations: a profile is two point reads (the username's guard, the user) and one more
//! for a signed-in viewer (the follow edge).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::errors::{error, invalid, native, store_error, FromApi as _};
use super::users::read_user;
use super::{Account, Result, Signed, Viewer};
use crate::api::{AppState, PathIds};
use crate::domain::accounts::{handle_id, HandleGuard};
use crate::domain::{Id, User};
use crate::store::{Container, Store};

/// A profile: a user as others see it, and whether the viewer follows them.
pub(super) fn profile_of(user: &User, following: bool) -> Value {
    json!({
        "username": user.username,
        "bio": user.bio,
        "image": user.image,
        "following": following,
    })
}

/// The live user holding the handle `username`, if any.
pub(super) async fn by_username(store: &dyn Store, username: &str) -> Result<Option<User>> {
    let id = handle_id(username);
    let Some(guard) = store
        .read(Container::Users, &id, &id)
        .await
        .map_err(|e| store_error(e, "profile"))?
        .and_then(|g| HandleGuard::deserialize(&g).ok())
    else {
        return Ok(None);
    };
    let user = read_user(store, &guard.owner).await?;
    Ok(user.filter(|u| handle_id(&u.username) == id))
}

async fn profile_user(store: &dyn Store, username: &str) -> Result<User> {
    by_username(store, username)
        .await?
        .ok_or_else(|| error(StatusCode::NOT_FOUND, "profile", "not found"))
}

/// Whether `viewer` follows `user` (one point read of the follow edge).
pub(super) async fn follows(s: &AppState, viewer: &Id, user: &str) -> Result<bool> {
    let Ok(user) = Id::parse("user", user) else {
        return Ok(false);
    };
    let answer =
        crate::api::follows::get_following(State(s.clone()), PathIds(viewer.clone(), user)).await;
    match answer {
        Ok(resp) => Ok(resp.status() == StatusCode::OK),
        Err(crate::error::ApiError::NotFound(_)) => Ok(false),
        Err(e) => Err(Response::from_api(e, "profile")),
    }
}

/// `GET /api/conduit/api/profiles/{username}`.
pub async fn profile(
    State(s): State<AppState>,
    Viewer(viewer): Viewer,
    Path(username): Path<String>,
) -> Result<Response> {
    let user = profile_user(&*s.store, &username).await?;
    let following = match &viewer {
        Some(v) => follows(&s, &v.user_id(), &user.user_id).await?,
        None => false,
    };
    Ok(Json(json!({ "profile": profile_of(&user, following) })).into_response())
}

/// `POST /api/conduit/api/profiles/{username}/follow`.
pub async fn follow(
    State(s): State<AppState>,
    Signed(account): Signed,
    Path(username): Path<String>,
) -> Result<Response> {
    change_follow(s, account, username, true).await
}

/// `DELETE /api/conduit/api/profiles/{username}/follow`.
pub async fn unfollow(
    State(s): State<AppState>,
    Signed(account): Signed,
    Path(username): Path<String>,
) -> Result<Response> {
    change_follow(s, account, username, false).await
}

async fn change_follow(
    s: AppState,
    account: Account,
    username: String,
    follow: bool,
) -> Result<Response> {
    let user = profile_user(&*s.store, &username).await?;
    let them = Id::parse("user", &user.user_id).map_err(invalid)?;
    let ids = PathIds(account.user_id(), them);
    let answer = if follow {
        crate::api::follows::follow(State(s.clone()), account.caller(), ids).await
    } else {
        crate::api::follows::unfollow(State(s.clone()), account.caller(), ids).await
    };
    native(answer, "profile").await?;
    super::own_writes::wait(&s).await;
    Ok(Json(json!({ "profile": profile_of(&user, follow) })).into_response())
}
