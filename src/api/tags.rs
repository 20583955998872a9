//! A tag's posts (`GET /api/tags/{tag}/posts`) and the most used tags (`GET /api/tags`): each
//! one query of one partition of `feed`, where the tags projection
//! (`crate::projection::tags`) keeps a copy of each tagged post per tag and a count per tag.

use axum::extract::{FromRequestParts, Path, State};
use axum::http::request::Parts;
use axum::response::Response;

use super::answer::page_response;
use super::views::{PageView, PostSummaryPage, PostSummaryView, TagPage, TagView, View};
use super::{AppState, Paging};
use crate::domain::tags::{self, TagCount, COUNTS};
use crate::error::{ApiError, ApiResult, Place};
use crate::projection::tags::post_of;
use crate::store::{Container, Order, Query};

/// The tag in the path, checked and lowercased as a post's tags are (a 400 naming `tag`).
pub struct PathTag(pub String);

impl<S: Send + Sync> FromRequestParts<S> for PathTag {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path(raw) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|_| ApiError::BadRequest("the path's parameters could not be read".into()))?;
        tags::parse_tag("tag", &raw)
            .map(PathTag)
            .map_err(|e| ApiError::invalid(Place::Path, "tag", e.detail))
    }
}

/// `GET /api/tags/{tag}/posts`: one query of the tag's partition of `feed`, newest first, then
/// the counts of each post shown, read from the post (at most `limit` point reads).
#[utoipa::path(
    get,
    path = "/api/tags/{tag}/posts",
    tag = "posts",
    summary = "A tag's posts, newest first, in short form",
    description = "The posts carrying the tag, kept by the change feed: a new, edited or deleted post joins or leaves the list a moment after the request. At most 1 + `limit` store operations a page, whatever the number of posts: one query of one partition, and at most one point read per post shown for its `commentCount` and `likeCount`, which are read from the post itself when shown (from a per-process snapshot while it holds, as on the timeline); a post deleted meanwhile is left out, so a page may hold fewer than `limit` posts and still have a next page. A tag in another case reads as lowercase.",
    params(
        ("tag" = String, Path, description = "The tag: 1 to 32 letters and digits of one script, `-` or `_`", min_length = 1, max_length = 32),
        super::schema::PagingParams,
    ),
    responses(
        (status = 200, description = "One page of the tag's posts (none: an empty page)", body = PostSummaryPage,
            headers(("Cache-Control" = String, description = "`no-cache`"))),
        (status = 400, description = "`tag` is not a tag; or `limit` or `continuationToken` is not valid", body = crate::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn list_tag_posts(
    State(s): State<AppState>,
    PathTag(tag): PathTag,
    paging: Paging,
) -> ApiResult<Response> {
    let q = Query::partition(tags::partition(&tag))
        .order_by_creation(Order::Desc)
        .limit(paging.limit)
        .continuation(paging.continuation);
    let page = s.store.query(Container::Feed, &q).await?;
    let posts = page
        .items
        .iter()
        .map(|copy| {
            post_of(copy)
                .map(PostSummaryView::from_domain)
                .ok_or_else(|| ApiError::internal("a stored tag copy does not read as a post"))
        })
        .collect::<ApiResult<Vec<_>>>()?;
    // A copy holds what changes rarely: the counts are the post's own, read when shown.
    let items = s.counts.shown(&*s.store, posts).await?;
    Ok(page_response(&PostSummaryPage::new(
        items,
        page.continuation,
    )))
}

/// `GET /api/tags`: one query of the counts' partition of `feed`, the most used first.
#[utoipa::path(
    get,
    path = "/api/tags",
    tag = "posts",
    summary = "The most used tags with their numbers of posts",
    description = "The tags carried by at least one post, the most used first (kept by the change feed: a moment after a post is created, edited or deleted). One query of one partition per page.",
    params(super::schema::PagingParams),
    responses(
        (status = 200, description = "One page of tags", body = TagPage,
            headers(("Cache-Control" = String, description = "`no-cache`"))),
        (status = 400, description = "`limit` or `continuationToken` is not valid", body = crate::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn list_tags(State(s): State<AppState>, paging: Paging) -> ApiResult<Response> {
    let q = Query::partition(COUNTS)
        .ne("postCount", 0)
        .order_by_creation(Order::Desc)
        .limit(paging.limit)
        .continuation(paging.continuation);
    let page = s.store.query(Container::Feed, &q).await?;
    let items = page
        .items
        .iter()
        .map(|item| match TagCount::read(item) {
            Ok(c) => Ok(TagView {
                tag: c.tag,
                post_count: c.post_count,
            }),
            Err(_) => Err(ApiError::internal(
                "a stored tag count does not read as one",
            )),
        })
        .collect::<ApiResult<Vec<_>>>()?;
    Ok(page_response(&TagPage::new(items, page.continuation)))
}
