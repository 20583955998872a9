//! The personal timeline's read (docs/timeline.md): the entries and merge markers the change
//! feed keeps in `timelines` (`crate::projection::timeline`), the merged authors' newest posts
//! in the shared partition, and the posts' counts.

use axum::extract::State;
use axum::response::Response;
use futures::TryFutureExt;
use serde_json::Value;

use super::answer::page_response;
use super::mutes::{muted_by, Reader};
use super::schema::PagingParams;
use super::views::{PageView, PostSummaryPage, PostSummaryView};
use super::{AppState, Paging, PathId};
use crate::domain::follows::{is_marker, FollowKind, TimelineItem, MAX_FOLLOWING, TIMELINE_SIZE};
use crate::domain::Kind;
use crate::error::{ApiError, ApiResult};
use crate::projection::{over_limit, upgrade};
use crate::store::{Container, Order, Query};

/// `GET /api/users/{userId}/timeline`: at most 3 + `limit` store operations, whoever the user
/// follows. One query in the user's partition reads every merge marker (at most
/// [`MAX_FOLLOWING`]; they sort before every entry) and the newest entries; if it found markers,
/// one query of the merged authors' shared partition reads the newest posts of all of them at
/// once; the two lists, each at most `served + limit` long, are merged newest first. Then each
/// post shown is hydrated with its counts, read from the post itself (one point read, or none
/// while the process's snapshot of its counts holds); a post found deleted is left out of the
/// page. The continuation token is the number of posts earlier pages passed over; each page
/// reads the newest `served + limit` again and skips those, so a page costs the same however
/// deep. While timeline items may still be where an earlier release kept them
/// (`upgrade::timelines::Place`), the first query is asked of `users` too (one more operation),
/// and of an item in both places the one in `timelines` is taken. The reader's mute list is read alongside the first query (one
/// point read), and the muted users' entries and markers are passed over.
#[utoipa::path(
    get,
    path = "/api/users/{userId}/timeline",
    operation_id = "get_timeline",
    tag = "follows",
    summary = "The newest posts of the users a user follows (at most 100), newest first, in short form",
    description = "At most 3 + `limit` store operations whoever the user follows: a point read of the reader's mute list (the signed-in caller's, or that of the user `viewerId` names; none for an anonymous read), whose users' posts are left out, alongside one query in the user's partition (kept by the change feed), one query of the shared partition holding the newest posts of the authors over the fan-out limit (only when the user follows such an author), and at most one point read per post shown for its `commentCount` and `likeCount`, which are read from the post itself when shown (from a per-process snapshot while it holds: until the next write to `posts` on the embedded store, at most `BLOG_FEED_CACHE_MS` on Cosmos DB). A post deleted meanwhile is left out, so a page may hold fewer than `limit` posts and still have a next page.",
    params(("userId" = String, Path, description = "The user's id"), ("viewerId" = Option<String>, Query, description = "Read as this user, without the posts of whom they muted: the caller's own user (by default, the signed-in caller's)", example = "a7e2d9c4-1b3f-4e6a-8d5c-9f0e2b7a4c13"), PagingParams),
    responses(
        (status = 200, description = "One page of the timeline", body = PostSummaryPage,
            headers(("Cache-Control" = String, description = "`no-cache`"))),
        (status = 401, description = "`viewerId` without a valid identity (authentication is on)", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 403, description = "`viewerId` is not the signed-in caller's user", body = crate::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn read_timeline(
    State(s): State<AppState>,
    PathId(user): PathId,
    Reader(reader): Reader,
    paging: Paging,
) -> ApiResult<Response> {
    let served = match paging.continuation.as_deref() {
        None => 0,
        Some(token) => token
            .parse::<usize>()
            .ok()
            .filter(|n| (1..TIMELINE_SIZE).contains(n))
            .ok_or_else(|| {
                ApiError::invalid(
                    crate::error::Place::Query,
                    "continuationToken",
                    "`continuationToken` is not valid",
                )
            })?,
    };
    let want = (served + paging.limit as usize).min(TIMELINE_SIZE);
    let q = Query::partition(user.as_str())
        .eq(Kind::FIELD, FollowKind::Timeline.as_str())
        .order_by_creation(Order::Desc)
        .limit((MAX_FOLLOWING + want) as u32);
    let page = s.store.query(Container::Timelines, &q).err_into();
    let (mut page, muted) = futures::try_join!(page, muted_by(&*s.store, reader.as_ref()))?;
    upgrade::timelines::Place::add_items_left(&s.timelines_left, &s.store, &q, &mut page).await?;
    let mut markers = Vec::new();
    let mut entries = Vec::new();
    let mut more = page.continuation.is_some();
    for item in &page.items {
        // The reader's muted users are passed over: no merged read, no entry counted.
        if is_marker(item) {
            markers.extend(Some(marker_author(item)?).filter(|a| !muted.contains(a)));
        } else if entries.len() < want {
            let entry = PostSummaryView::of_timeline_item(item)?;
            entries.extend(entry.filter(|p| !muted.contains(&p.user_id)));
        } else {
            more = true;
        }
    }
    if !markers.is_empty() {
        let q = over_limit::of_authors(markers, want as u32);
        let page = s.store.query(Container::Feed, &q).await?;
        more = more || page.continuation.is_some();
        let merged = page
            .items
            .iter()
            .map(PostSummaryView::of_merged)
            .collect::<ApiResult<Vec<_>>>()?;
        entries = newest(entries, merged, want, &mut more);
    }
    let shown: Vec<PostSummaryView> = entries.into_iter().skip(served).collect();
    let passed = served + shown.len();
    // Gone or marked deleted: its entries are on their way out.
    let items = s.counts.shown(&*s.store, shown).await?;
    let continuation =
        (more && passed == want && passed < TIMELINE_SIZE).then(|| passed.to_string());
    Ok(page_response(&PostSummaryPage::new(items, continuation)))
}

/// The timeline of `user` as its owner reads it (the RealWorld feed, whose reader is its owner).
pub async fn get_timeline(s: State<AppState>, user: PathId, paging: Paging) -> ApiResult<Response> {
    read_timeline(s, PathId(user.0.clone()), Reader(Some(user.0)), paging).await
}

/// The author a merge marker stands for.
fn marker_author(item: &Value) -> ApiResult<String> {
    match TimelineItem::read(item) {
        Ok(TimelineItem::Marker(m)) => Ok(m.ref_user_id),
        _ => Err(ApiError::internal(
            "a stored merge marker does not read as one",
        )),
    }
}

/// The `want` newest of two lists, each newest first, each post once (a merged author's posts
/// copied before they were merged may be in both); `more` is set when some were left over.
fn newest(
    a: Vec<PostSummaryView>,
    b: Vec<PostSummaryView>,
    want: usize,
    more: &mut bool,
) -> Vec<PostSummaryView> {
    let mut all = a;
    all.extend(b);
    all.sort_by(|x, y| (&y.creation_date, &y.id).cmp(&(&x.creation_date, &x.id)));
    let mut seen = std::collections::HashSet::new();
    all.retain(|p| seen.insert(p.post_id.clone()));
    if all.len() > want {
        *more = true;
        all.truncate(want);
    }
    all
}
