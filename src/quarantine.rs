//! The quarantine: changes a projection lane could not apply, kept so that the lane moves on and
//! nothing is lost (`docs/operations.md`, "Quarantined changes").
//!
//! Both drivers (the standalone pump and the Functions triggers) project a batch through
//! [`project`]. A batch that fails is retried by its driver as before; once it has failed
//! [`ATTEMPTS`] times, its changes are applied one at a time, and each change that still fails is
//! written to `leases` as a quarantine entry ([`Entry`]: the lane, the feed, the item's partition
//! key and id, the error, the first and last failure and the attempts) and logged with
//! `quarantined=<lane>.<feed>/<pk>/<id>`. The batch is then answered as applied, so the lane goes
//! on with the changes after it. Should the entry itself not be written, the batch fails as before
//! and is retried: a change is either applied or quarantined, never dropped.
//!
//! A quarantined change is retried on its own ([`replay`]): the item's *current* state is read
//! and projected as a change. The projections treat every change as a notification and write what
//! follows from the present state, so projecting the item as it is now is the whole replay. The
//! drivers replay their lane's entries every [`RETRY_EVERY`]; `handler quarantine replay` does at
//! once, `handler quarantine drop` gives an entry up, `handler verify` reports any entry as a
//! finding.
//!
//! Entry ids are `quarantine.<lane>.<feed>.<pk>.<id>`. The Functions host's own lease documents
//! in `leases` start with their function's `leaseContainerPrefix` (`posts-`, `users-`,
//! `timeline-posts-`, `timeline-users-`) and the pump's checkpoints with `pump.`, so none of them
//! can take the form of an entry.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash as _, Hasher as _};
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::projection::{self, Lane, ProjectionError, Report};
use crate::store::{retry, Container, Query, Store, StoreError, StoreResult};

/// Failed attempts of a batch before its changes are applied one at a time and those that still
/// fail are quarantined.
pub const ATTEMPTS: u32 = 5;

/// How often a driver retries its lane's quarantined changes on its own.
pub const RETRY_EVERY: Duration = Duration::from_secs(60);

/// The `type` of a quarantine entry in `leases`.
pub const TYPE: &str = "quarantine";
const PREFIX: &str = "quarantine.";

/// Batches whose attempts are counted at once; beyond it the counts start over (a batch then
/// takes a few more attempts before it is split).
const TRACKED: usize = 1024;

/// One quarantined change, as kept in `leases`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    pub id: String,
    /// The lane that could not apply it (`main`, `timeline`).
    pub lane: String,
    /// The feed it came from (`posts`, `users`).
    pub container: String,
    /// The changed item's partition key and id in that container.
    pub pk: String,
    pub item_id: String,
    /// The projection unit that failed on it (`crate::projection::UNITS`); empty on an entry
    /// kept before entries named it, or for a failure that was no one unit's.
    #[serde(default)]
    pub unit: String,
    /// The last failure's error.
    pub error: String,
    pub first_failure: String,
    pub last_failure: String,
    /// Failed attempts so far (the batch's, then each replay's).
    pub attempts: u64,
}

impl Entry {
    /// `<lane>.<feed>/<pk>/<id>`: what the log line names after `quarantined=`.
    pub fn label(&self) -> String {
        format!(
            "{}.{}/{}/{}",
            self.lane, self.container, self.pk, self.item_id
        )
    }

    fn lane(&self) -> Option<Lane> {
        Lane::ALL.into_iter().find(|l| l.name() == self.lane)
    }

    fn feed(&self) -> Option<Container> {
        [Container::Posts, Container::Users]
            .into_iter()
            .find(|c| c.name() == self.container)
    }
}

/// The id of the entry for item `pk`/`id` of `container`'s feed in `lane`. Characters an id may
/// not hold in Cosmos DB (`/ \ ? #`) are replaced; the entry keeps the item's own pk and id.
pub fn entry_id(lane: Lane, container: Container, pk: &str, id: &str) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if matches!(c, '/' | '\\' | '?' | '#') {
                    '_'
                } else {
                    c
                }
            })
            .collect()
    };
    format!(
        "{PREFIX}{}.{}.{}.{}",
        lane.name(),
        container.name(),
        clean(pk),
        clean(id)
    )
}

/// Failed attempts per batch, for a driver that sees the same batch again after a failure.
#[derive(Debug, Default)]
pub struct Attempts(Mutex<HashMap<u64, u32>>);

impl Attempts {
    /// Count one more failure of batch `key`; the failures so far.
    fn failed(&self, key: u64) -> u32 {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if m.len() >= TRACKED && !m.contains_key(&key) {
            m.clear();
        }
        let n = m.entry(key).or_insert(0);
        *n += 1;
        *n
    }

    fn forget(&self, key: u64) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&key);
    }
}

/// A key for a batch: its changes' ids and `_lsn`s (a redelivered batch is the same batch).
pub fn batch_key(lane: Lane, container: Container, changes: &[Value]) -> u64 {
    let mut h = DefaultHasher::new();
    (lane.name(), container.name()).hash(&mut h);
    for d in changes {
        d.get("id").and_then(Value::as_str).hash(&mut h);
        d.get("_lsn").and_then(Value::as_u64).hash(&mut h);
    }
    h.finish()
}

