//! Erasure in the timeline lane: an erased user's own timeline goes, a page a step, recorded in
//! their erase job item.

use crate::domain::follows::TIMELINE;
use crate::domain::jobs::{Job, Work, ERASE_JOB, JOB};
use crate::projection::engine::{delete_item, delete_matching, read_job, save_job};
use crate::projection::{over_limit, upgrade};
use crate::store::{Container, Query, Store, StoreResult};

/// User `user_id` is erased: the next step of their timeline's removal. Returns the writes
/// made.
pub(super) async fn user_erased(store: &dyn Store, user_id: &str) -> StoreResult<usize> {
    let job = read_job(store, user_id, ERASE_JOB).await?;
    erase_step(store, user_id, job.as_ref()).await
}

/// One step of an erased user's own timeline going (entries and markers in `timelines`; job
/// items, and timeline items still to be moved, in `users`), a page of each at a time; the
/// erase job item records that more may be left, and goes once nothing is.
pub(super) async fn erase_step(
    store: &dyn Store,
    user_id: &str,
    job: Option<&Job>,
) -> StoreResult<usize> {
    let theirs = Query::partition(user_id)
        .any_of("type", upgrade::timelines::with_items_left(JOB))
        .ne("id", ERASE_JOB);
    let (mut written, mut more) = delete_matching(store, Container::Users, theirs, 1).await?;
    let timeline = Query::partition(user_id).eq("type", TIMELINE);
    let (n, m) = delete_matching(store, Container::Timelines, timeline, 1).await?;
    written += n;
    more |= m;
    if job.is_none() {
        // At most TIMELINE_SIZE items of theirs in the shared partition.
        written += over_limit::remove_author(store, user_id).await?;
    }
    if more {
        let steps = job.map_or(0, |j| j.steps) + 1;
        let saved = save_job(store, job, Job::new(user_id, Work::Erase, steps, false)).await?;
        return Ok(written + usize::from(saved));
    }
    if job.is_some() {
        return Ok(written + delete_item(store, Container::Users, user_id, ERASE_JOB).await?);
    }
    Ok(written)
}
