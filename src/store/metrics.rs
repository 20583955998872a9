//! Per-request accounting of store operations and request units.
//!
//! The HTTP middleware runs each request inside [`scope`]; every store call records itself with
//! [`record`]. Outside a scope (the change-feed pump, tests) recording is a no-op, so the store
//! needs no extra parameter and the handlers no bookkeeping.

use std::future::Future;
use std::sync::{Arc, Mutex};

#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Usage {
    pub operations: u32,
    pub request_charge: f64,
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

/// Run `fut` with a fresh meter; returns the meter to read once `fut` is done.
pub async fn scope<F: Future>(fut: F) -> (F::Output, Usage) {
    let meter = Meter::default();
    let out = METER.scope(meter.clone(), fut).await;
    (out, meter.usage())
}

/// Record one store operation and the request units it cost (0 where the store reports none).
pub fn record(request_charge: f64) {
    let _ = METER.try_with(|m| {
        let mut u = m.0.lock().expect("meter lock");
        u.operations += 1;
        u.request_charge += request_charge;
    });
}
