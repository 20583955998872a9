//! The followers' checkpoints in `leases`: where each resumes (its feed position and the posts
//! whose counters await a recheck), and what the operations commands and the tests ask of them
//! (whether the pump has caught up, where each follower stands, checkpointing at the feeds' end).

use serde_json::{json, Value};

use super::{Follower, FOLLOWERS};
use crate::projection::Lane;
use crate::rechecks::Rechecks;
use crate::store::{Container, Store, StoreResult};

/// `pump.posts`, `pump.users` (the main lane), `pump.timeline.posts`, `pump.timeline.users`.
pub(super) fn lease_id(c: Follower) -> String {
    format!("pump.{}", c.name())
}

/// Where a follower resumes: the feed position and the posts whose counters await a recheck.
#[derive(Debug, Default)]
pub(super) struct Checkpoint {
    pub(super) continuation: Option<String>,
    pub(super) deferred: Vec<String>,
}

/// Where follower `c` starts: its checkpoint. A timeline follower without one, on a store whose
/// main lane checkpointed before the lanes were apart (its lease names no lane; the main lane
/// then wrote the timelines too), starts where the main lane is rather than replaying every
/// post's fan-out; its lease is written at once, so that nothing is taken for that later.
pub(super) async fn start_checkpoint(store: &dyn Store, c: Follower) -> StoreResult<Checkpoint> {
    let id = lease_id(c);
    if c.lane == Lane::Main || store.read(Container::Leases, &id, &id).await?.is_some() {
        return load_checkpoint(store, c).await;
    }
    let main_id = lease_id(Follower {
        lane: Lane::Main,
        ..c
    });
    let continuation = store
        .read(Container::Leases, &main_id, &main_id)
        .await?
        .filter(|l| l.get("lane").is_none())
        .and_then(|l| {
            l.get("continuation")
                .and_then(Value::as_str)
                .map(String::from)
        });
    let lease = json!({
        "id": id,
        "container": c.c.name(),
        "lane": c.lane.name(),
        "continuation": continuation,
        "deferred": [],
    });
    store.upsert(Container::Leases, &id, lease).await?;
    Ok(Checkpoint {
        continuation,
        deferred: Vec::new(),
    })
}

pub(super) async fn load_checkpoint(store: &dyn Store, c: Follower) -> StoreResult<Checkpoint> {
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

pub(super) async fn save_checkpoint(
    store: &dyn Store,
    c: Follower,
    continuation: &str,
    deferred: &Rechecks,
) -> StoreResult<()> {
    let id = lease_id(c);
    let lease = json!({
        "id": id,
        "container": c.c.name(),
        "lane": c.lane.name(),
        "continuation": continuation,
        "deferred": deferred.posts(),
    });
    store.upsert(Container::Leases, &id, lease).await.map(drop)
}

/// Whether the pump has applied every change of the feeds it follows: nothing lies beyond any
/// follower's checkpoint. Projections write too, so this holds only once their writes have
/// settled.
pub async fn caught_up(store: &dyn Store) -> StoreResult<bool> {
    for c in FOLLOWERS {
        let checkpoint = load_checkpoint(store, c).await?;
        if !checkpoint.deferred.is_empty()
            || !store
                .changes(c.c, checkpoint.continuation.as_deref(), 1)
                .await?
                .items
                .is_empty()
        {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Where one follower stands in its feed, as checkpointed.
#[derive(Debug, Clone)]
pub struct Position {
    pub lane: Lane,
    pub container: Container,
    /// Its checkpoint (`None`: it has not checkpointed, so it starts from the beginning).
    pub continuation: Option<String>,
    /// Posts whose counters await a recheck.
    pub deferred: Vec<String>,
}

/// Where every follower stands, or `None` when none has ever checkpointed in this store: its
/// feeds are followed by something else (the Functions host's triggers, whose leases are
/// theirs), or by nothing yet.
pub async fn positions(store: &dyn Store) -> StoreResult<Option<Vec<Position>>> {
    let mut out = Vec::new();
    let mut any = false;
    for c in FOLLOWERS {
        let id = lease_id(c);
        any |= store.read(Container::Leases, &id, &id).await?.is_some();
        let checkpoint = load_checkpoint(store, c).await?;
        out.push(Position {
            lane: c.lane,
            container: c.c,
            continuation: checkpoint.continuation,
            deferred: checkpoint.deferred,
        });
    }
    Ok(any.then_some(out))
}

/// Checkpoint the followed feeds at their current end, so that a pump started afterwards
/// projects only later changes. Only for data written with its projections already in place
/// (the bench loads its dataset that way); anything else needs the pump to read it all.
pub async fn checkpoint_at_end(store: &dyn Store) -> StoreResult<()> {
    for c in FOLLOWERS {
        let checkpoint = load_checkpoint(store, c).await?;
        let mut continuation = checkpoint.continuation;
        loop {
            let page = store.changes(c.c, continuation.as_deref(), 1000).await?;
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
