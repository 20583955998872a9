//! The browser client in `web/` (plain HTML, CSS and JavaScript modules), embedded into the binary
//! at compile time and served by the same router in both shapes:
//!
//! - `/api/web/` (and each file at `/api/web/<file>`): the one HTTP function `WebClient` forwards
//!   it under the Functions host, and it answers the same standalone;
//! - `/` standalone: a browser (a request accepting `text/html`) gets the page, anything else the
//!   readiness answer `{"status":"ok"}`. Under the host, `/` is only the host's readiness probe;
//!   either answer is an immediate 200 that touches no store. The page's files are also served at
//!   `/<file>` so that the page's relative links work at `/`.
//!
//! The page talks to the API at `/api/...` on its own origin, so both URLs work unchanged. Every
//! file goes out with a strict `Content-Security-Policy`: scripts and styles only from the page's
//! origin (no inline code), no plugins, no framing, and Trusted Types required, so that no script
//! can hand a string to an HTML sink such as `innerHTML`.

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{any, get};
use axum::{Json, Router};
use serde_json::json;

use crate::error::ApiError;
use crate::AppState;
use headers::{common_headers, content_security_policy, is_fresh, tag_of_bytes};

mod headers;
pub mod reference;

/// One embedded file of the client.
#[derive(Debug, Clone, Copy)]
pub struct Asset {
    /// The file's name under `web/`, which is also its URL path segment.
    pub name: &'static str,
    pub content_type: &'static str,
    pub body: &'static [u8],
}

macro_rules! asset {
    ($name:literal, $type:expr) => {
        Asset {
            name: $name,
            content_type: $type,
            body: include_bytes!(concat!("../web/", $name)),
        }
    };
}

const JS: &str = "text/javascript; charset=utf-8";

/// Every file under `web/` (a test checks the folder and this list agree).
pub const ASSETS: &[Asset] = &[
    asset!("index.html", "text/html; charset=utf-8"),
    asset!("style.css", "text/css; charset=utf-8"),
    asset!("app.js", JS),
    asset!("api.js", JS),
    asset!("auth.js", JS),
    asset!("ui.js", JS),
    asset!("parts.js", JS),
    asset!("arriving.js", JS),
    asset!("feed.js", JS),
    asset!("post.js", JS),
    asset!("user.js", JS),
    asset!("write.js", JS),
    asset!("me.js", JS),
    asset!("tags.js", JS),
    asset!("live.js", JS),
    asset!("icon.svg", "image/svg+xml"),
];

/// The page every route of the client starts from.
pub const INDEX: &str = "index.html";

/// The client's path under `/api`.
pub const PREFIX: &str = "/api/web";

/// The route (under `/api`) and method of the HTTP function `WebClient` that forwards the client
/// under the Functions host. Not an operation of the API: the page is no part of its description.
pub const FUNCTION_ROUTE: (&str, &str) = ("web/{*path}", "GET");

pub fn asset(name: &str) -> Option<&'static Asset> {
    ASSETS.iter().find(|a| a.name == name)
}

/// The scheme, host and port of an `http(s)` URL, as a CSP source; `None` for anything else.
pub fn origin_of(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    if !matches!(scheme.as_str(), "https" | "http") {
        return None;
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let ok = !authority.is_empty()
        && !authority.contains('@')
        && authority
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']'));
    ok.then(|| format!("{scheme}://{}", authority.to_ascii_lowercase()))
}

/// The origins the client's page may call besides its own: the OpenID Connect issuer's, when
/// callers sign in with one (its discovery document and token endpoint are fetched from the
/// page), and Web PubSub's client endpoint (`wss://<name>.webpubsub.azure.com`) when live
/// updates are pushed there.
fn connect_origins(state: &AppState) -> Vec<String> {
    let issuer = state
        .auth
        .client_config()
        .issuer
        .as_deref()
        .and_then(origin_of);
    // Live updates' WebSockets, where Web PubSub pushes them.
    let push = state.webpubsub.as_ref().map(|w| w.client_origin());
    issuer.into_iter().chain(push).collect()
}

/// A validator for an embedded file: a hash of its bytes, the same for the life of the binary.
pub fn etag(asset: &Asset) -> String {
    tag_of_bytes(asset.body)
}

fn serve(asset: &Asset, csp: &str, request: &HeaderMap) -> Response {
    let tag = etag(asset);
    let mut resp = if is_fresh(request, &tag) {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (StatusCode::OK, asset.body).into_response()
    };
    common_headers(resp.headers_mut(), &tag, asset.content_type, csp);
    resp
}

