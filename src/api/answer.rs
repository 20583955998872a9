//! Building the API's answers: a page of items as a list, an item's view with its `ETag` (or
//! 304), a create's `Location`; the one encoding of a JSON body they share. The routes call
//! these; the views and the conditional headers they use are below them.

use axum::body::Bytes;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::Value;

use super::conditional::{self, no_cache, tagged, IfNoneMatch};
use super::views::{PageView, View};
use crate::error::ApiResult;
use crate::store::Page;

/// A list response: the page of `P`'s views of the items a query found (`{"items": [...],
/// "continuationToken": ... | null}`), never used unchecked from a cache (`Cache-Control:
/// no-cache`).
pub(super) fn list<P: PageView>(page: Page) -> ApiResult<Response>
where
    P::Item: View,
{
    Ok(page_response(&P::from_stored(page)?))
}

/// A page answered as a list (see [`list`]).
pub(super) fn page_response(page: &impl Serialize) -> Response {
    no_cache(json_response(encode(page)))
}

/// The encoded body of an answer.
pub(super) fn encode(body: &impl Serialize) -> Bytes {
    Bytes::from(serde_json::to_vec(body).expect("views serialize"))
}

/// An already encoded JSON body, answered as `Json` would answer it.
pub(super) fn json_response(body: Bytes) -> Response {
    let json = HeaderValue::from_static("application/json");
    ([(header::CONTENT_TYPE, json)], body).into_response()
}

/// 200 with the item's view `V` and its `ETag`, or 304 with only the `ETag` when
/// `If-None-Match` names it (compared after the read, on the answer's tag); `None` when there
/// is no item of the kind asked for.
pub(super) fn item_response<V: View + Serialize>(
    item: Option<Value>,
    is_kind: impl Fn(&Value) -> bool,
    if_none_match: Option<IfNoneMatch>,
) -> ApiResult<Option<Response>> {
    let Some(item) = item.filter(|i| is_kind(i)) else {
        return Ok(None);
    };
    let body = encode(&V::from_stored(item)?);
    let tag = conditional::tag_of(&body);
    if if_none_match.is_some_and(|m| m.matches(&tag)) {
        return Ok(Some(tagged(StatusCode::NOT_MODIFIED.into_response(), &tag)));
    }
    Ok(Some(tagged(json_response(body), &tag)))
}

/// `status` with the view `V` of a stored item, tagged with its `ETag`.
pub(super) fn view_response<V: View + Serialize>(
    status: StatusCode,
    item: Value,
) -> ApiResult<Response> {
    let body = encode(&V::from_stored(item)?);
    let tag = conditional::tag_of(&body);
    let mut resp = json_response(body);
    *resp.status_mut() = status;
    Ok(tagged(resp, &tag))
}

/// Add `Location: <path>` (a create's answer).
pub(super) fn set_location(resp: &mut Response, path: &str) {
    if let Ok(v) = HeaderValue::from_str(path) {
        resp.headers_mut().insert(header::LOCATION, v);
    }
}

/// The `ETag` the view `V` of `item` is answered with.
pub(super) fn view_tag<V: View + Serialize>(item: &Value) -> ApiResult<String> {
    Ok(conditional::tag_of(&encode(&V::from_stored(item.clone())?)))
}
