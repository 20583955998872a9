//! The bench's results: every figure the report holds, as plain data, serialized whole to
//! `--json` and read by the markdown (`report`) and the chart (`chart`). It imports nothing of
//! the bench but the statistics (`measure`) and the dataset's summary (`dataset`), so that the
//! measuring modules and the report both import it, downward.

pub mod conduit;
pub mod live;
pub mod scale;

use std::time::Duration;

use blog::store::metrics::{self, Total};
use serde::Serialize;

use crate::dataset::{DatasetSummary, Verification};
use crate::measure::{self, Stats};

pub use scale::Scale;

/// The percentiles of `durations`.
pub fn latency_of(durations: &[Duration]) -> Latency {
    let (p50_ms, p99_ms, mean_ms, max_ms) = measure::latency(durations);
    Latency {
        samples: durations.len(),
        p50_ms,
        p99_ms,
        mean_ms,
        max_ms,
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub generated_at: String,
    pub machine: Machine,
    pub store: String,
    pub config: serde_json::Value,
    pub dataset: DatasetSummary,
    pub verification: Option<Verification>,
    /// A request that does no store work (`GET /`): the HTTP share of every V3 latency.
    pub http_baseline: Latency,
    /// In the article's order: C1, Q1, C2, Q2, Q3, C3, Q4, C4, Q5, Q6; then the deletes D1–D4
    /// and the timeline read T1 (V3 only); then search, S1 on the data as loaded and S2 with
    /// ten times the posts (V3 only).
    pub rows: Vec<Row>,
    /// S2 against S1: the price of a search as the posts grow.
    pub search_growth: SearchGrowth,
    /// SL: searches from one address against another address's reads, writes and feed lag.
    pub search_load: SearchLoad,
    pub change_feed_lag: Lag,
    /// `None` where the run skips it (the emulated store), with the reason in the next field.
    pub change_feed_lag_under_load: Option<LagUnderLoad>,
    pub change_feed_lag_under_load_skipped: Option<String>,
    /// `None` where the run skips it (the emulated store), with the reason in the next field.
    pub change_feed_lag_during_large_delete: Option<LagDuringDelete>,
    pub change_feed_lag_during_large_delete_skipped: Option<String>,
    /// C3 and C4 under the hot-post load: request and change-feed work per command.
    pub prices_under_load: Vec<PriceUnderLoad>,
    pub throughput: Vec<Throughput>,
    pub feed_snapshot: FeedSnapshot,
    /// F1/F2: one post by an author with many followers, the fan-out threshold off and on.
    pub fanout: Fanout,
    /// The rows of where the design tops out (writes per like by audience, others' lag under a
    /// big author, timeline pages, the like price on a large post); `None` when none was run.
    pub scale: Option<Scale>,
    /// Live updates: `--live-streams` streams open at once while writes come in (`live`).
    pub live: live::LiveUpdates,
    /// RW: the RealWorld API driven as any RealWorld server would be (`conduit`).
    pub conduit: conduit::Conduit,
    /// The product against a bare axum server, as processes; `None` when a binary is missing.
    pub versus: Option<Versus>,
    pub versus_skipped: Option<String>,
    /// Wall time of each phase of the run.
    pub phases: Vec<Phase>,
    pub total_seconds: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Phase {
    pub name: &'static str,
    pub seconds: f64,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Machine {
    pub cpus: usize,
    pub cpu_model: String,
    pub os: String,
}

impl Machine {
    pub fn this() -> Machine {
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split(':').nth(1))
                    .map(|m| m.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        Machine {
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            cpu_model,
            os: format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH),
        }
    }
}

#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Latency {
    pub samples: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub mean_ms: f64,
    pub max_ms: f64,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    /// `C1` … `Q6`, then what V1 does not have: `D1` … `D4` (the deletes), `T1`, `S1`, `G1`,
    /// `S2`.
    pub request: &'static str,
    pub title: &'static str,
    /// The V3 route measured.
    pub route: String,
    /// `None` for a request V1 has no counterpart of (the deletes).
    pub v1: Option<Stats>,
    pub v3: Stats,
    /// Writes only: how long the change feed took to apply what each version's requests
    /// set off (V1 writes trigger the product's projections too: they land in `posts`).
    pub v1_settle_seconds: Option<f64>,
    pub v3_settle_seconds: Option<f64>,
    /// Writes only: the change-feed work V3's requests set off, per request (one at a time).
    pub change_feed: Option<ChangeFeedPrice>,
}

/// The same searches (S1, S2) before and after the posts were made ten times as many.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SearchGrowth {
    /// Live posts when S2's were written, and after.
    pub posts_before: u64,
    pub posts_after: u64,
    /// Writing S2's posts and letting the change feed apply them.
    pub setup_seconds: f64,
    /// S2's mean over S1's: store operations, request units (where reported), and p50 latency.
    pub operations_ratio: f64,
    pub request_charge_ratio: Option<f64>,
    pub p50_ratio: f64,
}

