//! Follows in the timeline lane: a follow brings the followee's newest posts into the
//! follower's timeline (or a merge marker, for a merged author); an unfollow takes them out.

use std::collections::BTreeMap;

use serde_json::Value;

use super::limit::{limit_state, LimitState};
use super::trim::trim;
use super::Batch;
use crate::domain::follows::{
    following_id, marker_id, Edge, FollowKind, MergeMarker, TimelineEntry, TimelineItem, REF_USER,
    TIMELINE, TIMELINE_KEEP, TIMELINE_SIZE,
};
use crate::domain::{Kind, Post};
use crate::projection::change::Change;
use crate::projection::engine::{
    apply_all, apply_one, delete_item, delete_matching, live_user, query_all, read_not_older,
};
use crate::projection::engine::{CONCURRENCY, PAGE};
use crate::projection::follows::newest_edge;
use crate::projection::write::Write;
use crate::store::{retry, Container, Order, Query, Store, StoreResult};

/// The follow `f` → `x` as it is now. Marked (or gone): `x`'s entries and marker leave `f`'s
/// timeline. Live with its mirror in place: `x`'s posts are brought in (or the marker written).
/// A live edge whose mirror is not there yet waits for the mirror's own change.
pub(super) async fn follow_changed(
    store: &dyn Store,
    changes: &[&Change],
    f: &str,
    x: &str,
    from_mirror: bool,
    batch: &mut Batch,
) -> StoreResult<usize> {
    let id = following_id(x);
    let delivered = if from_mirror {
        None
    } else {
        newest_edge(changes, &id, f)
    };
    let edge = read_not_older(store, Container::Users, f, &id, delivered).await?;
    let places = batch.places(store).await?;
    let live =
        |item: Option<&Value>, kind| item.and_then(Edge::read).is_some_and(|e| e.is_live(kind));
    if !live(edge.as_ref(), FollowKind::Following) {
        let q = Query::partition(f).eq("type", TIMELINE).eq(REF_USER, x);
        let mut removed = 0;
        for &c in places {
            removed += delete_matching(store, c, q.clone(), usize::MAX).await?.0;
        }
        return Ok(removed);
    }
    let mirror_id = crate::domain::follows::follower_id(f);
    let mirror = retry(|| store.read(Container::Users, x, &mirror_id)).await?;
    if !live(mirror.as_ref(), FollowKind::Follower) {
        return Ok(0);
    }
    let (Some(followee), Some(_)) = (live_user(store, x).await?, live_user(store, f).await?) else {
        return Ok(0);
    };
    let state = limit_state(store, x, Some(&followee)).await?;
    copy_or_mark(store, places, f, x, &followee, &state).await
}

/// Bring `x`'s posts into `f`'s timeline: a marker when new followers of `x` get one, else the
/// posts copied (and any marker removed).
pub(super) async fn copy_or_mark(
    store: &dyn Store,
    places: &[Container],
    f: &str,
    x: &str,
    followee: &Value,
    state: &LimitState,
) -> StoreResult<usize> {
    if state.marks() {
        let marker = Write::upsert(Container::Timelines, f, MergeMarker::new(f, x).to_item());
        apply_one(store, &marker).await?;
        return Ok(1);
    }
    let name = &crate::projection::engine::as_user(followee)?.username;
    backfill(store, places, f, x, name).await
}

/// Make `f`'s timeline hold the [`TIMELINE_SIZE`] newest posts of `x` (called `name` now), from
/// the short-form copies in `x`'s partition, and no marker for `x` (in any of `places`, see
/// `upgrade::timelines::places`): only the entries missing or differing are written, so a follow
/// projected again (its edge, then its mirror, a redelivered batch) costs two queries and no
/// write.
async fn backfill(
    store: &dyn Store,
    places: &[Container],
    f: &str,
    x: &str,
    name: &str,
) -> StoreResult<usize> {
    let q = Query::partition(x)
        .of_kind(Kind::Post)
        .live()
        .order_by_creation(Order::Desc)
        .limit(TIMELINE_SIZE as u32);
    let page = retry(|| store.query(Container::Users, &q)).await?;
    let held_q = Query::partition(f)
        .eq("type", TIMELINE)
        .eq(REF_USER, x)
        .limit(TIMELINE_KEEP as u32 + PAGE);
    let held = query_all(store, Container::Timelines, held_q).await?;
    let mut marked = false;
    let mut entries: BTreeMap<String, TimelineEntry> = BTreeMap::new();
    for i in &held {
        match TimelineItem::read(i) {
            Ok(TimelineItem::Entry(e)) => {
                entries.insert(e.post.post_id.clone(), e);
            }
            Ok(TimelineItem::Marker(_)) => marked = true,
            Err(_) => {}
        }
    }
    let mut written = 0;
    for &c in places {
        // Where the move has yet to look, the marker may be there unseen.
        if c != Container::Timelines || marked {
            written += delete_item(store, c, f, &marker_id(x)).await?;
        }
    }
    let writes: Vec<Write> = page
        .items
        .into_iter()
        .filter_map(|item| serde_json::from_value::<Post>(item).ok())
        .filter(|p| p.user_id == x)
        .filter_map(|mut p| {
            p.user_username = name.to_string();
            let e = TimelineEntry::new(f, &p);
            let same = entries.get(&e.post.post_id) == Some(&e);
            (!same).then(|| Write::upsert(Container::Timelines, f, e.to_item()))
        })
        .collect();
    apply_all(store, &writes, CONCURRENCY).await?;
    written += writes.len();
    // Up to a hundred entries at once: the timeline is trimmed now rather than by later copies.
    if !writes.is_empty() {
        written += trim(store, f).await?;
    }
    Ok(written)
}
