//! The headers of the client's answers: its `Content-Security-Policy`, the validator of a body
//! and whether a request's `If-None-Match` names it, and the headers every file goes out with.

use axum::http::{header, HeaderMap, HeaderValue};

/// The `Content-Security-Policy` of the client. `connect_to` are further origins the page may
/// call with `fetch` (the OpenID Connect issuer, when sign-in goes through one).
pub(super) fn content_security_policy(connect_to: &[String]) -> String {
    let mut connect = String::from("'self'");
    for origin in connect_to {
        connect.push(' ');
        connect.push_str(origin);
    }
    format!(
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; \
         connect-src {connect}; object-src 'none'; base-uri 'none'; form-action 'self'; \
         frame-ancestors 'none'; require-trusted-types-for 'script'; trusted-types 'none'"
    )
}

/// A validator for a body: a hash of its bytes.
pub(super) fn tag_of_bytes(body: &[u8]) -> String {
    use std::hash::{DefaultHasher, Hasher};
    let mut h = DefaultHasher::new();
    h.write(body);
    format!("\"{:016x}\"", h.finish())
}

/// Whether the request's `If-None-Match` names `tag` (or `*`).
pub(super) fn is_fresh(request: &HeaderMap, tag: &str) -> bool {
    request
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim())
        .any(|t| t.strip_prefix("W/").unwrap_or(t) == tag || t == "*")
}

/// The headers of every embedded file's answer.
pub(super) fn common_headers(h: &mut HeaderMap, tag: &str, content_type: &'static str, csp: &str) {
    if let Ok(v) = HeaderValue::from_str(tag) {
        h.insert(header::ETAG, v);
    }
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    if let Ok(v) = HeaderValue::from_str(csp) {
        h.insert(header::CONTENT_SECURITY_POLICY, v);
    }
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    // The sign-in callback carries an authorization code in the URL: never send it on.
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    // Revalidated on every load (a 304 while the binary is the same), so an upgrade shows at once.
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
}
