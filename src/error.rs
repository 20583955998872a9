//! The one error type of the HTTP API, rendered as `application/problem+json` (RFC 9457).

use std::time::Duration;

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::domain::Invalid;
use crate::store::StoreError;

/// Every way a request can fail, each with the status it answers.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 400: malformed or invalid input (bad JSON, a field out of its limits, a bad id or query).
    #[error("{0}")]
    BadRequest(String),
    /// 401: a write without a valid identity. `challenge` is the `WWW-Authenticate` value when
    /// the caller should present a bearer token.
    #[error("{detail}")]
    Unauthorized {
        detail: String,
        challenge: Option<String>,
    },
    /// 403: the caller may not change this resource (a post edited by someone else).
    #[error("{0}")]
    Forbidden(String),
    /// 404: the resource named in the path does not exist, or no such route.
    #[error("{0}")]
    NotFound(String),
    /// 405: the path exists but not with this method.
    #[error("method not allowed")]
    MethodNotAllowed,
    /// 409: the write conflicts with the current state.
    #[error("{0}")]
    Conflict(String),
    /// 413: the body is over the 1 MiB limit.
    #[error("request body is larger than 1 MiB")]
    PayloadTooLarge,
    /// 415: the body is not declared as JSON.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// 422: a well-formed body names a user that does not exist.
    #[error("{0}")]
    Unprocessable(String),
    /// 429: the store throttles; retry after the given time.
    #[error("the store is busy; retry later")]
    Throttled { retry_after: Duration },
    /// 503: the store is unreachable or not ready; retry after the given time.
    #[error("the store is unavailable; retry later")]
    Unavailable { retry_after: Duration },
    /// 503: the identity provider's keys cannot be fetched, so no token can be checked; retry
    /// after the given time.
    #[error("the identity provider's signing keys are unavailable; retry later")]
    IdentityUnavailable { retry_after: Duration },
    /// 500: anything else. The detail is logged, never returned.
    #[error("internal error: {0}")]
    Internal(String),
}

#[derive(Serialize)]
struct Problem<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    title: &'a str,
    status: u16,
    detail: String,
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized { .. } => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::Unprocessable(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::Throttled { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Unavailable { .. } | ApiError::IdentityUnavailable { .. } => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    pub fn not_found(what: &str, id: &str) -> Self {
        ApiError::NotFound(format!("{what} `{id}` does not exist"))
    }
}

impl From<Invalid> for ApiError {
    fn from(e: Invalid) -> Self {
        ApiError::BadRequest(e.0)
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e.root() {
            StoreError::NotFound => ApiError::NotFound("the resource does not exist".into()),
            StoreError::Conflict => ApiError::Conflict("the resource already exists".into()),
            StoreError::PreconditionFailed => {
                ApiError::Conflict("the resource changed concurrently; retry".into())
            }
            StoreError::Throttled { retry_after } => ApiError::Throttled {
                retry_after: *retry_after,
            },
            StoreError::Unavailable(_) => ApiError::Unavailable {
                retry_after: Duration::from_secs(1),
            },
            StoreError::BadRequest(m) if m.contains("continuation") => {
                ApiError::BadRequest("`continuationToken` is not valid".into())
            }
            _ => ApiError::Internal(e.to_string()),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let detail = match &self {
            ApiError::Internal(msg) => {
                tracing::error!(error = %msg, "request failed");
                "an unexpected error occurred".to_string()
            }
            other => other.to_string(),
        };
        let body = Problem {
            kind: "about:blank",
            title: status.canonical_reason().unwrap_or("Error"),
            status: status.as_u16(),
            detail,
        };
        let mut resp = (status, axum::Json(body)).into_response();
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        if let ApiError::Throttled { retry_after }
        | ApiError::Unavailable { retry_after }
        | ApiError::IdentityUnavailable { retry_after } = &self
        {
            let secs = retry_after.as_secs_f64().ceil().max(1.0) as u64;
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        if let ApiError::Unauthorized {
            challenge: Some(c), ..
        } = &self
        {
            if let Ok(v) = HeaderValue::from_str(c) {
                resp.headers_mut().insert(header::WWW_AUTHENTICATE, v);
            }
        }
        resp
    }
}

pub type ApiResult<T> = Result<T, ApiError>;
