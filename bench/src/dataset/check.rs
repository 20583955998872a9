//! The store before and after loading: empty to start with, converged once loaded (`--verify`),
//! and the pump caught up.

use std::time::{Duration, Instant};

use anyhow::bail;
use blog::projection::{self, Write};
use blog::store::{Container, Query, Store};
use serde::Serialize;
use serde_json::Value;

use super::str_of;

/// An empty store, or a clear error: the bench loads its own dataset and must not mix it with
/// (or count requests against) someone else's data.
pub async fn ensure_empty(store: &dyn Store) -> anyhow::Result<()> {
    for c in [Container::Users, Container::Posts, Container::Feed] {
        let n = store.count(c, &Query::cross_partition()).await?;
        if n > 0 {
            bail!(
                "container `{}` already holds {n} items; the bench needs an empty database",
                c.name()
            );
        }
    }
    Ok(())
}

fn without_system_properties(mut v: Value) -> Value {
    if let Some(o) = v.as_object_mut() {
        o.retain(|k, _| !k.starts_with('_'));
    }
    v
}

/// What `--verify` found.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Verification {
    pub changes_replayed: usize,
    pub writes_planned: usize,
    pub seconds: f64,
}

/// Replay the whole `posts` change feed through the product's planner, reading the facts the
/// way the pump does, and require that everything it would write is already stored as is (and
/// no patch or delete is due); then require that no item carries a stale username. This is the
/// evidence that the loaded data equals what the change feed would have converged to.
pub async fn verify(store: &dyn Store) -> anyhow::Result<Verification> {
    let started = Instant::now();
    let mut out = Verification::default();
    let mut continuation: Option<String> = None;
    loop {
        let page = store
            .changes(Container::Posts, continuation.as_deref(), 500)
            .await?;
        if page.items.is_empty() {
            break;
        }
        out.changes_replayed += page.items.len();
        let changes = projection::change::decoded(Container::Posts, &page.items)
            .map_err(|e| anyhow::anyhow!("{}: {}", e.label, e.error))?;
        let changes: Vec<&projection::change::Change> = changes.iter().collect();
        let needs = projection::posts_needs(&changes);
        let facts = projection::posts::gather::posts_facts(store, &changes, &needs).await?;
        for w in projection::plan_posts(&changes, &needs, &facts) {
            out.writes_planned += 1;
            let Write::Upsert {
                container,
                pk,
                item,
            } = &w
            else {
                bail!("not converged: the projection still plans {w:?}");
            };
            let stored = store
                .read(*container, pk, str_of(item, "id"))
                .await?
                .map(without_system_properties);
            if stored.as_ref() != Some(item) {
                bail!(
                    "not converged: {} is {stored:?}, the projection writes {item}",
                    w.target()
                );
            }
        }
        continuation = Some(page.continuation);
    }
    let mut users = Vec::new();
    let mut q = Query::cross_partition().eq("type", "user").limit(1000);
    loop {
        let page = store.query(Container::Users, &q).await?;
        users.extend(page.items);
        match page.continuation {
            Some(t) => q.continuation = Some(t),
            None => break,
        }
    }
    for u in &users {
        let (id, name) = (str_of(u, "userId"), str_of(u, "username"));
        for (c, q) in [
            (Container::Posts, Query::cross_partition().eq("userId", id)),
            (Container::Users, Query::partition(id).eq("type", "post")),
        ] {
            let stale = store.count(c, &q.ne("userUsername", name)).await?;
            if stale > 0 {
                bail!(
                    "not converged: {stale} items in {} carry a stale name of user {id}",
                    c.name()
                );
            }
        }
    }
    out.seconds = started.elapsed().as_secs_f64();
    Ok(out)
}

/// Wait until the pump has applied every change, or fail after `limit`.
pub async fn settle(store: &dyn Store, limit: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + limit;
    while !blog::pump::caught_up(store).await? {
        if Instant::now() > deadline {
            bail!("the change-feed pump did not catch up within {limit:?}");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(())
}
