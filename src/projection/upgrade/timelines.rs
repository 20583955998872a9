//! The move of the timeline items (entries and merge markers) an earlier release kept in the
//! followers' partitions of `users` to `timelines`, where this release keeps them: in bounded
//! steps, run by the timeline lane, idempotent and resumable, with nothing lost and no timeline
//! going empty meanwhile. Everything that exists only for the move is here; the rest of the
//! code reaches it only through calls `upgrade::timelines::…`. Deleted in 0.2.0, the first
//! release after every deployment has recorded `timelinesMoved` (`docs/deploy.md`).
//!
//! - **Whether a move is owed.** The store's layout record (`store::LAYOUT_ID` in `leases`)
//!   says `timelinesMoved: true` once nothing is left to move ([`moved`]); a store created by
//!   this release records it when it is created. Without it, the timeline lane starts the move
//!   at the first batch that needs to know ([`Places`], [`start`]: one job item, [`JOB_ID`] in
//!   the partition [`JOB_PARTITION`] of `users`).
//! - **A step** ([`step`], each time the job item comes round the users feed): one query across
//!   partitions reads a page ([`PAGE`]) of timeline items in `users`; each is created in
//!   `timelines` unless an item of its id is there already (the lane wrote a newer one: it
//!   wins), then deleted from `users`. A page left means the job item is written again (its
//!   change brings the next step, behind the changes written meanwhile); an empty page records
//!   the layout and deletes the job item. A crash between the two writes of an item leaves it
//!   in both places, and the next step finishes it.
//! - **Meanwhile.** Reads look in both places (`timelines` wins for an id in both: [`Place`] for
//!   the timeline's read, [`items_left`] for `handler verify`); the lane writes only to
//!   `timelines`, and removes and renames in both places, `users` first ([`places`],
//!   [`with_items_left`] for an erasure). An item a removal took out of `users` between the
//!   step's read and its delete (the step's delete finds nothing) is judged again: its copy
//!   stays only if it is still wanted (the follow is live, and the post too, or the author
//!   still merged), so a concurrent unfollow, post deletion or erasure is never undone by the
//!   move. A rename racing the move of one entry may leave that entry with the old name until
//!   the post changes again; `handler verify` reports it and `--repair` rewrites it. Until
//!   the move is done, `handler verify` says so ([`verify_note`]).
//!
//! Outside this module the move leaves: the job's shape (`Work::Move`, `MOVE_JOB` in
//! `domain::jobs`), the lane's judge of a marker it is handed ([`Marks`]), and the store's
//! layout record, which a new store writes and which 0.2.0 keeps to tell a store not moved.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{json, Value};

use futures::future::BoxFuture;

use crate::domain::follows::{following_id, is_marker, Edge, FollowKind, REF_USER, TIMELINE};
use crate::domain::is_deleted;
use crate::domain::jobs::{Job, Work, MOVE_JOB};
use crate::domain::Meta;
use crate::projection::engine::{query_all, save_job, CONCURRENCY, PAGE};
use crate::projection::write::{content, str_field};
use crate::store::{
    retry, Container, Page, Query, Store, StoreError, StoreResult, LAYOUT_ID, TIMELINES_MOVED,
};

/// The partition of `users` holding the move's job item (no user's id: user ids are UUIDs).
pub const JOB_PARTITION: &str = "store.move";
/// The move's job item (`type: timelineJob`, `job: move`).
pub const JOB_ID: &str = MOVE_JOB;

/// Whether new followers of an author get a merge marker rather than copies (the timeline
/// lane's side of the fan-out limit, `timeline::LimitState::marks`), for judging a marker.
pub type Marks = for<'a> fn(&'a dyn Store, &'a str) -> BoxFuture<'a, StoreResult<bool>>;

/// Whether the layout record `layout` (as read; `None`: there is none) says that no timeline
/// item is left in `users`.
pub fn moved(layout: Option<&Value>) -> bool {
    layout
        .and_then(|l| l.get(TIMELINES_MOVED))
        .and_then(Value::as_bool)
        == Some(true)
}

/// Whether timeline items may still be in `users`: the layout record does not say they moved
/// (one point read).
pub async fn moving(store: &dyn Store) -> StoreResult<bool> {
    let layout = retry(|| store.read(Container::Leases, LAYOUT_ID, LAYOUT_ID)).await?;
    Ok(!moved(layout.as_ref()))
}

/// The containers a removal or a rename of timeline items goes through: `users` first while the
/// move is not done (`moving`), then `timelines`. In that order a removal racing the move of the
/// same item finds it in one place or the other: either it takes the item out of `users` before
/// the move's delete (which then finds nothing and judges the copy again), or the copy is in
/// `timelines` before the removal looks there.
pub fn places(moving: bool) -> &'static [Container] {
    if moving {
        &[Container::Users, Container::Timelines]
    } else {
        &[Container::Timelines]
    }
}

