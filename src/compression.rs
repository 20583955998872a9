//! Compressed answers: an answer is sent gzip-compressed when the request's `Accept-Encoding`
//! takes gzip, its body is over [`MIN_SIZE`] bytes and its type is worth compressing (JSON,
//! HTML, CSS, JavaScript, SVG; not other images). Otherwise it goes as it is. Every answer that
//! could be compressed says `Vary: Accept-Encoding`, so a cache keeps the two forms apart.
//!
//! Entity tags: the gzip form of an answer is another representation, so its `ETag` is the
//! uncompressed answer's tag with `-gzip` inside the quotes (`"abc"` becomes `"abc-gzip"`), as a
//! strong tag must differ between representations. A conditional request may name either form:
//! `-gzip` is taken off the tags of `If-None-Match` and `If-Match` before the request is
//! handled, so both name the same state of the resource (an update with `If-Match` carrying the
//! tag of the compressed answer succeeds as with the plain one). A 304 answers with the tag the
//! client named (the form it holds) and `Vary: Accept-Encoding`.
//!
//! An answer kept compressed (the feed's snapshot, the API reference's script) is sent as it is
//! to a client that takes gzip ([`takes_gzip`], [`gzipped`]); the layer leaves an answer that
//! already has a `Content-Encoding` alone.

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use tower::{Layer as _, ServiceExt as _};
use tower_http::compression::predicate::{NotForContentType, Predicate as _, SizeAbove};
use tower_http::compression::CompressionLayer;

/// Bodies this size or smaller go uncompressed: gzip's header and trailer take 18 bytes, and a
/// short JSON answer has too little repetition to gain more than that.
pub const MIN_SIZE: u16 = 256;

/// The suffix an entity tag of a gzip-compressed answer carries inside its quotes.
const GZIP_SUFFIX: &str = "-gzip";

/// The middleware: compress the answer to `req` when its client takes gzip (see the module).
pub async fn compress(mut req: Request, next: Next) -> Response {
    let named = plain_conditions(req.headers_mut());
    let predicate = SizeAbove::new(MIN_SIZE)
        .and(NotForContentType::GRPC)
        .and(NotForContentType::IMAGES)
        .and(NotForContentType::SSE);
    let layer = CompressionLayer::new().compress_when(predicate);
    let resp = match layer.layer(next).oneshot(req).await {
        Ok(resp) => resp.map(Body::new),
        Err(never) => match never {},
    };
    tag_representation(resp, &named)
}

/// Whether a request's `Accept-Encoding` takes gzip (named, or `*`, without `q=0`): for an
/// answer kept compressed, which is sent as it is.
pub fn takes_gzip(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|coding| {
            let mut parts = coding.split(';');
            let name = parts.next().unwrap_or("").trim();
            let refused = parts.any(|p| {
                p.trim()
                    .strip_prefix("q=")
                    .and_then(|q| q.trim().parse::<f32>().ok())
                    .is_some_and(|q| q == 0.0)
            });
            (name.eq_ignore_ascii_case("gzip") || name == "*") && !refused
        })
}

/// Whether the request takes gzip ([`takes_gzip`]), as an extractor: read from the request's
/// headers in place, where taking the `HeaderMap` would copy every header.
pub struct TakesGzip(pub bool);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for TakesGzip {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _: &S,
    ) -> Result<Self, Self::Rejection> {
        Ok(TakesGzip(takes_gzip(&parts.headers)))
    }
}

/// `body` gzip-compressed, at the level the layer uses, to be kept and sent more than once.
pub fn gzip(body: &[u8]) -> Bytes {
    use std::io::Write as _;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(body).expect("writing to memory");
    Bytes::from(encoder.finish().expect("writing to memory"))
}

/// An answer of `content_type` whose body is already gzip-compressed (`gzip`), with the headers
/// the layer would have given it.
pub fn gzipped(content_type: &'static str, gzip: Bytes) -> Response {
    let mut resp = Response::new(Body::from(gzip));
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    h.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    resp
}

