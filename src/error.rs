//! The one error type of the HTTP API, rendered as `application/problem+json` (RFC 9457).
//!
//! Each kind of problem has its own `type` URI ([`PROBLEM_TYPES`], listed in docs/api.md and in
//! the OpenAPI document), so a program can tell them apart without reading `detail`; a rejected
//! input names the field(s) at fault in the `errors` extension member. A `detail` is always the
//! service's own sentence (a parser's message never reaches it).
//!
//! Rendering never logs: a response for a server-side failure carries a [`Failure`] in its
//! extensions, and the request middleware (`api::middleware::Metering`) logs it inside the request's span, with
//! its method and path.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use crate::domain::Invalid;
use crate::store::StoreError;

mod types;

pub use types::*;

/// Every way a request can fail, each with the status it answers.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 400: one or more fields, parameters or headers are missing or out of their limits.
    #[error("{}", join_details(.0))]
    InvalidInput(Vec<FieldError>),
    /// 400: the body is not JSON, or not a JSON object.
    #[error("{0}")]
    MalformedBody(String),
    /// 400: the request is malformed in a way no field names (an undecodable query string).
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
    /// 409: the write conflicts with a concurrent one; retry.
    #[error("{0}")]
    Conflict(String),
    /// 409: the caller (or the id) already has a user.
    #[error("{0}")]
    UserExists(String),
    /// 409 with `Retry-After`: the account is still being erased; its identity may create a
    /// user again once the erasure is complete.
    #[error("{0}")]
    Erasing(String),
    /// 412: `If-Match` names a version of the item that is no longer current.
    #[error("{0}")]
    PreconditionFailed(String),
    /// 413: the body is over the 1 MiB limit.
    #[error("request body is larger than 1 MiB")]
    PayloadTooLarge,
    /// 415: the body is not declared as JSON.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// 422: a well-formed body's `userId` names a user that does not exist.
    #[error("{0}")]
    UnknownUser(String),
    /// 429: the store throttles; retry after the given time.
    #[error("the store is busy; retry later")]
    Throttled { retry_after: Duration },
    /// 429: the caller used up their writes for now (`BLOG_WRITES_PER_MINUTE`); retry after the
    /// given time.
    #[error("too many writes: at most {per_minute} a minute per caller; retry in {} s", retry_secs(.retry_after))]
    TooManyWrites {
        per_minute: u32,
        retry_after: Duration,
    },
    /// 429: the client used up their searches for now (`BLOG_SEARCHES_PER_MINUTE`), or too
    /// many searches are running on this server; retry after the given time.
    #[error("{detail}; retry in {} s", retry_secs(.retry_after))]
    TooManySearches {
        detail: String,
        retry_after: Duration,
    },
    /// 429: the client holds as many live-update streams as one client may; retry after the
    /// given time.
    #[error("{detail}")]
    TooManyStreams {
        detail: String,
        retry_after: Duration,
    },
    /// 503: the server holds as many live-update streams as it may; retry after the given time.
    #[error("{detail}")]
    StreamsFull {
        detail: String,
        retry_after: Duration,
    },
    /// 503: the push service of live updates (Azure Web PubSub) gave no client URL; retry
    /// after the given time.
    #[error("{detail}")]
    PushUnavailable {
        detail: String,
        retry_after: Duration,
    },
    /// 503: the store is unreachable or not ready; retry after the given time.
    #[error("the store is unavailable; retry later")]
    Unavailable { retry_after: Duration },
    /// 503: the identity provider's keys cannot be fetched, so no token can be checked; retry
    /// after the given time.
    #[error("the identity provider's signing keys are unavailable; retry later")]
    IdentityUnavailable { retry_after: Duration },
    /// 503: the request was not answered within the request timeout.
    #[error("the request was not answered within {} s; retry later", .0.as_secs())]
    TimedOut(Duration),
    /// 500: the store refuses this service (a missing role assignment, a firewall rule): a
    /// misconfiguration, which waiting does not cure. The store's message is logged (at most
    /// once per [`MISCONFIGURED_LOG_INTERVAL`]), never returned.
    #[error("the store refuses access: {0}")]
    Misconfigured(String),
    /// 500: anything else. The error and its sources are logged, never returned.
    #[error("internal error: {0}")]
    Internal(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// A wait in whole seconds for `Retry-After`, rounded up, at least 1.
fn retry_secs(wait: &Duration) -> u64 {
    wait.as_secs_f64().ceil().max(1.0) as u64
}

/// How often the store's refusal is logged while it lasts.
pub const MISCONFIGURED_LOG_INTERVAL: Duration = Duration::from_secs(60);

/// A server-side failure behind a 500, left in the response's extensions for the request
/// middleware to log: the error with its chain of sources.
#[derive(Debug, Clone)]
pub struct Failure {
    pub misconfigured: bool,
    pub error: Arc<str>,
}

impl Failure {
    /// Log it (in the caller's span). A misconfiguration is logged once per interval, with the
    /// number of requests it failed meanwhile.
    pub fn log(&self) {
        if !self.misconfigured {
            tracing::error!(error = %self.error, "request failed");
            return;
        }
        static LAST: std::sync::Mutex<Option<Instant>> = std::sync::Mutex::new(None);
        static SUPPRESSED: AtomicU64 = AtomicU64::new(0);
        let mut last = LAST.lock().unwrap_or_else(|p| p.into_inner());
        if last.is_some_and(|at| at.elapsed() < MISCONFIGURED_LOG_INTERVAL) {
            SUPPRESSED.fetch_add(1, Ordering::Relaxed);
            return;
        }
        *last = Some(Instant::now());
        tracing::error!(
            error = %self.error,
            failed_since_last_report = SUPPRESSED.swap(0, Ordering::Relaxed),
            "the store refuses access: check the service's role assignment and the account's \
             firewall; requests answer 500 until it is fixed"
        );
    }
}

/// `error: source: source …`
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(s) = next {
        out.push_str(": ");
        out.push_str(&s.to_string());
        next = s.source();
    }
    out
}