/// A batch projected: what the projections did, and the changes quarantined on the way.
#[derive(Debug, Default)]
pub struct Projected {
    pub report: Report,
    pub quarantined: Vec<Entry>,
}

/// Project a batch in `lane` ([`projection::project_lane`]). `key` names the batch across its
/// attempts, `attempts` counts them; `delivered` is the attempt number the driver knows of
/// otherwise (the host's retry count plus one; 0 when it does not know). Once the batch has
/// failed [`ATTEMPTS`] times its changes are applied one by one and those that fail are
/// quarantined: the answer is then `Ok` with the rest applied.
pub async fn project(
    store: &dyn Store,
    lane: Lane,
    container: Container,
    changes: &[Value],
    (key, attempts): (u64, &Attempts),
    delivered: u64,
) -> Result<Projected, ProjectionError> {
    let e = match projection::project_lane(store, lane, container, changes).await {
        Ok(report) => {
            attempts.forget(key);
            return Ok(Projected {
                report,
                quarantined: Vec::new(),
            });
        }
        Err(e) => e,
    };
    let failed = u64::from(attempts.failed(key)).max(delivered);
    if failed < u64::from(ATTEMPTS) {
        return Err(e);
    }
    let projected = isolate(store, lane, container, changes, failed).await?;
    attempts.forget(key);
    Ok(projected)
}

/// Apply `changes` one at a time; quarantine each that fails (after the batch failed `failed`
/// times). `Err` only when an entry could not be written: then the batch is to be retried.
async fn isolate(
    store: &dyn Store,
    lane: Lane,
    container: Container,
    changes: &[Value],
    failed: u64,
) -> Result<Projected, ProjectionError> {
    let mut report = Report::default();
    let mut quarantined = Vec::new();
    for change in changes {
        match projection::project_lane(store, lane, container, std::slice::from_ref(change)).await {
            Ok(r) => {
                report.writes += r.writes;
                report.deferred.extend(r.deferred);
                report.settled.extend(r.settled);
            }
            Err(e) => {
                let pk_field = container.partition_key_field();
                let field = |f: &str| change.get(f).and_then(Value::as_str).unwrap_or("?");
                let (pk, id) = (field(pk_field), field("id"));
                let entry = keep(store, lane, container, (pk, id), &e, failed)
                    .await
                    .map_err(|w| ProjectionError {
                        unit: e.unit,
                        reason: format!("{}; and not quarantined: {w}", e.reason),
                        not_applied: e.not_applied.clone(),
                    })?;
                tracing::error!(
                    quarantined = entry.label(),
                    unit = e.unit,
                    attempts = entry.attempts,
                    error = %e.reason,
                    "change not applied; quarantined (handler quarantine list)"
                );
                quarantined.push(entry);
            }
        }
    }
    report.changes = changes.len();
    Ok(Projected {
        report,
        quarantined,
    })
}

/// Write (or update) the entry for one change that failed `failed` more times.
async fn keep(
    store: &dyn Store,
    lane: Lane,
    container: Container,
    (pk, id): (&str, &str),
    error: &ProjectionError,
    failed: u64,
) -> StoreResult<Entry> {
    let entry_id = entry_id(lane, container, pk, id);
    let now = crate::domain::now();
    let old = retry(|| store.read(Container::Leases, &entry_id, &entry_id)).await?;
    let old: Option<Entry> = old.and_then(|v| serde_json::from_value(v).ok());
    let entry = Entry {
        id: entry_id.clone(),
        lane: lane.name().into(),
        container: container.name().into(),
        pk: pk.into(),
        item_id: id.into(),
        unit: error.unit.into(),
        error: error.reason.clone(),
        first_failure: old
            .as_ref()
            .map_or_else(|| now.clone(), |o| o.first_failure.clone()),
        last_failure: now,
        attempts: old.map_or(0, |o| o.attempts) + failed,
    };
    save(store, &entry).await?;
    Ok(entry)
}

async fn save(store: &dyn Store, entry: &Entry) -> StoreResult<()> {
    let mut item = serde_json::to_value(entry).expect("an entry is JSON");
    item["type"] = json!(TYPE);
    retry(|| store.upsert(Container::Leases, &entry.id, item.clone()))
        .await
        .map(drop)
}

/// Every quarantine entry, or only those of `lane` over `container`.
pub async fn list(store: &dyn Store, only: Option<(Lane, Container)>) -> StoreResult<Vec<Entry>> {
    let mut q = Query::cross_partition().eq("type", TYPE);
    if let Some((lane, c)) = only {
        q = q.eq("lane", lane.name()).eq("container", c.name());
    }
    let mut out = Vec::new();
    loop {
        let page = retry(|| store.query(Container::Leases, &q)).await?;
        out.extend(
            page.items
                .into_iter()
                .filter_map(|v| serde_json::from_value::<Entry>(v).ok()),
        );
        match page.continuation {
            Some(t) => q.continuation = Some(t),
            None => break,
        }
    }
    out.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(out)
}

