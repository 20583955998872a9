//! Extractors that turn every malformed input into an [`ApiError`] (problem+json), never into
//! axum's plain-text rejections.

use std::collections::HashMap;
use std::net::SocketAddr;

use axum::extract::rejection::JsonRejection;
use axum::extract::{ConnectInfo, FromRequest, FromRequestParts, Path, Request};
use axum::http::request::Parts;
use axum::http::{Method, StatusCode};

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::auth::{ActingUser, Caller};
use crate::domain::Id;
use crate::error::{ApiError, ApiResult, FieldError, Place};
use crate::settings::AuthMode;

use super::write_limit::Writer;
use super::AppState;

/// A JSON request body: 415 when not declared JSON, 413 over the body limit, 400 when malformed
/// (not JSON, or not a JSON object: `malformed-body`) or not the request's shape (a property
/// missing or of the wrong type: `invalid-input`, naming it).
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let axum::Json(value) = axum::Json::<Value>::from_request(req, state).await?;
        // An array would read as a struct's fields in order: only an object is a body.
        if !value.is_object() {
            return Err(ApiError::MalformedBody(
                "the body must be a JSON object".into(),
            ));
        }
        serde_path_to_error::deserialize(value)
            .map(JsonBody)
            .map_err(|e| body_data_error(&e))
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        match rejection {
            JsonRejection::MissingJsonContentType(_) => ApiError::UnsupportedMediaType(
                "the body must be JSON with `Content-Type: application/json`".into(),
            ),
            JsonRejection::BytesRejection(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => {
                ApiError::PayloadTooLarge
            }
            JsonRejection::JsonSyntaxError(_) | JsonRejection::JsonDataError(_) => {
                ApiError::MalformedBody("the body is not valid JSON".into())
            }
            _ => ApiError::MalformedBody("the body could not be read".into()),
        }
    }
}

/// A body that is JSON but not the request's shape, in the service's words, naming the
/// property at fault: `` `username` is required ``, `` `title` must be a string ``. The
/// parser's own message is read only to tell the cases apart, never answered.
fn body_data_error(e: &serde_path_to_error::Error<serde_json::Error>) -> ApiError {
    use serde_path_to_error::Segment;
    let path: Vec<String> = e
        .path()
        .iter()
        .filter_map(|s| match s {
            Segment::Map { key } => Some(key.clone()),
            Segment::Seq { index } => Some(index.to_string()),
            _ => None,
        })
        .collect();
    let message = e.inner().to_string();
    // `missing field `x`` is reported at the object that lacks it.
    if let Some(missing) = between(&message, "missing field `", "`") {
        let field = path
            .iter()
            .map(String::as_str)
            .chain([missing])
            .collect::<Vec<_>>()
            .join(".");
        return ApiError::invalid(Place::Body, &field, format!("`{field}` is required"));
    }
    if path.is_empty() {
        return ApiError::MalformedBody("the body must be a JSON object".into());
    }
    let field = path.join(".");
    let expected = message
        .split_once(", expected ")
        .map(|(_, rest)| rest.split(" at line ").next().unwrap_or(rest));
    let detail = match expected {
        Some("a string") => format!("`{field}` must be a string"),
        Some(e) if e.starts_with("u32") || e.starts_with("u64") || e.contains("integer") => {
            format!("`{field}` must be an integer")
        }
        Some(e) if e.starts_with("a boolean") => format!("`{field}` must be `true` or `false`"),
        _ => format!("`{field}` does not have the type the request takes"),
    };
    ApiError::invalid(Place::Body, &field, detail)
}

/// The text between `start` and the next `end` in `s`.
fn between<'a>(s: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let rest = &s[s.find(start)? + start.len()..];
    Some(&rest[..rest.find(end)?])
}

/// The path's parameters, named as the route names them (`{userId}`, …), each checked as an id.
async fn path_ids<S: Send + Sync>(parts: &mut Parts, state: &S) -> Result<Vec<Id>, ApiError> {
    let Path(params) = Path::<Vec<(String, String)>>::from_request_parts(parts, state)
        .await
        .map_err(|_| ApiError::BadRequest("the path's parameters could not be read".into()))?;
    let mut ids = Vec::with_capacity(params.len());
    let mut errors = Vec::new();
    for (name, raw) in &params {
        match Id::parse(name, raw) {
            Ok(id) => ids.push(id),
            Err(e) => errors.push(FieldError::new(Place::Path, name, e.detail)),
        }
    }
    if errors.is_empty() {
        Ok(ids)
    } else {
        Err(ApiError::InvalidInput(errors))
    }
}

/// The one id in a route's path (`{userId}` or `{postId}`), validated.
pub struct PathId(pub Id);

impl<S: Send + Sync> FromRequestParts<S> for PathId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match <[Id; 1]>::try_from(path_ids(parts, state).await?) {
            Ok([id]) => Ok(PathId(id)),
            Err(_) => Err(ApiError::internal("the route has not exactly one id")),
        }
    }
}

/// The two ids in a route's path (`{postId}` and then `{commentId}` or `{userId}`), validated.
pub struct PathIds(pub Id, pub Id);