fn serve_named(state: &AppState, name: &str, request: &HeaderMap) -> Response {
    match asset(name) {
        Some(a) => serve(
            a,
            &content_security_policy(&connect_origins(state)),
            request,
        ),
        None => ApiError::NotFound(format!("no file `{name}` in the web client")).into_response(),
    }
}

fn wants_html(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("text/html"))
}

/// `/`: the page for a browser (a GET accepting HTML), the readiness answer for everything else
/// (the Functions host's probe, scripts), whatever the method. Both are immediate and touch no
/// store.
async fn root(State(state): State<AppState>, method: Method, headers: HeaderMap) -> Response {
    if !wants_page(&method, &headers) {
        return readiness();
    }
    let mut resp = serve_named(&state, INDEX, &headers);
    resp.headers_mut()
        .insert(header::VARY, HeaderValue::from_static("accept"));
    resp
}

/// Whether a request for `/` is a browser's for the page (a GET or HEAD accepting HTML), not the
/// readiness probe.
pub(crate) fn wants_page(method: &Method, headers: &HeaderMap) -> bool {
    matches!(*method, Method::GET | Method::HEAD) && wants_html(headers)
}

/// The readiness answer: `/` for anything but a browser (also while the store is still opening,
/// see `startup::waiting`).
pub(crate) fn readiness() -> Response {
    let mut resp = Json(json!({ "status": "ok" })).into_response();
    resp.headers_mut()
        .insert(header::VARY, HeaderValue::from_static("accept"));
    resp
}

/// The client's routes: `/`, `/api/web`, `/api/web/`, `/api/web/<file>` and `/<file>`; and the
/// API reference's, `/api/docs`, `/api/docs/` and `/api/docs/<script>`.
pub fn routes() -> Router<AppState> {
    let mut router = Router::new()
        .route("/", any(root))
        .route(
            reference::PATH,
            get(|h: HeaderMap| async move { reference::page(&h) }),
        )
        .route(
            &format!("{}/{{*path}}", reference::PATH),
            get(|Path(path): Path<String>, h: HeaderMap| async move {
                match path.as_str() {
                    "" => reference::page(&h),
                    reference::SCRIPT => reference::script(&h),
                    _ => ApiError::NotFound(format!("no file `{path}` in the API reference"))
                        .into_response(),
                }
            }),
        )
        .route(
            &format!("{}/", reference::PATH),
            get(|h: HeaderMap| async move { reference::page(&h) }),
        )
        // Without the slash the page's relative links would resolve under `/api/`.
        .route(PREFIX, get(|| async { Redirect::permanent("/api/web/") }))
        .route(
            &format!("{PREFIX}/"),
            get(
                |State(s): State<AppState>, h: HeaderMap| async move { serve_named(&s, INDEX, &h) },
            ),
        )
        .route(
            &format!("{PREFIX}/{{*path}}"),
            get(
                |State(s): State<AppState>, Path(path): Path<String>, h: HeaderMap| async move {
                    serve_named(&s, &path, &h)
                },
            ),
        );
    for a in ASSETS.iter().filter(|a| a.name != INDEX) {
        let name = a.name;
        router =
            router.route(
                &format!("/{name}"),
                get(move |State(s): State<AppState>, h: HeaderMap| async move {
                    serve_named(&s, name, &h)
                }),
            );
    }
    router
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_allows_only_the_pages_origin_and_the_given_origins() {
        let p = content_security_policy(&[]);
        assert!(p.contains("default-src 'self'"));
        assert!(p.contains("script-src 'self';"));
        assert!(p.contains("connect-src 'self';"));
        assert!(!p.contains("unsafe"));
        let p = content_security_policy(&["https://login.example.com".into()]);
        assert!(p.contains("connect-src 'self' https://login.example.com;"));
    }

    #[test]
    fn origins_are_scheme_host_and_port_only() {
        assert_eq!(
            origin_of("https://login.microsoftonline.com/tid/v2.0").as_deref(),
            Some("https://login.microsoftonline.com")
        );
        assert_eq!(
            origin_of("http://127.0.0.1:8080").as_deref(),
            Some("http://127.0.0.1:8080")
        );
        assert_eq!(
            origin_of("HTTPS://Issuer.Example/x?y").as_deref(),
            Some("https://issuer.example")
        );
        for bad in [
            "javascript:alert(1)",
            "https://",
            "https://a b/",
            "https://x;y",
        ] {
            assert_eq!(origin_of(bad), None, "{bad}");
        }
    }
}
