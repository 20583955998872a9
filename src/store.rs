//! The store: one small, Cosmos-shaped trait with two implementations.
//!
//! The trait speaks in containers, partition keys, JSON items, patches, partition-scoped queries,
//! transactional batches and a per-container change feed, because that is what Cosmos DB offers
//! ([`cosmos::CosmosStore`]); the embedded store ([`embedded::EmbeddedStore`], SQLite) mirrors
//! exactly that, so the service code cannot come to depend on anything Cosmos could not do.
//!
//! Every operation records itself (and its request charge) in the per-request [`metrics`]
//! accumulator, which is what `x-store-operations` and `x-request-charge` report.

pub mod cosmos;
pub mod embedded;
mod keys;
pub mod layout;
pub mod metrics;
pub mod priority;
mod query;
mod retry;

pub use query::{Cmp, Filter, Order, Page, Query, Scope, Words, SEARCHABLE, SEARCHABLE_LISTS};

pub use layout::{LAYOUT_ID, TIMELINES_MOVED};
pub use priority::{with_write_priority, WritePriority};
pub use retry::{retry, ATTEMPTS};

use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

/// The containers (docs/ARCHITECTURE.md) and their partition-key paths: the four of the data
/// model, and `timelines`, the personal timelines' entries and merge markers (partition
/// `userId`, the reader), which nothing projects from, so that a timeline fan-out, however
/// large, adds nothing to the `users` change feed the main lane follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Container {
    Users,
    Posts,
    Feed,
    Leases,
    Timelines,
}

impl Container {
    pub const ALL: [Container; 5] = [
        Container::Users,
        Container::Posts,
        Container::Feed,
        Container::Leases,
        Container::Timelines,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Container::Users => "users",
            Container::Posts => "posts",
            Container::Feed => "feed",
            Container::Leases => "leases",
            Container::Timelines => "timelines",
        }
    }

    /// The item property holding the partition key (the path without its leading `/`).
    pub fn partition_key_field(self) -> &'static str {
        match self {
            Container::Users => "userId",
            Container::Posts => "postId",
            Container::Feed => "type",
            Container::Leases => "id",
            Container::Timelines => "userId",
        }
    }
}

/// What can go wrong in a store operation. The HTTP layer maps each to a status.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("item not found")]
    NotFound,
    #[error("an item with this id already exists")]
    Conflict,
    #[error("the item changed since it was read")]
    PreconditionFailed,
    /// The store asks the caller to slow down (Cosmos 429).
    #[error("the store is throttling requests")]
    Throttled { retry_after: Duration },
    /// The store cannot be reached or is not ready (Cosmos 503, network errors, timeouts).
    #[error("the store is unavailable: {0}")]
    Unavailable(String),
    /// A transactional batch failed as a whole because operation `index` failed with `source`.
    #[error("batch operation {index} failed: {source}")]
    BatchFailed {
        index: usize,
        #[source]
        source: Box<StoreError>,
    },
    /// The request was not something the store accepts (a bad item, a bad query).
    #[error("bad store request: {0}")]
    BadRequest(String),
    /// A continuation token the store cannot resume from (malformed, or from another query):
    /// the caller's mistake when the caller handed it in.
    #[error("invalid continuation token: {0}")]
    BadContinuation(String),
    /// The store refuses this service (Cosmos 401/403: a missing data-plane role assignment, a
    /// firewall rule, a revoked key). A misconfiguration to fix, not an outage to wait out.
    #[error("the store refuses access: {0}")]
    Forbidden(String),
    #[error("store error: {0}")]
    Other(String),
}

impl StoreError {
    /// Worth retrying as is: the same call may well succeed later.
    pub fn is_transient(&self) -> bool {
        match self {
            StoreError::Throttled { .. } | StoreError::Unavailable(_) => true,
            StoreError::BatchFailed { source, .. } => source.is_transient(),
            _ => false,
        }
    }

    /// The error an operation inside a batch failed with, or the error itself.
    pub fn root(&self) -> &StoreError {
        match self {
            StoreError::BatchFailed { source, .. } => source.root(),
            other => other,
        }
    }
}

pub type StoreResult<T> = Result<T, StoreError>;

/// One patch operation on an item (defined with the items it changes, in `domain`).
pub use crate::domain::PatchOp;

