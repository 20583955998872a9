//! One user's check (`super` states what is checked): their edges, mirrors, counters, side of
//! the fan-out limit and timeline, and a merged author's copies in the shared partition.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

use super::read::{edges_of, follows, live_user, newest_posts, timeline_items, Id, Live};
use super::Check;
use crate::domain::follows::{
    follower_id, following_id, marker_id, Edge, FollowKind, MergeMarker, MergedPost, TimelineEntry,
    TimelineItem, TIMELINE_SIZE,
};
use crate::domain::{is_deleted, Post};
use crate::projection;
use crate::projection::write::Write;
use crate::store::{retry, Container, PatchOp, Store, StoreResult};

pub(super) async fn check_user(
    store: &dyn Store,
    live: &Live,
    limit: u64,
    moving: bool,
    check: &mut Check,
) -> StoreResult<()> {
    let user = &live.user;
    let u = user.user_id.as_str();
    check.checked += 1;
    check.sources.insert(u.to_string());
    let edges = edges_of(store, u, FollowKind::Following).await?;
    let mirrors = edges_of(store, u, FollowKind::Follower).await?;
    let mut markers = Vec::new();
    let mut entries = Vec::new();
    for (c, id, item) in timeline_items(store, u, moving).await? {
        match item {
            Ok(TimelineItem::Marker(m)) => markers.push((c, m)),
            Ok(TimelineItem::Entry(e)) => entries.push((c, id, Some(e))),
            Err(_) => entries.push((c, id, None)),
        }
    }
    let mut marked: BTreeMap<String, Container> = markers
        .iter()
        .map(|(c, m)| (m.ref_user_id.clone(), *c))
        .collect();
    check.checked += markers.len() as u64;
    check.checked += (edges.len() + mirrors.len() + entries.len()) as u64;

    // Counters.
    if user.following_count != edges.len() as u64 || user.follower_count != mirrors.len() as u64 {
        check.found("counter", format!("users/{u}/{u}"));
        check.recount.insert(u.to_string());
    }
    // Their side of the fan-out limit.
    let followers = mirrors.len() as u64;
    let state = projection::timeline::limit_state(store, u, Some(&live.item)).await?;
    let side = state.side();
    if (!side && projection::timeline::merges(followers, limit))
        || (side && projection::timeline::unmerges(followers, limit))
    {
        check.found(
            "fan-out limit crossing owed",
            format!("users/{u}/{u} ({followers} followers, limit {limit})"),
        );
        check.replay_users.push(live.item.clone());
    }
    if state.target.is_none() {
        check_merged(store, u, &user.username, state.merged, check).await?;
    }

    // Edges: a live followee by their current name, with a mirror by this user's current name;
    // their newest posts in the timeline.
    let mut followed: BTreeMap<String, String> = BTreeMap::new();
    let mut wanted: BTreeMap<String, Post> = BTreeMap::new();
    for (e, stored) in &edges {
        let x = e.ref_user_id.as_str();
        check.sources.insert(x.to_string());
        let where_ = format!("users/{u}/{}", following_id(x));
        let Some(followee) = live_user(store, x).await? else {
            check.found("edge to an erased user", where_);
            check.replay_edges.push(stored.clone());
            continue;
        };
        let name = followee.user.username.clone();
        if e.user_username != name {
            check.found("edge name", where_.clone());
            check.writes.push(Write::Patch {
                container: Container::Users,
                pk: u.into(),
                id: following_id(x),
                ops: vec![PatchOp::set("/userUsername", name.as_str())],
                if_match: None,
            });
        }
        let mirror_id = follower_id(u);
        let mirror = retry(|| store.read(Container::Users, x, &mirror_id)).await?;
        let mirror_ok = mirror
            .and_then(|m| Edge::read(&m))
            .is_some_and(|m| m.is_live(FollowKind::Follower) && m.user_username == user.username);
        if !mirror_ok {
            check.found(
                "mirror missing or stale",
                format!("users/{x}/{}", follower_id(u)),
            );
            check.replay_edges.push(stored.clone());
        }
        followed.insert(x.to_string(), name.clone());
        let state = projection::timeline::limit_state(store, x, Some(&followee.item)).await?;
        if state.target.is_some() {
            // A crossing under way: its markers and copies are lag, not drift.
            marked.remove(x);
            continue;
        }
        if state.merged {
            if marked.remove(x).is_none() {
                check.found(
                    "timeline marker missing",
                    format!("timelines/{u}/{}", marker_id(x)),
                );
                check.writes.push(Write::Upsert {
                    container: Container::Timelines,
                    pk: u.into(),
                    item: crate::domain::to_value(&MergeMarker::new(u, x)),
                });
            }
            continue;
        }
        for p in newest_posts(store, x, &name).await? {
            wanted.insert(p.id.clone(), p);
        }
    }
    // Markers for anyone not followed, or not merged.
    for (x, c) in marked {
        check.found(
            "timeline marker extra",
            format!("{}/{u}/{}", c.name(), marker_id(&x)),
        );
        check.writes.push(delete_entry(c, u, &marker_id(&x)));
    }

    // Mirrors: each has its edge.
    for (m, _) in &mirrors {
        let f = m.ref_user_id.as_str();
        check.sources.insert(f.to_string());
        if !follows(store, f, &following_id(u)).await? {
            check.found(
                "mirror without its edge",
                format!("users/{u}/{}", follower_id(f)),
            );
            check.writes.push(Write::Delete {
                container: Container::Users,
                pk: u.into(),
                id: follower_id(f),
            });
        }
    }

    // Timeline entries: of a followed author's live post, as the post is now.
    let mut present = BTreeSet::new();
    for (c, id, entry) in &entries {
        let where_ = format!("{}/{u}/{id}", c.name());
        let Some(entry) = entry else {
            check.found("timeline entry extra", where_);
            check.writes.push(delete_entry(*c, u, id));
            continue;
        };
        let shown = &entry.post;
        present.insert(shown.id.clone());
        check.sources.insert(shown.user_id.clone());
        let post = retry(|| store.read(Container::Posts, &shown.id, &shown.id)).await?;
        let post = post
            .filter(|p| !is_deleted(p))
            .and_then(|p| Post::deserialize(&p).ok());
        let author_name = followed.get(&shown.user_id);
        let (Some(mut post), Some(name)) = (post, author_name) else {
            check.found("timeline entry extra", where_);
            check.writes.push(delete_entry(*c, u, id));
            continue;
        };
        post.user_username = name.clone();
        let should_be = TimelineEntry::new(u, &post);
        if entry.post != should_be.post {
            check.found("timeline entry stale", where_);
            // Written to `timelines`; one still in `users` then goes with the move.
            check.writes.push(Write::Upsert {
                container: Container::Timelines,
                pk: u.into(),
                item: should_be.to_item(),
            });
        }
    }
    // Only the newest posts across the authors followed need an entry: a timeline is trimmed to
    // its newest entries, so an older post's entry may be gone.
    let mut wanted: Vec<Post> = wanted.into_values().collect();
    wanted.sort_by(|a, b| (&b.creation_date, &b.id).cmp(&(&a.creation_date, &a.id)));
    wanted.truncate(TIMELINE_SIZE);
    for p in &wanted {
        if !present.contains(&p.id) {
            check.found(
                "timeline entry missing",
                format!("timelines/{u}/timeline-{}", p.id),
            );
            check.writes.push(Write::Upsert {
                container: Container::Timelines,
                pk: u.into(),
                item: TimelineEntry::new(u, p).to_item(),
            });
        }
    }
    Ok(())
}

