//! The timeline lane: everything that writes the personal timelines (`crate::domain::follows`),
//! kept in the container `timelines`, which nothing projects from, so that a fan-out writes
//! nothing into the users feed but its job items; run apart from the main projections ([`super::Lane::Timeline`]: its own followers of the
//! posts and users feeds, its own checkpoints, its own trigger functions), so that no fan-out
//! holds up the feed, the post copies, the counters or a follow showing in `/followers`.
//!
//! What it reacts to, each change read as a notification (the item is read as it is now):
//! - The author's copy of a post in `users` (written by the main lane): its entry is written
//!   into each follower's timeline, unless the post's job item (`timelineJob-post-<P>`, in the
//!   author's partition) records this very entry content: a like or a comment changes the
//!   copy's counts, which no entry holds, so it writes no timeline item at all.
//! - A post marked deleted (posts feed): its entries are deleted wherever they are.
//! - A follow edge or its mirror: live, with the mirror in place, the followee's newest posts
//!   are brought into the follower's timeline (or a merge marker written, for a merged author);
//!   marked, the followee's entries and marker leave it.
//! - A user: renamed, the edges and entries naming them are patched; their follower count
//!   crossing the fan-out limit, their followers' timelines are switched between copies and
//!   markers; erased, their own timeline goes.
//! - A job item (`type: timelineJob`): the next step of a fan-out.
//!
//! **Bounded steps.** Any work over more followers or entries than one page ([`PAGE`](super::engine::PAGE)) runs a
//! page per step: the step records where it stopped in the job item in the author's partition
//! of `users`,
//! whose change comes back through the users feed behind the changes written meanwhile, so
//! other authors' posts interleave with a big fan-out, a crash resumes from the last recorded
//! step, and a newer change of the same post or user supersedes the job (a step whose job item
//! changed since it was delivered does nothing: the newer version's own change carries on).
//!
//! **Ordering with the main lane.** A post and a follow made at once both reach the timeline:
//! a fan-out is set off by the author's copy and reads the mirrors after it; a backfill is set
//! off by the mirror (or the edge, once the mirror is there) and reads the copies after it; so
//! at least one of the two sees the other's write. An unfollow is read from the edge itself:
//! after each page of a fan-out one query asks which of the page's followers still hold a live
//! edge, and the entry written for any who does not is taken back; a post deleted meanwhile is
//! looked up once a page the same way.
//!
//! **The fan-out limit.** An author with more followers than the limit `L` ([`limit_in_force`],
//! recorded in the store) is *merged*: their posts are not copied; each follower's timeline
//! holds a marker ([`MergeMarker`](crate::domain::follows::MergeMarker)) and a read merges their newest posts in. Hysteresis:
//! an author is merged once their followers exceed `L`, and copied again only once they fall
//! below 80% of `L` ([`merges`], [`unmerges`]), so follower churn around the limit does not
//! switch every timeline back and forth. The author's state is the job item
//! `timelineJob-limit`: going over, the markers are written (a page a step) and only then does
//! copying stop; coming back, copying resumes first, then each follower's marker is removed and
//! the posts copied. A merged author's newest posts are kept in one shared partition
//! ([`over_limit`]): each change of one of their posts upserts its item there (one write), crossing
//! up copies their [`TIMELINE_SIZE`](crate::domain::follows::TIMELINE_SIZE) newest there before any marker is written, crossing down
//! removes them once every follower's posts are copied back; a deleted post and an erased
//! author take theirs out, and a rename reaches them with the post copies' changes.

pub mod backfill;
pub mod copies;
pub mod crossing;
pub mod erasure;
pub mod limit;
pub mod names;
pub mod trim;

use std::collections::{BTreeMap, BTreeSet};

use super::change::{Change, ChangeKind, Item};
use super::engine::{compare_versions, current_job, failed, live_user, read_job, wrote, Unit};
use super::over_limit;
use super::upgrade;
use crate::domain::is_deleted;
use crate::domain::jobs::{delete_job_id, Job, Work};
use crate::store::{Container, Store, StoreResult};

/// Recount `user_id`'s follows (as the main lane does) and carry out, now, whatever the timeline
/// lane then owes the user: a crossing of the fan-out limit is run step after step to its end
/// (for tools and repairs that want the timelines in line when they return, rather than a step
/// per change of the job item). Returns the writes made.
pub async fn set_follow_counts_and_cross(store: &dyn Store, user_id: &str) -> StoreResult<usize> {
    let mut written = super::follows::set_follow_counts(store, user_id).await?;
    let mut batch = Batch::default();
    written += user_changed(store, &[], user_id, &mut batch).await?;
    let mut last: Option<String> = None;
    loop {
        let Some(job) = read_job(store, user_id, LIMIT_JOB).await? else {
            return Ok(written);
        };
        let crossing = matches!(
            job.work,
            Work::Limit {
                target: Some(_),
                ..
            }
        );
        if !crossing || job.etag == last {
            return Ok(written);
        }
        last = job.etag.clone();
        written += job_step(store, &job, &mut batch).await?;
    }
}

