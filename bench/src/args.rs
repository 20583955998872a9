//! The command line.

use std::path::PathBuf;

use clap::{Parser, ValueEnum};
use serde::Serialize;

/// The default data set: large enough for the article's figures to settle, small enough for one
/// run on a 2-core machine (its size and duration are in the report and the performance page).
pub const DEFAULT_USERS: usize = 100;

/// The largest post the emulated store deletes for the lag during a large delete: a few pages
/// of the delete's sweep. Every page's query and change-feed read copies the whole range it
/// reads on the in-process emulator, so a larger post measures the emulator's copying, and a
/// post of tens of thousands of comments does not settle there at all.
pub const EMULATED_LARGE_DELETE_MAX: usize = 1_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StoreArg {
    /// SQLite in a scratch directory, removed afterwards.
    Embedded,
    /// The Cosmos DB account of the `COSMOS*` settings; the database must be empty.
    Cosmos,
    /// The Cosmos DB store on the SDK's in-memory emulator, whose RU model fills the RU
    /// columns (a bench built with `--features emulator`).
    Emulated,
}

/// A group of the scale rows (`--scale-rows`): where the design tops out, each at the scale its
/// own options set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ScaleRow {
    /// W: store writes per like for authors of each `--audiences`, steady and in a burst.
    Writes,
    /// L: other users' feed and follow lag while an author of `--hot-followers` is liked,
    /// renames, deletes a post and crosses the fan-out limit.
    Lag,
    /// T2/T3: a timeline page of an ordinary reader and of one following `--merged-authors`
    /// merged authors, and the memory of `--timeline-readers` concurrent such reads.
    Timeline,
    /// P: the price of a like on a post with `--price-likes` likes against one with 10.
    Price,
    /// None of them.
    None,
}

/// Every group of the scale rows, the default of `--scale-rows`.
pub const ALL_SCALE_ROWS: [ScaleRow; 4] = [
    ScaleRow::Writes,
    ScaleRow::Lag,
    ScaleRow::Timeline,
    ScaleRow::Price,
];

