//! Accounts and profiles: register, sign in, the current user and its update, a profile by
//! username, follow and unfollow.
//!
//! Store operations: a registration is three creates (the username's guard, the email's guard,
//! the user); a sign-in two point reads (the email's guard, the user); a profile two point reads
//! (the username's guard, the user) and one more for a signed-in viewer (the follow edge). A
//! change of username or email creates the new guard before the change and deletes the old one
//! after it, so a crash in between leaves a guard that nobody holds, which a claim of that name
//! takes back once the guard is a minute old ([`claim`]; younger, it may belong to a registration
//! or change still under way).

use axum::body::Bytes;
use axum::extract::{ConnectInfo, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::body::{body_object, string_field};
use super::errors::{error, invalid, native, store_error, too_many, unprocessable, FromApi as _};
use super::{Account, Result, Signed};
use crate::api::AppState;
use crate::auth::local::{self, PASSWORD_MAX_CHARS, PASSWORD_MIN_CHARS};
use crate::auth::Identity;
use crate::domain::accounts::{email_id, handle_id, parse_email, EmailGuard, HandleGuard};
use crate::domain::{is_live, to_value, Id, Kind, PatchOp, User, Username};
use crate::store::{Container, Store, StoreError};

/// The most characters of a bio and of an image's address.
const BIO_MAX_CHARS: usize = 1_000;
const IMAGE_MAX_CHARS: usize = 2_048;

/// The `user` object of the answers: who the account is, with a token for it.
fn user_answer(user: &User, token: &str) -> Value {
    json!({ "user": {
        "email": user.email.clone().unwrap_or_default(),
        "token": token,
        "username": user.username,
        "bio": user.bio,
        "image": user.image,
    }})
}

/// A password as an account takes it: 8 to 256 characters, nothing else asked of it.
fn parse_password(p: &str) -> Result<&str> {
    let n = p.chars().count();
    if n == 0 {
        return Err(unprocessable("password", "can't be blank"));
    }
    if n < PASSWORD_MIN_CHARS {
        return Err(unprocessable(
            "password",
            &format!("is too short (minimum is {PASSWORD_MIN_CHARS} characters)"),
        ));
    }
    if n > PASSWORD_MAX_CHARS {
        return Err(unprocessable(
            "password",
            &format!("is too long (maximum is {PASSWORD_MAX_CHARS} characters)"),
        ));
    }
    Ok(p)
}

fn parse_username(s: &str) -> Result<Username> {
    if s.trim().is_empty() {
        return Err(unprocessable("username", "can't be blank"));
    }
    Username::parse(s).map_err(invalid)
}

/// An optional profile text: `""` and null clear it; otherwise at most `max` characters and no
/// control character.
fn profile_text(field: &str, value: &str, max: usize) -> Result<Option<String>> {
    if value.is_empty() {
        return Ok(None);
    }
    if value.chars().count() > max || value.chars().any(char::is_control) {
        return Err(unprocessable(
            field,
            &format!("is at most {max} characters, without control characters"),
        ));
    }
    Ok(Some(value.to_string()))
}

/// Hash off the async runtime's threads (tens of milliseconds of CPU and memory).
async fn hash(password: String) -> Result<String> {
    tokio::task::spawn_blocking(move || local::hash_password(&password))
        .await
        .map_err(|e| Response::from_api(crate::error::ApiError::internal(e.to_string()), "user"))
}

pub(super) async fn read_user(store: &dyn Store, id: &str) -> Result<Option<User>> {
    let item = store
        .read(Container::Users, id, id)
        .await
        .map_err(|e| store_error(e, "user"))?;
    Ok(item
        .filter(|u| is_live(u, Kind::User))
        .and_then(|u| User::deserialize(&u).ok()))
}

/// How long a guard is held whatever its owner looks like: a registration or a change of name
/// creates the guard before it writes the user, so until then the guard's owner is missing or
/// still carries another name, and another claim must not take the guard back meanwhile. Longer
/// than a request may run; a guard a crash left behind is free after it.
const GUARD_GRACE_SECS: i64 = 60;

/// Take the guard `guard` (a new item in its own partition) for `owner`: created, or taken back
/// from a holder that no longer holds it (`held` says whether the stored guard's holder still
/// does; a guard written less than [`GUARD_GRACE_SECS`] ago is held). `false` when someone holds
/// it.
async fn claim<F, Fut>(store: &dyn Store, guard: Value, held: F) -> Result<bool>
where
    F: FnOnce(Value) -> Fut,
    Fut: std::future::Future<Output = Result<bool>>,
{
    let id = guard["id"].as_str().unwrap_or_default().to_string();
    match store.create(Container::Users, &id, guard.clone()).await {
        Ok(_) => return Ok(true),
        Err(StoreError::Conflict) => {}
        Err(e) => return Err(store_error(e, "user")),
    }
    let Some(existing) = store
        .read(Container::Users, &id, &id)
        .await
        .map_err(|e| store_error(e, "user"))?
    else {
        return Ok(false);
    };
    let etag = existing["_etag"].as_str().map(String::from);
    let written = existing["_ts"].as_i64().unwrap_or(i64::MAX);
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    if now.saturating_sub(written) < GUARD_GRACE_SECS || held(existing).await? {
        return Ok(false);
    }
    match store
        .replace(Container::Users, &id, &id, guard, etag.as_deref())
        .await
    {
        Ok(_) => Ok(true),
        Err(StoreError::PreconditionFailed | StoreError::NotFound) => Ok(false),
        Err(e) => Err(store_error(e, "user")),
    }
}

/// Whether the username guard `guard` is held: its owner is a live user of that name.
async fn handle_held(store: &dyn Store, guard: Value) -> Result<bool> {
    let Ok(g) = HandleGuard::deserialize(&guard) else {
        return Ok(false);
    };
    let user = read_user(store, &g.owner).await?;
    Ok(user.is_some_and(|u| handle_id(&u.username) == g.id))
}

/// Whether the email guard `guard` is held: its owner is a live user with that email.
async fn email_held(store: &dyn Store, guard: Value) -> Result<bool> {
    let Ok(g) = EmailGuard::deserialize(&guard) else {
        return Ok(false);
    };
    let user = read_user(store, &g.owner).await?;
    Ok(user.is_some_and(|u| u.email.as_deref().map(email_id) == Some(g.id.clone())))
}

/// Give up a guard (best effort: a guard nobody holds is taken back by the next claim).
async fn release(store: &dyn Store, id: &str) {
    if let Err(e) = store.delete(Container::Users, id, id).await {
        if !matches!(e, StoreError::NotFound) {
            tracing::warn!(error = %e, "a released guard was not deleted; the next claim takes it back");
        }
    }
}

/// `POST /api/conduit/api/users`: register.
pub async fn register(
    State(s): State<AppState>,
    ConnectInfo(peer): ConnectInfo<std::net::SocketAddr>,
    body: Bytes,
) -> Result<Response> {
    // A registration is a write of the client address's budget (`BLOG_WRITES_PER_MINUTE`).
    if let Err(wait) = s
        .writes
        .check(&crate::api::write_limit::Writer::peer(Some(peer)))
    {
        return Err(too_many("user", wait));
    }
    let m = body_object(&body, "user")?;
    let username = string_field(&m, "username", false)?.unwrap_or_default();
    let email = string_field(&m, "email", false)?.unwrap_or_default();
    let password = string_field(&m, "password", false)?.unwrap_or_default();
    let username = parse_username(&username)?;
    let email = parse_email(&email).map_err(invalid)?;
    let password = parse_password(&password)?.to_string();
    let password_hash = hash(password).await?;
    let store = &*s.store;
    let subject = Id::new().to_string();
    let identity = Identity::new(local::ISSUER, subject.clone());
    let user_id = identity.user_id();
    let handle = HandleGuard::new(username.as_str(), user_id.as_str());
    if !claim(store, to_value(&handle), |g| handle_held(store, g)).await? {
        return Err(error(
            StatusCode::CONFLICT,
            "username",
            "has already been taken",
        ));
    }
    let guard = EmailGuard::new(&email, user_id.as_str(), &subject, password_hash);
    if !claim(store, to_value(&guard), |g| email_held(store, g)).await? {
        release(store, &handle.id).await;
        return Err(error(
            StatusCode::CONFLICT,
            "email",
            "has already been taken",
        ));
    }
    let mut user = User::new(&user_id, &username);
    user.email = Some(email);
    if let Err(e) = store
        .create(Container::Users, user_id.as_str(), to_value(&user))
        .await
    {
        release(store, &guard.id).await;
        release(store, &handle.id).await;
        return Err(store_error(e, "user"));
    }
    let token = s.auth.token_key().issue(&subject);
    Ok((StatusCode::CREATED, Json(user_answer(&user, &token))).into_response())
}

/// `POST /api/conduit/api/users/login`: sign in. A wrong password and an unknown email get the
/// same answer, in the same time.
pub async fn login(
    State(s): State<AppState>,
    ConnectInfo(peer): ConnectInfo<std::net::SocketAddr>,
    body: Bytes,
) -> Result<Response> {
    let m = body_object(&body, "user")?;
    let email = string_field(&m, "email", false)?.unwrap_or_default();
    let password = string_field(&m, "password", false)?.unwrap_or_default();
    if email.trim().is_empty() {
        return Err(unprocessable("email", "can't be blank"));
    }
    if password.is_empty() {
        return Err(unprocessable("password", "can't be blank"));
    }
    if let Err(wait) = s
        .accounts
        .per_address
        .check(&crate::api::write_limit::Writer::peer(Some(peer)))
    {
        return Err(too_many("credentials", wait));
    }
    let account = crate::api::write_limit::Writer::User(email.trim().to_lowercase());
    if let Err(wait) = s.accounts.per_account.check(&account) {
        return Err(too_many("credentials", wait));
    }
    let store = &*s.store;
    let id = email_id(email.trim());
    let guard = store
        .read(Container::Users, &id, &id)
        .await
        .map_err(|e| store_error(e, "user"))?
        .and_then(|g| EmailGuard::deserialize(&g).ok());
    let phc = guard.as_ref().map(|g| g.password_hash.clone());
    let matches =
        tokio::task::spawn_blocking(move || local::verify_password(&password, phc.as_deref()))
            .await
            .unwrap_or(false);
    let refused = || error(StatusCode::UNAUTHORIZED, "credentials", "invalid");
    let Some(guard) = guard.filter(|_| matches) else {
        return Err(refused());
    };
    let user = read_user(store, &guard.owner).await?.ok_or_else(refused)?;
    let token = s.auth.token_key().issue(&guard.subject);
    Ok(Json(user_answer(&user, &token)).into_response())
}

/// The signed-in account's user (404 when it is gone: erased).
async fn own_user(store: &dyn Store, account: &Account) -> Result<User> {
    read_user(store, account.user_id().as_str())
        .await?
        .ok_or_else(|| error(StatusCode::NOT_FOUND, "user", "not found"))
}

/// `GET /api/conduit/api/user`: the signed-in account.
pub async fn current(State(s): State<AppState>, Signed(account): Signed) -> Result<Response> {
    let user = own_user(&*s.store, &account).await?;
    Ok(Json(user_answer(&user, &account.token)).into_response())
}

/// `PUT /api/conduit/api/user`: change any of email, username, password, bio, image.
pub async fn update(
    State(s): State<AppState>,
    Signed(account): Signed,
    body: Bytes,
) -> Result<Response> {
    let m = body_object(&body, "user")?;
    let email = match string_field(&m, "email", false)? {
        Some(e) => Some(parse_email(&e).map_err(invalid)?),
        None => None,
    };
    let username = match string_field(&m, "username", false)? {
        Some(u) => Some(parse_username(&u)?),
        None => None,
    };
    let password = match string_field(&m, "password", false)? {
        Some(p) => Some(parse_password(&p)?.to_string()),
        None => None,
    };
    let bio = string_field(&m, "bio", true)?
        .map(|b| profile_text("bio", &b, BIO_MAX_CHARS))
        .transpose()?;
    let image = string_field(&m, "image", true)?
        .map(|i| profile_text("image", &i, IMAGE_MAX_CHARS))
        .transpose()?;
    let store = &*s.store;
    let user = own_user(store, &account).await?;
    let me = account.user_id();
    let new_hash = match password {
        Some(p) => Some(hash(p).await?),
        None => None,
    };
    // The email (and with it where the password's hash is kept).
    let old_email = user.email.clone().unwrap_or_default();
    let email_changes = email
        .as_deref()
        .is_some_and(|e| email_id(e) != email_id(&old_email));
    if email_changes || new_hash.is_some() {
        let old_id = email_id(&old_email);
        let old = store
            .read(Container::Users, &old_id, &old_id)
            .await
            .map_err(|e| store_error(e, "user"))?
            .and_then(|g| EmailGuard::deserialize(&g).ok())
            .filter(|g| g.owner == me.as_str())
            .ok_or_else(|| {
                error(
                    StatusCode::CONFLICT,
                    "email",
                    "the account's sign-in is missing",
                )
            })?;
        let hash = new_hash.clone().unwrap_or(old.password_hash.clone());
        if email_changes {
            let new_email = email.clone().expect("it changes");
            let guard = EmailGuard::new(&new_email, me.as_str(), &old.subject, hash);
            if !claim(store, to_value(&guard), |g| email_held(store, g)).await? {
                return Err(error(
                    StatusCode::CONFLICT,
                    "email",
                    "has already been taken",
                ));
            }
            store
                .patch(
                    Container::Users,
                    me.as_str(),
                    me.as_str(),
                    &[PatchOp::set("/email", new_email.as_str())],
                    None,
                )
                .await
                .map_err(|e| store_error(e, "user"))?;
            release(store, &old_id).await;
        } else {
            store
                .patch(
                    Container::Users,
                    &old_id,
                    &old_id,
                    &[PatchOp::set("/passwordHash", hash.as_str())],
                    None,
                )
                .await
                .map_err(|e| store_error(e, "user"))?;
        }
    } else if let Some(e) = &email {
        // The same address in another case: kept as now written.
        if *e != old_email {
            store
                .patch(
                    Container::Users,
                    me.as_str(),
                    me.as_str(),
                    &[PatchOp::set("/email", e.as_str())],
                    None,
                )
                .await
                .map_err(|e| store_error(e, "user"))?;
        }
    }
    // The username: the new guard, the rename (the change feed carries it everywhere), the old
    // guard given up.
    let mut renamed = false;
    if let Some(new_name) = username.filter(|n| n.as_str() != user.username) {
        let old_guard = handle_id(&user.username);
        let new_guard = HandleGuard::new(new_name.as_str(), me.as_str());
        let other_name = new_guard.id != old_guard;
        if other_name && !claim(store, to_value(&new_guard), |g| handle_held(store, g)).await? {
            return Err(error(
                StatusCode::CONFLICT,
                "username",
                "has already been taken",
            ));
        }
        let body = crate::api::users::UserBody {
            username: new_name.as_str().to_string(),
        };
        let renamed_answer = crate::api::users::rename_user(
            State(s.clone()),
            account.caller(),
            crate::api::PathId(me.clone()),
            None,
            crate::api::JsonBody(body),
        )
        .await;
        if let Err(e) = native(renamed_answer, "user").await {
            if other_name {
                release(store, &new_guard.id).await;
            }
            return Err(e);
        }
        if other_name {
            release(store, &old_guard).await;
        }
        renamed = true;
    }
    let mut ops = Vec::new();
    if let Some(bio) = bio {
        ops.push(PatchOp::set("/bio", bio.map_or(Value::Null, Value::from)));
    }
    if let Some(image) = image {
        ops.push(PatchOp::set(
            "/image",
            image.map_or(Value::Null, Value::from),
        ));
    }
    if !ops.is_empty() {
        store
            .patch(Container::Users, me.as_str(), me.as_str(), &ops, None)
            .await
            .map_err(|e| store_error(e, "user"))?;
    }
    if renamed {
        super::own_writes::wait(&s).await;
    }
    let user = own_user(store, &account).await?;
    Ok(Json(user_answer(&user, &account.token)).into_response())
}
