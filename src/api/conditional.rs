//! Entity tags and conditional requests: `ETag` on users and posts, `If-None-Match` on their
//! reads and `If-Match` on their updates.
//!
//! The tag is a digest of the answer's body ([`tag_of`]), not the store's `_etag`: the change
//! feed writes bookkeeping of its own on items (a rename's fan-out records that it is done on the
//! user), which changes `_etag` but nothing a client sees, and must not make the tag a write
//! answered stale. An update with `If-Match` compares the tag with the view of the item read and
//! then writes only while the store's `_etag` is still the one read (retrying after a change that
//! left the view as it was), so a change made between the check and the write is never
//! overwritten.
//!
//! Both headers take one entity tag or `*`; `If-None-Match` also takes a comma-separated list.
//! An empty value is no condition; any other value not in that form answers 400. Reads compare weakly (`W/"x"` matches `"x"`),
//! updates strongly (a weak tag never matches, so it answers 412).

use axum::extract::OptionalFromRequestParts;
use axum::http::request::Parts;
use axum::http::{header, HeaderName, HeaderValue};
use axum::response::Response;
use sha2::{Digest, Sha256};
use utoipa::IntoParams;

use crate::error::{ApiError, Place};

/// `If-None-Match` as a header value: `*`, or one or more entity tags. Empty (or blank) is no
/// condition.
pub const IF_NONE_MATCH_PATTERN: &str =
    r#"^[ \t]*(?:\*|(?:W/)?"[\x21\x23-\x7E]*"(?:[ \t]*,[ \t]*(?:W/)?"[\x21\x23-\x7E]*")*)?[ \t]*$"#;

/// `If-Match` as a header value: `*`, or one entity tag. Empty (or blank) is no condition.
pub const IF_MATCH_PATTERN: &str = r#"^[ \t]*(?:\*|(?:W/)?"[\x21\x23-\x7E]*")?[ \t]*$"#;

/// The `If-None-Match` request header, for the document.
#[derive(IntoParams)]
#[into_params(parameter_in = Header)]
#[allow(dead_code)] // read by the `IfNoneMatch` extractor; this type only describes it
pub struct IfNoneMatchParam {
    /// The `ETag`(s) of the copy the client holds, or `*`: answers 304 without a body while
    /// it is current (weak comparison).
    #[param(rename = "If-None-Match")]
    if_none_match: Option<String>,
}

/// The `If-Match` request header, for the document.
#[derive(IntoParams)]
#[into_params(parameter_in = Header)]
#[allow(dead_code)] // read by the `IfMatch` extractor; this type only describes it
pub struct IfMatchParam {
    /// The `ETag` the update is based on: 412 when the item has changed since (strong
    /// comparison); `*`: any current version.
    #[param(rename = "If-Match")]
    if_match: Option<String>,
}

/// The tags of an `If-None-Match` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IfNoneMatch {
    /// `*`: any current item matches.
    Any,
    /// One or more opaque tags, quotes included, `W/` dropped.
    Tags(Vec<String>),
}

impl IfNoneMatch {
    /// Whether an answer with this tag matches (weak comparison).
    pub fn matches(&self, etag: &str) -> bool {
        match self {
            IfNoneMatch::Any => true,
            IfNoneMatch::Tags(tags) => tags.iter().any(|t| t == etag),
        }
    }
}

/// The condition of an `If-Match` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IfMatch {
    /// `*`: the item must exist, which an update requires anyway.
    Any,
    /// One tag, quotes included (`W/` kept: a weak tag never matches an answer's tag).
    Tag(String),
}

impl IfMatch {
    /// The tag the item's current answer must have, if any.
    pub fn etag(&self) -> Option<&str> {
        match self {
            IfMatch::Any => None,
            IfMatch::Tag(t) => Some(t),
        }
    }
}

/// Split an entity-tag list (`"a", W/"b"`) into its tags, each with `W/` flagged; `None` when
/// the text is not such a list. A tag may hold any visible ASCII but `"`, commas included.
fn parse_tags(text: &str) -> Option<Vec<(bool, String)>> {
    let is_space = |c: char| c == ' ' || c == '\t';
    let mut out = Vec::new();
    let mut rest = text.trim_start_matches(is_space);
    loop {
        let (weak, tail) = match rest.strip_prefix("W/") {
            Some(t) => (true, t),
            None => (false, rest),
        };
        let inner = tail.strip_prefix('"')?;
        let end = inner.find('"')?;
        let opaque = &inner[..end];
        if !opaque
            .bytes()
            .all(|b| b == 0x21 || (0x23..=0x7e).contains(&b))
        {
            return None;
        }
        out.push((weak, format!("\"{opaque}\"")));
        rest = inner[end + 1..].trim_start_matches(is_space);
        if rest.is_empty() {
            return Some(out);
        }
        rest = rest.strip_prefix(',')?.trim_start_matches(is_space);
    }
}

