//! The RealWorld ("Conduit") API under `/api/conduit` (docs/conduit.md), the API that many
//! existing front ends speak: an adapter over the native API's handlers, so every rule (who may
//! write, limits, counters, deletes, the copies the change feed keeps) has one copy. An article
//! is a post (its slug `<title words>-<post id>`), a favorite is a like, the feed is the personal
//! timeline, a profile is a user found by its handle.
//!
//! What the adapter adds of its own:
//! - **Local accounts** ([`users`]): register and sign in with email and password, tokens this
//!   service signs ([`crate::auth::local`]); usernames and emails unique, case-insensitively,
//!   through guard items ([`crate::domain::accounts`]).
//! - **Its shapes and errors**: `{"user": …}`, `{"article": …}`, `{"errors": {"<field>": […]}}`
//!   with 401 before any lookup, 403, 404, 409, 422 as RealWorld clients expect.
//! - **Reading one's own writes**: a write that the change feed carries into a list (a post, an
//!   edit, a delete, a follow, a rename) answers once the in-process pump has applied it
//!   ([`crate::pump::Progress::passed`], at most [`OWN_WRITES_WAIT`]), so the caller's next read
//!   of any list shows it. Under the Functions host no pump runs in the process: lists follow
//!   within the triggers' polling delay.

// The error of a Conduit handler is its answer (a status and `{"errors": …}`), built once, on
// the failing path only: boxing it would add an allocation to every such answer for nothing.
#![allow(clippy::result_large_err)]

mod articles;
mod body;
mod comments;
mod errors;
mod lists;
mod own_writes;
mod profiles;
mod users;

use std::time::Duration;

use axum::extract::{FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{header, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::Router;

use super::write_limit::Writer;
use super::AppState;
use crate::auth::{Caller, Identity};
use crate::domain::Id;
use crate::error::ApiError;
use errors::{unauthorized, FromApi as _};

/// The longest a write waits for the change feed to carry it into the lists its caller reads
/// next (see the module's documentation).
pub const OWN_WRITES_WAIT: Duration = Duration::from_secs(2);

/// The Functions host's HTTP functions of the Conduit API (`functions/<name>/function.json`):
/// name, route (under the host's `api` prefix) and methods. Deployed with every other function;
/// they answer only where `BLOG_CONDUIT` is on (docs/conduit.md).
pub const FUNCTIONS: [(&str, &str, &[&str]); 13] = [
    ("ConduitApiDescription", "conduit/openapi.yml", &["GET"]),
    ("ConduitUsers", "conduit/api/users", &["POST"]),
    ("ConduitLogin", "conduit/api/users/login", &["POST"]),
    ("ConduitUser", "conduit/api/user", &["GET", "PUT"]),
    (
        "ConduitProfile",
        "conduit/api/profiles/{username}",
        &["GET"],
    ),
    (
        "ConduitFollow",
        "conduit/api/profiles/{username}/follow",
        &["POST", "DELETE"],
    ),
    ("ConduitArticles", "conduit/api/articles", &["GET", "POST"]),
    ("ConduitFeed", "conduit/api/articles/feed", &["GET"]),
    (
        "ConduitArticle",
        "conduit/api/articles/{slug}",
        &["GET", "PUT", "DELETE"],
    ),
    (
        "ConduitFavorite",
        "conduit/api/articles/{slug}/favorite",
        &["POST", "DELETE"],
    ),
    (
        "ConduitComments",
        "conduit/api/articles/{slug}/comments",
        &["GET", "POST"],
    ),
    (
        "ConduitComment",
        "conduit/api/articles/{slug}/comments/{id}",
        &["DELETE"],
    ),
    ("ConduitTags", "conduit/api/tags", &["GET"]),
];

/// The Conduit routes, each answered within `request_timeout`.
pub fn routes(request_timeout: Duration) -> Router<AppState> {
    const P: &str = "/api/conduit/api";
    Router::new()
        .route(&format!("{P}/users"), post(users::register))
        .route(&format!("{P}/users/login"), post(users::login))
        .route(&format!("{P}/user"), get(users::current).put(users::update))
        .route(
            &format!("{P}/profiles/{{username}}"),
            get(profiles::profile),
        )
        .route(
            &format!("{P}/profiles/{{username}}/follow"),
            post(profiles::follow).delete(profiles::unfollow),
        )
        .route(
            &format!("{P}/articles"),
            get(lists::list).post(articles::create),
        )
        .route(&format!("{P}/articles/feed"), get(lists::feed))
        .route(
            &format!("{P}/articles/{{slug}}"),
            get(articles::get)
                .put(articles::update)
                .delete(articles::remove),
        )
        .route(
            &format!("{P}/articles/{{slug}}/favorite"),
            post(articles::favorite).delete(articles::unfavorite),
        )
        .route(
            &format!("{P}/articles/{{slug}}/comments"),
            get(comments::comments).post(comments::comment),
        )
        .route(
            &format!("{P}/articles/{{slug}}/comments/{{id}}"),
            delete(comments::uncomment),
        )
        .route(&format!("{P}/tags"), get(lists::tags))
        .route("/api/conduit/openapi.yml", get(description))
        .route_layer(axum::middleware::from_fn(
            move |req: Request, next: Next| async move {
                match tokio::time::timeout(request_timeout, next.run(req)).await {
                    Ok(resp) => resp,
                    Err(_) => Error::from_api(ApiError::TimedOut(request_timeout), "request"),
                }
            },
        ))
}

/// The RealWorld API's description (OpenAPI 3.1, as upstream publishes it with the suite in
/// `tests/conduit/`), its server this one's Conduit API.
const DESCRIPTION: &str = include_str!("../../tests/conduit/openapi.yml");

/// `GET /api/conduit/openapi.yml`: [`DESCRIPTION`], for clients generated from it.
async fn description() -> Response {
    let doc = DESCRIPTION.replacen(
        "  - url: https://api.realworld.show/api",
        "  - url: /api/conduit/api",
        1,
    );
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/yaml"),
        )],
        doc,
    )
        .into_response()
}

