//! Accounting of store operations and request units: per request, and for the change-feed
//! projections as a whole.
//!
//! The HTTP middleware runs each request inside [`scope`]; every store call records itself with
//! [`record`]. Outside a scope recording is a no-op, so the store needs no extra parameter and the
//! handlers no bookkeeping. The drivers of the projections (the pump, the Functions triggers, the
//! counter rechecks) run their work inside [`projecting`], which adds it to a process-wide total
//! ([`projections`]): what a command really costs is its request plus the change-feed work it sets
//! off, and the bench reads both.

use std::future::Future;
use std::sync::{Arc, Mutex};

#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Usage {
    pub operations: u32,
    pub request_charge: f64,
}

impl Usage {
    fn add(&mut self, other: Usage) {
        self.operations += other.operations;
        self.request_charge += other.request_charge;
    }
}

/// The projections' work since the process started (operations as a wider count: a long-lived
/// process makes more than a request's `u32` holds).
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Total {
    pub operations: u64,
    pub request_charge: f64,
}

static PROJECTIONS: Mutex<Total> = Mutex::new(Total {
    operations: 0,
    request_charge: 0.0,
});

/// The store work the change-feed projections have done in this process so far.
pub fn projections() -> Total {
    *PROJECTIONS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Charge `usage` to the projections' total.
pub fn charge_projections(usage: Usage) {
    let mut t = PROJECTIONS.lock().unwrap_or_else(|e| e.into_inner());
    t.operations += u64::from(usage.operations);
    t.request_charge += usage.request_charge;
}

/// Run `fut`, change-feed work, and charge the store operations it made to the projections'
/// total; a request it runs inside (a trigger invocation) is charged them too.
pub async fn projecting<F: Future>(fut: F) -> F::Output {
    let (out, usage) = scope(fut).await;
    charge_projections(usage);
    let _ = METER.try_with(|m| m.0.lock().expect("meter lock").add(usage));
    out
}

#[derive(Debug, Default, Clone)]
pub struct Meter(Arc<Mutex<Usage>>);

impl Meter {
    pub fn usage(&self) -> Usage {
        *self.0.lock().expect("meter lock")
    }
}

tokio::task_local! {
    static METER: Meter;
}

/// `fut` run with `meter` as its meter: [`scope`] as a future with a name, for a service that
/// reads the meter itself once `fut` is done.
pub fn metered<F: Future>(meter: Meter, fut: F) -> tokio::task::futures::TaskLocalFuture<Meter, F> {
    METER.scope(meter, fut)
}

/// Run `fut` with a fresh meter; returns the meter to read once `fut` is done.
pub async fn scope<F: Future>(fut: F) -> (F::Output, Usage) {
    let meter = Meter::default();
    let out = METER.scope(meter.clone(), fut).await;
    (out, meter.usage())
}

/// Record one store operation and the request units it cost (0 where the store reports none).
pub fn record(request_charge: f64) {
    let _ = METER.try_with(|m| {
        m.0.lock().expect("meter lock").add(Usage {
            operations: 1,
            request_charge,
        })
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn projection_work_counts_in_the_total_and_in_the_request_around_it() {
        let before = projections();
        let ((), request) = scope(async {
            record(1.0);
            projecting(async {
                record(2.0);
                record(3.0);
            })
            .await;
        })
        .await;
        let after = projections();
        // Other tests may project at the same time: the total grows by at least this work.
        assert!(
            after.operations >= before.operations + 2,
            "{before:?} -> {after:?}"
        );
        assert!(after.request_charge >= before.request_charge + 5.0);
        assert_eq!(
            request,
            Usage {
                operations: 3,
                request_charge: 6.0
            }
        );
    }
}