/// SL: searches sent from one client address, as fast as its clients can, while a user at
/// another address reads a post, comments and waits for their posts in the feed.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SearchLoad {
    /// Clients searching at once from the one address.
    pub searchers: usize,
    pub seconds: f64,
    /// Live posts the searches ran over.
    pub posts: u64,
    /// Live posts the first search finds (one count across the partitions of `posts`).
    pub posts_found: u64,
    /// One run per search budget: the default `BLOG_SEARCHES_PER_MINUTE`, then none (the cap
    /// on searches in flight alone).
    pub runs: Vec<SearchLoadRun>,
}

/// One run of SL, with one search budget.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SearchLoadRun {
    /// Searches a minute per client address; 0: none.
    pub searches_per_minute: u32,
    /// Searches that may run at once in the server.
    pub searches_in_flight: usize,
    /// The searches' answers by status: 200, 429, 503, and any other.
    pub answered_ok: u64,
    pub answered_too_many: u64,
    pub answered_unavailable: u64,
    pub answered_other: u64,
    /// Searches answered 200, and those answered 429.
    pub search_latency: Latency,
    pub refused_latency: Latency,
    /// The other address's user: Q2, a post read.
    pub point_read: Latency,
    /// C3, a comment.
    pub write: Latency,
    /// C2 acknowledged → visible as the newest entry of Q6.
    pub feed_lag: Lag,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Lag {
    #[serde(flatten)]
    pub latency: Latency,
    /// How often Q6 was polled while waiting: the resolution of each sample.
    pub poll_interval_ms: f64,
}

/// The change-feed lag while clients comment on one hot post.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LagUnderLoad {
    #[serde(flatten)]
    pub lag: Lag,
    /// Clients commenting on the hot post, each as fast as it can.
    pub hot_clients: usize,
    pub seconds: f64,
    pub comments_per_second: f64,
    /// From the end of the load until the hot post's `commentCount` was exact.
    pub count_exact_after_ms: f64,
}

/// Other users' posts' change-feed lag while a post with many comments is deleted.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LagDuringDelete {
    /// Comments on the deleted post.
    pub comments: usize,
    /// The `DELETE`'s answer.
    pub delete_answered_ms: f64,
    /// From the `DELETE` until every comment of the post was marked deleted.
    pub all_marked_after_ms: f64,
    /// C2 acknowledged → visible in Q6, for posts created by others meanwhile.
    #[serde(flatten)]
    pub lag: Lag,
    /// The largest of those lags over the quiet lag's median: how much the delete held them up.
    pub max_over_quiet_p50: f64,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Throughput {
    pub request: &'static str,
    pub version: &'static str,
    pub concurrency: usize,
    pub seconds: f64,
    pub requests: usize,
    pub requests_per_second: f64,
    #[serde(flatten)]
    pub latency: Latency,
}

/// The change-feed work of a run of commands, per command.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChangeFeedPrice {
    /// Commands the work is spread over.
    pub commands: usize,
    pub operations_per_command: f64,
    /// Request units per command, where the store reports them.
    pub request_charge_per_command: Option<f64>,
}

impl ChangeFeedPrice {
    /// The projections' work since `before`, over `commands` commands.
    pub fn since(before: Total, commands: usize) -> ChangeFeedPrice {
        let now = metrics::projections();
        let n = commands.max(1) as f64;
        let charge = now.request_charge - before.request_charge;
        ChangeFeedPrice {
            commands,
            operations_per_command: (now.operations - before.operations) as f64 / n,
            request_charge_per_command: (charge > 0.0).then_some(charge / n),
        }
    }
}