/// What one batch of the lane reads once, when it first needs it.
#[derive(Debug, Default)]
struct Batch {
    limit: Option<u64>,
    /// Where timeline items may be, while an earlier release's may remain in `users`.
    places: upgrade::timelines::Places,
}

impl Batch {
    /// The fan-out limit in force ([`limit_in_force`]).
    async fn limit(&mut self, store: &dyn Store) -> StoreResult<u64> {
        if let Some(l) = self.limit {
            return Ok(l);
        }
        let l = limit_in_force(store).await?;
        self.limit = Some(l);
        Ok(l)
    }

    /// The containers timeline items may be in (`upgrade::timelines::Places`; `timelines` alone
    /// once the move is done).
    async fn places(&mut self, store: &dyn Store) -> StoreResult<&'static [Container]> {
        upgrade::timelines::Places::of(&mut self.places, store).await
    }
}

/// Followers per step of a crossing back under the limit: each is a backfill of up to
/// [`TIMELINE_SIZE`](crate::domain::follows::TIMELINE_SIZE) entries, so a step writes at most `BACKFILL_PAGE × TIMELINE_SIZE`.
pub const BACKFILL_PAGE: u32 = 20;

/// `type` of a job item (internal, in `users`, in the partition of the user it works for: its
/// changes are what carries a job on, through the users feed).
pub use super::engine::JOB;
pub use crate::domain::jobs::post_job_id;
pub use limit::{
    limit_in_force, limit_state, merges, record_limit, stored_limit, unmerges, LimitState,
    DEFAULT_FANOUT_LIMIT, LIMIT_ID, LIMIT_JOB,
};
pub use names::naming;
pub use trim::trim;

/// The timeline lane's projection of the posts feed: a deleted post's entries go
/// ([`project_posts`]).
pub const POSTS: Unit = Unit {
    name: "timeline-deletions",
    feed: Container::Posts,
    watches: &[ChangeKind::Post],
    reads: &[Container::Users, Container::Timelines, Container::Leases],
    writes: &[Container::Users, Container::Timelines, Container::Feed],
    project: |store, changes| {
        Box::pin(async move {
            project_posts(store, changes)
                .await
                .map(wrote)
                .map_err(|e| failed(Container::Posts, changes, e))
        })
    },
};

/// The timeline lane's projection of the users feed ([`project_users`]): follows
/// ([`backfill`]), the authors' post copies ([`copies`]), users ([`names`], [`crossing`],
/// [`erasure`]) and the next steps of their jobs, in that order, sharing what one batch reads
/// once (the fan-out limit, where timeline items may be).
pub const USERS: Unit = Unit {
    name: "timelines",
    feed: Container::Users,
    watches: &[
        ChangeKind::Following,
        ChangeKind::Follower,
        ChangeKind::PostCopy,
        ChangeKind::User,
        ChangeKind::Job,
    ],
    reads: &[
        Container::Users,
        Container::Posts,
        Container::Timelines,
        Container::Feed,
        Container::Leases,
    ],
    writes: &[
        Container::Users,
        Container::Timelines,
        Container::Feed,
        Container::Leases,
    ],
    project: |store, changes| {
        Box::pin(async move {
            project_users(store, changes)
                .await
                .map(wrote)
                .map_err(|e| failed(Container::Users, changes, e))
        })
    },
};

// ---------------------------------------------------------------------------------------------
// The lane's entries.

/// The posts feed, timeline lane: each post marked deleted has its entries deleted, a page now
/// and a page per step after; any other change is passed over without a read. Returns the
/// writes made.
pub async fn project_posts(store: &dyn Store, changes: &[&Change]) -> StoreResult<usize> {
    let mut written = 0;
    let mut seen = BTreeSet::new();
    let mut batch = Batch::default();
    for c in changes {
        let Item::Post(a) = &c.item else {
            continue;
        };
        let (post_id, author) = (a.post_id.as_str(), a.user_id.as_str());
        // Only a deletion's mark: a deleted post stays deleted, and a change of a live post
        // (an edit, its counts) reaches the timelines through its author's copy.
        if !a.deleted || !seen.insert(post_id) {
            continue;
        }
        written += over_limit::remove_post(store, post_id).await?;
        let job = read_job(store, author, &delete_job_id(post_id)).await?;
        let places = batch.places(store).await?;
        written += copies::delete_step(store, places, author, post_id, job.as_ref()).await?;
    }
    Ok(written + batch.places.started)
}