/// A merged author's newest posts in the shared partition (`projection::over_limit`), as their
/// post copies are now, by their current name; nothing of an author who is not merged.
async fn check_merged(
    store: &dyn Store,
    u: &str,
    name: &str,
    merged: bool,
    check: &mut Check,
) -> StoreResult<()> {
    use projection::over_limit as shared;
    let q = shared::of_author(u).limit(TIMELINE_SIZE as u32 + projection::engine::PAGE);
    let held = retry(|| store.query(Container::Feed, &q)).await?.items;
    check.checked += held.len() as u64;
    let mut wanted: BTreeMap<String, MergedPost> = BTreeMap::new();
    if merged {
        for p in newest_posts(store, u, name).await? {
            wanted.insert(p.id.clone(), MergedPost::new(&p));
        }
    }
    let mut drifted = false;
    for item in &held {
        let Ok(Id { id }) = Id::deserialize(item) else {
            continue;
        };
        let id = id.as_str();
        match wanted.remove(id) {
            Some(w) if MergedPost::deserialize(item).is_ok_and(|m| m == w) => {}
            Some(_) => {
                check.found("merged copy stale", format!("feed/merged/{id}"));
                drifted = true;
            }
            None => {
                check.found("merged copy extra", format!("feed/merged/{id}"));
                check.writes.push(Write::Delete {
                    container: Container::Feed,
                    pk: shared::PARTITION.into(),
                    id: id.to_string(),
                });
            }
        }
    }
    for id in wanted.keys() {
        check.found("merged copy missing", format!("feed/merged/{id}"));
        drifted = true;
    }
    if drifted {
        check.merged_sync.push((u.to_string(), name.to_string()));
    }
    Ok(())
}

/// The removal of timeline item `id` of `user`'s partition of `c`.
fn delete_entry(c: Container, user: &str, id: &str) -> Write {
    Write::Delete {
        container: c,
        pk: user.into(),
        id: id.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Id, Text};

    /// `verify` judges the merged authors' posts by [`MergedPost`]; the projection that writes
    /// them builds its own item, which must be the same.
    #[test]
    fn verify_expects_the_merged_post_the_projection_writes() {
        let mut p = Post::new(
            &Id::parse("id", "x").unwrap(),
            "xena".into(),
            &Text::title("t").unwrap(),
            &Text::post_content(&"c".repeat(300)).unwrap(),
        );
        p.like_count = 4;
        let written = projection::over_limit::item(&p);
        assert_eq!(written, MergedPost::new(&p).to_item());
        assert_eq!(
            MergedPost::deserialize(&written).unwrap(),
            MergedPost::new(&p)
        );
        assert_eq!(
            projection::over_limit::PARTITION,
            crate::domain::follows::MERGED
        );
    }
}