/// What one batch of the timeline lane learns of the move, once, when it first needs to know
/// where timeline items may be ([`Places::of`]).
#[derive(Debug, Default)]
pub struct Places {
    moving: Option<bool>,
    /// Writes made starting the move.
    pub started: usize,
}

impl Places {
    /// The containers timeline items may be in ([`places`]): learning that some may still be in
    /// `users` starts their move, unless it is under way.
    pub async fn of(&mut self, store: &dyn Store) -> StoreResult<&'static [Container]> {
        if let Some(m) = self.moving {
            return Ok(places(m));
        }
        let m = moving(store).await?;
        if m {
            self.started += start(store).await?;
        }
        self.moving = Some(m);
        Ok(places(m))
    }
}

/// What `handler verify` adds to its line of the follows and timelines while the move is not
/// done (`moving`, as the store's layout record says); nothing once it is.
pub fn verify_note(moving: bool) -> &'static str {
    if moving {
        ", timeline items still moving from `users` (no `timelinesMoved` recorded)"
    } else {
        ""
    }
}

/// The kinds an erased user's partition of `users` is cleared of: `kind`, and the timeline
/// items an earlier release left there (whether or not the move is done: a query that finds
/// none of them costs what one without them would).
pub fn with_items_left(kind: &str) -> [String; 2] {
    [TIMELINE.to_string(), kind.to_string()]
}

/// `user`'s live timeline items still in `users` while the move is not done (`moving`; none
/// once it is), every page: what `handler verify` reads besides `timelines` (of an item in
/// both, the one in `timelines` counts), read `page` items a query.
pub async fn items_left(
    store: &dyn Store,
    moving: bool,
    user: &str,
    page: u32,
) -> StoreResult<Vec<Value>> {
    if !moving {
        return Ok(Vec::new());
    }
    let q = Query::partition(user)
        .eq("type", TIMELINE)
        .live()
        .limit(page);
    query_all(store, Container::Users, q).await
}

/// How often a process not yet sure that timeline items have left `users` asks again.
const RECHECK_MOVE: std::time::Duration = std::time::Duration::from_secs(1);

/// Where a timeline read looks for timeline items: process state the timeline read and the
/// application's state share. Timeline items may still be in `users`, where an earlier release
/// kept them, until the timeline lane has moved them. The process asks the store's layout
/// record at its first timeline read, and again at most every `RECHECK_MOVE` while the move
/// is not done; once it is, never again. The asking runs in a task of its own: process
/// bookkeeping, one point read per process once the move is done, not a request's operation
/// (the first timeline read waits for the first answer; later ones go on with what is known,
/// and look in `users` too until the move is known done).
#[derive(Debug, Default)]
pub struct Place {
    moved: std::sync::atomic::AtomicBool,
    /// When the record was last asked for.
    asked: std::sync::Mutex<Option<std::time::Instant>>,
    first: tokio::sync::OnceCell<()>,
}

