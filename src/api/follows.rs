//! Follows and the personal timeline (docs/timeline.md): the edges in `users`, the timeline in
//! `timelines`. The edge is written by the request, its mirror, the counters and the timeline
//! entries by the change feed (`crate::projection::timeline`).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::Value;

use super::schema::PagingParams;
use super::views::{PageView, PostSummaryPage, PostSummaryView, UserPage, UserView};
use super::{page_response, AppState, Paging, PathId, PathIds};
use crate::auth::Caller;
use crate::domain::follows::{
    edge_tombstone_ops, following_id, is_marker, Edge, FollowKind, TimelineItem, MAX_FOLLOWING,
    TIMELINE_SIZE,
};
use crate::domain::{is_deleted, is_live, now, Id, Kind, User};
use crate::error::Problem;
use crate::error::{ApiError, ApiResult};
use crate::projection::merged;
use crate::store::{timelines_moved, Container, Order, Query, Store, StoreError};

/// How often a follow or unfollow is retried when the edge changed between its read and write.
const ATTEMPTS: usize = 5;

/// 403 unless the caller may act as `user` (under `BLOG_AUTH=none` the path names the caller).
fn acts_as(caller: &Caller, user: &Id) -> ApiResult<()> {
    caller.may_act_for(&[user.as_str()], || {
        format!("only user `{user}` may change whom they follow")
    })
}

async fn live_user(store: &dyn Store, id: &Id) -> ApiResult<User> {
    let user = store
        .read(Container::Users, id.as_str(), id.as_str())
        .await?
        .filter(|u| is_live(u, Kind::User))
        .ok_or_else(|| ApiError::not_found("user", id.as_str()))?;
    User::deserialize(&user)
        .map_err(|e| ApiError::internal(format!("a stored user does not read as one: {e}")))
}

/// Whether a stored item is a live edge of `kind`.
fn is_live_edge(item: &Value, kind: FollowKind) -> bool {
    Edge::read(item).is_some_and(|e| e.is_live(kind))
}

/// The query of `user`'s live items of `kind`.
fn of_kind(user: &Id, kind: FollowKind) -> Query {
    Query::partition(user.as_str())
        .eq(Kind::FIELD, kind.as_str())
        .live()
}

