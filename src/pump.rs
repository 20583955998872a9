//! The in-process change-feed pump (standalone mode): follows the `posts` and `users` feeds,
//! hands each batch to the projections, then checkpoints in `leases`. It resumes from its
//! checkpoint after a restart; an unapplied batch is retried, never skipped.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::task::JoinHandle;

use crate::projection::{self, ProjectionError, Report};
use crate::store::{ChangeNotifier, Container, Store, StoreResult};

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

async fn load_checkpoint(store: &dyn Store, c: Container) -> StoreResult<Option<String>> {
    let id = lease_id(c);
    Ok(store
        .read(Container::Leases, &id, &id)
        .await?
        .and_then(|v| {
            v.get("continuation")
                .and_then(Value::as_str)
                .map(String::from)
        }))
}

async fn save_checkpoint(store: &dyn Store, c: Container, continuation: &str) -> StoreResult<()> {
    let id = lease_id(c);
    let lease = json!({ "id": id, "container": c.name(), "continuation": continuation });
    store.upsert(Container::Leases, &id, lease).await.map(drop)
}

async fn project(
    store: &dyn Store,
    c: Container,
    batch: &[Value],
) -> Result<Report, ProjectionError> {
    match c {
        Container::Users => projection::project_users(store, batch).await,
        _ => projection::project_posts(store, batch).await,
    }
}

async fn follow(store: Arc<dyn Store>, c: Container) {
    let mut backoff = FIRST_BACKOFF;
    let idle = store.idle_poll();
    let mut continuation = loop {
        match load_checkpoint(&*store, c).await {
            Ok(cp) => break cp,
            Err(e) => {
                tracing::warn!(container = c.name(), error = %e, "cannot read the pump checkpoint; retrying");
                tokio::time::sleep(MAX_BACKOFF).await;
            }
        }
    };
    tracing::info!(container = c.name(), checkpoint = ?continuation, "change-feed pump started");
    // Where the store can tell, a commit wakes the follower; the idle poll is the fallback.
    let mut wake = store.change_notifier(c);
    loop {
        if let Some(w) = &mut wake {
            // Seen before reading: a commit from here on wakes the wait below.
            w.borrow_and_update();
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
            wait_for_changes(&mut wake, idle).await;
            continue;
        }
        match project(&*store, c, &page.items).await {
            Ok(report) => {
                tracing::debug!(
                    container = c.name(),
                    changes = report.changes,
                    writes = report.writes,
                    "batch projected"
                );
                if let Err(e) = save_checkpoint(&*store, c, &page.continuation).await {
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

/// Wait until the store signals a commit or `idle` has passed, whichever comes first.
async fn wait_for_changes(wake: &mut Option<ChangeNotifier>, idle: Duration) {
    let Some(w) = wake else {
        return tokio::time::sleep(idle).await;
    };
    tokio::select! {
        changed = w.changed() => {
            if changed.is_err() {
                // The store is gone: no more signals, poll from now on.
                *wake = None;
            }
        }
        () = tokio::time::sleep(idle) => {}
    }
}

/// The feeds the pump follows (those [`spawn`] starts a follower for).
const WATCHED: [Container; 2] = [Container::Posts, Container::Users];

/// Whether the pump has applied every change of the feeds it follows: nothing lies beyond
/// either checkpoint. Projections write too, so this holds only once their writes have settled.
pub async fn caught_up(store: &dyn Store) -> StoreResult<bool> {
    for c in WATCHED {
        let checkpoint = load_checkpoint(store, c).await?;
        if !store
            .changes(c, checkpoint.as_deref(), 1)
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
        let mut continuation = load_checkpoint(store, c).await?;
        loop {
            let page = store.changes(c, continuation.as_deref(), 1000).await?;
            let done = page.items.is_empty();
            continuation = Some(page.continuation);
            if done {
                break;
            }
        }
        if let Some(cp) = &continuation {
            save_checkpoint(store, c, cp).await?;
        }
    }
    Ok(())
}
