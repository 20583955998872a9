//! The lists of articles (newest first, by author, favorited, tag, or all), the feed (the
//! personal timeline) and the tags.
//!
//! Store operations of a list page of `limit` articles (docs/conduit.md): the source's query
//! (one per 100 articles up to `offset + limit`), one count in the same partition, one point
//! read to find a user by username (`author`, `favorited`), and per article shown at most one
//! point read of the viewer's like (signed in) and, per author shown, one of the author and one
//! of the viewer's follow edge (signed in): at most 4 + 3 × `limit` for `limit` ≤ 100 and
//! `offset` < 100.

use axum::extract::{Query as QueryParams, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::articles::{read_post, shown, Context, Shown};
use super::errors::{invalid, native, store_error, unprocessable};
use super::profiles::by_username;
use super::{Account, Result, Signed, Viewer};
use crate::api::{AppState, Paging, PathId};
use crate::domain::favorites::FAVORITE;
use crate::domain::{tags, Id, Kind};
use crate::store::{Container, Order, Query};

/// Lists read at most this deep (`offset + limit`): the native lists' page size, and the most
/// a personal timeline or the global list holds.
pub const MAX_DEPTH: usize = 100;

/// `GET /api/conduit/api/tags`: the tags carried by at least one post, the newest used first.
pub async fn tags(State(s): State<AppState>) -> Result<Response> {
    let paging = Paging {
        limit: Paging::MAX_LIMIT,
        continuation: None,
    };
    let answer = crate::api::tags::list_tags(State(s.clone()), paging).await;
    let (_, page) = native(answer, "tags").await?;
    let names: Vec<Value> = page["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["tag"].as_str().map(Value::from))
        .collect();
    Ok(Json(json!({ "tags": names })).into_response())
}

/// The list parameters.
#[derive(Debug, Default, Deserialize)]
pub struct ListParams {
    tag: Option<String>,
    author: Option<String>,
    favorited: Option<String>,
    limit: Option<String>,
    offset: Option<String>,
}

/// `limit` (1 to 100, 20 when absent) and `offset` (0 or more).
fn window(p: &ListParams) -> Result<(usize, usize)> {
    let limit = match &p.limit {
        None => 20,
        Some(l) => l
            .parse::<usize>()
            .ok()
            .filter(|l| (1..=MAX_DEPTH).contains(l))
            .ok_or_else(|| unprocessable("limit", "must be a whole number from 1 to 100"))?,
    };
    let offset = match &p.offset {
        None => 0,
        Some(o) => o
            .parse::<usize>()
            .map_err(|_| unprocessable("offset", "must be a whole number, 0 or more"))?,
    };
    Ok((limit, offset))
}

/// Posts a native list answers, page after page, until `want` are read or it ends.
async fn read_list<F, Fut>(want: usize, mut page: F) -> Result<Vec<Shown>>
where
    F: FnMut(Paging) -> Fut,
    Fut: std::future::Future<Output = crate::error::ApiResult<Response>>,
{
    let mut out = Vec::new();
    let mut continuation = None;
    while out.len() < want {
        let paging = Paging {
            limit: (want - out.len()).min(MAX_DEPTH) as u32,
            continuation: continuation.take(),
        };
        let (_, v) = native(page(paging).await, "articles").await?;
        for item in v["items"].as_array().into_iter().flatten() {
            out.push(shown(item)?);
        }
        match v["continuationToken"].as_str() {
            Some(t) => continuation = Some(t.to_string()),
            None => break,
        }
    }
    Ok(out)
}

async fn count(s: &AppState, c: Container, q: &Query) -> Result<u64> {
    s.store
        .count(c, q)
        .await
        .map_err(|e| store_error(e, "articles"))
}

/// The page `[offset, offset + limit)` of `posts` as articles, with the count.
async fn list_answer(
    s: &AppState,
    viewer: Option<&Account>,
    posts: Vec<Shown>,
    offset: usize,
    limit: usize,
    total: u64,
) -> Result<Response> {
    let mut ctx = Context::new(s, viewer);
    let mut articles = Vec::new();
    for p in posts.iter().skip(offset).take(limit) {
        articles.push(ctx.article(p, false).await?);
    }
    Ok(Json(json!({ "articles": articles, "articlesCount": total })).into_response())
}

/// `GET /api/conduit/api/articles`: newest first, by `author`, `favorited` (a username) or
/// `tag`, or all of the newest posts.
pub async fn list(
    State(s): State<AppState>,
    Viewer(viewer): Viewer,
    QueryParams(p): QueryParams<ListParams>,
) -> Result<Response> {
    let (limit, offset) = window(&p)?;
    let want = (offset + limit).min(MAX_DEPTH);
    let empty = || Json(json!({ "articles": [], "articlesCount": 0 })).into_response();
    let (mut posts, total) = if let Some(author) = &p.author {
        let Some(user) = by_username(&*s.store, author).await? else {
            return Ok(empty());
        };
        let id = Id::parse("author", &user.user_id).map_err(invalid)?;
        let posts = read_list(want, |paging| {
            crate::api::users::list_user_posts(State(s.clone()), PathId(id.clone()), paging)
        })
        .await?;
        let q = Query::partition(id.as_str()).of_kind(Kind::Post);
        (posts, count(&s, Container::Users, &q).await?)
    } else if let Some(fan) = &p.favorited {
        let Some(user) = by_username(&*s.store, fan).await? else {
            return Ok(empty());
        };
        let q = Query::partition(user.user_id.as_str()).eq(Kind::FIELD, FAVORITE);
        let total = count(&s, Container::Users, &q).await?;
        let edges = s
            .store
            .query(
                Container::Users,
                &q.order_by_creation(Order::Desc).limit(want as u32),
            )
            .await
            .map_err(|e| store_error(e, "articles"))?;
        let mut posts = Vec::new();
        for edge in &edges.items {
            let Some(pid) = edge["postId"]
                .as_str()
                .and_then(|p| Id::parse("post", p).ok())
            else {
                continue;
            };
            match read_post(&s, &pid).await {
                Ok(post) => posts.push(post),
                // A post deleted since: its like went with it.
                Err(resp) if resp.status() == StatusCode::NOT_FOUND => {}
                Err(resp) => return Err(resp),
            }
        }
        (posts, total)
    } else if let Some(tag) = &p.tag {
        let Ok(tag) = tags::parse_tag("tag", tag) else {
            return Ok(empty());
        };
        let posts = read_list(want, |paging| {
            crate::api::tags::list_tag_posts(
                State(s.clone()),
                crate::api::tags::PathTag(tag.clone()),
                paging,
            )
        })
        .await?;
        let q = Query::partition(tags::partition(&tag));
        (posts, count(&s, Container::Feed, &q).await?)
    } else {
        let posts = read_list(want, |paging| {
            crate::api::feed::get_feed(
                State(s.clone()),
                crate::compression::TakesGzip(false),
                paging,
            )
        })
        .await?;
        let q = Query::partition(Kind::Post.as_str()).of_kind(Kind::Post);
        (posts, count(&s, Container::Feed, &q).await?)
    };
    // More than one filter: the first one's list, narrowed by the others.
    if p.author.is_some() || p.favorited.is_some() {
        if let Some(tag) = &p.tag {
            let tag = tag.to_lowercase();
            posts.retain(|post| post.tags.contains(&tag));
        }
    }
    if p.favorited.is_some() {
        if let Some(author) = &p.author {
            posts.retain(|post| post.user_username.eq_ignore_ascii_case(author));
        }
    }
    list_answer(&s, viewer.as_ref(), posts, offset, limit, total).await
}

/// `GET /api/conduit/api/articles/feed`: the newest articles of the authors the caller follows.
pub async fn feed(
    State(s): State<AppState>,
    Signed(account): Signed,
    QueryParams(p): QueryParams<ListParams>,
) -> Result<Response> {
    let (limit, offset) = window(&p)?;
    let me = account.user_id();
    let posts = read_list(MAX_DEPTH, |paging| {
        crate::api::timeline::get_timeline(State(s.clone()), PathId(me.clone()), paging)
    })
    .await?;
    let total = posts.len() as u64;
    list_answer(&s, Some(&account), posts, offset, limit, total).await
}
