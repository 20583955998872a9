//! The repair of what the check found (`super`): replays through the projections, and writes
//! each re-read right before it is made.

use serde::Deserialize;
use serde_json::Value;

use super::read::{follows, live_user, Live};
use super::Check;
use crate::domain::follows::{follower_id, following_id, TimelineEntry, TimelineItem};
use crate::domain::jobs::{Job, Work};
use crate::domain::{is_deleted, Post, User};
use crate::projection::write::Write;
use crate::projection::{self, engine as apply};
use crate::store::{retry, Container, PatchOp, Store, StoreResult};

/// What a repair did.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Mended {
    pub replayed: usize,
    pub written: usize,
    pub failed: Vec<String>,
}

/// Write the fixes `check` found: edges replayed through the projection, counters recounted,
/// the rest written as found.
pub async fn repair(store: &dyn Store, check: &Check) -> Mended {
    let mut done = Mended::default();
    if !check.replay_edges.is_empty() {
        match projection::project(store, Container::Users, &check.replay_edges).await {
            Ok(_) => done.replayed += check.replay_edges.len(),
            Err(e) => done.failed.push(e.to_string()),
        }
    }
    for (u, name) in &check.merged_sync {
        match projection::over_limit::copy_author(store, u, name).await {
            Ok(n) => done.written += n,
            Err(e) => done.failed.push(format!("feed/merged ({u}): {e}")),
        }
    }
    // A crossing owed: started by the timeline lane, which then carries it out a step per change
    // of its job item (projected here until done, so the check after the repair sees it done).
    for user in &check.replay_users {
        match replay_user(store, user).await {
            Ok(n) => {
                done.replayed += 1;
                done.written += n;
            }
            Err(e) => done.failed.push(e.to_string()),
        }
    }
    for w in &check.writes {
        let written = match fresh(store, w).await {
            Ok(Some(w)) => apply::apply_one(store, &w).await.map(|()| 1),
            Ok(None) => Ok(0),
            Err(e) => Err(e),
        };
        match written {
            Ok(n) => done.written += n,
            Err(e) => done.failed.push(format!("{}: {e}", w.target())),
        }
    }
    for u in &check.recount {
        match projection::timeline::set_follow_counts_and_cross(store, u).await {
            Ok(n) => done.written += n,
            Err(e) => done.failed.push(format!("users/{u}/{u}: {e}")),
        }
    }
    done
}

/// The fix `w` as it should be written now, or `None` when it is no longer wanted: what the check
/// read is read again right before the write, so a repair never writes from a stale read (a post
/// deleted, an author renamed, unfollowed or merged, an edge made since the check). An entry is
/// written from the post and the author's name as they are now; a deletion is skipped when what
/// made the item extra has changed.
async fn fresh(store: &dyn Store, w: &Write) -> StoreResult<Option<Write>> {
    let users = Container::Users;
    match w {
        Write::Upsert { pk: u, item, .. } => match TimelineItem::read(item) {
            Ok(TimelineItem::Marker(m)) => Ok(merged_followee(store, u, &m.ref_user_id)
                .await?
                .then(|| w.clone())),
            Ok(TimelineItem::Entry(e)) => {
                Ok(wanted_entry(store, u, &e.post.id)
                    .await?
                    .map(|post| Write::Upsert {
                        container: Container::Timelines,
                        pk: u.clone(),
                        item: TimelineEntry::new(u, &post).to_item(),
                    }))
            }
            Err(_) => Ok(None),
        },
        Write::Patch { pk: u, id, .. } => {
            let Some(x) = id.strip_prefix(&following_id("")) else {
                return Ok(Some(w.clone()));
            };
            if !follows(store, u, id).await? {
                return Ok(None);
            }
            Ok(live_user(store, x).await?.map(|followee| Write::Patch {
                container: users,
                pk: u.clone(),
                id: id.clone(),
                ops: vec![PatchOp::set(
                    "/userUsername",
                    followee.user.username.as_str(),
                )],
                if_match: None,
            }))
        }
        Write::Delete {
            container,
            pk: u,
            id,
            ..
        } => {
            if let Some(f) = id.strip_prefix(&follower_id("")) {
                // A mirror goes only while its edge is still missing.
                let has_edge = follows(store, f, &following_id(u)).await?;
                return Ok((!has_edge).then(|| w.clone()));
            }
            let Some(item) = retry(|| store.read(*container, u, id)).await? else {
                return Ok(None);
            };
            if is_deleted(&item) {
                return Ok(None);
            }
            let still_wanted = match TimelineItem::read(&item) {
                Ok(TimelineItem::Marker(m)) => merged_followee(store, u, &m.ref_user_id).await?,
                Ok(TimelineItem::Entry(e)) => wanted_entry(store, u, &e.post.id).await?.is_some(),
                Err(_) => false,
            };
            Ok((!still_wanted).then(|| w.clone()))
        }
    }
}

