//! The fan-out limit (`BLOG_TIMELINE_FANOUT_LIMIT`) the timeline lane projects by: the one
//! place the bench sets it, for the rows that need an author at, over or far below it. The
//! limit in force is the one recorded in the store (`handler` records its setting when its
//! pump starts); the bench records another for the length of a row and puts the old one back.

use blog::projection::timeline::{limit_in_force, record_limit};
use blog::store::Store;

/// The limit in force.
#[cfg(test)]
pub async fn current(store: &dyn Store) -> u64 {
    limit_in_force(store).await.expect("the limit is read")
}

/// Put `limit` in force; the one it replaces.
pub async fn set(store: &dyn Store, limit: u64) -> anyhow::Result<u64> {
    let was = limit_in_force(store).await?;
    record_limit(store, limit).await?;
    Ok(was)
}
