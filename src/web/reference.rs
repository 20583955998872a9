//! The API reference for a browser: `GET /api/docs` is a page that renders the served OpenAPI
//! document (`/api/openapi.json`) with RapiDoc, a web component whose one script is embedded in
//! the binary (`vendor/rapidoc/`: the npm package's own gzip-compressed build, 217,516 bytes,
//! with its licences) and served at `/api/docs/rapidoc-min.js`, from the page's origin, so the
//! page needs nothing from elsewhere.
//!
//! The script is kept and sent gzip-compressed as it is to a client that takes gzip (every
//! browser); for any other client it is inflated once, on the first such request, and that copy
//! is served from memory from then on (an anonymous client must not make the server inflate it
//! on every request). The page has the client's
//! Content-Security-Policy with two differences, both for RapiDoc: Trusted Types allow the one
//! policy its rendering library (lit) creates, `lit-html`, instead of none; and styles may be
//! inline (RapiDoc writes its theme into `<style>` elements and `style` attributes; without them
//! the reference renders unstyled). Scripts still come only from the page's origin, with no
//! inline code and no `eval`, and the page shows nothing but the served document. RapiDoc's web
//! fonts are off (`load-fonts="false"`): the page loads nothing from elsewhere.

use std::io::Read as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::LazyLock;

use axum::body::Bytes;

use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

/// The reference's path.
pub const PATH: &str = "/api/docs";

/// The route (under `/api`) and method of the HTTP function `ApiReference` that forwards the
/// reference under the Functions host.
pub const FUNCTION_ROUTE: (&str, &str) = ("docs/{*path}", "GET");

/// The script's name under [`PATH`].
pub const SCRIPT: &str = "rapidoc-min.js";

/// RapiDoc's script, gzip-compressed (`vendor/rapidoc/README.md` says where it comes from).
pub const SCRIPT_GZIP: &[u8] = include_bytes!("../../vendor/rapidoc/rapidoc-min.js.gz");

/// The page: the component, told where the document is.
pub const PAGE: &str = r#"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>blog API reference</title>
<link rel="icon" href="/api/web/icon.svg" type="image/svg+xml">
<script type="module" src="/api/docs/rapidoc-min.js"></script>
</head>
<body>
<rapi-doc spec-url="/api/openapi.json" render-style="read" show-header="false"
  allow-try="false" allow-authentication="false" allow-spec-url-load="false"
  allow-spec-file-load="false" allow-server-selection="false" load-fonts="false"
  schema-style="table" default-schema-tab="example"
  schema-description-expanded="true" sort-endpoints-by="none">
<noscript>The reference needs JavaScript; the document itself is at
<a href="/api/openapi.json">/api/openapi.json</a>.</noscript>
</rapi-doc>
</body>
</html>
"#;

/// The page's `Content-Security-Policy`: the client's, with lit's Trusted Types policy and inline
/// styles allowed.
pub fn content_security_policy() -> String {
    super::headers::content_security_policy(&[])
        .replace("trusted-types 'none'", "trusted-types lit-html")
        .replace("style-src 'self';", "style-src 'self' 'unsafe-inline';")
}

/// How many times this process inflated the script.
static INFLATED: AtomicUsize = AtomicUsize::new(0);

/// How many times this process inflated the script (for a client that does not take gzip): at
/// most once.
pub fn times_inflated() -> usize {
    INFLATED.load(Ordering::Relaxed)
}

/// The script decompressed, for a client that does not take gzip: inflated on first use, then
/// shared.
fn script_plain() -> Bytes {
    static PLAIN: LazyLock<Bytes> = LazyLock::new(|| {
        INFLATED.fetch_add(1, Ordering::Relaxed);
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(SCRIPT_GZIP)
            .read_to_end(&mut out)
            .expect("the embedded script is a gzip stream");
        Bytes::from(out)
    });
    PLAIN.clone()
}

/// `GET /api/docs/rapidoc-min.js`.
pub fn script(request: &HeaderMap) -> Response {
    let tag = super::headers::tag_of_bytes(SCRIPT_GZIP);
    let gzip = crate::compression::takes_gzip(request);
    let mut resp = if super::headers::is_fresh(request, &tag) {
        StatusCode::NOT_MODIFIED.into_response()
    } else if gzip {
        let mut r = (StatusCode::OK, SCRIPT_GZIP).into_response();
        r.headers_mut()
            .insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        r
    } else {
        (StatusCode::OK, script_plain()).into_response()
    };
    let h = resp.headers_mut();
    h.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    super::headers::common_headers(
        h,
        &tag,
        "text/javascript; charset=utf-8",
        &content_security_policy(),
    );
    resp
}

/// `GET /api/docs`.
pub fn page(request: &HeaderMap) -> Response {
    let tag = super::headers::tag_of_bytes(PAGE.as_bytes());
    let mut resp = if super::headers::is_fresh(request, &tag) {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (StatusCode::OK, PAGE).into_response()
    };
    super::headers::common_headers(
        resp.headers_mut(),
        &tag,
        "text/html; charset=utf-8",
        &content_security_policy(),
    );
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_script_is_rapidoc() {
        let plain = script_plain();
        assert!(plain.len() > SCRIPT_GZIP.len() * 3);
        let text = String::from_utf8_lossy(&plain[plain.len() - 400_000..]);
        assert!(text.contains("rapi-doc"), "defines the <rapi-doc> element");
        assert_eq!(
            script_plain().as_ptr(),
            plain.as_ptr(),
            "inflated once, then shared"
        );
    }
}
