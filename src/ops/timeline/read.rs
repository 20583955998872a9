//! What the timeline check and its repair read: a user's partition a page at a time, a live
//! user, their edges, their timeline's items, an author's newest posts.

use std::collections::BTreeSet;

use serde::Deserialize;
use serde_json::Value;

use crate::domain::follows::{Edge, FollowKind, TimelineItem, TIMELINE, TIMELINE_SIZE};
use crate::domain::{is_live, Kind, Post, User};
use crate::ops::TRAVERSAL_PAGE;
use crate::projection::upgrade;
use crate::store::{retry, Container, Order, Query, Store, StoreResult};

/// Every live item of `type` `kind` in `user`'s partition of `c`.
pub(super) async fn all_of(
    store: &dyn Store,
    c: Container,
    user: &str,
    kind: &str,
) -> StoreResult<Vec<Value>> {
    let q = Query::partition(user)
        .eq("type", kind)
        .live()
        .limit(TRAVERSAL_PAGE);
    crate::projection::engine::query_all(store, c, q).await
}

/// What any stored item carries: its id.
#[derive(Deserialize)]
pub(super) struct Id {
    pub(super) id: String,
}

/// A live user: the item as stored (what the timeline lane reads its side of the limit from,
/// and replays) and as read.
pub(super) struct Live {
    pub(super) item: Value,
    pub(super) user: User,
}

impl Live {
    pub(super) fn read(item: &Value) -> Option<Live> {
        let user = User::deserialize(item).ok()?;
        Some(Live {
            item: item.clone(),
            user,
        })
    }
}

pub(super) async fn live_user(store: &dyn Store, id: &str) -> StoreResult<Option<Live>> {
    let user = retry(|| store.read(Container::Users, id, id)).await?;
    Ok(user
        .filter(|u| is_live(u, Kind::User))
        .as_ref()
        .and_then(Live::read))
}

/// Every live edge of `kind` in `user`'s partition, each as read and as stored (what a replay
/// hands the projections).
pub(super) async fn edges_of(
    store: &dyn Store,
    user: &str,
    kind: FollowKind,
) -> StoreResult<Vec<(Edge, Value)>> {
    let items = all_of(store, Container::Users, user, kind.as_str()).await?;
    Ok(items
        .into_iter()
        .filter_map(|i| Some((Edge::read(&i).filter(|e| e.is_live(kind))?, i)))
        .collect())
}

/// Whether the edge `id` in `owner`'s partition is a live `following` edge.
pub(super) async fn follows(store: &dyn Store, owner: &str, id: &str) -> StoreResult<bool> {
    let edge = retry(|| store.read(Container::Users, owner, id)).await?;
    Ok(edge
        .and_then(|e| Edge::read(&e))
        .is_some_and(|e| e.is_live(FollowKind::Following)))
}

/// `user`'s timeline items, each with the container it is in and as read (`Err`: what it does
/// not read as): those in `timelines`, and while the move is not done (`moving`) those in
/// `users` that `timelines` does not hold too (`upgrade::timelines::items_left`).
pub(super) async fn timeline_items(
    store: &dyn Store,
    user: &str,
    moving: bool,
) -> StoreResult<Vec<(Container, String, Result<TimelineItem, String>)>> {
    let read = |c: Container, items: Vec<Value>| {
        items.into_iter().filter_map(move |i| {
            let id = Id::deserialize(&i).ok()?.id;
            Some((c, id, TimelineItem::read(&i)))
        })
    };
    let mut items: Vec<_> = read(
        Container::Timelines,
        all_of(store, Container::Timelines, user, TIMELINE).await?,
    )
    .collect();
    let old = upgrade::timelines::items_left(store, moving, user, TRAVERSAL_PAGE).await?;
    let held: BTreeSet<String> = items.iter().map(|(_, id, _)| id.clone()).collect();
    items.extend(read(Container::Users, old).filter(|(_, id, _)| !held.contains(id)));
    Ok(items)
}

/// The newest live posts of `author` (their copies in `users`, at most [`TIMELINE_SIZE`]), by
/// the name `name`.
pub(super) async fn newest_posts(
    store: &dyn Store,
    author: &str,
    name: &str,
) -> StoreResult<Vec<Post>> {
    let q = Query::partition(author)
        .of_kind(Kind::Post)
        .live()
        .order_by_creation(Order::Desc)
        .limit(TIMELINE_SIZE as u32);
    let copies = retry(|| store.query(Container::Users, &q)).await?;
    Ok(copies
        .items
        .iter()
        .filter_map(|c| Post::deserialize(c).ok())
        .map(|mut p| {
            p.user_username = name.to_string();
            p
        })
        .collect())
}