/// Take `-gzip` off the tags of `If-None-Match` and `If-Match`; returns the tags of
/// `If-None-Match` as the client named them (with any suffix), for the 304's tag.
fn plain_conditions(headers: &mut HeaderMap) -> Vec<String> {
    let mut named = Vec::new();
    for name in [header::IF_NONE_MATCH, header::IF_MATCH] {
        let values: Vec<HeaderValue> = headers.get_all(&name).iter().cloned().collect();
        if values.is_empty() {
            continue;
        }
        headers.remove(&name);
        for value in values {
            let plain = match value.to_str() {
                Ok(text) => {
                    if name == header::IF_NONE_MATCH {
                        named.extend(text.split(',').map(|t| opaque(t).to_string()));
                    }
                    let stripped = text.replace(&format!("{GZIP_SUFFIX}\""), "\"");
                    HeaderValue::from_str(&stripped).unwrap_or(value)
                }
                // Not text: left for the handler to refuse.
                Err(_) => value,
            };
            headers.append(&name, plain);
        }
    }
    named
}

/// A tag as compared: quotes kept, `W/` and white space dropped.
fn opaque(tag: &str) -> &str {
    let tag = tag.trim();
    tag.strip_prefix("W/").unwrap_or(tag)
}

/// The `ETag` of `resp` for the representation sent: `-gzip` added to a compressed answer's; a
/// 304 takes the form the client named.
fn tag_representation(mut resp: Response, named: &[String]) -> Response {
    let compressed = resp
        .headers()
        .get(header::CONTENT_ENCODING)
        .is_some_and(|e| e.as_bytes().eq_ignore_ascii_case(b"gzip"));
    let not_modified = resp.status() == StatusCode::NOT_MODIFIED;
    let headers = resp.headers_mut();
    let Some(tag) = headers
        .get(header::ETAG)
        .and_then(|t| t.to_str().ok())
        .map(str::to_string)
    else {
        return resp;
    };
    let Some(inner) = tag.strip_suffix('"') else {
        return resp;
    };
    let gzip_form = format!("{inner}{GZIP_SUFFIX}\"");
    let tag = if compressed {
        Some(gzip_form)
    } else if not_modified {
        headers.append(header::VARY, HeaderValue::from_static("accept-encoding"));
        let plain_named = named.iter().any(|n| n == opaque(&tag));
        let gzip_named = named.iter().any(|n| n == opaque(&gzip_form));
        (gzip_named && !plain_named).then_some(gzip_form)
    } else {
        None
    };
    if let Some(v) = tag.and_then(|t| HeaderValue::from_str(&t).ok()) {
        headers.insert(header::ETAG, v);
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gzip_is_taken_unless_refused() {
        let with = |v: &'static str| {
            let mut h = HeaderMap::new();
            h.insert(header::ACCEPT_ENCODING, HeaderValue::from_static(v));
            takes_gzip(&h)
        };
        assert!(with("gzip, deflate, br, zstd"));
        assert!(with("br;q=1.0, GZIP;q=0.5"));
        assert!(with("*"));
        assert!(!with("br"));
        assert!(!with("gzip;q=0"));
        assert!(!with("identity"));
        assert!(!takes_gzip(&HeaderMap::new()));
    }

    #[test]
    fn conditions_lose_the_suffix_and_the_named_tags_are_kept() {
        let mut h = HeaderMap::new();
        h.insert(
            header::IF_NONE_MATCH,
            HeaderValue::from_static(r#""a-gzip", W/"b""#),
        );
        h.insert(header::IF_MATCH, HeaderValue::from_static(r#""c-gzip""#));
        let named = plain_conditions(&mut h);
        assert_eq!(h[header::IF_NONE_MATCH], r#""a", W/"b""#);
        assert_eq!(h[header::IF_MATCH], r#""c""#);
        assert_eq!(named, vec![r#""a-gzip""#.to_string(), r#""b""#.into()]);
    }
}