/// `PUT /api/users/{userId}/following/{followeeId}`: reads both users, then creates the edge
/// (or revives its tombstone). Idempotent.
#[utoipa::path(
    put,
    path = "/api/users/{userId}/following/{followeeId}",
    tag = "follows",
    summary = "Follow a user",
    description = "Idempotent: 204 whether or not the user followed them already. A user may follow at most 1,000 users: a new follow beyond that answers 409 and writes nothing. The change feed then copies the followee's newest posts into the follower's timeline and recounts `followerCount` and `followingCount`.",
    params(
        ("userId" = String, Path, description = "Who follows: the caller's own user"),
        ("followeeId" = String, Path, description = "Whom they follow"),
    ),
    responses(
        (status = 204, description = "The user follows the followee"),
        (status = 400, description = "A user cannot follow themselves", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "The user is not the signed-in caller's", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such user or followee", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The user follows 1,000 users already (the most one may follow), or the follow kept changing meanwhile (retry)", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn follow(
    State(s): State<AppState>,
    caller: Caller,
    PathIds(user, followee): PathIds,
) -> ApiResult<Response> {
    acts_as(&caller, &user)?;
    if user == followee {
        return Err(ApiError::invalid(
            crate::error::Place::Path,
            "followeeId",
            "`followeeId` must be another user: a user cannot follow themselves",
        ));
    }
    let store = &*s.store;
    let follows = of_kind(&user, FollowKind::Following);
    let (_, target, followed) = futures::try_join!(
        live_user(store, &user),
        live_user(store, &followee),
        async { Ok(store.count(Container::Users, &follows).await?) },
    )?;
    let item = Edge::new(
        FollowKind::Following,
        user.as_str(),
        followee.as_str(),
        &target.username,
        &now(),
    )
    .to_item();
    let id = following_id(followee.as_str());
    if followed >= MAX_FOLLOWING as u64 {
        // Only a follow already made may be repeated.
        let existing = store.read(Container::Users, user.as_str(), &id).await?;
        if existing.is_some_and(|e| is_live_edge(&e, FollowKind::Following)) {
            return Ok(StatusCode::NO_CONTENT.into_response());
        }
        return Err(ApiError::Conflict(format!(
            "user `{user}` follows {followed} users, the most one may follow ({MAX_FOLLOWING}); unfollow someone first"
        )));
    }
    for _ in 0..ATTEMPTS {
        match store
            .create(Container::Users, user.as_str(), item.clone())
            .await
        {
            Ok(_) => return Ok(StatusCode::NO_CONTENT.into_response()),
            Err(StoreError::Conflict) => {}
            Err(e) => return Err(e.into()),
        }
        // Followed before: nothing to do, unless that follow was taken back.
        let Some(existing) = store.read(Container::Users, user.as_str(), &id).await? else {
            continue;
        };
        if !is_deleted(&existing) {
            return Ok(StatusCode::NO_CONTENT.into_response());
        }
        let etag = existing.get("_etag").and_then(Value::as_str);
        match store
            .replace(Container::Users, user.as_str(), &id, item.clone(), etag)
            .await
        {
            Ok(_) => return Ok(StatusCode::NO_CONTENT.into_response()),
            Err(StoreError::PreconditionFailed | StoreError::NotFound) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(ApiError::Conflict(format!(
        "the follow of `{followee}` kept changing; retry"
    )))
}

/// `GET /api/users/{userId}/following/{followeeId}`: whether the user follows the followee, in
/// one point read (the edge's id is derived from the followee): the followee as the user's
/// following list shows them, or 404.
#[utoipa::path(
    get,
    path = "/api/users/{userId}/following/{followeeId}",
    tag = "follows",
    summary = "Read a user's follow of another (does that user follow them?)",
    description = "One point read: the follow's id is derived from the followee. 404 when the user does not follow them, or there is no such user.",
    params(
        ("userId" = String, Path, description = "Who may follow"),
        ("followeeId" = String, Path, description = "Whom they may follow"),
    ),
    responses(
        (status = 200, description = "The user follows the followee: the followee, as the user's following list shows them", body = UserView,
            headers(("Cache-Control" = String, description = "`no-cache`"))),
        (status = 404, description = "The user does not follow the followee (or there is no such user)", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn get_following(
    State(s): State<AppState>,
    PathIds(user, followee): PathIds,
) -> ApiResult<Response> {
    let edge = s
        .store
        .read(
            Container::Users,
            user.as_str(),
            &following_id(followee.as_str()),
        )
        .await?
        .filter(|e| is_live_edge(e, FollowKind::Following))
        .ok_or_else(|| ApiError::NotFound(format!("user `{user}` does not follow `{followee}`")))?;
    Ok(super::conditional::no_cache(
        axum::Json(UserView::of_edge(&edge)?).into_response(),
    ))
}

/// `DELETE /api/users/{userId}/following/{followeeId}`: marks the edge deleted (the change feed
/// carries the mark to the mirror, the timeline and the counters). Idempotent.
#[utoipa::path(
    delete,
    path = "/api/users/{userId}/following/{followeeId}",
    tag = "follows",
    summary = "Unfollow a user",
    description = "Idempotent: 204 whether or not the user followed them. The change feed then removes the followee's posts from the follower's timeline and recounts.",
    params(
        ("userId" = String, Path, description = "Who unfollows: the caller's own user"),
        ("followeeId" = String, Path, description = "Whom they stop following"),
    ),
    responses(
        (status = 204, description = "The user does not follow the followee (any more)"),
        (status = 403, description = "The user is not the signed-in caller's", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The follow kept changing meanwhile; retry", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn unfollow(
    State(s): State<AppState>,
    caller: Caller,
    PathIds(user, followee): PathIds,
) -> ApiResult<Response> {
    acts_as(&caller, &user)?;
    let id = following_id(followee.as_str());
    for _ in 0..ATTEMPTS {
        let Some(existing) = s.store.read(Container::Users, user.as_str(), &id).await? else {
            return Ok(StatusCode::NO_CONTENT.into_response());
        };
        if !is_live_edge(&existing, FollowKind::Following) {
            return Ok(StatusCode::NO_CONTENT.into_response());
        }
        let etag = existing.get("_etag").and_then(Value::as_str);
        match s
            .store
            .patch(
                Container::Users,
                user.as_str(),
                &id,
                &edge_tombstone_ops(),
                etag,
            )
            .await
        {
            Ok(_) | Err(StoreError::NotFound) => return Ok(StatusCode::NO_CONTENT.into_response()),
            Err(StoreError::PreconditionFailed) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(ApiError::Conflict(format!(
        "the follow of `{followee}` kept changing; retry"
    )))
}

/// One page of `user`'s edges of `kind`, newest first, as users: one query in their partition.
async fn edges(s: &AppState, user: &Id, kind: FollowKind, paging: Paging) -> ApiResult<Response> {
    let q = of_kind(user, kind)
        .order_by_creation(Order::Desc)
        .limit(paging.limit)
        .continuation(paging.continuation);
    let page = s.store.query(Container::Users, &q).await?;
    let users = page
        .items
        .iter()
        .map(UserView::of_edge)
        .collect::<ApiResult<_>>()?;
    Ok(page_response(&UserPage::new(users, page.continuation)))
}

/// `GET /api/users/{userId}/following`: one query in the user's partition.
#[utoipa::path(
    get,
    path = "/api/users/{userId}/following",
    tag = "follows",
    summary = "List whom a user follows, newest follow first",
    description = "One query in the user's partition: an unknown user follows nobody.",
    params(("userId" = String, Path, description = "The user's id"), PagingParams),
    responses(
        (status = 200, description = "One page of the users they follow", body = UserPage,
            headers(("Cache-Control" = String, description = "`no-cache`"))),
    )
)]
pub async fn list_following(
    State(s): State<AppState>,
    PathId(user): PathId,
    paging: Paging,
) -> ApiResult<Response> {
    edges(&s, &user, FollowKind::Following, paging).await
}

/// `GET /api/users/{userId}/followers`: one query in the user's partition (the mirrors).
#[utoipa::path(
    get,
    path = "/api/users/{userId}/followers",
    tag = "follows",
    summary = "List a user's followers, newest follow first",
    description = "One query in the user's partition, kept by the change feed: a follow shows here a moment after it is made.",
    params(("userId" = String, Path, description = "The user's id"), PagingParams),
    responses(
        (status = 200, description = "One page of the users following them", body = UserPage,
            headers(("Cache-Control" = String, description = "`no-cache`"))),
    )
)]
pub async fn list_followers(
    State(s): State<AppState>,
    PathId(user): PathId,
    paging: Paging,
) -> ApiResult<Response> {
    edges(&s, &user, FollowKind::Follower, paging).await
}

/// How often a process not yet sure that timeline items have left `users` asks again.
const RECHECK_MOVE: std::time::Duration = std::time::Duration::from_secs(1);

/// Whether timeline items may still be in `users`, where an earlier release kept them, until
/// the timeline lane has moved them (`crate::projection::relocation`). The process asks the
/// store's layout record at its first timeline read, and again at most every [`RECHECK_MOVE`]
/// while the move is not done; once it is, never again. The asking runs in a task of its own:
/// process bookkeeping, one point read per process once the move is done, not a request's
/// operation (the first timeline read waits for the first answer; later ones go on with what is
/// known, and look in `users` too until the move is known done).
#[derive(Debug, Default)]
pub(crate) struct TimelinePlace {
    moved: std::sync::atomic::AtomicBool,
    /// When the record was last asked for.
    asked: std::sync::Mutex<Option<std::time::Instant>>,
    first: tokio::sync::OnceCell<()>,
}

impl TimelinePlace {
    async fn moving(self: &std::sync::Arc<Self>, store: &std::sync::Arc<dyn Store>) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        if self.moved.load(Relaxed) {
            return false;
        }
        let ask = || {
            let (place, store) = (self.clone(), store.clone());
            *self.asked.lock().unwrap_or_else(|e| e.into_inner()) = Some(std::time::Instant::now());
            tokio::spawn(async move {
                let layout = store
                    .read(
                        Container::Leases,
                        crate::store::LAYOUT_ID,
                        crate::store::LAYOUT_ID,
                    )
                    .await;
                // Not known (the store failed to answer): still looked for in both places.
                if layout.is_ok_and(|l| timelines_moved(l.as_ref())) {
                    place.moved.store(true, Relaxed);
                }
            })
        };
        if !self.first.initialized() {
            self.first
                .get_or_init(|| async {
                    let _ = ask().await;
                })
                .await;
        } else {
            let due = self
                .asked
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .is_none_or(|t| t.elapsed() >= RECHECK_MOVE);
            if due {
                drop(ask());
            }
        }
        !self.moved.load(Relaxed)
    }
}

/// `GET /api/users/{userId}/timeline`: at most 2 + `limit` store operations, whoever the user
/// follows. One query in the user's partition reads every merge marker (at most
/// [`MAX_FOLLOWING`]; they sort before every entry) and the newest entries; if it found markers,
/// one query of the merged authors' shared partition reads the newest posts of all of them at
/// once; the two lists, each at most `served + limit` long, are merged newest first. Then each
/// post shown is hydrated with its counts, read from the post itself (one point read, or none
/// while the process's snapshot of its counts holds); a post found deleted is left out of the
/// page. The continuation token is the number of posts earlier pages passed over; each page
/// reads the newest `served + limit` again and skips those, so a page costs the same however
/// deep. While timeline items may still be where an earlier release kept them ([`TimelinePlace`]),
/// the first query is asked of `users` too (one more operation), and of an item in both places
/// the one in `timelines` is taken.
#[utoipa::path(
    get,
    path = "/api/users/{userId}/timeline",
    tag = "follows",
    summary = "The newest posts of the users a user follows (at most 100), newest first, in short form",
    description = "At most 2 + `limit` store operations whoever the user follows: one query in the user's partition (kept by the change feed), one query of the shared partition holding the newest posts of the authors over the fan-out limit (only when the user follows such an author), and at most one point read per post shown for its `commentCount` and `likeCount`, which are read from the post itself when shown (from a per-process snapshot while it holds: until the next write to `posts` on the embedded store, at most `BLOG_FEED_CACHE_MS` on Cosmos DB). A post deleted meanwhile is left out, so a page may hold fewer than `limit` posts and still have a next page.",
    params(("userId" = String, Path, description = "The user's id"), PagingParams),
    responses(
        (status = 200, description = "One page of the timeline", body = PostSummaryPage,
            headers(("Cache-Control" = String, description = "`no-cache`"))),
    )
)]
pub async fn get_timeline(
    State(s): State<AppState>,
    PathId(user): PathId,
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
    let mut page = s.store.query(Container::Timelines, &q).await?;
    // Read once: each item's place in the timeline (id and date), then what it is.
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Placed {
        id: String,
        #[serde(default)]
        creation_date: String,
    }
    let placed = |i: &Value| Placed::deserialize(i).map(|p| (p.creation_date, p.id)).ok();
    if s.timelines.moving(&s.store).await {
        let old = s.store.query(Container::Users, &q).await?;
        let held: std::collections::HashSet<String> = page
            .items
            .iter()
            .filter_map(|i| placed(i).map(|(_, id)| id))
            .collect();
        page.items.extend(
            old.items
                .into_iter()
                .filter(|i| placed(i).is_none_or(|(_, id)| !held.contains(&id))),
        );
        page.items
            .sort_by_cached_key(|i| std::cmp::Reverse(placed(i).unwrap_or_default()));
        page.continuation = page.continuation.or(old.continuation);
    }
    let mut markers = Vec::new();
    let mut entries = Vec::new();
    let mut more = page.continuation.is_some();
    for item in &page.items {
        if is_marker(item) {
            markers.push(marker_author(item)?);
        } else if entries.len() < want {
            entries.extend(PostSummaryView::of_timeline_item(item)?);
        } else {
            more = true;
        }
    }
    if !markers.is_empty() {
        let q = merged::of_authors(markers, want as u32);
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
    let ids: Vec<String> = shown.iter().map(|p| p.post_id.clone()).collect();
    let counts = s.counts.counts(&*s.store, &ids).await?;
    let items: Vec<PostSummaryView> = shown
        .into_iter()
        .zip(counts)
        .filter_map(|(mut p, counts)| {
            // Gone or marked deleted: its entries are on their way out.
            let c = counts?;
            p.comment_count = c.comment_count;
            p.like_count = c.like_count;
            Some(p)
        })
        .collect();
    let continuation =
        (more && passed == want && passed < TIMELINE_SIZE).then(|| passed.to_string());
    Ok(page_response(&PostSummaryPage::new(items, continuation)))
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