/// The users feed, timeline lane. Returns the writes made.
pub async fn project_users(store: &dyn Store, changes: &[&Change]) -> StoreResult<usize> {
    let mut written = 0;
    let mut pairs = BTreeSet::new();
    let mut copies = BTreeSet::new();
    let mut users = BTreeSet::new();
    let mut jobs: BTreeMap<(String, String), &Change> = BTreeMap::new();
    for c in changes {
        match &c.item {
            Item::Following(e) => {
                pairs.insert((e.user_id.clone(), e.ref_user_id.clone(), false));
            }
            Item::Follower(e) => {
                pairs.insert((e.ref_user_id.clone(), e.user_id.clone(), true));
            }
            Item::Job(job) => {
                // The newest delivered version of each job item.
                let key = (job.user_id.clone(), job.id.clone());
                let newer = jobs.get(&key).is_none_or(|old| {
                    compare_versions(&old.doc, &c.doc) == Some(std::cmp::Ordering::Less)
                });
                if newer {
                    jobs.insert(key, c);
                }
            }
            Item::PostCopy(a) => {
                copies.insert((a.user_id.clone(), a.id.clone()));
            }
            Item::User(u) => {
                users.insert(u.user_id.clone());
            }
            _ => {}
        }
    }
    let mut batch = Batch::default();
    for (f, x, from_mirror) in &pairs {
        written += backfill::follow_changed(store, changes, f, x, *from_mirror, &mut batch).await?;
    }
    for (author, post_id) in &copies {
        written += copies::copy_changed(store, author, post_id).await?;
    }
    for u in &users {
        written += user_changed(store, changes, u, &mut batch).await?;
    }
    for c in jobs.into_values() {
        if let Item::Job(job) = &c.item {
            written += job_step(store, job, &mut batch).await?;
        }
    }
    Ok(written + batch.places.started)
}

async fn user_changed(
    store: &dyn Store,
    changes: &[&Change],
    user_id: &str,
    batch: &mut Batch,
) -> StoreResult<usize> {
    let Some(user) = crate::projection::engine::user(store, changes, user_id).await? else {
        return Ok(0);
    };
    // Learning whether timeline items may still be in `users` starts their move if it is owed:
    // a store that has one has users changing.
    batch.places(store).await?;
    if is_deleted(&user) {
        return erasure::user_erased(store, user_id).await;
    }
    let typed = super::engine::as_user(&user)?;
    let written = names::user_changed(store, user_id, &typed).await?;
    Ok(written + crossing::user_changed(store, user_id, &user, &typed, batch).await?)
}

// ---------------------------------------------------------------------------------------------
// Steps of jobs.

/// The next step of the job `delivered` (a job item as the users feed delivered it): nothing if
/// the item changed since (its newer version's change carries on) or is done.
async fn job_step(store: &dyn Store, delivered: &Job, batch: &mut Batch) -> StoreResult<usize> {
    let Some(job) = current_job(store, delivered).await? else {
        return Ok(0);
    };
    let user_id = job.user_id.as_str();
    match &job.work {
        Work::Post { .. } => copies::post_step(store, &job).await,
        Work::Delete { post_id } => {
            let places = batch.places(store).await?;
            copies::delete_step(store, places, user_id, post_id, Some(&job)).await
        }
        Work::Rename { .. } => {
            let Some(user) = live_user(store, user_id).await? else {
                return Ok(0);
            };
            let user = super::engine::as_user(&user)?;
            names::rename_step(
                store,
                user_id,
                &user.username,
                user.rename_version,
                Some(&job),
            )
            .await
        }
        Work::Limit { .. } => {
            let places = batch.places(store).await?;
            crossing::limit_step(store, places, &job).await
        }
        Work::Erase => erasure::erase_step(store, user_id, Some(&job)).await,
        Work::Move { .. } => upgrade::timelines::step(store, &job, author_marks).await,
        // The bookmarks lane's.
        Work::Bookmarks { .. } => Ok(0),
    }
}

/// Whether new followers of `author` get a marker ([`LimitState::marks`]); `false` for an
/// author who is gone. What the move judges a marker by (`upgrade::timelines::Marks`).
fn author_marks<'a>(
    store: &'a dyn Store,
    author: &'a str,
) -> futures::future::BoxFuture<'a, StoreResult<bool>> {
    Box::pin(async move {
        let Some(user) = live_user(store, author).await? else {
            return Ok(false);
        };
        Ok(limit_state(store, author, Some(&user)).await?.marks())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_has_hysteresis() {
        let l = 10_000;
        assert!(!merges(l, l), "at the limit: still copied");
        assert!(merges(l + 1, l));
        assert!(!unmerges(l, l), "back at the limit: still merged");
        assert!(!unmerges(8_000, l), "at 80%: still merged");
        assert!(unmerges(7_999, l));
        assert!(
            !unmerges(0, 0) && merges(1, 0),
            "a limit of 0 copies no one"
        );
    }
}