/// Where a rejected input was: the part of the request a [`FieldError`] names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Place {
    Body,
    Path,
    Query,
    Header,
}

/// One rejected input: which field (a body property, path or query parameter, or header, as
/// the API names it) and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct FieldError {
    /// The field's name: `username`, `title`, `userId`, `limit`, `If-Match`, …
    pub field: String,
    /// Where it is.
    #[serde(rename = "in")]
    pub place: Place,
    /// What is wrong with it, naming it (`` `title` must not be empty ``).
    pub detail: String,
}

impl FieldError {
    pub fn new(place: Place, field: &str, detail: impl Into<String>) -> Self {
        FieldError {
            field: field.to_string(),
            place,
            detail: detail.into(),
        }
    }
}

fn join_details(errors: &[FieldError]) -> String {
    errors
        .iter()
        .map(|e| e.detail.as_str())
        .collect::<Vec<_>>()
        .join("; ")
}

/// An error (RFC 9457 problem details), sent as `application/problem+json`.
#[derive(Serialize, ToSchema)]
pub struct Problem {
    /// The kind of problem: one of the URIs listed in `examples` (docs/api.md, "Errors"), each
    /// `tag:blog-api,2026:problems/` and a name. Compare it as a string; it is not fetched. A
    /// client should treat a type it does not know by its `status`.
    #[serde(rename = "type")]
    kind: String,
    /// The kind's title, the same for every problem of that kind.
    title: &'static str,
    /// The HTTP status code.
    #[schema(minimum = 400, maximum = 599)]
    status: u16,
    /// What went wrong, for a human.
    detail: String,
    /// The rejected inputs, each named (`invalid-input`, `unknown-user`); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    errors: Option<Vec<FieldError>>,
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::InvalidInput(_) | ApiError::MalformedBody(_) | ApiError::BadRequest(_) => {
                StatusCode::BAD_REQUEST
            }
            ApiError::Unauthorized { .. } => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Conflict(_) | ApiError::UserExists(_) | ApiError::Erasing(_) => {
                StatusCode::CONFLICT
            }
            ApiError::PreconditionFailed(_) => StatusCode::PRECONDITION_FAILED,
            ApiError::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::UnknownUser(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::Throttled { .. }
            | ApiError::TooManyWrites { .. }
            | ApiError::TooManySearches { .. }
            | ApiError::TooManyStreams { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Unavailable { .. }
            | ApiError::StreamsFull { .. }
            | ApiError::PushUnavailable { .. }
            | ApiError::IdentityUnavailable { .. }
            | ApiError::TimedOut(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Misconfigured(_) | ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The kind of problem this is.
    pub fn problem_type(&self) -> ProblemType {
        match self {
            ApiError::InvalidInput(_) => INVALID_INPUT,
            ApiError::MalformedBody(_) => MALFORMED_BODY,
            ApiError::BadRequest(_) => BAD_REQUEST,
            ApiError::Unauthorized { .. } => UNAUTHORIZED,
            ApiError::Forbidden(_) => FORBIDDEN,
            ApiError::NotFound(_) => NOT_FOUND,
            ApiError::MethodNotAllowed => METHOD_NOT_ALLOWED,
            ApiError::Conflict(_) => CONFLICT,
            ApiError::UserExists(_) => USER_EXISTS,
            ApiError::Erasing(_) => ERASING,
            ApiError::PreconditionFailed(_) => STALE_VERSION,
            ApiError::PayloadTooLarge => BODY_TOO_LARGE,
            ApiError::UnsupportedMediaType(_) => NOT_JSON,
            ApiError::UnknownUser(_) => UNKNOWN_USER,
            ApiError::TooManyWrites { .. } => TOO_MANY_WRITES,
            ApiError::TooManySearches { .. } => TOO_MANY_SEARCHES,
            ApiError::TooManyStreams { .. } => TOO_MANY_STREAMS,
            ApiError::StreamsFull { .. } => STREAMS_FULL,
            ApiError::PushUnavailable { .. } => PUSH_UNAVAILABLE,
            ApiError::Throttled { .. } => STORE_BUSY,
            ApiError::Unavailable { .. } => UNAVAILABLE,
            ApiError::IdentityUnavailable { .. } => IDENTITY_UNAVAILABLE,
            ApiError::TimedOut(_) => TIMED_OUT,
            ApiError::Misconfigured(_) | ApiError::Internal(_) => INTERNAL,
        }
    }

    /// One rejected input.
    pub fn invalid(place: Place, field: &str, detail: impl Into<String>) -> Self {
        ApiError::InvalidInput(vec![FieldError::new(place, field, detail)])
    }

    pub fn not_found(what: &str, id: &str) -> Self {
        ApiError::NotFound(format!("{what} `{id}` does not exist"))
    }

    /// A 500 for any error, keeping it (and its sources) for the log.
    pub fn internal(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        ApiError::Internal(e.into())
    }
}

/// A domain rule a body property broke (path ids are checked by the extractors, which name
/// the parameter).
impl From<Invalid> for ApiError {
    fn from(e: Invalid) -> Self {
        ApiError::invalid(Place::Body, &e.field, e.detail)
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e.root() {
            StoreError::NotFound => ApiError::NotFound("the resource does not exist".into()),
            StoreError::Conflict => {
                ApiError::Conflict("the item was written concurrently; retry".into())
            }
            StoreError::PreconditionFailed => ApiError::PreconditionFailed(
                "the item changed since the version `If-Match` names; read it again".into(),
            ),
            StoreError::Throttled { retry_after } => ApiError::Throttled {
                retry_after: *retry_after,
            },
            StoreError::Unavailable(_) => ApiError::Unavailable {
                retry_after: Duration::from_secs(1),
            },
            StoreError::BadContinuation(_) => ApiError::invalid(
                Place::Query,
                "continuationToken",
                "`continuationToken` is not valid",
            ),
            StoreError::Forbidden(m) => ApiError::Misconfigured(m.clone()),
            _ => ApiError::internal(e),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let failure = match &self {
            ApiError::Internal(e) => Some(Failure {
                misconfigured: false,
                error: chain(&**e).into(),
            }),
            ApiError::Misconfigured(m) => Some(Failure {
                misconfigured: true,
                error: m.as_str().into(),
            }),
            _ => None,
        };
        let detail = match &failure {
            Some(_) => "an unexpected error occurred".to_string(),
            None => self.to_string(),
        };
        let kind = self.problem_type();
        let errors = match &self {
            ApiError::InvalidInput(errors) => Some(errors.clone()),
            ApiError::UnknownUser(detail) => {
                Some(vec![FieldError::new(Place::Body, "userId", detail.clone())])
            }
            _ => None,
        };
        let body = Problem {
            kind: kind.uri(),
            title: kind.title,
            status: status.as_u16(),
            detail,
            errors,
        };
        let mut resp = (status, axum::Json(body)).into_response();
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        if let Some(failure) = failure {
            resp.extensions_mut().insert(failure);
        }
        let retry_after = match &self {
            ApiError::Throttled { retry_after }
            | ApiError::TooManyWrites { retry_after, .. }
            | ApiError::TooManySearches { retry_after, .. }
            | ApiError::TooManyStreams { retry_after, .. }
            | ApiError::StreamsFull { retry_after, .. }
            | ApiError::PushUnavailable { retry_after, .. }
            | ApiError::Unavailable { retry_after }
            | ApiError::IdentityUnavailable { retry_after } => Some(*retry_after),
            ApiError::TimedOut(_) | ApiError::Erasing(_) => Some(Duration::from_secs(1)),
            _ => None,
        };
        if let Some(retry_after) = retry_after {
            resp.headers_mut().insert(
                header::RETRY_AFTER,
                HeaderValue::from(retry_secs(&retry_after)),
            );
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use tracing_subscriber::layer::SubscriberExt as _;

    use super::*;

    /// Counts the events logged while it is the subscriber.
    struct Count(Arc<AtomicUsize>);

    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Count {
        fn on_event(&self, _: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn logged(f: impl FnOnce()) -> usize {
        let n = Arc::new(AtomicUsize::new(0));
        let subscriber = tracing_subscriber::registry().with(Count(n.clone()));
        tracing::subscriber::with_default(subscriber, f);
        n.load(Ordering::SeqCst)
    }

    #[test]
    fn a_store_refusal_is_a_500_logged_once_per_interval() {
        let e = ApiError::from(StoreError::Forbidden("403: no role".into()));
        assert_eq!(e.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let resp = e.into_response();
        assert!(resp.headers().get(header::RETRY_AFTER).is_none());
        let failure = resp.extensions().get::<Failure>().unwrap().clone();
        assert!(failure.misconfigured && failure.error.contains("no role"));
        assert_eq!(logged(|| (0..100).for_each(|_| failure.log())), 1);
    }

    #[test]
    fn errors_map_by_type_and_keep_their_sources() {
        let bad = ApiError::from(StoreError::BadContinuation("x".into()));
        assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
        // A bad request to the store that merely mentions a continuation is not the caller's.
        let other = ApiError::from(StoreError::BadRequest("continuation of something".into()));
        assert_eq!(other.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let batch = StoreError::BatchFailed {
            index: 1,
            source: Box::new(StoreError::Other("disk full".into())),
        };
        let resp = ApiError::from(batch).into_response();
        let failure = resp.extensions().get::<Failure>().unwrap();
        assert!(!failure.misconfigured);
        assert!(
            failure.error.contains("batch operation 1 failed")
                && failure.error.contains("disk full"),
            "{}",
            failure.error
        );
        let internal = ApiError::from(StoreError::Other("x".into()));
        assert!(
            logged(|| {
                internal
                    .into_response()
                    .extensions()
                    .get::<Failure>()
                    .unwrap()
                    .log()
            }) == 1
        );
    }
}