/// One command under the hot-post load.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PriceUnderLoad {
    /// `C3` (comment) or `C4` (like).
    pub request: &'static str,
    pub clients: usize,
    pub seconds: f64,
    pub commands_per_second: f64,
    /// The requests' own store work, per command.
    pub request_operations_per_command: f64,
    pub request_charge_per_command: Option<f64>,
    /// The change-feed work they set off, per command, once the change feed has settled.
    pub change_feed: ChangeFeedPrice,
}

/// The fan-out of one post, with the threshold off and on.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Fanout {
    pub followers: usize,
    /// Writing the followers and letting the change feed go over them (not measured).
    pub setup_seconds: f64,
    /// F1: the post copied into every follower's timeline.
    pub copied: FanoutRun,
    /// F2: nothing copied; the followers' timelines merge the author's posts when read.
    pub merged: FanoutRun,
    /// F2's follower's timeline read.
    pub merged_read: TimelineRead,
}

/// One post by the author, from the request to the change feed done.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FanoutRun {
    pub fanout_limit: u64,
    #[serde(skip)]
    pub post_id: String,
    /// The post's request (C2).
    pub request_operations: u32,
    /// C2 sent → the change feed has applied everything the post set off.
    pub applied_ms: f64,
    /// Store operations of the change-feed work the post set off.
    pub change_feed_operations: u64,
    /// Timeline entries of the post in the store once it was applied.
    pub timeline_copies: u64,
    /// The process's peak resident set during the run above its resident set at the start, MiB;
    /// `None` where `/proc/self/clear_refs` is not available.
    pub peak_rss_above_start_mib: Option<f64>,
}

/// Reads of one follower's timeline.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TimelineRead {
    /// Store operations of the costliest read.
    pub operations: u32,
    #[serde(flatten)]
    pub latency: Latency,
    /// Whether the read shows the post.
    pub shows_post: bool,
}

/// The feed snapshot's saving (see `snapshot`).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FeedSnapshot {
    pub concurrency: usize,
    pub seconds: f64,
    /// Posts created meanwhile (each drops the snapshot on the embedded store).
    pub posts_created: usize,
    pub reads: u64,
    /// Feed queries the reads made (the rest were answered from the snapshot).
    pub store_operations: u64,
    pub operations_saved_per_1000_reads: f64,
    /// The request units of one feed query (Q6, V3); `None` where the store reports none.
    pub request_units_per_query: Option<f64>,
    pub request_units_saved_per_1000_reads: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Versus {
    pub handler: String,
    pub handler_bytes: u64,
    /// Whether `handler` is a packaged build (statically linked and stripped, as
    /// `scripts/package.sh` writes it): only its size is held to the target.
    pub handler_packaged: bool,
    pub bare_bytes: u64,
    pub cold_start: ColdStart,
    /// Q6 (`GET /api/feed`), product and bare.
    pub feed_throughput: ReadThroughput,
    /// Q2 (`GET /api/posts/{id}`), product and bare.
    pub post_throughput: ReadThroughput,
    pub hot_post: HotPost,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ColdStart {
    pub product: Latency,
    pub bare: Latency,
    /// Product p50 / bare p50.
    pub ratio: f64,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Load {
    pub requests: usize,
    pub requests_per_second: f64,
    pub latency: Latency,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadThroughput {
    /// The read (`Q6`, `Q2`).
    pub request: &'static str,
    /// Posts in the answer.
    pub items: usize,
    pub body_bytes: usize,
    pub concurrency: usize,
    pub seconds: f64,
    pub product: Load,
    pub bare: Load,
    /// Product requests/s ÷ bare requests/s.
    pub ratio: f64,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HotPost {
    pub concurrency: usize,
    pub seconds: f64,
    pub comments: Load,
    /// The product's peak resident set over its life (`VmHWM`), MiB.
    pub peak_rss_mib: f64,
    /// The same for `bare` after its feed load, for scale.
    pub bare_peak_rss_mib: f64,
}
