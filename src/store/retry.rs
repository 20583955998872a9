//! Retrying transient store errors: the one place above the SDK that retries a store call.

use std::future::Future;
use std::time::Duration;

use super::{StoreError, StoreResult};

/// Attempts per call, the first included.
pub const ATTEMPTS: u32 = 5;

/// Run `op`, retrying transient store errors (throttling, unavailability) up to [`ATTEMPTS`]
/// times: after a throttle the wait the store asks for (at most 5 s), otherwise 50 ms doubling.
pub async fn retry<T, F, Fut>(mut op: F) -> StoreResult<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = StoreResult<T>>,
{
    let mut attempt = 0;
    loop {
        match op().await {
            Err(e) if e.is_transient() && attempt + 1 < ATTEMPTS => {
                let wait = match e.root() {
                    StoreError::Throttled { retry_after } => *retry_after,
                    _ => Duration::from_millis(50 << attempt),
                };
                tracing::warn!(error = %e, attempt, "transient store error; retrying");
                tokio::time::sleep(wait.min(Duration::from_secs(5))).await;
                attempt += 1;
            }
            other => return other,
        }
    }
}