/// Measure C1–C4 and Q1–Q6 as the article does, V1 against V3, on a generated dataset.
#[derive(Debug, Clone, Parser, Serialize)]
#[command(name = "bench", version)]
#[serde(rename_all = "camelCase")]
pub struct Args {
    /// Users to generate (each with 5–50 posts, each post with 0–25 comments, 0–100 likes).
    #[arg(long, default_value_t = DEFAULT_USERS, value_parser = positive)]
    pub users: usize,
    /// Seed of the generated dataset and of the requests drawn from it.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// The store to measure.
    #[arg(long, value_enum, default_value_t = StoreArg::Embedded)]
    pub store: StoreArg,
    /// Also write the whole report as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Measured requests per row and version.
    #[arg(long, default_value_t = 100, value_parser = positive)]
    pub samples: usize,
    /// Requests per row and version before measuring (at least 1: V3's first shows partitions).
    #[arg(long, default_value_t = 5, value_parser = positive)]
    pub warmup: usize,
    /// Posts created to measure the change-feed lag.
    #[arg(long, default_value_t = 30, value_parser = positive)]
    pub lag_samples: usize,
    /// Duration of the lag-under-load run, in seconds.
    #[arg(long, default_value_t = 30.0, value_parser = seconds)]
    pub load_seconds: f64,
    /// Comments on the post deleted while the feed lag of other users' posts is measured (on
    /// `--store emulated`, more than a few sweep pages skip that row, and the run says why).
    #[arg(long, default_value_t = 50_000, value_parser = positive)]
    pub large_delete_comments: usize,
    /// Concurrent workers in the throughput runs (and commenting clients under load).
    #[arg(long, default_value_t = 16, value_parser = workers)]
    pub concurrency: usize,
    /// Duration of each throughput run, in seconds.
    #[arg(long, default_value_t = 5.0, value_parser = seconds)]
    pub seconds: f64,
    /// Posts Q6 asks for (the article's x); also the page of the searches (S1, S2).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub feed_limit: u32,
    /// SL: clients searching at once from one address for `--seconds`, while a user at another
    /// address reads, comments and posts.
    #[arg(long, default_value_t = 32, value_parser = workers)]
    pub searchers: usize,
    /// Followers of the author whose post is fanned out (F1, F2): the threshold off copies it
    /// into each timeline; on, the limit is a tenth of this.
    #[arg(long, default_value_t = 10_000, value_parser = positive)]
    pub fanout_followers: usize,
    /// Live updates: streams of `GET /api/events` open at once on the in-process server, a
    /// third each on the hot post, on a follower's timeline and on the author.
    #[arg(long, default_value_t = 1_000, value_parser = positive)]
    pub live_streams: usize,
    /// Live updates: writes sent while the streams are open (comments, likes and posts in turn).
    #[arg(long, default_value_t = 90, value_parser = positive)]
    pub live_writes: usize,
    /// Live updates: writes per second.
    #[arg(long, default_value_t = 30.0, value_parser = rate)]
    pub live_rate: f64,
    /// The product binary for the process measurements (cold start, feed throughput against a
    /// bare axum server, peak memory, size); default: `handler` next to this executable.
    #[arg(long)]
    pub handler: Option<PathBuf>,
    /// Cold starts per binary.
    #[arg(long, default_value_t = 20, value_parser = positive)]
    pub cold_starts: usize,
    /// The scale rows to run, comma-separated (`writes,lag,timeline,price`, or `none`).
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = ALL_SCALE_ROWS)]
    pub scale_rows: Vec<ScaleRow>,
    /// W: the followers of each author whose posts are liked, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [0usize, 100, 1_000, 10_000])]
    pub audiences: Vec<usize>,
    /// W: the bookmarkers of each post liked in the runs of the post's other audiences (by an
    /// author with the most of `--audiences` followers, carrying `--post-tags` tags),
    /// comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [0usize, 1_000, 10_000])]
    pub bookmarkers: Vec<usize>,
    /// W: the tags of the posts of the `--bookmarkers` runs (at most 10, a post's most).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u8).range(0..=10))]
    pub post_tags: u8,
    /// W: likes per run (each by a user of its own), sent at `--like-rate` and then in a burst.
    #[arg(long, default_value_t = 50, value_parser = positive)]
    pub likes: usize,
    /// W and L: likes per second of the steady runs.
    #[arg(long, default_value_t = 5.0, value_parser = rate)]
    pub like_rate: f64,
    /// L: followers of the big author, and the fan-out limit in force during those rows (the
    /// author sits at it, so one follow takes it over).
    #[arg(long, default_value_t = 10_000, value_parser = positive)]
    pub hot_followers: usize,
    /// L: posts of the big author one ordinary user likes, one after another at `--like-rate`
    /// (each post a count change of its own).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u16).range(1..=99))]
    pub hot_likes: u16,
    /// T3: merged authors (over the fan-out limit) the reader follows.
    #[arg(long, default_value_t = 400, value_parser = positive)]
    pub merged_authors: usize,
    /// T3: concurrent reads of that timeline whose peak memory is measured.
    #[arg(long, default_value_t = 32, value_parser = workers)]
    pub timeline_readers: usize,
    /// P: likes of the large post (written straight to the store, then projected).
    #[arg(long, default_value_t = 100_000, value_parser = positive)]
    pub price_likes: usize,
    /// The RealWorld row: the base URL of the server to drive, on this machine, that the paths
    /// `/api/users`, `/api/articles`, … follow (e.g. `http://127.0.0.1:3000`); default: the
    /// handler the bench starts, at `/api/conduit`.
    #[arg(long)]
    pub conduit_base: Option<String>,
    /// Run the RealWorld row only: no dataset and no other row; the bench starts the handler on
    /// an empty store of `--store` unless `--conduit-base` names a server.
    #[arg(long)]
    pub conduit_only: bool,
    /// The RealWorld row: users registered.
    #[arg(long, default_value_t = 50, value_parser = positive)]
    pub conduit_users: usize,
    /// The RealWorld row: users each user follows.
    #[arg(long, default_value_t = 3)]
    pub conduit_follows: usize,
    /// The RealWorld row: articles each user posts.
    #[arg(long, default_value_t = 2, value_parser = positive)]
    pub conduit_articles: usize,
    /// The RealWorld row: other users' articles each user favorites.
    #[arg(long, default_value_t = 3)]
    pub conduit_favorites: usize,
    /// The RealWorld row: requests of each read (lists, feed, article, tags).
    #[arg(long, default_value_t = 200, value_parser = positive)]
    pub conduit_reads: usize,
    /// The RealWorld row: the page size of its lists and feed.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub conduit_limit: u32,
    /// The RealWorld row: clients sending each kind of request at once.
    #[arg(long, default_value_t = 4, value_parser = workers)]
    pub conduit_concurrency: usize,
    /// The RealWorld row: the most each kind of request may take, in seconds (the rest are not
    /// sent, and the report says how many were).
    #[arg(long, default_value_t = 60.0, value_parser = seconds)]
    pub conduit_seconds: f64,
    /// Replay the change feed through the product's planner after loading and require that it
    /// finds nothing to change (slow at scale: a full check that the load is converged).
    #[arg(long)]
    pub verify: bool,
}