impl Place {
    /// Whether timeline items may still be in `users`, as far as the process knows.
    async fn moving(self: &Arc<Self>, store: &Arc<dyn Store>) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        if self.moved.load(Relaxed) {
            return false;
        }
        let ask = || {
            let (place, store) = (self.clone(), store.clone());
            *self.asked.lock().unwrap_or_else(|e| e.into_inner()) = Some(std::time::Instant::now());
            tokio::spawn(async move {
                let layout = store.read(Container::Leases, LAYOUT_ID, LAYOUT_ID).await;
                // Not known (the store failed to answer): still looked for in both places.
                if layout.is_ok_and(|l| moved(l.as_ref())) {
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

    /// A timeline read's first page `page` (the query `q` asked of `timelines`), with the items
    /// `q` finds in `users` while they may still be there (one more operation): of an item in
    /// both places the one in `timelines` is taken, and the whole is sorted newest first again.
    pub async fn add_items_left(
        self: &Arc<Self>,
        store: &Arc<dyn Store>,
        q: &Query,
        page: &mut Page,
    ) -> StoreResult<()> {
        if !self.moving(store).await {
            return Ok(());
        }
        // Read once: each item's place in the timeline (id and date).
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Placed {
            id: String,
            #[serde(default)]
            creation_date: String,
        }
        let placed = |i: &Value| Placed::deserialize(i).map(|p| (p.creation_date, p.id)).ok();
        let old = store.query(Container::Users, q).await?;
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
        page.continuation = page.continuation.take().or(old.continuation);
        Ok(())
    }
}

fn job(steps: u64, moved: u64) -> Job {
    Job::new(JOB_PARTITION, Work::Move { moved }, steps, false)
}

/// Start the move: its job item, unless it is there (a move under way carries on by itself).
/// Returns the writes made.
pub async fn start(store: &dyn Store) -> StoreResult<usize> {
    match retry(|| store.create(Container::Users, JOB_PARTITION, job(0, 0).to_item())).await {
        Ok(_) => Ok(1),
        Err(StoreError::Conflict) => Ok(0),
        Err(e) => Err(e),
    }
}

/// One step of the move (`job_item`: the job item as read now; `marks`: the author's side of
/// the limit, to judge a marker). Returns the writes made.
pub async fn step(store: &dyn Store, job_item: &Job, marks: Marks) -> StoreResult<usize> {
    let mut q = Query::cross_partition().eq("type", TIMELINE).limit(PAGE);
    let mut page = retry(|| store.query(Container::Users, &q)).await?;
    while page.items.is_empty() && page.continuation.is_some() {
        q.continuation = page.continuation.take();
        page = retry(|| store.query(Container::Users, &q)).await?;
    }
    if page.items.is_empty() {
        let layout = json!({ "id": LAYOUT_ID, TIMELINES_MOVED: true });
        retry(|| store.upsert(Container::Leases, LAYOUT_ID, layout.clone())).await?;
        match retry(|| store.delete(Container::Users, JOB_PARTITION, JOB_ID)).await {
            Ok(()) | Err(StoreError::NotFound) => {}
            Err(e) => return Err(e),
        }
        tracing::info!("timeline items: the move from `users` to `timelines` is done");
        return Ok(2);
    }
    let mut written = 0;
    for chunk in page.items.chunks(CONCURRENCY) {
        let moved =
            futures::future::try_join_all(chunk.iter().map(|i| move_one(store, i, marks))).await?;
        written += moved.iter().sum::<usize>();
    }
    let moved = match job_item.work {
        Work::Move { moved } => moved,
        _ => 0,
    };
    let next = job(job_item.steps + 1, moved + page.items.len() as u64);
    // Another delivery that moved the job on carries on from its own change.
    let saved = save_job(store, Some(job_item), next).await?;
    Ok(written + usize::from(saved))
}

/// Move one item: its copy created in `timelines` (unless one is there), then the item deleted
/// from `users`; if something else deleted it first, the copy stays only while still wanted.
async fn move_one(store: &dyn Store, item: &Value, marks: Marks) -> StoreResult<usize> {
    let (Some(owner), Some(id)) = (Meta::of(item).user_id, Meta::of(item).id) else {
        return Ok(0);
    };
    let copy = content(item);
    let created = match retry(|| store.create(Container::Timelines, owner, copy.clone())).await {
        Ok(_) => true,
        Err(StoreError::Conflict) => false,
        Err(e) => return Err(e),
    };
    match retry(|| store.delete(Container::Users, owner, id)).await {
        Ok(()) => Ok(usize::from(created) + 1),
        Err(StoreError::NotFound)
            if created && !still_wanted(store, owner, item, marks).await? =>
        {
            match retry(|| store.delete(Container::Timelines, owner, id)).await {
                Ok(()) | Err(StoreError::NotFound) => Ok(2),
                Err(e) => Err(e),
            }
        }
        Err(StoreError::NotFound) => Ok(usize::from(created)),
        Err(e) => Err(e),
    }
}

/// Whether `owner`'s timeline still wants `item` (an entry or a marker): they follow its
/// author, and the post is live (an entry) or the author is merged (a marker).
async fn still_wanted(
    store: &dyn Store,
    owner: &str,
    item: &Value,
    marks: Marks,
) -> StoreResult<bool> {
    let Some(author) = str_field(item, REF_USER) else {
        return Ok(false);
    };
    let edge_id = following_id(author);
    let edge = retry(|| store.read(Container::Users, owner, &edge_id)).await?;
    let live = edge.as_ref().and_then(Edge::read);
    if !live.is_some_and(|e| e.is_live(FollowKind::Following)) {
        return Ok(false);
    }
    if is_marker(item) {
        return marks(store, author).await;
    }
    let Some(post_id) = Meta::of(item).post_id else {
        return Ok(false);
    };
    let post = retry(|| store.read(Container::Posts, post_id, post_id)).await?;
    Ok(post.is_some_and(|p| !is_deleted(&p)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store created by this release records what the move reads as done; one without the
    /// record, or with it saying anything else, is moving.
    #[test]
    fn a_new_store_has_nothing_to_move() {
        assert!(moved(Some(&crate::store::layout::new_store_layout())));
        assert!(!moved(None));
        assert!(!moved(Some(&json!({ "id": LAYOUT_ID }))));
        assert!(!moved(Some(
            &json!({ "id": LAYOUT_ID, TIMELINES_MOVED: "yes" })
        )));
        assert_eq!(places(false), [Container::Timelines]);
        assert_eq!(places(true), [Container::Users, Container::Timelines]);
    }
}
