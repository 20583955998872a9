//! Mutes (docs/api.md#mutes): a user's mute list, one item in their partition of `users`
//! ([`MuteList`]), written by their own requests alone. The timeline and the comment lists
//! leave the muted users out when the muter reads them: a filter at read time, no copy written.

use std::collections::{HashMap, HashSet};

use axum::extract::{FromRequestParts, Query, State};
use axum::http::request::Parts;
use axum::response::Response;
use serde_json::Value;

use super::answer::page_response;
use super::deletion::no_content;
use super::views::{PageView, UserPage, UserView, View};
use super::{AppState, PathId, PathIds};
use crate::auth::Caller;
use crate::domain::follows::{MuteList, MAX_MUTES};
use crate::domain::{is_live, to_value, Id, Kind};
use crate::error::{ApiError, ApiResult, Place, Problem};
use crate::store::{Container, Store, StoreError};

/// `user`'s mute list (one point read), and the stored item when there is one.
async fn read_list(store: &dyn Store, user: &Id) -> ApiResult<(MuteList, Option<Value>)> {
    let id = MuteList::id_of(user.as_str());
    let stored = store.read(Container::Users, user.as_str(), &id).await?;
    Ok((MuteList::read(user.as_str(), stored.as_ref()), stored))
}

/// Whose posts and comments `reader`'s reads leave out: one point read; none for nobody.
pub(super) async fn muted_by(store: &dyn Store, reader: Option<&Id>) -> ApiResult<HashSet<String>> {
    let Some(reader) = reader else {
        return Ok(HashSet::new());
    };
    let (list, _) = read_list(store, reader).await?;
    Ok(list.muted.into_iter().collect())
}

/// Who reads a timeline or a comment list, leaving out whom they muted: the user `viewerId` names
/// (with authentication on, only the caller: else 403, or 401 anonymous), else the signed-in
/// caller, else nobody (an anonymous read, or `BLOG_AUTH=none` without `viewerId`).
pub struct Reader(pub(super) Option<Id>);

impl FromRequestParts<AppState> for Reader {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<Self> {
        let Query(q) = Query::<HashMap<String, String>>::try_from_uri(&parts.uri)
            .map_err(|_| ApiError::BadRequest("the query string could not be decoded".into()))?;
        let caller = Caller::from_request_parts(parts, state).await;
        let Some(v) = q.get("viewerId") else {
            return Ok(Reader(caller.ok().and_then(|c| c.own_user_id().ok())));
        };
        let v = Id::parse("viewerId", v);
        let v = v.map_err(|e| ApiError::invalid(Place::Query, "viewerId", e.detail))?;
        caller?.may_act_for(&[v.as_str()], || format!("only `{v}` reads as `{v}`"))?;
        Ok(Reader(Some(v)))
    }
}

/// 403 unless the caller is `user` (anyone under `BLOG_AUTH=none`, where the path names them).
fn owner_only(caller: &Caller, user: &Id) -> ApiResult<()> {
    caller.may_act_for(&[user.as_str()], || {
        format!("only user `{user}` may read or change their mutes")
    })
}

/// 404 unless user `id` is live.
async fn must_live(store: &dyn Store, id: &Id) -> ApiResult<()> {
    let (c, id) = (Container::Users, id.as_str());
    match store.read(c, id, id).await? {
        Some(u) if is_live(&u, Kind::User) => Ok(()),
        _ => Err(ApiError::not_found("user", id)),
    }
}