fn positive(s: &str) -> Result<usize, String> {
    s.parse::<usize>()
        .ok()
        .filter(|n| *n >= 1)
        .ok_or_else(|| "a whole number of at least 1".into())
}

fn workers(s: &str) -> Result<usize, String> {
    positive(s)
        .ok()
        .filter(|n| *n <= 1024)
        .ok_or_else(|| "a whole number from 1 to 1024".into())
}

fn rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x > 0.0 && x <= 10_000.0 => Ok(x),
        _ => Err("a rate per second above 0 and at most 10000".into()),
    }
}

fn seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x > 0.0 && x <= 600.0 => Ok(x),
        _ => Err("a number of seconds above 0 and at most 600".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_parse_with_defaults() {
        let a = Args::try_parse_from(["bench"]).unwrap();
        assert_eq!(a.users, DEFAULT_USERS);
        assert_eq!(a.store, StoreArg::Embedded);
        let a = Args::try_parse_from(["bench", "--users", "3", "--store", "cosmos"]).unwrap();
        assert_eq!((a.users, a.store), (3, StoreArg::Cosmos));
        // Parsed with or without the `emulator` feature: without it, opening the store says how
        // to build it.
        let a = Args::try_parse_from(["bench", "--store", "emulated"]).unwrap();
        assert_eq!(a.store, StoreArg::Emulated);
        assert!(Args::try_parse_from(["bench", "--store", "emulator"]).is_err());
        assert!(Args::try_parse_from(["bench", "--users", "0"]).is_err());
        assert!(Args::try_parse_from(["bench", "--seconds", "0"]).is_err());
        assert!(Args::try_parse_from(["bench", "--feed-limit", "101"]).is_err());
        assert_eq!(a.scale_rows, ALL_SCALE_ROWS);
        assert_eq!(a.audiences, [0, 100, 1_000, 10_000]);
        assert_eq!(
            (a.bookmarkers.as_slice(), a.post_tags),
            (&[0, 1_000, 10_000][..], 10)
        );
        let a = Args::try_parse_from([
            "bench",
            "--scale-rows",
            "writes,price",
            "--audiences",
            "0,5",
        ])
        .unwrap();
        assert_eq!(a.scale_rows, [ScaleRow::Writes, ScaleRow::Price]);
        assert_eq!(a.audiences, [0, 5]);
        let a = Args::try_parse_from(["bench", "--scale-rows", "none"]).unwrap();
        assert_eq!(a.scale_rows, [ScaleRow::None]);
        assert!(Args::try_parse_from(["bench", "--scale-rows", "all"]).is_err());
        assert!(Args::try_parse_from(["bench", "--like-rate", "0"]).is_err());
        assert_eq!((a.conduit_base.as_deref(), a.conduit_only), (None, false));
        let a = Args::try_parse_from([
            "bench",
            "--conduit-only",
            "--conduit-base",
            "http://127.0.0.1:3000",
        ])
        .unwrap();
        assert!(a.conduit_only);
        assert_eq!(a.conduit_base.as_deref(), Some("http://127.0.0.1:3000"));
        assert!(Args::try_parse_from(["bench", "--conduit-limit", "0"]).is_err());
        assert_eq!((a.live_streams, a.live_writes), (1_000, 90));
        assert!(Args::try_parse_from(["bench", "--live-streams", "0"]).is_err());
    }
}