/// The header's text; `None` when absent or empty (an empty condition is no condition).
fn header_text<'a>(
    parts: &'a Parts,
    name: &HeaderName,
    shown: &str,
) -> Result<Option<&'a str>, ApiError> {
    let mut values = parts.headers.get_all(name).iter();
    let Some(first) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(bad_header(shown, format!("`{shown}` must be sent once")));
    }
    let text = first
        .to_str()
        .map_err(|_| bad_header(shown, format!("`{shown}` must be ASCII")))?;
    Ok(Some(text).filter(|t| !t.trim().is_empty()))
}

fn bad_header(name: &str, detail: String) -> ApiError {
    ApiError::invalid(Place::Header, name, detail)
}

/// An optional extractor: `Option<IfNoneMatch>` is `None` without the header.
impl<S: Send + Sync> OptionalFromRequestParts<S> for IfNoneMatch {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Option<Self>, ApiError> {
        let Some(text) = header_text(parts, &header::IF_NONE_MATCH, "If-None-Match")? else {
            return Ok(None);
        };
        if text.trim() == "*" {
            return Ok(Some(IfNoneMatch::Any));
        }
        let tags = parse_tags(text).ok_or_else(|| {
            bad_header(
                "If-None-Match",
                "`If-None-Match` must be `*` or entity tags such as `\"abc\"`".into(),
            )
        })?;
        Ok(Some(IfNoneMatch::Tags(
            tags.into_iter().map(|(_, t)| t).collect(),
        )))
    }
}

/// An optional extractor: `Option<IfMatch>` is `None` without the header.
impl<S: Send + Sync> OptionalFromRequestParts<S> for IfMatch {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Option<Self>, ApiError> {
        let Some(text) = header_text(parts, &header::IF_MATCH, "If-Match")? else {
            return Ok(None);
        };
        if text.trim() == "*" {
            return Ok(Some(IfMatch::Any));
        }
        match parse_tags(text).as_deref() {
            Some([(weak, tag)]) => Ok(Some(IfMatch::Tag(if *weak {
                format!("W/{tag}")
            } else {
                tag.clone()
            }))),
            _ => Err(bad_header(
                "If-Match",
                "`If-Match` must be `*` or one entity tag such as `\"abc\"`".into(),
            )),
        }
    }
}

/// The `ETag` of an answer whose body is `body`: a quoted digest of the bytes (128 bits of
/// SHA-256, in hex), so it changes exactly when what a client sees changes, is the same on every
/// instance, and tells nothing of other items or of how much was written.
pub fn tag_of(body: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digest = Sha256::digest(body);
    let mut tag = String::with_capacity(34);
    tag.push('"');
    for b in &digest[..16] {
        tag.push(char::from(HEX[usize::from(b >> 4)]));
        tag.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    tag.push('"');
    tag
}

/// Add the `ETag` `tag` and `Cache-Control: no-cache` (cache, but revalidate every time).
pub fn tagged(mut resp: Response, tag: &str) -> Response {
    if let Ok(v) = HeaderValue::from_str(tag) {
        resp.headers_mut().insert(header::ETAG, v);
    }
    no_cache(resp)
}

/// `Cache-Control: no-cache`: a client may keep the answer but must ask again before using it.
pub fn no_cache(mut resp: Response) -> Response {
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entity_tag_lists_parse() {
        assert_eq!(
            parse_tags(r#""a""#),
            Some(vec![(false, r#""a""#.to_string())])
        );
        assert_eq!(
            parse_tags(r#"W/"a" , "b""#),
            Some(vec![
                (true, r#""a""#.to_string()),
                (false, r#""b""#.to_string())
            ])
        );
        assert_eq!(
            parse_tags(r#""""#),
            Some(vec![(false, r#""""#.to_string())])
        );
        assert_eq!(
            parse_tags("\"a,b\",\tW/\",\" "),
            Some(vec![(false, "\"a,b\"".into()), (true, "\",\"".into())])
        );
        for bad in [
            "", "a", r#""a"#, r#"a""#, r#""a"b""#, r#""a", "#, "\"", r#"w/"a""#,
        ] {
            assert_eq!(parse_tags(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn tags_are_digests_of_the_body() {
        let a = tag_of(br#"{"id":"u1","username":"ana"}"#);
        assert_eq!(a, tag_of(br#"{"id":"u1","username":"ana"}"#));
        assert_ne!(a, tag_of(br#"{"id":"u1","username":"bea"}"#));
        assert_eq!(a.len(), 34);
        assert!(parse_tags(&a).is_some(), "{a}");
    }

    #[test]
    fn if_none_match_compares_weakly() {
        let tags = IfNoneMatch::Tags(vec![r#""a""#.into(), r#""b""#.into()]);
        assert!(tags.matches(r#""b""#));
        assert!(!tags.matches(r#""c""#));
        assert!(IfNoneMatch::Any.matches(r#""x""#));
    }
}