/// Write `user`'s list as `change` leaves it, if it says it changed it, only over the version
/// read: a concurrent change is read again, never overwritten.
async fn change(
    store: &dyn Store,
    user: &Id,
    change: impl Fn(&mut MuteList) -> ApiResult<bool>,
) -> ApiResult<Response> {
    for _ in 0..5 {
        let (mut list, stored) = read_list(store, user).await?;
        if !change(&mut list)? {
            return Ok(no_content());
        }
        let (pk, item) = (user.as_str(), to_value(&list));
        let written = match stored.as_ref().map(|s| s["_etag"].as_str()) {
            None => store.create(Container::Users, pk, item).await,
            Some(etag) => (store.replace(Container::Users, pk, &list.id, item, etag)).await,
        };
        match written {
            Ok(_) => return Ok(no_content()),
            Err(StoreError::Conflict | StoreError::PreconditionFailed | StoreError::NotFound) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Err(ApiError::Conflict("the mutes kept changing; retry".into()))
}

/// `PUT /api/users/{userId}/mutes/{mutedId}`: both users read, then the list; idempotent.
#[utoipa::path(
    put,
    path = "/api/users/{userId}/mutes/{mutedId}",
    tag = "users",
    summary = "Mute a user",
    description = "Idempotent: 204 whether or not the user had muted them already. From then on the muted user's posts are left out of the user's timeline and their comments out of the comment lists the user reads. A user may mute at most 100 users: a new mute beyond answers 409 and writes nothing. Four store operations: the two users read at once, then the list read and written.",
    params(
        ("userId" = String, Path, description = "Who mutes: the caller's own user"),
        ("mutedId" = String, Path, description = "Whom they mute", example = "a7e2d9c4-1b3f-4e6a-8d5c-9f0e2b7a4c13", pattern = r"^(?!\.+$)[^/\\?#\u0000-\u001F\u007F-\u009F]{1,128}$"),
    ),
    responses(
        (status = 204, description = "The user has them muted"),
        (status = 400, description = "A user cannot mute themselves", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such user, or no such user to mute", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The user mutes 100 users already, or the list kept changing meanwhile (retry)", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn mute(
    State(s): State<AppState>,
    caller: Caller,
    PathIds(user, muted): PathIds,
) -> ApiResult<Response> {
    owner_only(&caller, &user)?;
    if user == muted {
        let detail = "`mutedId` must be another user: a user cannot mute themselves";
        return Err(ApiError::invalid(Place::Path, "mutedId", detail));
    }
    let store = &*s.store;
    futures::try_join!(must_live(store, &user), must_live(store, &muted))?;
    let muted = muted.to_string();
    change(store, &user, |list| match list.muted.len() {
        _ if list.muted.contains(&muted) => Ok(false),
        n if n >= MAX_MUTES => Err(ApiError::Conflict(format!(
            "user `{user}` mutes {n} users, the most one may mute; unmute someone first"
        ))),
        _ => {
            list.muted.push(muted.clone());
            Ok(true)
        }
    })
    .await
}

/// `DELETE /api/users/{userId}/mutes/{mutedId}`: the list read, then written; idempotent.
#[utoipa::path(
    delete,
    path = "/api/users/{userId}/mutes/{mutedId}",
    tag = "users",
    summary = "Unmute a user",
    description = "Idempotent: 204 whether or not the user had muted them. Their posts and comments show again in what the user reads. Two store operations (one when they were not muted).",
    params(
        ("userId" = String, Path, description = "Who unmutes: the caller's own user"),
        ("mutedId" = String, Path, description = "Whom they unmute", example = "a7e2d9c4-1b3f-4e6a-8d5c-9f0e2b7a4c13", pattern = r"^(?!\.+$)[^/\\?#\u0000-\u001F\u007F-\u009F]{1,128}$"),
    ),
    responses(
        (status = 204, description = "The user does not have them muted (any more)"),
        (status = 409, description = "The list kept changing meanwhile; retry", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn unmute(
    State(s): State<AppState>,
    caller: Caller,
    PathIds(user, muted): PathIds,
) -> ApiResult<Response> {
    owner_only(&caller, &user)?;
    change(&*s.store, &user, |list| {
        let before = list.muted.len();
        list.muted.retain(|m| m != muted.as_str());
        Ok(list.muted.len() != before)
    })
    .await
}

/// `GET /api/users/{userId}/mutes`: the list, then each user in it (point reads, at once).
#[utoipa::path(
    get,
    path = "/api/users/{userId}/mutes",
    tag = "users",
    summary = "List the users a user has muted, newest mute first",
    description = "The user's own: with authentication on, only that user may list them (401 anonymous, 403 for another signed-in user); with `BLOG_AUTH=none`, anyone. The whole list in one page (at most 100 users): a point read of the list, then a point read of each user in it, at once. A user erased meanwhile is left out. An unknown user has an empty list.",
    security(("bearer" = [])),
    params(("userId" = String, Path, description = "Whose mutes: the caller's own user")),
    responses(
        (status = 200, description = "The muted users (`continuationToken` is always null)", body = UserPage,
            headers(("Cache-Control" = String, description = "`no-cache`"))),
        (status = 401, description = "No valid identity (authentication is on and the list is its owner's)", body = Problem, content_type = "application/problem+json", headers(("WWW-Authenticate" = String, description = "`Bearer` (with the error when a token was refused)"))),
        (status = 403, description = "The user is not the signed-in caller's", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn list_mutes(
    State(s): State<AppState>,
    caller: Caller,
    PathId(user): PathId,
) -> ApiResult<Response> {
    owner_only(&caller, &user)?;
    let store = &*s.store;
    let (muted, c) = (read_list(store, &user).await?.0.muted, Container::Users);
    let reads = muted.iter().rev().map(|id| store.read(c, id, id));
    let mut items = Vec::new();
    for user in futures::future::try_join_all(reads).await? {
        if let Some(user) = user.filter(|u| is_live(u, Kind::User)) {
            items.push(UserView::from_stored(user)?);
        }
    }
    Ok(page_response(&UserPage::new(items, None)))
}
