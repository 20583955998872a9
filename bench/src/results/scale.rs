//! The scale rows' figures (`bench::scale`): what one like costs as the author's audience grows,
//! how long others wait while a big author acts, what a timeline page costs, and what a like
//! costs on a post with a large total.

use std::collections::BTreeMap;

use serde::Serialize;

use super::Latency;

#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Scale {
    /// The groups run (`--scale-rows`), in order.
    pub rows: Vec<String>,
    pub writes_per_like: Option<WritesPerLike>,
    pub others_lag: Option<OthersLag>,
    pub timeline_pages: Option<TimelinePages>,
    pub like_price: Option<LikePrice>,
}

/// W: store writes per like, by the liked post's audiences: its author's followers, its
/// bookmarkers and its tags.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WritesPerLike {
    pub likes: usize,
    pub steady_per_second: f64,
    /// Writing the followers and the posts and letting the change feed go over them.
    pub setup_seconds: f64,
    /// One run per audience and mode (`steady`, then `burst`).
    pub runs: Vec<LikeRun>,
}

/// Likes of one post, each by a user of its own, from the first like until every lane of the
/// change feed has applied what they set off.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LikeRun {
    pub followers: usize,
    /// Users who bookmarked the post (each holding a copy of it).
    pub bookmarkers: usize,
    /// The post's tags (each tag's page holding a copy of it).
    pub tags: usize,
    /// `steady` (at `--like-rate`) or `burst` (all at once).
    pub mode: &'static str,
    pub likes: usize,
    /// From the first like to the change feed done, ms.
    pub applied_ms: f64,
    /// Items written, per like: the requests' and every lane of the change feed's.
    pub writes_per_like: f64,
    /// The same by container.
    pub writes_per_like_by_container: BTreeMap<&'static str, f64>,
    pub request_operations_per_like: f64,
    pub change_feed_operations_per_like: f64,
    /// Request units, where the store reports them.
    pub request_charge_per_like: Option<f64>,
    pub change_feed_charge_per_like: Option<f64>,
    /// The post's `likeCount` once applied (the likes it had plus these).
    pub like_count: u64,
}

/// L: other users' lag while an author with many followers acts.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OthersLag {
    pub followers: usize,
    /// The fan-out limit in force: the followers, so that one follow takes the author over it.
    pub fanout_limit: u64,
    pub setup_seconds: f64,
    /// With nothing else going on.
    pub quiet: LagScenario,
    pub scenarios: Vec<LagScenario>,
}

/// Other users' lag during one thing the big author does, measured until the change feed has
/// applied all of it (at least one sample of each).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LagScenario {
    pub name: &'static str,
    /// What was done, in words.
    pub what: String,
    /// From the first request to the change feed done, ms.
    pub applied_ms: f64,
    /// Items written meanwhile, less the probes' own (the quiet run's writes per probe).
    pub store_writes: u64,
    /// Another user's new post (C2 acknowledged) → in `GET /api/feed`.
    pub feed_lag: Latency,
    /// Another user's follow (204) → in `GET /api/users/{id}/followers`.
    pub follow_lag: Latency,
}

/// T2/T3: one timeline page.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TimelinePages {
    pub page_limit: u32,
    pub ordinary: PageRead,
    pub merged: PageRead,
    /// The merged reader's page read by `--timeline-readers` clients at once.
    pub concurrent: ConcurrentReads,
    pub setup_seconds: f64,
}

/// Sequential reads of one reader's first page.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PageRead {
    /// Authors the reader follows, and how many of them are merged.
    pub follows: usize,
    pub merged_authors: usize,
    /// Posts on the page.
    pub items: usize,
    pub operations_mean: f64,
    pub operations_max: u32,
    pub request_charge_mean: Option<f64>,
    #[serde(flatten)]
    pub latency: Latency,
}

/// One timeline page read by many clients at once.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConcurrentReads {
    pub readers: usize,
    /// Reads answered 200, and the first failure's message, if any.
    pub answered: usize,
    pub first_failure: Option<String>,
    pub wall_ms: f64,
    #[serde(flatten)]
    pub latency: Latency,
    /// The process's peak resident set during the reads above its resident set before, MiB;
    /// `None` where `/proc/self/clear_refs` is not available.
    pub peak_rss_above_idle_mib: Option<f64>,
}

/// P: one like on a post with many likes against one on a post with few.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LikePrice {
    /// Writing the likes and letting the change feed go over them.
    pub setup_seconds: f64,
    pub small: LikeCost,
    pub large: LikeCost,
    /// Large over small: store operations (request + change feed), and request units.
    pub operations_ratio: f64,
    pub request_charge_ratio: Option<f64>,
}

/// Likes sent one at a time, the change feed settled after each; per like.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LikeCost {
    /// Likes the post had before.
    pub post_likes: usize,
    pub samples: usize,
    pub request_operations: f64,
    pub change_feed_operations: f64,
    pub writes: f64,
    pub request_charge: Option<f64>,
    pub change_feed_charge: Option<f64>,
    /// p50 of the like's request, ms.
    pub request_p50_ms: f64,
    /// p50 from the like sent to the change feed done, ms.
    pub applied_p50_ms: f64,
}

impl LikeCost {
    pub fn operations(&self) -> f64 {
        self.request_operations + self.change_feed_operations
    }

    pub fn request_charge_total(&self) -> Option<f64> {
        Some(self.request_charge? + self.change_feed_charge.unwrap_or(0.0))
    }
}