/// A Conduit error answer: `{"errors": {"<field>": ["<message>"]}}` with its status (and the
/// headers and log record of the native error it comes from, where it does).
pub type Error = Response;
pub type Result<T> = std::result::Result<T, Error>;

/// The signed-in local account making a request.
#[derive(Clone)]
pub struct Account {
    identity: Identity,
    /// The token it presented.
    token: String,
}

impl Account {
    pub fn user_id(&self) -> Id {
        self.identity.user_id()
    }

    /// The account as the native handlers' caller.
    fn caller(&self) -> Caller {
        Caller::Verified(self.identity.clone())
    }
}

fn account_of(parts: &Parts, state: &AppState) -> Result<Option<Account>> {
    let Some(token) = crate::auth::local::presented_token(&parts.headers) else {
        return Ok(None);
    };
    let identity = state
        .auth
        .token_key()
        .verify(token)
        .map_err(|_| unauthorized("is invalid"))?;
    if let Some(acting) = parts.extensions.get::<crate::auth::ActingUser>() {
        acting.set(&identity.user_id());
    }
    Ok(Some(Account {
        identity,
        token: token.to_string(),
    }))
}

/// A request that needs a signed-in account: 401 before anything else is looked at.
pub struct Signed(pub Account);

impl FromRequestParts<AppState> for Signed {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self> {
        let Some(account) = account_of(parts, state)? else {
            return Err(unauthorized("is missing"));
        };
        // A write takes one from the account's budget (`BLOG_WRITES_PER_MINUTE`), as every
        // write of the native API does.
        let who = Writer::User(account.user_id().to_string());
        super::extract::spend_a_write(parts, state, &who)
            .map_err(|e| Error::from_api(e, "request"))?;
        Ok(Signed(account))
    }
}

/// A read that shows more to a signed-in account (`following`, `favorited`); anonymous
/// otherwise. A token that proves nothing is still a 401.
pub struct Viewer(pub Option<Account>);

impl FromRequestParts<AppState> for Viewer {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self> {
        Ok(Viewer(account_of(parts, state)?))
    }
}
