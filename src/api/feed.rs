//! Q6: the feed (the newest posts' short forms, in `feed`'s one partition).

use super::answer::{encode, json_response};
use super::conditional::no_cache;
use super::schema::PagingParams;
use super::views::{PageView, PostSummaryPage, PostSummaryView};
use super::{AppState, Paging};
use crate::compression::TakesGzip;
use crate::domain::{Kind, FEED_PK, FEED_SIZE};
use crate::error::{ApiError, ApiResult};
use crate::store::{Container, Order, Page, Query};
use axum::body::Bytes;
use axum::extract::State;
use axum::response::Response;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;

/// Q6 `GET /api/feed?limit=x`: one query in the feed's single partition, newest first, never
/// paging past the [`FEED_SIZE`] newest (while two projections insert at once the container can
/// briefly hold more; the next projection trims it).
//
// A continuation token names the last entry served (its creation date and id), nothing else:
// the next page is taken from the `FEED_SIZE` newest entries (the same snapshot a first page of
// that size uses), after that entry. Whatever a client puts in a token, it can only choose where
// to start within what the feed shows: a token that does not decode is a 400, and one that
// points below the newest `FEED_SIZE` ends the list.
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
pub async fn get_feed(
    State(s): State<AppState>,
    TakesGzip(gzip): TakesGzip,
    paging: Paging,
) -> ApiResult<Response> {
    let limit = paging.limit;
    let body = match paging.continuation.as_deref() {
        None => {
            let body = first_page(&s, limit).await?;
            // A snapshot's compressed form is made once and sent to every reader taking gzip.
            if gzip {
                if let Some(gzip) = s.feed.gzipped(limit, &body) {
                    return Ok(no_cache(crate::compression::gzipped(
                        "application/json",
                        gzip,
                    )));
                }
            }
            body
        }
        Some(token) => {
            let after = Cursor::decode(token).ok_or_else(|| {
                ApiError::invalid(
                    crate::error::Place::Query,
                    "continuationToken",
                    "`continuationToken` is not valid",
                )
            })?;
            let shown = first_page(&s, FEED_SIZE as u32).await?;
            let shown: PostSummaryPage = serde_json::from_slice(&shown).map_err(|e| {
                ApiError::internal(format!("the feed's page does not read as one: {e}"))
            })?;
            encode(&page_after(shown.items, &after, limit))
        }
    };
    Ok(no_cache(json_response(body)))
}

/// The first `limit` entries, from the process's snapshot when it holds (see `feed_cache`).
async fn first_page(s: &AppState, limit: u32) -> ApiResult<Bytes> {
    s.feed
        .first_page(limit, || async {
            let q = Query::partition(FEED_PK)
                .of_kind(Kind::Post)
                .order_by_creation(Order::Desc)
                .limit(limit);
            let page = s.store.query(Container::Feed, &q).await?;
            let more = page.continuation.is_some() && (limit as usize) < FEED_SIZE;
            let mut answer = PostSummaryPage::from_stored(Page {
                items: page.items,
                continuation: None,
            })?;
            answer.continuation_token = answer
                .items
                .last()
                .filter(|_| more)
                .map(|last| Cursor::of(last).encode());
            Ok(encode(&answer))
        })
        .await
}

/// The page of at most `limit` of `shown` (the newest entries, in the store's order) after
/// `after`: after its position when it is still among them (the same query's order, whatever
/// the store does with equal creation dates), else from the first entry older than it.
fn page_after(shown: Vec<PostSummaryView>, after: &Cursor, limit: u32) -> PostSummaryPage {
    fn key_of(item: &PostSummaryView) -> (&str, &str) {
        (&item.creation_date, &item.id)
    }
    let after_key = (after.creation_date.as_str(), after.id.as_str());
    let start = match shown.iter().position(|i| key_of(i) == after_key) {
        Some(at) => at + 1,
        None => shown
            .iter()
            .position(|i| key_of(i) < after_key)
            .unwrap_or(shown.len()),
    };
    let mut rest: Vec<PostSummaryView> = shown.into_iter().skip(start).collect();
    let more = rest.len() > limit as usize;
    rest.truncate(limit as usize);
    let continuation = if more {
        rest.last().map(|last| Cursor::of(last).encode())
    } else {
        None
    };
    PostSummaryPage::new(rest, continuation)
}

