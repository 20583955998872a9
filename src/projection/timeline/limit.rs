//! The fan-out limit: which authors are *merged* (more followers than the limit, their posts
//! read into timelines rather than copied) and which copied, with the limit kept in the store
//! so that every process judges by the same one. How an author crosses it is
//! [`super::crossing`].

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use crate::domain::jobs::LIMIT_JOB;
use crate::domain::jobs::{Job, Work};
use crate::projection::engine::read_job;
use crate::store::{retry, Container, Store, StoreError, StoreResult};

/// The fan-out limit when none is recorded.
pub const DEFAULT_FANOUT_LIMIT: u64 = crate::settings::DEFAULT_TIMELINE_FANOUT_LIMIT;

/// The `leases` item recording the limit in force (partition key = id).
pub const LIMIT_ID: &str = "settings.timeline";

/// The item [`LIMIT_ID`]: the fan-out limit in force.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct LimitRecord {
    id: String,
    fanout_limit: u64,
}

/// The limit recorded in the store, if any (one point read; a record that does not read is
/// none, and the next process configured with a limit writes it whole).
pub async fn stored_limit(store: &dyn Store) -> StoreResult<Option<u64>> {
    let item = retry(|| store.read(Container::Leases, LIMIT_ID, LIMIT_ID)).await?;
    Ok(item
        .and_then(|i| LimitRecord::deserialize(&i).ok())
        .map(|r| r.fanout_limit))
}

/// Record `limit` as the one in force, unless it is already (a point read, and a write when it
/// differs). A process configured with a limit (`BLOG_TIMELINE_FANOUT_LIMIT`) records it before
/// its timeline lane projects anything: the standalone pump when it starts, the timeline
/// triggers on their first invocation. Every process then judges by the recorded one.
pub async fn record_limit(store: &dyn Store, limit: u64) -> StoreResult<()> {
    if stored_limit(store).await? != Some(limit) {
        let record = LimitRecord {
            id: LIMIT_ID.into(),
            fanout_limit: limit,
        };
        let item = crate::domain::to_value(&record);
        retry(|| store.upsert(Container::Leases, LIMIT_ID, item.clone())).await?;
    }
    Ok(())
}

/// The limit in force: the recorded one, else the default. Read by the timeline lane when it
/// needs it (once per batch that changes a user), and by verify and repair.
pub async fn limit_in_force(store: &dyn Store) -> StoreResult<u64> {
    Ok(stored_limit(store).await?.unwrap_or(DEFAULT_FANOUT_LIMIT))
}

/// Whether an author with `followers` who is copied is merged: more followers than the limit.
pub fn merges(followers: u64, limit: u64) -> bool {
    followers > limit
}

/// Whether a merged author with `followers` is copied again: fewer followers than 80% of the
/// limit.
pub fn unmerges(followers: u64, limit: u64) -> bool {
    u128::from(followers) * 5 < u128::from(limit) * 4
}

/// An author's side of the fan-out limit, as their job item records it.
#[derive(Debug, Clone, Default)]
pub struct LimitState {
    /// Their posts are not copied (their followers' timelines hold markers).
    pub merged: bool,
    /// A crossing under way: `Some(true)` writing the markers, `Some(false)` removing them.
    pub target: Option<bool>,
    pub(super) cursor: Option<String>,
    pub(super) job: Option<Job>,
}

impl LimitState {
    /// The state a job item records.
    pub fn of_job(job: Job) -> StoreResult<LimitState> {
        let Work::Limit {
            merged,
            target,
            cursor,
        } = &job.work
        else {
            return Err(StoreError::Other(format!(
                "job item {} is not a fan-out limit record",
                job.id
            )));
        };
        Ok(LimitState {
            merged: *merged,
            target: *target,
            cursor: cursor.clone(),
            job: Some(job),
        })
    }

    /// Whether a new follower gets a marker rather than copies.
    pub fn marks(&self) -> bool {
        self.merged || self.target == Some(true)
    }

    /// The side the author is on or crossing to.
    pub fn side(&self) -> bool {
        self.target.unwrap_or(self.merged)
    }
}

/// Author `user_id`'s side of the limit. Without a job item, what an earlier release recorded
/// on the user (`timelineMerged`).
pub async fn limit_state(
    store: &dyn Store,
    user_id: &str,
    user: Option<&Value>,
) -> StoreResult<LimitState> {
    let item = read_job(store, user_id, LIMIT_JOB).await?;
    Ok(match item {
        Some(i) => LimitState::of_job(i)?,
        None => LimitState {
            merged: user.is_some_and(|u| u.get("timelineMerged") == Some(&Value::Bool(true))),
            ..LimitState::default()
        },
    })
}
