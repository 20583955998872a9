//! Renames in the timeline lane: a user's new name carried to the edges and timeline entries in
//! other users' partitions that name them, a page a step, recorded in their rename job item.

use serde_json::{json, Value};

use super::RENAME_JOB;
use super::{CONCURRENCY, PAGE};
use crate::domain::follows::REF_USER;
use crate::projection::engine::{apply_all, read_job, save_job};
use crate::projection::merged;
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
    let done = rename
        .as_ref()
        .and_then(|j| j.get("version"))
        .and_then(Value::as_u64)
        .unwrap_or(0);
    if version <= done {
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
    job: Option<&Value>,
) -> StoreResult<usize> {
    let q = naming(user_id).ne("userUsername", name).live().limit(PAGE);
    let mut writes = Vec::new();
    let mut more = false;
    // `users` holds the edges, and entries an earlier release wrote until they are moved.
    for c in [Container::Users, Container::Timelines] {
        let page = retry(|| store.query(c, &q)).await?;
        more |= page.continuation.is_some() || page.items.len() >= PAGE as usize;
        writes.extend(plan_rename(c, name, &page.items));
    }
    if job.is_none_or(|j| j.get("renaming").and_then(Value::as_u64) != Some(version)) {
        // The first step of this rename: the author's items in the shared partition too (at
        // most TIMELINE_SIZE, so one page).
        let (c, q) = merged::naming(user_id);
        let q = q.ne("userUsername", name).limit(PAGE);
        let stale = retry(|| store.query(c, &q)).await?;
        writes.extend(plan_rename(c, name, &stale.items));
    }
    apply_all(store, &writes, CONCURRENCY).await?;
    let steps = job.and_then(|j| j.get("steps")).and_then(Value::as_u64);
    let (version_done, steps) = if more {
        (
            job.and_then(|j| j.get("version")).cloned(),
            steps.unwrap_or(0) + 1,
        )
    } else {
        (Some(version.into()), 0)
    };
    let next = json!({
        "id": RENAME_JOB, "job": "rename", "version": version_done.unwrap_or(0.into()),
        "renaming": version, "username": name, "steps": steps, "done": !more,
    });
    let saved = save_job(store, user_id, job, next).await?;
    Ok(writes.len() + usize::from(saved))
}

/// The query of the edges (in `users`) and entries (in `timelines`) in other users' partitions
/// that name `user_id` (and so carry their name): a rename's fan-out patches these.
pub fn naming(user_id: &str) -> Query {
    Query::cross_partition().eq(REF_USER, user_id)
}
