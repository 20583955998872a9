//! Extractors that turn every malformed input into an [`ApiError`] (problem+json), never into
//! axum's plain-text rejections.

use std::collections::HashMap;

use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, FromRequestParts, Path};
use axum::http::request::Parts;
use axum::http::StatusCode;

use crate::domain::Id;
use crate::error::ApiError;

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