/// One operation of a transactional batch (all in one partition; all or nothing).
#[derive(Debug, Clone)]
pub enum BatchOp {
    /// Fails the batch with `NotFound` when the item is missing: an atomic existence check.
    Read {
        id: String,
    },
    Create {
        item: Value,
    },
}

/// One page of a container's change feed in "latest version" mode: each item changed since the
/// continuation, once, in its latest state, in commit order within a partition.
#[derive(Debug, Clone, PartialEq)]
pub struct ChangePage {
    pub items: Vec<Value>,
    /// Where to resume after these items. Always set (store it as the checkpoint).
    pub continuation: String,
}

/// Committed changes to one container, as a count: its value goes up by at least one after each
/// commit that wrote to the container, and [`tokio::sync::watch::Receiver::changed`] wakes on it.
pub type ChangeNotifier = tokio::sync::watch::Receiver<u64>;

/// The store, shaped like a Cosmos DB database with the containers of [`Container`].
///
/// Items are JSON objects with a string `id`; the partition key is passed explicitly and must
/// equal the item's partition-key property. Returned items may carry system properties (`_etag`,
/// `_ts`, `_lsn`, …) which the HTTP layer strips.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// A short name for logs and the bench ("embedded", "cosmos").
    fn kind(&self) -> &'static str;

    /// How long a change-feed follower waits after an empty page: what polling an idle feed
    /// costs differs per store. No default, so that a wrapper cannot silently lose its inner
    /// store's answer.
    fn idle_poll(&self) -> Duration;

    /// A signal that changes to `c` were committed, for a store that sees every write to itself
    /// (the embedded one): a change-feed follower waits on it instead of polling, and a reader
    /// keeping a snapshot of `c` compares its value to know whether the snapshot still holds.
    /// `None` where changes can come from elsewhere (Cosmos DB: other instances, the portal,
    /// other tools): followers then poll every [`Store::idle_poll`]. No default, like `idle_poll`.
    fn change_notifier(&self, c: Container) -> Option<ChangeNotifier>;

    /// Point read; `Ok(None)` when the item does not exist.
    async fn read(&self, c: Container, pk: &str, id: &str) -> StoreResult<Option<Value>>;

    /// Create; `Conflict` when the id exists in the partition.
    async fn create(&self, c: Container, pk: &str, item: Value) -> StoreResult<Value>;

    async fn upsert(&self, c: Container, pk: &str, item: Value) -> StoreResult<Value>;

    /// Replace an existing item, optionally only if its `_etag` still matches (`PreconditionFailed`).
    async fn replace(
        &self,
        c: Container,
        pk: &str,
        id: &str,
        item: Value,
        if_match: Option<&str>,
    ) -> StoreResult<Value>;

    /// Delete; `NotFound` when missing.
    async fn delete(&self, c: Container, pk: &str, id: &str) -> StoreResult<()>;

    /// Delete only if the item's `_etag` still matches (`PreconditionFailed`); `NotFound` when
    /// missing. A write made since the version was read wins over the delete.
    async fn delete_if_match(
        &self,
        c: Container,
        pk: &str,
        id: &str,
        etag: &str,
    ) -> StoreResult<()>;

    /// Server-side patch: applied atomically by the store, never as a client read + replace;
    /// optionally only if the item's `_etag` still matches (`PreconditionFailed`).
    async fn patch(
        &self,
        c: Container,
        pk: &str,
        id: &str,
        ops: &[PatchOp],
        if_match: Option<&str>,
    ) -> StoreResult<Value>;

    async fn query(&self, c: Container, q: &Query) -> StoreResult<Page>;

    /// `SELECT VALUE COUNT(1)` over the query's scope and filters (order and limit ignored).
    async fn count(&self, c: Container, q: &Query) -> StoreResult<u64>;

    /// Transactional batch in one partition: every operation or none. Returns one result per
    /// operation (the item read or created). Only what the service needs is offered: a read
    /// as an atomic existence check, and creates.
    async fn batch(&self, c: Container, pk: &str, ops: Vec<BatchOp>) -> StoreResult<Vec<Value>>;

    /// Read the change feed of a whole container from `continuation` (`None`: from the beginning),
    /// at most `max_items` items. An empty page means nothing new *for now*.
    async fn changes(
        &self,
        c: Container,
        continuation: Option<&str>,
        max_items: u32,
    ) -> StoreResult<ChangePage>;
}
