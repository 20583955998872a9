//! Entity tags and conditional requests: `ETag` on users and posts (the stored item's `_etag`,
//! already a quoted string), `If-None-Match` on their reads and `If-Match` on their updates.
//!
//! Both headers take one entity tag or `*`; `If-None-Match` also takes a comma-separated list.
//! An empty value is no condition; any other value not in that form answers 400. Reads compare weakly (`W/"x"` matches `"x"`),
//! updates strongly (a weak tag never matches, so it answers 412).

use axum::extract::OptionalFromRequestParts;
use axum::http::request::Parts;
use axum::http::{header, HeaderName, HeaderValue};
use axum::response::Response;
use serde_json::Value;
use utoipa::IntoParams;

use crate::error::ApiError;

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
    /// Whether an item with this stored `_etag` matches (weak comparison).
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
    /// One tag, quotes included (`W/` kept: a weak tag never matches a stored `_etag`).
    Tag(String),
}

impl IfMatch {
    /// The `_etag` the store must still see, if any.
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
fn header_text<'a>(parts: &'a Parts, name: &HeaderName) -> Result<Option<&'a str>, ApiError> {
    let mut values = parts.headers.get_all(name).iter();
    let Some(first) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(ApiError::BadRequest(format!("`{name}` must be sent once")));
    }
    let text = first
        .to_str()
        .map_err(|_| ApiError::BadRequest(format!("`{name}` must be ASCII")))?;
    Ok(Some(text).filter(|t| !t.trim().is_empty()))
}

/// An optional extractor: `Option<IfNoneMatch>` is `None` without the header.
impl<S: Send + Sync> OptionalFromRequestParts<S> for IfNoneMatch {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Option<Self>, ApiError> {
        let Some(text) = header_text(parts, &header::IF_NONE_MATCH)? else {
            return Ok(None);
        };
        if text.trim() == "*" {
            return Ok(Some(IfNoneMatch::Any));
        }
        let tags = parse_tags(text).ok_or_else(|| {
            ApiError::BadRequest(
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
        let Some(text) = header_text(parts, &header::IF_MATCH)? else {
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
            _ => Err(ApiError::BadRequest(
                "`If-Match` must be `*` or one entity tag such as `\"abc\"`".into(),
            )),
        }
    }
}

/// The stored item's `_etag`, as an `ETag` header value.
pub fn etag_of(item: &Value) -> Option<HeaderValue> {
    item.get("_etag")
        .and_then(Value::as_str)
        .and_then(|e| HeaderValue::from_str(e).ok())
}

/// Add the item's `ETag` and `Cache-Control: no-cache` (cache, but revalidate every time).
pub fn tagged(mut resp: Response, item: &Value) -> Response {
    if let Some(etag) = etag_of(item) {
        resp.headers_mut().insert(header::ETAG, etag);
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
    fn if_none_match_compares_weakly() {
        let tags = IfNoneMatch::Tags(vec![r#""a""#.into(), r#""b""#.into()]);
        assert!(tags.matches(r#""b""#));
        assert!(!tags.matches(r#""c""#));
        assert!(IfNoneMatch::Any.matches(r#""x""#));
    }
}
