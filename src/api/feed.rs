//! Q6: the feed (the newest posts' short forms, in `feed`'s one partition).

use axum::body::Bytes;
use axum::extract::State;
use axum::response::Response;

use super::conditional::no_cache;
use super::schema::{PagingParams, PostSummaryPage};
use super::{json_response, list_body, AppState, Paging};
use crate::domain::{Kind, FEED_PK, FEED_SIZE};
use crate::error::{ApiError, ApiResult};
use crate::store::{Container, Order, Query};

/// Q6 `GET /api/feed?limit=x`: one query in the feed's single partition, newest first, never
/// paging past the [`FEED_SIZE`] newest (while two projections insert at once the container can
/// briefly hold more; the next projection trims it). The continuation token carries how many
/// entries earlier pages served: `<served>.<store token>`. A first page may come from the
/// process's snapshot of the feed (no store call, see `feed_cache`).
#[utoipa::path(
    get,
    path = "/api/feed",
    tag = "feed",
    summary = "The newest posts (at most 100), newest first, in short form",
    params(PagingParams),
    responses(
        (status = 200, description = "One page of the feed", body = PostSummaryPage,
            headers(("Cache-Control" = String, description = "`no-cache`"))),
    )
)]
pub async fn get_feed(State(s): State<AppState>, paging: Paging) -> ApiResult<Response> {
    let limit = paging.limit;
    let body = match paging.continuation.as_deref() {
        None => {
            s.feed
                .first_page(limit, || read_page(&s, limit, 0, None))
                .await?
        }
        Some(token) => {
            let (served, inner) = token
                .split_once('.')
                .and_then(|(n, t)| Some((n.parse::<usize>().ok()?, t)))
                .filter(|(n, t)| *n < FEED_SIZE && !t.is_empty())
                .ok_or_else(|| ApiError::BadRequest("`continuationToken` is not valid".into()))?;
            read_page(&s, limit, served, Some(inner.to_string())).await?
        }
    };
    Ok(no_cache(json_response(body)))
}

/// The page of at most `limit` entries after the `served` newest (`inner`: the store's token).
async fn read_page(
    s: &AppState,
    limit: u32,
    served: usize,
    inner: Option<String>,
) -> ApiResult<Bytes> {
    let q = Query::partition(FEED_PK)
        .of_kind(Kind::Post)
        .order_by_creation(Order::Desc)
        .limit(limit.min((FEED_SIZE - served) as u32))
        .continuation(inner);
    let mut page = s.store.query(Container::Feed, &q).await?;
    let served = served + page.items.len();
    page.continuation = page
        .continuation
        .filter(|_| served < FEED_SIZE)
        .map(|t| format!("{served}.{t}"));
    Ok(list_body(page))
}
