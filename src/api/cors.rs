//! Cross-origin requests from browser apps (`BLOG_CORS_ORIGINS`): the allowed origins may call
//! the API (`/api/...`) with every method and request header it reads, and read the response
//! headers it sets. Nothing else answers CORS: the trigger invocations are the Functions host's
//! alone, and the page and its files are not an API. Without origins there are no CORS headers
//! at all, so browsers keep other origins out.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Method};
use tower_http::cors::{AllowOrigin, CorsLayer};

/// Response headers a browser app may read besides the CORS-safelisted ones.
pub const EXPOSED_HEADERS: [&str; 5] = [
    "etag",
    "location",
    "retry-after",
    "x-store-operations",
    "x-request-charge",
];

/// Every method the API's operations use (a test holds this to the route table).
pub const ALLOWED_METHODS: [Method; 5] = [
    Method::GET,
    Method::HEAD,
    Method::POST,
    Method::PUT,
    Method::DELETE,
];

/// How long a browser may cache a preflight answer.
const PREFLIGHT_MAX_AGE: Duration = Duration::from_secs(3600);

/// The CORS layer for these origins (`["*"]`: any origin); `None` when there are none.
/// Origins are checked at start-up (see `settings`); one that is not a header value is skipped.
pub fn layer(origins: &[String]) -> Option<CorsLayer> {
    if origins.is_empty() {
        return None;
    }
    let allow_origin = if origins.iter().any(|o| o == "*") {
        AllowOrigin::any()
    } else {
        AllowOrigin::list(origins.iter().filter_map(|o| HeaderValue::from_str(o).ok()))
    };
    Some(
        CorsLayer::new()
            .allow_origin(allow_origin)
            .allow_methods(ALLOWED_METHODS)
            .allow_headers([
                header::AUTHORIZATION,
                header::CONTENT_TYPE,
                header::IF_MATCH,
                header::IF_NONE_MATCH,
            ])
            .expose_headers(EXPOSED_HEADERS.map(HeaderName::from_static))
            .max_age(PREFLIGHT_MAX_AGE),
    )
}

/// Whether a request to `path` is one CORS answers for: the API under `/api/`.
pub fn covers(path: &str) -> bool {
    path == "/api" || path.starts_with("/api/")
}

/// How often a refused preflight is logged, at most.
const HINT_INTERVAL: Duration = Duration::from_secs(60);

/// With no origins allowed: a browser's preflight to the API (an `OPTIONS` with
/// `Access-Control-Request-Method`) gets no CORS headers, so the browser refuses the call and
/// says little about why. Log why, naming the setting that allows it (at most once a minute).
/// Called where such a preflight ends up, the fallbacks for unknown routes and methods: with
/// origins allowed, the CORS layer answers every preflight before routing.
pub fn hint_when_refused(method: &Method, path: &str, headers: &HeaderMap) {
    if method == Method::OPTIONS
        && headers.contains_key(header::ACCESS_CONTROL_REQUEST_METHOD)
        && covers(path)
    {
        static LAST: Mutex<Option<Instant>> = Mutex::new(None);
        let mut last = LAST.lock().unwrap_or_else(|p| p.into_inner());
        if last.is_none_or(|at| at.elapsed() >= HINT_INTERVAL) {
            *last = Some(Instant::now());
            let origin = headers
                .get(header::ORIGIN)
                .and_then(|o| o.to_str().ok())
                .unwrap_or("");
            tracing::warn!(
                origin = %origin,
                path = path,
                "a browser's cross-origin preflight was refused: no origin may call the API; \
                 set BLOG_CORS_ORIGINS to the app's origin (e.g. BLOG_CORS_ORIGINS={origin}) to allow it"
            );
        }
    }
}
