//! An author crossing the fan-out limit ([`super::limit`]), a page of followers a step:
//! going over, each follower's timeline gets a marker (and only then does copying stop);
//! coming back, copying resumes first, then each follower's marker is removed and the posts
//! copied.

use serde_json::Value;

use super::backfill::copy_or_mark;
use super::limit::{limit_state, merges, unmerges, LimitState};
use super::{Batch, BACKFILL_PAGE};
use crate::domain::follows::{FOLLOWER, REF_USER};
use crate::domain::jobs::{Job, Work};
use crate::projection::engine::PAGE;
use crate::projection::engine::{live_user, save_job};
use crate::projection::over_limit;
use crate::projection::write::str_field;
use crate::store::{retry, Container, Query, Store, StoreError, StoreResult};

/// User `user_id` (`user`, live) changed: a crossing starts when their follower count calls
/// for one. Returns the writes made.
pub(super) async fn user_changed(
    store: &dyn Store,
    user_id: &str,
    user: &Value,
    typed: &crate::domain::User,
    batch: &mut Batch,
) -> StoreResult<usize> {
    let mut written = 0;
    // The limit: a crossing starts when the count calls for one.
    let followers = typed.follower_count;
    let state = limit_state(store, user_id, Some(user)).await?;
    let side = state.side();
    let cross_to = if !side && merges(followers, batch.limit(store).await?) {
        Some(true)
    } else if side && unmerges(followers, batch.limit(store).await?) {
        Some(false)
    } else {
        None
    };
    if let Some(target) = cross_to {
        // Going over, copying goes on until every marker is written, and their newest posts are
        // in the shared partition before the first one; coming back, copying resumes at once
        // (the markers then go, and the posts are copied, a page of followers a step).
        if target {
            written += over_limit::copy_author(store, user_id, &typed.username).await?;
        }
        let work = Work::Limit {
            merged: target && state.merged,
            target: Some(target),
            cursor: None,
        };
        let job = Job::new(user_id, work, 0, false);
        if !save_job(store, state.job.as_ref(), job).await? {
            return Err(StoreError::Other(format!(
                "the fan-out limit record of user {user_id} changed while it was written"
            )));
        }
        written += 1;
    }
    Ok(written)
}

/// One page of followers switched to the side the author is crossing to: markers written, or
/// markers removed and the posts copied ([`BACKFILL_PAGE`] followers). The last page records
/// the crossing done (`merged` set to its target).
pub(super) async fn limit_step(
    store: &dyn Store,
    places: &[Container],
    job: &Job,
) -> StoreResult<usize> {
    let user_id = job.user_id.as_str();
    let state = LimitState::of_job(job.clone())?;
    let Some(target) = state.target else {
        return Ok(0);
    };
    let Some(user) = live_user(store, user_id).await? else {
        return Ok(0);
    };
    let q = Query::partition(user_id)
        .eq("type", FOLLOWER)
        .live()
        .limit(if target { PAGE } else { BACKFILL_PAGE })
        .continuation(state.cursor.clone());
    let mut written = 0;
    if target && state.cursor.is_none() {
        // Going over: their newest posts in the shared partition before the first marker.
        let name = &crate::projection::engine::as_user(&user)?.username;
        written += over_limit::copy_author(store, user_id, name).await?;
    }
    let page = retry(|| store.query(Container::Users, &q)).await?;
    for m in &page.items {
        if let Some(f) = str_field(m, REF_USER) {
            written += copy_or_mark(store, places, f, user_id, &user, &state).await?;
        }
    }
    if !target && page.continuation.is_none() {
        // Coming back: every follower holds the posts again; the shared copies go.
        written += over_limit::remove_author(store, user_id).await?;
    }
    let done = page.continuation.is_none();
    let work = Work::Limit {
        merged: if done { target } else { state.merged },
        target: Some(target).filter(|_| !done),
        cursor: page.continuation,
    };
    let next = Job::new(user_id, work, job.steps + 1, done);
    let saved = save_job(store, Some(job), next).await?;
    Ok(written + usize::from(saved))
}
