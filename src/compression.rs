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

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use tower::Service;
use tower_http::compression::predicate::Predicate;
use tower_http::compression::{Compression, CompressionBody, CompressionLayer};

/// Bodies this size or smaller go uncompressed: gzip's header and trailer take 18 bytes, and a
/// short JSON answer has too little repetition to gain more than that.
pub const MIN_SIZE: u16 = 256;

/// The suffix an entity tag of a gzip-compressed answer carries inside its quotes.
const GZIP_SUFFIX: &str = "-gzip";

/// Which answers are worth compressing: not already encoded or a range; of a type that gains
/// (not an image other than SVG, not gRPC other than gRPC-Web, not an event stream, which must
/// reach its reader event by event); over [`MIN_SIZE`] bytes, or of a size not known ahead.
#[derive(Clone, Copy)]
pub struct Worth;

impl Predicate for Worth {
    fn should_compress<B: axum::body::HttpBody>(&self, resp: &axum::http::Response<B>) -> bool {
        Seen::of(resp.headers()).worth(resp.body().size_hint().exact())
    }
}

/// What an answer's headers say about compressing it, read in one pass (an answer has few).
struct Seen<'a> {
    content_type: &'a str,
    length: Option<u64>,
    encoded: bool,
    ranged: bool,
    varies: bool,
}

impl<'a> Seen<'a> {
    /// Whether the answer is worth compressing ([`Worth`]), its body `exact` bytes if known.
    fn worth(&self, exact: Option<u64>) -> bool {
        let ty = self.content_type;
        let kind = (ty.starts_with("image/svg+xml") || !ty.starts_with("image/"))
            && (ty.starts_with("application/grpc-web") || !ty.starts_with("application/grpc"))
            && !ty.starts_with("text/event-stream");
        !self.encoded
            && !self.ranged
            && kind
            && exact
                .or(self.length)
                .is_none_or(|size| size >= u64::from(MIN_SIZE))
    }

    fn of(headers: &'a HeaderMap) -> Self {
        let mut seen = Seen {
            content_type: "",
            length: None,
            encoded: false,
            ranged: false,
            varies: false,
        };
        for (name, value) in headers {
            if name == header::CONTENT_TYPE {
                seen.content_type = value.to_str().unwrap_or_default();
            } else if name == header::CONTENT_LENGTH {
                seen.length = value.to_str().ok().and_then(|v| v.parse().ok());
            } else if name == header::CONTENT_ENCODING {
                seen.encoded = true;
            } else if name == header::CONTENT_RANGE {
                seen.ranged = true;
            } else if name == header::VARY {
                seen.varies |= value.to_str().is_ok_and(|v| {
                    v.split(',')
                        .any(|n| n.trim().eq_ignore_ascii_case("accept-encoding"))
                });
            }
        }
        seen
    }
}

/// The layer: compress the answers of the services it wraps (see the module), except to requests
/// whose path `passes` names, which go through untouched.
#[derive(Clone, Copy)]
pub struct Layer {
    passes: fn(&str) -> bool,
}

impl Layer {
    /// Compress every answer except to requests whose path `passes` names.
    pub fn except(passes: fn(&str) -> bool) -> Self {
        Layer { passes }
    }
}

impl<S> tower::Layer<S> for Layer {
    type Service = Compress<S>;

    fn layer(&self, inner: S) -> Compress<S> {
        Compress {
            gzip: CompressionLayer::new().compress_when(Worth).layer(inner),
            passes: self.passes,
        }
    }
}

/// The service [`Layer`] makes. A request whose client does not take gzip goes straight to the
/// service inside: nothing is boxed or wrapped on its way, only `Vary` and the 304's tag are set
/// on the answer.
#[derive(Clone)]
pub struct Compress<S> {
    gzip: Compression<S, Worth>,
    passes: fn(&str) -> bool,
}

