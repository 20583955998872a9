//! The Conduit error answers (`{"errors": {"<field>": ["<message>"]}}` with the status a
//! RealWorld client expects), and the native API's answers and errors read as Conduit ones.

use std::time::Duration;

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value};

use super::{Error, Result};
use crate::domain::Invalid;
use crate::error::ApiError;

/// `{"errors": {field: [message]}}` with `status`.
pub(super) fn error(status: StatusCode, field: &str, message: &str) -> Error {
    let body = json!({ "errors": { field: [message] } });
    (status, axum::Json(body)).into_response()
}

/// 401: no token (`token: is missing`) or one that proves nothing (`token: is invalid`).
pub(super) fn unauthorized(message: &str) -> Error {
    let mut resp = error(StatusCode::UNAUTHORIZED, "token", message);
    resp.headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Token"));
    resp
}

/// 422 for invalid input: the field and what is wrong with it.
pub(super) fn unprocessable(field: &str, message: &str) -> Error {
    error(StatusCode::UNPROCESSABLE_ENTITY, field, message)
}

/// A domain check's refusal as a 422 naming the field as Conduit does (`content` is `body`,
/// `tags` is `tagList`), `can't be blank` for an empty value.
pub(super) fn invalid(e: Invalid) -> Error {
    let field = conduit_field(&e.field);
    let message = if e.detail.contains("must not be empty") || e.detail.contains("blank") {
        "can't be blank".to_string()
    } else {
        e.detail
    };
    unprocessable(field, &message)
}

fn conduit_field(native: &str) -> &str {
    match native {
        "content" => "body",
        "tags" => "tagList",
        other => other,
    }
}

/// The native API's error `e` as a Conduit error about `what` (`article`, `comment`, `profile`):
/// the same status, a Conduit body; a server-side failure keeps its log record.
pub(super) trait FromApi {
    fn from_api(e: ApiError, what: &str) -> Error;
}

impl FromApi for Error {
    fn from_api(e: ApiError, what: &str) -> Error {
        let (field, message): (String, String) = match &e {
            ApiError::InvalidInput(errors) => {
                let mut fields = Map::new();
                for f in errors {
                    let message = if f.detail.contains("must not be empty") {
                        "can't be blank".to_string()
                    } else {
                        f.detail.clone()
                    };
                    fields
                        .entry(conduit_field(&f.field).to_string())
                        .or_insert_with(|| json!([]))
                        .as_array_mut()
                        .expect("an array")
                        .push(message.into());
                }
                let body = json!({ "errors": fields });
                return (StatusCode::UNPROCESSABLE_ENTITY, axum::Json(body)).into_response();
            }
            ApiError::MalformedBody(m) | ApiError::BadRequest(m) => {
                return unprocessable("body", m);
            }
            ApiError::UnknownUser(m) => ("user".into(), m.clone()),
            ApiError::Unauthorized { .. } => return unauthorized("is invalid"),
            ApiError::Forbidden(_) => (what.into(), "forbidden".into()),
            ApiError::NotFound(_) => (what.into(), "not found".into()),
            ApiError::Conflict(m) | ApiError::UserExists(m) | ApiError::Erasing(m) => {
                (what.into(), m.clone())
            }
            other => ("server".into(), other.to_string()),
        };
        let status = e.status();
        // The native answer's headers (`Retry-After`) and extensions (the failure to log).
        let native = e.into_response();
        let (mut parts, _) = native.into_parts();
        parts.status = if status == StatusCode::BAD_REQUEST {
            StatusCode::UNPROCESSABLE_ENTITY
        } else {
            status
        };
        parts.headers.remove(header::CONTENT_LENGTH);
        parts.headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        let body = json!({ "errors": { field: [message] } });
        Response::from_parts(
            parts,
            axum::body::Body::from(serde_json::to_vec(&body).expect("JSON")),
        )
    }
}

/// A native handler's answer, or its error as a Conduit one about `what`.
pub(super) async fn native(
    answer: crate::error::ApiResult<Response>,
    what: &str,
) -> Result<(StatusCode, Value)> {
    let resp = answer.map_err(|e| Error::from_api(e, what))?;
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .map_err(|e| Error::from_api(ApiError::internal(e.to_string()), what))?;
    if bytes.is_empty() {
        return Ok((status, Value::Null));
    }
    let value = serde_json::from_slice(&bytes)
        .map_err(|e| Error::from_api(ApiError::internal(e.to_string()), what))?;
    Ok((status, value))
}

/// A store error as a Conduit one about `what`.
pub(super) fn store_error(e: crate::store::StoreError, what: &str) -> Error {
    Error::from_api(e.into(), what)
}

/// `Retry-After` with a 429 about `field`.
pub(super) fn too_many(field: &str, wait: Duration) -> Error {
    let mut resp = error(
        StatusCode::TOO_MANY_REQUESTS,
        field,
        "too many attempts; retry later",
    );
    let secs = wait.as_secs_f64().ceil().max(1.0) as u64;
    resp.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    resp
}
