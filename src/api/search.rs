//! `GET /api/search?q=…`: the live posts whose title, content or tags hold every word of `q`, newest
//! first, in short form, paged. Unlike every other read it is not one partition's: the words
//! can be in any post, so it is one query across the partitions of `posts` (a full-text filter
//! through the posts' full-text index on Cosmos DB, FTS5 on the embedded store), and a point
//! read of each author shown, to leave out the posts of an account being erased. docs/scale.md states its price.

use std::collections::{BTreeSet, HashSet};

use axum::extract::State;
use axum::response::Response;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use utoipa::IntoParams;

use super::answer::page_response;
use super::views::{PageView, PostSummaryPage, PostSummaryView, View};
use super::{AppState, Paging};
use crate::domain::{is_live, Kind, Post};
use crate::error::{ApiError, ApiResult, Place};
use crate::store::{Container, Order, Page, Query, SEARCHABLE};

/// The longest `q`, in characters.
pub const MAX_QUERY_CHARS: usize = 200;
/// The most words `q` may hold (each word is one more full-text condition per field).
pub const MAX_WORDS: usize = 8;

/// The query parameter of a search (the `Search` extractor reads it; this type describes it).
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct SearchParams {
    /// The words to find: a post is found when its title, its content or its tags hold each
    /// of them (one word in the title and another in a tag counts). A word is a run of letters
    /// and digits; anything else separates words. Case, accents and English word endings do
    /// not matter (`Run` finds "running"). 1 to 200 characters, at most 8 words.
    #[param(min_length = 1, max_length = 200)]
    q: String,
}

/// The words of `q`: runs of letters and digits, each once (ignoring case), in order.
pub fn words_of(q: &str) -> Vec<String> {
    let mut seen = HashSet::new();
    q.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .filter(|w| seen.insert(w.to_lowercase()))
        .map(String::from)
        .collect()
}

/// `q` checked: 1 to [`MAX_QUERY_CHARS`] characters holding 1 to [`MAX_WORDS`] words.
fn parse_query(q: Option<&str>) -> ApiResult<Vec<String>> {
    let bad = |detail: String| ApiError::invalid(Place::Query, "q", detail);
    let q = q.ok_or_else(|| bad("`q` is required: the words to search for".into()))?;
    if q.chars().count() > MAX_QUERY_CHARS {
        return Err(bad(format!(
            "`q` must be at most {MAX_QUERY_CHARS} characters"
        )));
    }
    let words = words_of(q);
    if words.is_empty() {
        return Err(bad(
            "`q` must hold at least one word (letters or digits)".into()
        ));
    }
    if words.len() > MAX_WORDS {
        return Err(bad(format!(
            "`q` must hold at most {MAX_WORDS} different words, not {}",
            words.len()
        )));
    }
    Ok(words)
}

/// The checked words of a search request's `q`, and the client's address (its budget's key).
pub struct Search(Vec<String>, Option<std::net::SocketAddr>);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Search {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _: &S,
    ) -> Result<Self, ApiError> {
        let axum::extract::Query(params) = axum::extract::Query::<
            std::collections::HashMap<String, String>,
        >::try_from_uri(&parts.uri)
        .map_err(|_| ApiError::BadRequest("the query string could not be decoded".into()))?;
        let peer = parts
            .extensions
            .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
            .map(|c| c.0);
        parse_query(params.get("q").map(String::as_str)).map(|words| Search(words, peer))
    }
}