impl<S: Send + Sync> FromRequestParts<S> for PathIds {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match <[Id; 2]>::try_from(path_ids(parts, state).await?) {
            Ok([a, b]) => Ok(PathIds(a, b)),
            Err(_) => Err(ApiError::internal("the route has not exactly two ids")),
        }
    }
}

/// Paging parameters of the list requests: `limit` (1..=100) and `continuationToken`.
#[derive(Debug, Clone, PartialEq)]
pub struct Paging {
    pub limit: u32,
    pub continuation: Option<String>,
}

impl Paging {
    pub const DEFAULT_LIMIT: u32 = 20;
    pub const MAX_LIMIT: u32 = 100;

    pub fn parse(params: &HashMap<String, String>) -> Result<Self, ApiError> {
        let limit = match params.get("limit") {
            None => Self::DEFAULT_LIMIT,
            Some(s) => s
                .parse::<u32>()
                .ok()
                .filter(|n| (1..=Self::MAX_LIMIT).contains(n))
                .ok_or_else(|| {
                    ApiError::invalid(
                        Place::Query,
                        "limit",
                        format!("`limit` must be an integer from 1 to {}", Self::MAX_LIMIT),
                    )
                })?,
        };
        let continuation = match params.get("continuationToken") {
            Some(t) if t.is_empty() || t.len() > 4096 => {
                return Err(ApiError::invalid(
                    Place::Query,
                    "continuationToken",
                    "`continuationToken` is not valid",
                ))
            }
            other => other.cloned(),
        };
        Ok(Paging {
            limit,
            continuation,
        })
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Paging {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let axum::extract::Query(params) =
            axum::extract::Query::<HashMap<String, String>>::try_from_uri(&parts.uri).map_err(
                |_| ApiError::BadRequest("the query string could not be decoded".into()),
            )?;
        Paging::parse(&params)
    }
}

/// Who is calling, for a write (or `GET /api/me`): [`Caller`], as `BLOG_AUTH` decides it.
///
/// In `jwt`, `easyauth` and `local` a request without a valid identity is refused here with 401
/// (in `jwt` and `local` with `WWW-Authenticate: Bearer`), before its body is read; so a refused
/// write writes nothing. A write over the caller's budget is refused here too (429).
impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<Self> {
        let auth = &state.auth;
        if auth.mode() == AuthMode::None {
            // Nobody is verified, so the client's address is who writes.
            let peer = parts
                .extensions
                .get::<ConnectInfo<SocketAddr>>()
                .map(|c| c.0);
            spend_a_write(parts, state, &Writer::peer(peer))?;
            return Ok(Caller::Unverified);
        }
        match auth.identify(parts).await? {
            Some(identity) => {
                let user_id = identity.user_id();
                if let Some(slot) = parts.extensions.get::<ActingUser>() {
                    slot.set(&user_id);
                }
                auth.may_write(parts, &identity)?;
                spend_a_write(parts, state, &Writer::User(user_id.to_string()))?;
                Ok(Caller::Verified(identity))
            }
            None => {
                let bearer = matches!(auth.mode(), AuthMode::Jwt | AuthMode::Local);
                Err(ApiError::Unauthorized {
                    detail: match auth.mode() {
                        AuthMode::Local => {
                            "sign in: writes, and reading what is the caller's own, \
                             need `Authorization: Bearer <token>`, a local account's token \
                             (`POST /api/conduit/api/users/login`)"
                                .into()
                        }
                        AuthMode::Jwt => "sign in: writes, and reading what is the caller's own, \
                             need `Authorization: Bearer <token>`"
                            .into(),
                        _ => "sign in: writes, and reading what is the caller's own, need an \
                              authenticated caller"
                            .into(),
                    },
                    challenge: bearer.then(|| "Bearer".to_string()),
                })
            }
        }
    }
}

/// Take one write from `who`'s budget (`BLOG_WRITES_PER_MINUTE`) when the request is a write
/// (reads such as `GET /api/me` are free): 429 with `Retry-After` when it is spent, decided
/// before the body is read, so nothing is written.
pub(super) fn spend_a_write(parts: &Parts, state: &AppState, who: &Writer) -> ApiResult<()> {
    if matches!(parts.method, Method::GET | Method::HEAD) {
        return Ok(());
    }
    state
        .writes
        .check(who)
        .map_err(|retry_after| ApiError::TooManyWrites {
            per_minute: state.writes.per_minute(),
            retry_after,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn paging_defaults_and_limits() {
        assert_eq!(Paging::parse(&params(&[])).unwrap().limit, 20);
        assert_eq!(
            Paging::parse(&params(&[("limit", "100")])).unwrap().limit,
            100
        );
        for bad in ["0", "101", "-1", "x", ""] {
            assert!(Paging::parse(&params(&[("limit", bad)])).is_err(), "{bad}");
        }
        let p = Paging::parse(&params(&[("continuationToken", "abc")])).unwrap();
        assert_eq!(p.continuation.as_deref(), Some("abc"));
        assert!(Paging::parse(&params(&[("continuationToken", "")])).is_err());
    }
}
