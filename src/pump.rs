//! The in-process change-feed pump (standalone mode): follows the `posts` and `users` feeds,
//! hands each batch to the projections, then checkpoints in `leases`. It resumes from its
//! checkpoint after a restart; an unapplied batch is retried, never skipped. Posts whose
//! counter a projection deferred are projected again once due, and are kept in the checkpoint
//! so that a restart does not forget them.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::task::JoinHandle;

use tokio::time::Instant;

use crate::projection::{self, INCREMENT_GRACE};
use crate::store::{Container, Store, StoreResult};

/// First pause after a failure (doubling up to `MAX_BACKOFF`).
const FIRST_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(5);
const BATCH: u32 = 100;

/// Start one follower per watched container; abort the handles to stop.
pub fn spawn(store: Arc<dyn Store>) -> Vec<JoinHandle<()>> {
    [Container::Posts, Container::Users]
        .into_iter()
        .map(|c| tokio::spawn(follow(store.clone(), c)))
        .collect()
}

fn lease_id(c: Container) -> String {
    format!("pump.{}", c.name())
}

/// Where a follower resumes: the feed position and the posts whose counters await a recheck.
#[derive(Debug, Default)]
struct Checkpoint {
    continuation: Option<String>,
    deferred: Vec<String>,
}

async fn load_checkpoint(store: &dyn Store, c: Container) -> StoreResult<Checkpoint> {
    let id = lease_id(c);
    let Some(lease) = store.read(Container::Leases, &id, &id).await? else {
        return Ok(Checkpoint::default());
    };
    let continuation = lease
        .get("continuation")
        .and_then(Value::as_str)
        .map(String::from);
    let deferred = lease
        .get("deferred")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default();
    Ok(Checkpoint {
        continuation,
        deferred,
    })
}

async fn save_checkpoint(
    store: &dyn Store,
    c: Container,
    continuation: &str,
    deferred: &Rechecks,
) -> StoreResult<()> {
    let id = lease_id(c);
    let lease = json!({
        "id": id,
        "container": c.name(),
        "continuation": continuation,
        "deferred": deferred.0.keys().collect::<Vec<_>>(),
    });
    store.upsert(Container::Leases, &id, lease).await.map(drop)
}

/// Posts to project again, each at its due time.
#[derive(Debug, Default)]
struct Rechecks(BTreeMap<String, Instant>);

impl Rechecks {
    fn defer(&mut self, posts: impl IntoIterator<Item = String>) {
        let due = Instant::now() + INCREMENT_GRACE;
        for p in posts {
            self.0.entry(p).or_insert(due);
        }
    }

    fn take_due(&mut self) -> Vec<String> {
        let now = Instant::now();
        let due: Vec<String> = self
            .0
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(p, _)| p.clone())
            .collect();
        for p in &due {
            self.0.remove(p);
        }
        due
    }

    /// How long an idle follower may sleep before a recheck falls due.
    fn idle(&self, idle: Duration) -> Duration {
        self.0.values().min().map_or(idle, |at| {
            idle.min(at.saturating_duration_since(Instant::now()))
        })
    }
}

async fn follow(store: Arc<dyn Store>, c: Container) {
    let mut backoff = FIRST_BACKOFF;
    let idle = store.idle_poll();
    let checkpoint = loop {
        match load_checkpoint(&*store, c).await {
            Ok(cp) => break cp,
            Err(e) => {
                tracing::warn!(container = c.name(), error = %e, "cannot read the pump checkpoint; retrying");
                tokio::time::sleep(MAX_BACKOFF).await;
            }
        }
    };
    let mut continuation = checkpoint.continuation;
    let mut rechecks = Rechecks::default();
    rechecks.defer(checkpoint.deferred);
    tracing::info!(container = c.name(), checkpoint = ?continuation, "change-feed pump started");
    loop {
        let due = rechecks.take_due();
        if !due.is_empty() {
            let docs: Vec<Value> = due.iter().map(|p| projection::recheck(p)).collect();
            match projection::project(&*store, c, &docs).await {
                Ok(report) => rechecks.defer(report.deferred),
                Err(e) => {
                    tracing::warn!(container = c.name(), error = %e, "counter recheck failed; it will be retried");
                    rechecks.defer(due);
                }
            }
            if let Some(cp) = &continuation {
                if let Err(e) = save_checkpoint(&*store, c, cp, &rechecks).await {
                    tracing::warn!(container = c.name(), error = %e, "checkpoint not saved");
                }
            }
        }
        let page = match store.changes(c, continuation.as_deref(), BATCH).await {
            Ok(page) => page,
            Err(e) => {
                tracing::warn!(container = c.name(), error = %e, "change feed read failed; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
                continue;
            }
        };
        if page.items.is_empty() {
            continuation = Some(page.continuation);
            tokio::time::sleep(rechecks.idle(idle)).await;
            continue;
        }
        match projection::project(&*store, c, &page.items).await {
            Ok(report) => {
                rechecks.defer(report.deferred);
                tracing::debug!(
                    container = c.name(),
                    changes = report.changes,
                    writes = report.writes,
                    "batch projected"
                );
                if let Err(e) = save_checkpoint(&*store, c, &page.continuation, &rechecks).await {
                    // The batch is applied; replaying it after a restart is harmless.
                    tracing::warn!(container = c.name(), error = %e, "checkpoint not saved");
                }
                continuation = Some(page.continuation);
                backoff = FIRST_BACKOFF;
            }
            Err(e) => {
                tracing::error!(container = c.name(), error = %e, "batch not applied; it will be retried");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

/// The feeds the pump follows (those [`spawn`] starts a follower for).
const WATCHED: [Container; 2] = [Container::Posts, Container::Users];

/// Whether the pump has applied every change of the feeds it follows: nothing lies beyond
/// either checkpoint. Projections write too, so this holds only once their writes have settled.
pub async fn caught_up(store: &dyn Store) -> StoreResult<bool> {
    for c in WATCHED {
        let checkpoint = load_checkpoint(store, c).await?;
        if !checkpoint.deferred.is_empty()
            || !store
                .changes(c, checkpoint.continuation.as_deref(), 1)
                .await?
                .items
                .is_empty()
        {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Checkpoint the followed feeds at their current end, so that a pump started afterwards
/// projects only later changes. Only for data written with its projections already in place
/// (the bench loads its dataset that way); anything else needs the pump to read it all.
pub async fn checkpoint_at_end(store: &dyn Store) -> StoreResult<()> {
    for c in WATCHED {
        let checkpoint = load_checkpoint(store, c).await?;
        let mut continuation = checkpoint.continuation;
        loop {
            let page = store.changes(c, continuation.as_deref(), 1000).await?;
            let done = page.items.is_empty();
            continuation = Some(page.continuation);
            if done {
                break;
            }
        }
        if let Some(cp) = &continuation {
            let mut deferred = Rechecks::default();
            deferred.defer(checkpoint.deferred);
            save_checkpoint(store, c, cp, &deferred).await?;
        }
    }
    Ok(())
}