impl<S> Service<Request> for Compress<S>
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Answer<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.gzip.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request) -> Self::Future {
        if (self.passes)(req.uri().path()) {
            return Answer::Passed {
                inner: self.gzip.get_mut().call(req),
            };
        }
        // One pass over the request's headers (a lookup each would cost more).
        let (mut gzip, mut conditional) = (false, false);
        for (name, value) in req.headers() {
            if name == header::ACCEPT_ENCODING {
                gzip |= value_takes_gzip(value);
            } else if name == header::IF_NONE_MATCH || name == header::IF_MATCH {
                conditional = true;
            }
        }
        let named = if conditional {
            plain_conditions(req.headers_mut())
        } else {
            Vec::new()
        };
        if gzip {
            Answer::Gzip {
                inner: self.gzip.call(req),
                named,
            }
        } else {
            Answer::Plain {
                inner: self.gzip.get_mut().call(req),
                named,
            }
        }
    }
}

pin_project_lite::pin_project! {
    /// The answer of [`Compress`], on its way.
    #[project = AnswerProj]
    pub enum Answer<F> {
        /// Left alone.
        Passed { #[pin] inner: F },
        /// To a client that does not take gzip.
        Plain { #[pin] inner: F, named: Vec<String> },
        /// To a client that takes gzip.
        Gzip { #[pin] inner: tower_http::compression::ResponseFuture<F, Worth>, named: Vec<String> },
    }
}

impl<F> Future for Answer<F>
where
    F: Future<Output = Result<Response, Infallible>>,
{
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Poll::Ready(Ok(match self.project() {
            AnswerProj::Passed { inner } => return inner.poll(cx),
            AnswerProj::Plain { inner, named } => {
                let Ok(mut resp) = ready!(inner.poll(cx));
                let seen = Seen::of(resp.headers());
                if seen.worth(axum::body::HttpBody::size_hint(resp.body()).exact()) && !seen.varies
                {
                    resp.headers_mut()
                        .append(header::VARY, HeaderValue::from_static("accept-encoding"));
                }
                tag_representation(resp, named)
            }
            AnswerProj::Gzip { inner, named } => {
                let Ok(resp) = ready!(inner.poll(cx));
                tag_representation(resp.map(compressed_body), named)
            }
        }))
    }
}

fn compressed_body(body: CompressionBody<Body>) -> Body {
    Body::new(body)
}

/// Add `Vary: Accept-Encoding` unless the answer already varies by it.
fn vary(headers: &mut HeaderMap) {
    if !Seen::of(headers).varies {
        headers.append(header::VARY, HeaderValue::from_static("accept-encoding"));
    }
}

/// Whether a request's `Accept-Encoding` takes gzip (named, or `*`, without `q=0`): for an
/// answer kept compressed, which is sent as it is.
pub fn takes_gzip(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .any(value_takes_gzip)
}

/// Whether one `Accept-Encoding` value takes gzip (see [`takes_gzip`]).
fn value_takes_gzip(value: &HeaderValue) -> bool {
    value.to_str().unwrap_or_default().split(',').any(|coding| {
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
    if !compressed && !not_modified {
        return resp;
    }
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
        vary(headers);
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
    fn worth_compressing_by_type_size_and_encoding() {
        let answer =
            |ty: &'static str, len: usize, extra: Option<(header::HeaderName, &'static str)>| {
                let mut resp = Response::new(Body::from(vec![b'a'; len]));
                resp.headers_mut()
                    .insert(header::CONTENT_TYPE, HeaderValue::from_static(ty));
                if let Some((name, value)) = extra {
                    resp.headers_mut()
                        .insert(name, HeaderValue::from_static(value));
                }
                Worth.should_compress(&resp)
            };
        let big = usize::from(MIN_SIZE);
        assert!(answer("application/json", big, None));
        assert!(!answer("application/json", big - 1, None));
        assert!(answer("image/svg+xml", big, None));
        assert!(!answer("image/png", big, None));
        assert!(answer("application/grpc-web", big, None));
        assert!(!answer("application/grpc", big, None));
        assert!(!answer("text/event-stream", big, None));
        assert!(!answer(
            "text/html",
            big,
            Some((header::CONTENT_ENCODING, "br"))
        ));
        assert!(!answer(
            "text/html",
            big,
            Some((header::CONTENT_RANGE, "bytes 0-9/99"))
        ));
        // A body of unknown size is worth it.
        let stream = Body::from_stream(futures::stream::iter([Ok::<_, Infallible>(
            Bytes::from_static(b"a"),
        )]));
        let mut resp = Response::new(stream);
        resp.headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html"));
        assert!(Worth.should_compress(&resp));
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
