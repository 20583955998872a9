//! The HTTP API of CONTRACT §3 under `/api`, plus the readiness answer at `/` and the Functions
//! host's trigger invocations at `/<FunctionName>`.

mod conditional;
pub mod cors;
mod extract;
mod posts;
mod users;

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{DefaultBodyLimit, Request};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use axum::{Json, Router};
use serde_json::{json, Value};

pub use extract::{JsonBody, Paging, PathId};

use crate::domain::public;
use crate::domain::Id;
use crate::error::ApiError;
use crate::store::{metrics, ConditionalRead, Container, Page, Store, StoreResult};
use conditional::{no_cache, tagged, IfNoneMatch};

/// Request bodies over this size answer 413.
pub const BODY_LIMIT: usize = 1024 * 1024;

/// What every handler shares: the store, behind the trait so either implementation fits.
#[derive(Clone)]
pub struct AppState {
    pub store: Arc<dyn Store>,
}

impl AppState {
    pub fn new(store: Arc<dyn Store>) -> Self {
        AppState { store }
    }
}

/// The routes of CONTRACT §3 (relative to `/api`): `(path, methods)`. The Functions contract
/// test checks every `function.json` against this list.
pub const ROUTES: &[(&str, &[&str])] = &[
    ("users", &["POST"]),
    ("users/{userId}", &["GET", "PUT"]),
    ("users/{userId}/posts", &["GET"]),
    ("posts", &["POST"]),
    ("posts/{postId}", &["GET", "PUT"]),
    ("posts/{postId}/comments", &["GET", "POST"]),
    ("posts/{postId}/likes", &["GET", "POST"]),
    ("feed", &["GET"]),
];

/// The router for `/api/...`.
pub fn api_routes() -> Router<AppState> {
    Router::new()
        .route("/api/users", post(users::create))
        .route("/api/users/{userId}", get(users::get).put(users::rename))
        .route("/api/users/{userId}/posts", get(users::posts))
        .route("/api/posts", post(posts::create))
        .route("/api/posts/{postId}", get(posts::get).put(posts::update))
        .route(
            "/api/posts/{postId}/comments",
            get(posts::comments).post(posts::comment),
        )
        .route(
            "/api/posts/{postId}/likes",
            get(posts::likes).post(posts::like),
        )
        .route("/api/feed", get(posts::feed))
}

/// The whole application: API routes, readiness at `/`, trigger invocations, problem+json for
/// unknown routes and methods, the body limit and per-request store accounting.
pub fn router(state: AppState) -> Router {
    api_routes()
        .merge(crate::functions::routes())
        // The Functions host probes `/` until it answers; answer at once, whatever the store does.
        .route("/", any(|| async { Json(json!({ "status": "ok" })) }))
        .fallback(|| async { ApiError::NotFound("no such resource".into()) })
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .layer(axum::middleware::from_fn(meter))
        .with_state(state)
}

/// Count the store operations (and request units) a request used into response headers.
async fn meter(req: Request, next: Next) -> Response {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let started = Instant::now();
    let (mut resp, usage) = metrics::scope(next.run(req)).await;
    let headers = resp.headers_mut();
    headers.insert("x-store-operations", HeaderValue::from(usage.operations));
    if usage.request_charge > 0.0 {
        if let Ok(v) = HeaderValue::from_str(&format!("{:.2}", usage.request_charge)) {
            headers.insert("x-request-charge", v);
        }
    }
    tracing::info!(
        %method,
        %path,
        status = resp.status().as_u16(),
        store_operations = usage.operations,
        request_charge = usage.request_charge,
        elapsed_ms = started.elapsed().as_secs_f64() * 1000.0,
        "request"
    );
    resp
}

/// A list response: `{"items": [...], "continuationToken": ... | null}`, never used unchecked
/// from a cache (`Cache-Control: no-cache`).
fn list(page: Page) -> Response {
    no_cache(
        Json(json!({
            "items": page.items.into_iter().map(public).collect::<Vec<Value>>(),
            "continuationToken": page.continuation,
        }))
        .into_response(),
    )
}

/// What a point read of a user or post found.
enum Read {
    Item(Value),
    /// The client's copy, with this `ETag`, is current.
    NotModified(String),
    Missing,
}

/// Read the item `id` (its own partition key) in one store operation, honouring
/// `If-None-Match`: one tag goes to the store as a conditional read (on Cosmos DB a 304 costs
/// less than the item); `*` or a list of tags is compared after a plain read.
async fn read_item(
    store: &dyn Store,
    c: Container,
    id: &Id,
    if_none_match: Option<IfNoneMatch>,
) -> StoreResult<Read> {
    let id = id.as_str();
    if let Some(tag) = if_none_match.as_ref().and_then(IfNoneMatch::single) {
        return Ok(match store.read_if_none_match(c, id, id, tag).await? {
            ConditionalRead::Changed(item) => Read::Item(item),
            ConditionalRead::Unchanged => Read::NotModified(tag.to_string()),
            ConditionalRead::Missing => Read::Missing,
        });
    }
    Ok(match store.read(c, id, id).await? {
        None => Read::Missing,
        Some(item) => match item.get("_etag").and_then(Value::as_str) {
            Some(etag) if if_none_match.as_ref().is_some_and(|m| m.matches(etag)) => {
                Read::NotModified(etag.to_string())
            }
            _ => Read::Item(item),
        },
    })
}

/// 200 with the item and its `ETag`, or 304 with only the `ETag`; `None` when there is no item
/// of the kind asked for.
fn item_response(read: Read, is_kind: impl Fn(&Value) -> bool) -> Option<Response> {
    match read {
        Read::Item(item) if is_kind(&item) => {
            Some(tagged(Json(public(item.clone())).into_response(), &item))
        }
        Read::NotModified(etag) => {
            let mut resp = StatusCode::NOT_MODIFIED.into_response();
            if let Ok(v) = HeaderValue::from_str(&etag) {
                resp.headers_mut().insert(header::ETAG, v);
            }
            Some(no_cache(resp))
        }
        _ => None,
    }
}