/// Whether `u` follows `x` now, and `x` is merged (their followers hold a marker for them).
async fn merged_followee(store: &dyn Store, u: &str, x: &str) -> StoreResult<bool> {
    if !follows(store, u, &following_id(x)).await? {
        return Ok(false);
    }
    Ok(match live_user(store, x).await? {
        Some(followee) => settled_side(store, x, &followee).await? == Some(true),
        None => false,
    })
}

/// The post `post_id` as `u`'s timeline should show it now (by its author's current name), if
/// it should: the post is live, and `u` follows its author, who is live and not merged.
async fn wanted_entry(store: &dyn Store, u: &str, post_id: &str) -> StoreResult<Option<Post>> {
    let post = retry(|| store.read(Container::Posts, post_id, post_id)).await?;
    let Some(mut post) = post
        .filter(|p| !is_deleted(p))
        .and_then(|p| Post::deserialize(&p).ok())
    else {
        return Ok(None);
    };
    let author = post.user_id.clone();
    if !follows(store, u, &following_id(&author)).await? {
        return Ok(None);
    }
    let Some(a) = live_user(store, &author).await? else {
        return Ok(None);
    };
    match settled_side(store, &author, &a).await? {
        Some(false) => {
            post.user_username = a.user.username;
            Ok(Some(post))
        }
        _ => Ok(None),
    }
}

/// Whether author `x` is merged (`Some(true)`) or copied (`Some(false)`), as their limit job
/// records it; `None` while a crossing is under way (the timeline lane writes the markers and
/// copies then, and a repair leaves them to it).
async fn settled_side(store: &dyn Store, x: &str, author: &Live) -> StoreResult<Option<bool>> {
    let state = projection::timeline::limit_state(store, x, Some(&author.item)).await?;
    Ok(state.target.is_none().then_some(state.merged))
}

/// Project `user` through the timeline lane, then each change of their limit job item until the
/// crossing it starts is done.
async fn replay_user(store: &dyn Store, user: &Value) -> Result<usize, String> {
    use projection::{project_lane, Lane};
    let u = User::deserialize(user)
        .map_err(|e| format!("a stored user does not read as one: {e}"))?
        .user_id;
    let mut written = project_lane(
        store,
        Lane::Timeline,
        Container::Users,
        std::slice::from_ref(user),
    )
    .await
    .map_err(|e| e.to_string())?
    .writes;
    let mut last_etag: Option<String> = None;
    loop {
        let job = retry(|| store.read(Container::Users, &u, projection::timeline::LIMIT_JOB))
            .await
            .map_err(|e| e.to_string())?;
        let Some(item) = job else {
            return Ok(written);
        };
        let job = Job::read(&item)?;
        if !matches!(
            job.work,
            Work::Limit {
                target: Some(_),
                ..
            }
        ) {
            return Ok(written);
        }
        // A step that did not move the job on (its user gone, say) ends the replay.
        if job.etag.is_some() && job.etag == last_etag {
            return Ok(written);
        }
        last_etag = job.etag;
        written += project_lane(store, Lane::Timeline, Container::Users, &[item])
            .await
            .map_err(|e| e.to_string())?
            .writes;
    }
}
