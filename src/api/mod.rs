//! The HTTP API under `/api` (the README's API section), plus the readiness answer and the browser
//! client at `/` ([`crate::web`]) and the Functions host's trigger invocations at `/<FunctionName>`.

mod extract;
pub mod feed_cache;
mod identity;
mod posts;
mod users;

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Request};
use axum::http::{header, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Value};
use tracing::Instrument as _;

pub use extract::{JsonBody, Paging, PathId};

use crate::auth::{ActingUser, Auth};
use crate::domain::public;
use crate::error::{ApiError, Failure};
use crate::store::{metrics, Page, Store};
use feed_cache::FeedCache;

/// Request bodies over this size answer 413.
pub const BODY_LIMIT: usize = 1024 * 1024;

/// What every handler shares: the store, behind the trait so either implementation fits, and
/// how callers are identified, and the snapshot of the feed's first pages.
#[derive(Clone)]
pub struct AppState {
    pub store: Arc<dyn Store>,
    pub auth: Arc<Auth>,
    pub feed: Arc<FeedCache>,
}

impl AppState {
    /// Over `store`, with `BLOG_AUTH=none` (see [`AppState::with_auth`]) and the default feed
    /// snapshot age.
    pub fn new(store: Arc<dyn Store>) -> Self {
        let feed = Arc::new(FeedCache::new(&*store, feed_cache::DEFAULT_MAX_AGE));
        AppState {
            store,
            auth: Arc::new(Auth::none()),
            feed,
        }
    }

    pub fn with_auth(self, auth: Auth) -> Self {
        AppState {
            auth: Arc::new(auth),
            ..self
        }
    }

    /// `feed_max_age`: how long a feed snapshot holds on a store that does not signal its
    /// commits (`BLOG_FEED_CACHE_MS`); 0 turns snapshots off.
    pub fn with_feed_cache(self, feed_max_age: Duration) -> Self {
        AppState {
            feed: Arc::new(FeedCache::new(&*self.store, feed_max_age)),
            ..self
        }
    }
}

/// Every route of the API (relative to `/api`): `(path, methods)`; each is one HTTP function under
/// the Functions host. The Functions contract test checks every `function.json` against this list
/// (and the web client's one function against [`crate::web::FUNCTION_ROUTE`]).
pub const ROUTES: &[(&str, &[&str])] = &[
    ("users", &["POST"]),
    ("users/{userId}", &["GET", "PUT"]),
    ("users/{userId}/posts", &["GET"]),
    ("posts", &["POST"]),
    ("posts/{postId}", &["GET", "PUT"]),
    ("posts/{postId}/comments", &["GET", "POST"]),
    ("posts/{postId}/likes", &["GET", "POST"]),
    ("feed", &["GET"]),
    ("me", &["GET"]),
    ("config", &["GET"]),
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
        .route("/api/me", get(identity::me))
        .route("/api/config", get(identity::config))
}

/// The whole application: API routes (each answered within `request_timeout`), readiness at
/// `/`, problem+json for unknown routes and methods, the body limit and per-request store
/// accounting; under the Functions host (`hosted`) also the trigger invocations, which do not
/// exist standalone.
pub fn router(state: AppState, hosted: bool, request_timeout: Duration) -> Router {
    // Only API requests are timed: a trigger batch is applied or refused, never cut off.
    let api = api_routes().route_layer(axum::middleware::from_fn(
        move |req: Request, next: Next| async move {
            match tokio::time::timeout(request_timeout, next.run(req)).await {
                Ok(resp) => resp,
                Err(_) => ApiError::TimedOut(request_timeout).into_response(),
            }
        },
    ));
    let routes = if hosted {
        api.merge(crate::functions::routes())
    } else {
        api
    };
    routes
        // `/` (the Functions host's readiness probe, or the page for a browser) and the client.
        .merge(crate::web::routes())
        .fallback(|| async { ApiError::NotFound("no such resource".into()) })
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .layer(axum::middleware::from_fn(meter))
        .with_state(state)
}

/// Count the store operations (and request units) a request used into response headers, and log
/// the request (with the user it acted as, never the token or principal that proved it).
/// Everything a request logs (here and in the handlers) is in its span, with method and path;
/// a server-side failure is logged here from the [`Failure`] the error response carries.
async fn meter(mut req: Request, next: Next) -> Response {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let span = tracing::info_span!("request", %method, %path);
    let acting = ActingUser::default();
    req.extensions_mut().insert(acting.clone());
    let started = Instant::now();
    let (mut resp, usage) = metrics::scope(next.run(req)).instrument(span.clone()).await;
    let _in_span = span.enter();
    if let Some(failure) = resp.extensions_mut().remove::<Failure>() {
        failure.log();
    }
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
        user = acting.get(),
        store_operations = usage.operations,
        request_charge = usage.request_charge,
        elapsed_ms = started.elapsed().as_secs_f64() * 1000.0,
        "request"
    );
    resp
}

/// A list response: `{"items": [...], "continuationToken": ... | null}`.
fn list(page: Page) -> Response {
    json_response(list_body(page))
}

/// The encoded body of a list response.
fn list_body(page: Page) -> Bytes {
    let body = json!({
        "items": page.items.into_iter().map(public).collect::<Vec<Value>>(),
        "continuationToken": page.continuation,
    });
    Bytes::from(serde_json::to_vec(&body).expect("JSON values serialize"))
}

/// An already encoded JSON body, answered as `Json` would answer it.
fn json_response(body: Bytes) -> Response {
    let json = HeaderValue::from_static("application/json");
    ([(header::CONTENT_TYPE, json)], body).into_response()
}