/// Remove entry `id`; whether there was one.
pub async fn drop_entry(store: &dyn Store, id: &str) -> StoreResult<bool> {
    match retry(|| store.delete(Container::Leases, id, id)).await {
        Ok(()) => Ok(true),
        Err(StoreError::NotFound) => Ok(false),
        Err(e) => Err(e),
    }
}

/// What a replay did.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Replayed {
    /// Entries whose item was projected, and removed.
    pub applied: Vec<String>,
    /// Entries whose item is gone from its container (a deletion mark past its time to live):
    /// removed, nothing left to project (`handler verify --repair` mends what it left behind).
    pub gone: Vec<String>,
    /// Entries that failed again (their attempts and error updated), with the error.
    pub failed: Vec<(String, String)>,
    /// Posts whose counter is to be looked at again (see [`Report::deferred`]).
    pub deferred: Vec<String>,
}

/// Replay `entries`: read each item as it is now and project it in the entry's lane; an entry
/// applied (or whose item is gone) is removed, one that fails again is updated. `Err` only when
/// the store cannot be used at all.
pub async fn replay(store: &dyn Store, entries: &[Entry]) -> StoreResult<Replayed> {
    let mut done = Replayed::default();
    for entry in entries {
        let (Some(lane), Some(c)) = (entry.lane(), entry.feed()) else {
            done.failed.push((
                entry.id.clone(),
                "not a lane and feed of this handler".into(),
            ));
            continue;
        };
        let Some(item) = retry(|| store.read(c, &entry.pk, &entry.item_id)).await? else {
            drop_entry(store, &entry.id).await?;
            tracing::warn!(
                quarantine_dropped = entry.label(),
                "quarantined change's item is gone; entry removed"
            );
            done.gone.push(entry.id.clone());
            continue;
        };
        match projection::project_lane(store, lane, c, std::slice::from_ref(&item)).await {
            Ok(report) => {
                drop_entry(store, &entry.id).await?;
                tracing::info!(
                    quarantine_replayed = entry.label(),
                    "quarantined change applied"
                );
                done.deferred.extend(report.deferred);
                done.applied.push(entry.id.clone());
            }
            Err(e) => {
                let mut again = entry.clone();
                again.attempts += 1;
                again.error = e.reason.clone();
                again.unit = e.unit.into();
                again.last_failure = crate::domain::now();
                save(store, &again).await?;
                tracing::warn!(
                    quarantined = entry.label(),
                    attempts = again.attempts,
                    error = %e.reason,
                    "quarantined change failed again"
                );
                done.failed.push((entry.id.clone(), e.reason));
            }
        }
    }
    Ok(done)
}

/// Replay the quarantined changes of `lane` over `container` (what a driver does every
/// [`RETRY_EVERY`]); failures are logged, never raised.
pub async fn retry_lane(store: &dyn Store, lane: Lane, container: Container) -> Vec<String> {
    let entries = match list(store, Some((lane, container))).await {
        Ok(e) => e,
        Err(e) => {
            tracing::warn!(lane = lane.name(), container = container.name(), error = %e, "quarantine not read");
            return Vec::new();
        }
    };
    if entries.is_empty() {
        return Vec::new();
    }
    match replay(store, &entries).await {
        Ok(done) => done.deferred,
        Err(e) => {
            tracing::warn!(lane = lane.name(), container = container.name(), error = %e, "quarantine not replayed");
            Vec::new()
        }
    }
}

/// For a driver that keeps nothing between batches (the Functions triggers): whether `lane` over
/// `container` is due for [`retry_lane`] in this process (at most every [`RETRY_EVERY`]); claims
/// the turn when it is.
pub fn due(lane: Lane, container: Container) -> bool {
    static LAST: Mutex<Vec<(Lane, Container, std::time::Instant)>> = Mutex::new(Vec::new());
    let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
    let now = std::time::Instant::now();
    match last
        .iter_mut()
        .find(|(l, c, _)| *l == lane && *c == container)
    {
        Some((_, _, at)) if now.duration_since(*at) < RETRY_EVERY => false,
        Some((_, _, at)) => {
            *at = now;
            true
        }
        None => {
            last.push((lane, container, now));
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_ids_cannot_meet_the_hosts_or_the_pumps_leases() {
        let id = entry_id(Lane::Timeline, Container::Posts, "p/1", "p#1");
        assert_eq!(id, "quarantine.timeline.posts.p_1.p_1");
        for prefix in [
            "posts-",
            "users-",
            "timeline-posts-",
            "timeline-users-",
            "pump.",
        ] {
            assert!(!id.starts_with(prefix), "{prefix}");
        }
    }

    #[test]
    fn a_batch_is_known_by_its_ids_and_lsns() {
        let a = [json!({"id": "p1", "_lsn": 3})];
        let b = [json!({"id": "p1", "_lsn": 4})];
        let k = |d: &[Value]| batch_key(Lane::Main, Container::Posts, d);
        assert_eq!(k(&a), k(&a));
        assert_ne!(k(&a), k(&b));
        assert_ne!(k(&a), batch_key(Lane::Timeline, Container::Posts, &a));
    }
}
