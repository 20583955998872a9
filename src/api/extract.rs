//! Extractors that turn every malformed input into an [`ApiError`] (problem+json), never into
//! axum's plain-text rejections.

use std::collections::HashMap;
use std::net::SocketAddr;

use axum::extract::rejection::JsonRejection;
use axum::extract::{ConnectInfo, FromRequest, FromRequestParts, Path};
use axum::http::request::Parts;
use axum::http::{Method, StatusCode};

use crate::auth::{ActingUser, Caller};
use crate::domain::Id;
use crate::error::{ApiError, ApiResult};
use crate::settings::AuthMode;

use super::write_limit::Writer;
use super::AppState;

/// A JSON request body: 415 when not declared JSON, 413 over the body limit, 400 when malformed
/// (the rejections map to [`ApiError`] in `From<JsonRejection>`).
#[derive(FromRequest)]
#[from_request(via(axum::Json), rejection(ApiError))]
pub struct JsonBody<T>(pub T);

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        match rejection {
            JsonRejection::MissingJsonContentType(_) => ApiError::UnsupportedMediaType(
                "the body must be JSON with `Content-Type: application/json`".into(),
            ),
            JsonRejection::JsonSyntaxError(e) => {
                ApiError::BadRequest(format!("malformed JSON: {}", e.body_text()))
            }
            JsonRejection::JsonDataError(e) => ApiError::BadRequest(e.body_text()),
            JsonRejection::BytesRejection(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => {
                ApiError::PayloadTooLarge
            }
            e => ApiError::BadRequest(e.body_text()),
        }
    }
}

/// The one id in a route's path (`{userId}` or `{postId}`), validated.
pub struct PathId(pub Id);

impl<S: Send + Sync> FromRequestParts<S> for PathId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path(raw) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::BadRequest(e.body_text()))?;
        Ok(PathId(Id::parse("id in the path", &raw)?))
    }
}

/// The two ids in a route's path (`{postId}` and then `{commentId}` or `{userId}`), validated.
pub struct PathIds(pub Id, pub Id);

impl<S: Send + Sync> FromRequestParts<S> for PathIds {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path((a, b)) = Path::<(String, String)>::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::BadRequest(e.body_text()))?;
        Ok(PathIds(
            Id::parse("id in the path", &a)?,
            Id::parse("id in the path", &b)?,
        ))
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
                    ApiError::BadRequest(format!(
                        "`limit` must be an integer from 1 to {}",
                        Self::MAX_LIMIT
                    ))
                })?,
        };
        let continuation = match params.get("continuationToken") {
            Some(t) if t.is_empty() || t.len() > 4096 => {
                return Err(ApiError::BadRequest(
                    "`continuationToken` is not valid".into(),
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
            axum::extract::Query::<HashMap<String, String>>::try_from_uri(&parts.uri)
                .map_err(|e| ApiError::BadRequest(e.body_text()))?;
        Paging::parse(&params)
    }
}

/// Who is calling, for a write (or `GET /api/me`): [`Caller`], as `BLOG_AUTH` decides it.
///
/// In `jwt` and `easyauth` a request without a valid identity is refused here with 401 (in
/// `jwt` with `WWW-Authenticate: Bearer`), before its body is read; so a refused write writes
/// nothing. A write over the caller's budget is refused here too (429).
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
            None => Err(ApiError::Unauthorized {
                detail: match auth.mode() {
                    AuthMode::Jwt => "sign in: writes need `Authorization: Bearer <token>`".into(),
                    _ => "sign in: writes need an authenticated caller".into(),
                },
                challenge: (auth.mode() == AuthMode::Jwt).then(|| "Bearer".to_string()),
            }),
        }
    }
}

/// Take one write from `who`'s budget (`BLOG_WRITES_PER_MINUTE`) when the request is a write
/// (reads such as `GET /api/me` are free): 429 with `Retry-After` when it is spent, decided
/// before the body is read, so nothing is written.
fn spend_a_write(parts: &Parts, state: &AppState, who: &Writer) -> ApiResult<()> {
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