/// `GET /api/search?q=…`: one query across the partitions of `posts` for the page, newest
/// first, and a point read of each of the page's authors, so that an account being
/// erased (whose posts the change feed is still marking) shows none.
#[utoipa::path(
    get,
    path = "/api/search",
    tag = "posts",
    summary = "Find posts by their words, newest first, in short form",
    description = "The live posts whose title, content or tags hold every word of `q`, newest first (not ranked by relevance; on the embedded store in its full-text index's order, the most recently written first). Each client address has `BLOG_SEARCHES_PER_MINUTE` searches a minute, and a server runs at most 2 at once: over either, 429 `too-many-searches` with `Retry-After`. Across every partition of the posts: each page costs one query, plus a point read of each author it shows (at most `limit`), whatever the number of posts; the query's request units grow with the number of physical partitions and of posts holding the words (docs/scale.md). A page may hold fewer than `limit` posts while more follow.",
    params(SearchParams, super::schema::PagingParams),
    responses(
        (status = 200, description = "One page of the posts found", body = PostSummaryPage,
            headers(("Cache-Control" = String, description = "`no-cache`"))),
        (status = 400, description = "`q` is missing, too long, holds no word or too many words; or `limit` or `continuationToken` is not valid", body = crate::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn search_posts(
    State(s): State<AppState>,
    Search(words, peer): Search,
    paging: Paging,
) -> ApiResult<Response> {
    // Held until the answer is made, or the request is dropped (a timeout): one slot of the
    // searches in flight, after one search of the client's budget.
    let _slot = s.searches.admit(peer).await?;
    let continuation = paging
        .continuation
        .as_deref()
        .map(unpack_token)
        .transpose()?;
    let q = Query::cross_partition()
        .of_kind(Kind::Post)
        .live()
        .containing_words(&SEARCHABLE, words)
        .order_by_creation(Order::Desc)
        .limit(paging.limit)
        .continuation(continuation);
    let Page {
        items,
        continuation,
    } = s.store.query(Container::Posts, &q).await?;
    let posts = items
        .into_iter()
        .map(|item| {
            serde_json::from_value::<Post>(item)
                .map_err(|e| ApiError::internal(format!("a stored post does not read as one: {e}")))
        })
        .collect::<ApiResult<Vec<Post>>>()?;
    let live = live_authors(&s, &posts).await?;
    let shown = posts
        .into_iter()
        .filter(|p| live.contains(&p.user_id))
        .map(|p| PostSummaryView::from_domain(p.summary()))
        .collect();
    let token = continuation.as_deref().map(pack_token);
    Ok(page_response(&PostSummaryPage::new(shown, token)))
}

/// The longest store token a client's token may unpack to.
const MAX_STORE_TOKEN: u64 = 64 * 1024;

/// The client's form of a store's continuation token: deflated, then base64url. A query across
/// partitions resumes each partition still holding results, so Cosmos DB's token names every
/// one of them (a few hundred characters each) and would pass `continuationToken`'s 4,096
/// characters at about 14 physical partitions; deflated, at about 60 (docs/scale.md).
fn pack_token(token: &str) -> String {
    use std::io::Write as _;
    let mut z = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
    z.write_all(token.as_bytes()).expect("writing to memory");
    URL_SAFE_NO_PAD.encode(z.finish().expect("writing to memory"))
}

/// The store's token in a client's token, or a 400 naming `continuationToken`.
fn unpack_token(token: &str) -> ApiResult<String> {
    use std::io::Read as _;
    let bad = || {
        ApiError::invalid(
            Place::Query,
            "continuationToken",
            "`continuationToken` is not valid",
        )
    };
    let packed = URL_SAFE_NO_PAD.decode(token).map_err(|_| bad())?;
    let mut out = String::new();
    flate2::read::DeflateDecoder::new(packed.as_slice())
        .take(MAX_STORE_TOKEN + 1)
        .read_to_string(&mut out)
        .map_err(|_| bad())?;
    if out.is_empty() || out.len() as u64 > MAX_STORE_TOKEN {
        return Err(bad());
    }
    Ok(out)
}

/// Which of the posts' authors are live users: a point read of each (at once), none for an
/// empty page. An erased account's user is marked at once, its posts a step at a time by the
/// change feed; until then they are left out here. Point reads, not one query across the
/// partitions of `users`: a query there reads partition after partition, so its price grows with
/// the container, while a page names at most `limit` authors at one request unit each.
async fn live_authors(s: &AppState, posts: &[Post]) -> ApiResult<HashSet<String>> {
    let authors: BTreeSet<&str> = posts.iter().map(|p| p.user_id.as_str()).collect();
    let reads = authors.iter().map(|&author| async move {
        let user = s.store.read(Container::Users, author, author).await?;
        Ok::<_, ApiError>(
            user.filter(|u| is_live(u, Kind::User))
                .map(|_| author.to_string()),
        )
    });
    let live = futures::future::try_join_all(reads).await?;
    Ok(live.into_iter().flatten().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_runs_of_letters_and_digits_each_once() {
        assert_eq!(
            words_of("  Rust, rust & Cosmos-DB 2026!"),
            ["Rust", "Cosmos", "DB", "2026"]
        );
        assert_eq!(words_of("café crème"), ["café", "crème"]);
        assert!(words_of(" -- !? ").is_empty());
    }

    fn field_of(e: ApiError) -> String {
        match e {
            ApiError::InvalidInput(errors) => format!("{errors:?}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn tokens_round_trip_and_a_foreign_one_is_a_400() {
        let store = format!("c1.{}", "eyJyYW5nZXMiOlt7Im1pbl9lcGsiOiIifV19".repeat(40));
        let packed = pack_token(&store);
        assert!(packed.len() < store.len() / 4, "{}", packed.len());
        assert_eq!(unpack_token(&packed).unwrap(), store);
        for foreign in ["", "not a token", "eyJhIjoiYiJ9", &pack_token("")] {
            let e = field_of(unpack_token(foreign).unwrap_err());
            assert!(e.contains("continuationToken"), "{foreign}: {e}");
        }
        // A token that would unpack to more than any store's is refused, not unpacked.
        let bomb = pack_token(&"a".repeat(MAX_STORE_TOKEN as usize + 1));
        assert!(unpack_token(&bomb).is_err());
    }

    /// A Cosmos DB token of a search across 50 physical partitions (its shape as the SDK writes
    /// it, each partition's resume point with a random item id) fits in `continuationToken`.
    #[test]
    fn a_token_across_fifty_partitions_fits() {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut random = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let ranges: Vec<serde_json::Value> = (0..50u128)
            .map(|i| {
                let rid: Vec<u8> = (0..16).map(|_| random() as u8).collect();
                serde_json::json!({
                    "min_epk": format!("{:032X}", i << 120),
                    "max_epk": format!("{:032X}", (i + 1) << 120),
                    "boundary": {
                        "resume_values": [{ "type": "string",
                            "value": format!("2026-11-26T12:{:02}:{:02}.{:03}Z",
                                random() % 60, random() % 60, random() % 1000) }],
                        "last_rid": base64::engine::general_purpose::STANDARD.encode(rid),
                        "skip_count": 1
                    }
                })
            })
            .collect();
        let state = serde_json::json!({ "op": "Query", "rid": "AAAAAYAAAAI=",
            "root": { "kind": "streaming_ordered_merge", "directions": ["Descending"],
                "query_fingerprint": "bd5501ad7cbb515556c38d5e790b0144", "ranges": ranges } });
        let store = format!("c1.{}", URL_SAFE_NO_PAD.encode(state.to_string()));
        assert!(store.len() > 4096 * 3, "{}", store.len());
        let packed = pack_token(&store);
        assert!(packed.len() <= 4096, "{}", packed.len());
        assert_eq!(unpack_token(&packed).unwrap(), store);
    }

    #[test]
    fn a_bad_q_names_q() {
        for q in [None, Some(""), Some("  ,;  "), Some("a b c d e f g h i")] {
            let e = field_of(parse_query(q).unwrap_err());
            assert!(e.contains("\"q\""), "{q:?}: {e}");
        }
        let long = "a".repeat(MAX_QUERY_CHARS + 1);
        assert!(field_of(parse_query(Some(&long)).unwrap_err()).contains("200 characters"));
        // Eight different words, repeats not counted, and 200 characters are fine.
        assert_eq!(parse_query(Some("a b c d e f g h A a")).unwrap().len(), 8);
        assert!(parse_query(Some(&"é".repeat(MAX_QUERY_CHARS))).is_ok());
    }
}
