//! Who may spend a search (`GET /api/search`), the one anonymous read whose work grows with the
//! data: every other read is one partition's, a search reads the full-text index of all posts.
//!
//! - **A budget per caller**: `BLOG_SEARCHES_PER_MINUTE` searches per client address (an IPv6
//!   address by its /64 network), a token bucket refilled evenly over the minute, kept as the
//!   write budget is ([`WriteLimit`]: bounded memory, idle callers swept). Over it: 429
//!   `too-many-searches` with `Retry-After`, before anything is read.
//! - **A cap on searches in flight**: at most `in_flight` searches run at once in the process,
//!   so that searches cannot take every reader connection from point reads and the change feed.
//!   One more waits at most [`WAIT_FOR_SLOT`] for a search to end, then is answered 429 with
//!   `Retry-After: 1`. A search holds its slot until its request is answered or dropped (a
//!   request timeout drops it, and the store stops its statement).
//!
//! Under the Functions host every request comes from the host's own address, so there the budget
//! is one for all callers; the cap holds as everywhere.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::write_limit::{WriteLimit, Writer};
use crate::error::{ApiError, ApiResult};

pub use crate::settings::DEFAULT_SEARCHES_PER_MINUTE;

/// The searches that may run at once in a process, by default: half the embedded store's
/// reader connections, so point reads and the change feed keep the other half.
pub const DEFAULT_SEARCHES_IN_FLIGHT: usize = 2;
/// How long a search waits for another to end before it is refused.
pub const WAIT_FOR_SLOT: Duration = Duration::from_millis(250);

/// The budget per client address and the slots of the searches in flight.
pub struct SearchLimit {
    budget: WriteLimit,
    slots: Arc<Semaphore>,
}

impl SearchLimit {
    /// `per_minute` searches per client address (0: no budget) and at most `in_flight` at once
    /// (at least one).
    pub fn new(per_minute: u32, in_flight: usize) -> Self {
        SearchLimit {
            budget: WriteLimit::new(per_minute),
            slots: Arc::new(Semaphore::new(in_flight.max(1))),
        }
    }

    /// Take one search from `peer`'s budget, then a slot: the slot is held while the search
    /// runs (drop it to free it). 429 with `Retry-After` when the budget is spent or no slot
    /// frees within [`WAIT_FOR_SLOT`].
    pub async fn admit(&self, peer: Option<SocketAddr>) -> ApiResult<OwnedSemaphorePermit> {
        self.budget
            .check(&Writer::peer(peer))
            .map_err(|retry_after| ApiError::TooManySearches {
                detail: format!(
                    "too many searches: at most {} a minute per client",
                    self.budget.per_minute()
                ),
                retry_after,
            })?;
        let slot = tokio::time::timeout(WAIT_FOR_SLOT, self.slots.clone().acquire_owned()).await;
        match slot {
            Ok(Ok(permit)) => Ok(permit),
            _ => Err(ApiError::TooManySearches {
                detail: "too many searches in flight on this server".into(),
                retry_after: Duration::from_secs(1),
            }),
        }
    }
}
