//! The RealWorld row's figures (`bench::conduit`): per kind of request, how many were answered,
//! how fast, and, where the server says so, the store operations each took.

use serde::Serialize;

use super::Latency;
use crate::measure::Spread;

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Conduit {
    /// The base URL driven, that the RealWorld paths `/api/…` follow (`…/api/conduit` for this
    /// app).
    pub base: String,
    /// Whether it is the handler the bench started itself.
    pub own_handler: bool,
    pub users: usize,
    pub follows_per_user: usize,
    pub articles_per_user: usize,
    pub favorites_per_user: usize,
    /// Requests of each read kind.
    pub reads: usize,
    /// The page size of every list and of the feed.
    pub limit: u32,
    /// Clients sending each kind's requests at once.
    pub concurrency: usize,
    /// The most a kind's requests may take; the rest are not sent.
    pub seconds_per_kind: f64,
    /// In the order sent: register, follow, post, favorite, then the reads.
    pub kinds: Vec<ConduitKind>,
    pub total_seconds: f64,
}

/// One kind of request, sent `requests` times by `concurrency` clients.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConduitKind {
    /// `register`, `follow`, `post`, `favorite`, `list`, `by author`, `by tag`, `favorited`,
    /// `feed`, `get`, `tags`.
    pub kind: &'static str,
    /// Method and path after the base, its parameters named.
    pub route: &'static str,
    /// Requests planned, and those answered before the kind's time ran out.
    pub planned: usize,
    pub requests: usize,
    pub seconds: f64,
    pub requests_per_second: f64,
    #[serde(flatten)]
    pub latency: Latency,
    /// Articles on each page (the lists and the feed).
    pub items: Option<Spread>,
    /// From `x-store-operations`, where every answer carried it; `None` for a server that
    /// does not send it.
    pub operations: Option<Spread>,
    /// From `x-request-charge`, where every answer carried it.
    pub request_charge: Option<Spread>,
    /// The documented bound of a list page's store operations (4 + 3 × limit), for the lists
    /// and the feed.
    pub operations_bound: Option<u32>,
}

impl ConduitKind {
    /// Whether the page's store operations stayed within the documented bound (`None` where
    /// there is no bound or no count).
    pub fn within_bound(&self) -> Option<bool> {
        Some(self.operations?.max <= f64::from(self.operations_bound?))
    }
}

/// A report of the RealWorld row alone (`--conduit-only`).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConduitReport {
    pub generated_at: String,
    pub machine: super::Machine,
    /// The store of the handler the bench started; `None` for a server at `--conduit-base`.
    pub store: Option<String>,
    pub config: serde_json::Value,
    pub conduit: Conduit,
    pub total_seconds: f64,
}