/// The position of a feed entry in the feed's order (creation date, then id, both descending).
struct Cursor {
    creation_date: String,
    id: String,
}

impl Cursor {
    fn of(item: &PostSummaryView) -> Cursor {
        Cursor {
            creation_date: item.creation_date.clone(),
            id: item.id.clone(),
        }
    }

    /// URL-safe base64 of `[creationDate, id]`: opaque to clients, who pass it back as given.
    fn encode(&self) -> String {
        let json = serde_json::to_vec(&[&self.creation_date, &self.id]).expect("strings encode");
        URL_SAFE_NO_PAD.encode(json)
    }

    fn decode(token: &str) -> Option<Cursor> {
        let bytes = URL_SAFE_NO_PAD.decode(token).ok()?;
        let [creation_date, id]: [String; 2] = serde_json::from_slice(&bytes).ok()?;
        (!creation_date.is_empty() && !id.is_empty()).then_some(Cursor { creation_date, id })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn post(id: &str, creation_date: &str) -> PostSummaryView {
        PostSummaryView {
            id: id.into(),
            post_id: id.into(),
            user_id: "u".into(),
            user_username: "ana".into(),
            title: "t".into(),
            description: None,
            content: "c".into(),
            comment_count: 0,
            like_count: 0,
            creation_date: creation_date.into(),
            tags: Vec::new(),
        }
    }

    fn entry(n: u32) -> PostSummaryView {
        post(
            &format!("p{n:03}"),
            &format!("2026-01-01T00:00:{n:02}.000Z"),
        )
    }

    fn ids(page: &PostSummaryPage) -> (Vec<String>, Option<String>) {
        let ids = page.items.iter().map(|i| i.id.clone()).collect();
        (ids, page.continuation_token.clone())
    }

    #[test]
    fn a_page_starts_after_the_cursor_and_stays_within_what_is_shown() {
        let shown: Vec<PostSummaryView> = (0..10).rev().map(entry).collect();
        let after = Cursor::of(&entry(7));
        let (page, next) = ids(&page_after(shown.clone(), &after, 3));
        assert_eq!(page, ["p006", "p005", "p004"]);
        let next = Cursor::decode(&next.unwrap()).unwrap();
        let (page, next) = ids(&page_after(shown.clone(), &next, 10));
        assert_eq!(page, ["p003", "p002", "p001", "p000"]);
        assert_eq!(next, None);
        // A cursor newer than every entry starts at the newest; one older than all ends the list.
        let newest = Cursor::of(&entry(50));
        assert_eq!(
            ids(&page_after(shown.clone(), &newest, 2)).0,
            ["p009", "p008"]
        );
        let oldest = Cursor::of(&post("a", "2000"));
        assert_eq!(ids(&page_after(shown, &oldest, 2)), (vec![], None));
    }

    #[test]
    fn equal_creation_dates_in_any_order_are_neither_skipped_nor_repeated() {
        let at = |id: &str, second: u32| post(id, &format!("2026-01-01T00:00:{second:02}.000Z"));
        // A store that orders by creation date alone may put `a` before `b`.
        let shown = vec![at("x", 3), at("a", 2), at("b", 2), at("y", 1)];
        let after = Cursor::of(&shown[1]);
        assert_eq!(ids(&page_after(shown, &after, 5)).0, ["b", "y"]);
    }

    #[test]
    fn tokens_round_trip_and_anything_else_is_refused() {
        let token = Cursor::of(&entry(1)).encode();
        assert_eq!(Cursor::decode(&token).unwrap().id, "p001");
        for bad in ["", "x", "0.abc", "WyJhIl0", "WyIiLCJhIl0", "e30"] {
            assert!(Cursor::decode(bad).is_none(), "{bad}");
        }
    }
}
