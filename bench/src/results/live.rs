//! The live-updates row's figures (`bench::live`): streams of `GET /api/events` open at once on
//! a realistic mix of topics, a steady stream of writes, and what reaches the streams.

use serde::Serialize;

use super::Latency;

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LiveUpdates {
    pub streams: usize,
    /// Streams on `post:<hot post>`, on `timeline:<a follower of the author>` (each follower's
    /// own) and on `user:<the author>`.
    pub post_streams: usize,
    pub timeline_streams: usize,
    pub user_streams: usize,
    /// Writes sent, one after another at `write_rate` a second: comments on the hot post, likes
    /// of it (each by a user of its own) and posts by its author, in turn.
    pub writes: usize,
    pub write_rate: f64,
    /// How long opening the streams took, each until its `ready`.
    pub open_seconds: f64,
    /// Events naming a write that the streams on its topics should receive, and did.
    pub expected: u64,
    pub delivered: u64,
    /// Every event the streams received from the first write until the last named one arrived
    /// (besides the named ones: the posts' and the author's changed counts).
    pub events: u64,
    pub delivery_seconds: f64,
    pub events_per_second: f64,
    /// From each write's 201 to each stream on its topics receiving the event naming it (0 when
    /// the event came first).
    pub lag: Latency,
    /// The same with one stream open: comments on the hot post, before the others open.
    pub one_stream_lag: Latency,
    /// The process's resident set (server and the streams' readers both: the app runs in the
    /// bench's process): before any stream, with every stream open and idle, and its peak while
    /// the writes were delivered.
    pub rss_before_mib: Option<f64>,
    pub rss_idle_mib: Option<f64>,
    pub rss_delivery_peak_mib: Option<f64>,
    /// The follower's store work while the streams are open and nothing is written: with one
    /// stream, then with all of them.
    pub idle: Vec<LiveIdle>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LiveIdle {
    pub streams: usize,
    pub seconds: f64,
    pub operations: u64,
    /// Where the store reports request units.
    pub request_charge: Option<f64>,
    pub operations_per_second: f64,
}
