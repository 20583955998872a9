//! Renames in the timeline lane: a user's new name carried to the edges and timeline entries in
//! other users' partitions that name them, a page a step, recorded in their rename job item.

use crate::domain::follows::REF_USER;
use crate::domain::jobs::{Job, Work, RENAME_JOB};
use crate::projection::engine::{apply_all, read_job, save_job};
use crate::projection::engine::{CONCURRENCY, PAGE};
use crate::projection::over_limit;
use crate::projection::rename::plan_rename;
use crate::store::{retry, Container, Query, Store, StoreResult};

/// User `user_id` (`user`, live) changed: unless the job item records their rename version as
/// done, its first step. Returns the writes made.
pub(super) async fn user_changed(
    store: &dyn Store,
    user_id: &str,
    user: &crate::domain::User,
) -> StoreResult<usize> {
    let version = user.rename_version;
    let rename = read_job(store, user_id, RENAME_JOB).await?;
    if version <= rename.as_ref().map_or(0, |j| rename_of(j).0) {
        return Ok(0);
    }
    rename_step(store, user_id, &user.username, version, rename.as_ref()).await
}

/// One page of the edges (in `users`) and of the entries (in `timelines`, and in `users` those
/// still to be moved there) in other users' partitions still carrying another name than `name`
/// patched; the job item records the rename `version` as done once both pages come back short,
/// or is written again (its change brings the next pages). Patched items stop matching, so each
/// page is the query's first.
pub(super) async fn rename_step(
    store: &dyn Store,
    user_id: &str,
    name: &str,
    version: u64,
    job: Option<&Job>,
) -> StoreResult<usize> {
    let (done, renaming) = job.map_or((0, None), rename_of);
    let q = naming(user_id).ne("userUsername", name).live().limit(PAGE);
    let mut writes = Vec::new();
    let mut more = false;
    // `users` holds the edges (and entries an earlier release wrote until they are moved:
    // `upgrade::timelines`, the same query finds them).
    for c in [Container::Users, Container::Timelines] {
        let page = retry(|| store.query(c, &q)).await?;
        more |= page.continuation.is_some() || page.items.len() >= PAGE as usize;
        writes.extend(plan_rename(c, name, &page.items));
    }
    if renaming != Some(version) {
        // The first step of this rename: the author's items in the shared partition too (at
        // most TIMELINE_SIZE, so one page).
        let (c, q) = over_limit::naming(user_id);
        let q = q.ne("userUsername", name).limit(PAGE);
        let stale = retry(|| store.query(c, &q)).await?;
        writes.extend(plan_rename(c, name, &stale.items));
    }
    apply_all(store, &writes, CONCURRENCY).await?;
    let steps = job.map_or(0, |j| j.steps);
    let (version_done, steps) = if more {
        (done, steps + 1)
    } else {
        (version, 0)
    };
    let work = Work::Rename {
        version: version_done,
        renaming: version,
        username: name.into(),
    };
    let saved = save_job(store, job, Job::new(user_id, work, steps, !more)).await?;
    Ok(writes.len() + usize::from(saved))
}

/// The rename version a rename job records as done, and the one it is carrying out.
fn rename_of(job: &Job) -> (u64, Option<u64>) {
    match job.work {
        Work::Rename {
            version, renaming, ..
        } => (version, Some(renaming)),
        _ => (0, None),
    }
}

/// The query of the edges (in `users`) and entries (in `timelines`) in other users' partitions
/// that name `user_id` (and so carry their name): a rename's fan-out patches these.
pub fn naming(user_id: &str) -> Query {
    Query::cross_partition().eq(REF_USER, user_id)
}
