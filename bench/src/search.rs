//! S1, S2: full-text search (`GET /api/search`), the one read that is not one partition's.
//!
//! - S1: `--warmup` + `--samples` searches of two words drawn from the dataset's vocabulary, a
//!   page of `--feed-limit` posts each, on the data as loaded (run with the reads).
//! - S2: the same searches after as many posts again as the store holds, nine times over, are
//!   written (ten times the posts), run last since every later row would read a larger store.
//!   Its posts are written straight to the store as the dataset is loaded (through the API
//!   that would take longer than the rest of the run), by the loaded users, and the change
//!   feed goes over them before the searches run.
//!
//! On the emulated store the full-text condition is a substring test
//! (`CosmosStore::with_emulated_full_text`), so its request units are the emulator's for that
//! query, not a real account's for `FullTextContains`.

use std::time::{Duration, Instant};

use anyhow::bail;
use blog::domain::{self, Id, Kind, Post};
use blog::store::{Container, Query};
use rand::seq::IndexedRandom;

use crate::dataset::{self, Loader};
use crate::measure::Req;
use crate::results::{Row, SearchGrowth};
use crate::runner::{Bench, SETTLE_LIMIT};

/// The words searched for: words of the dataset's texts that no analyzer drops as too common
/// (`the`, `a`), in ASCII so that the query needs no encoding.
const SEARCH_WORDS: &[&str] = &[
    "cosmos",
    "partition",
    "latency",
    "request",
    "model",
    "query",
    "index",
    "container",
    "throughput",
    "denormalize",
    "scale",
    "blog",
];

/// How many times the posts the store holds the second measurement searches.
pub const GROWTH: u64 = 10;

/// The longest the change feed may take per post written for S2 before the row gives up: far
/// above what a release build takes on the embedded store, so that a debug build on a shared
/// machine and the emulated store (whose change-feed pages copy the whole range they read) get
/// there.
const PROJECT_ONE: Duration = Duration::from_millis(500);

impl Bench {
    /// The searches of S1 and S2: two different words each, a page of `--feed-limit`.
    pub fn search_requests(&mut self) -> Vec<Req> {
        let limit = self.args.feed_limit;
        (0..self.n())
            .map(|_| {
                let two: Vec<&&str> = SEARCH_WORDS.sample(&mut self.rng, 2).collect();
                Req::get(format!("/api/search?q={}+{}&limit={limit}", two[0], two[1]))
            })
            .collect()
    }

    /// S1: `searches` on the store as it is.
    pub async fn search(&mut self, searches: &[Req]) -> anyhow::Result<Row> {
        let row = self
            .row_v3("S1", "Search posts by their words", searches.to_vec())
            .await?;
        self.searches_find_posts(searches).await?;
        Ok(row)
    }

    /// A measurement of searches that find nothing would price the wrong query: the first of
    /// `searches` must answer posts.
    async fn searches_find_posts(&self, searches: &[Req]) -> anyhow::Result<()> {
        let a = self.client.send(&searches[0]).await?;
        let found = a.body["items"].as_array().map_or(0, Vec::len);
        if found == 0 {
            bail!("{} found no post: {}", searches[0].path, a.body);
        }
        Ok(())
    }

    /// S2: the posts the store holds made [`GROWTH`] times as many, then `searches` again;
    /// compared with `s1`.
    pub async fn search_growth(
        &mut self,
        searches: &[Req],
        s1: &Row,
    ) -> anyhow::Result<(Row, SearchGrowth)> {
        let started = Instant::now();
        let posts_before = self.live_posts().await?;
        let added = posts_before * (GROWTH - 1);
        eprintln!("bench: [S2] writing {added} posts ({GROWTH}× the {posts_before} there are)");
        let mut loader = Loader::new(self.store.clone());
        let pb = dataset::bar(added, "S2 posts");
        let authors = self.users(added as usize);
        for author in authors {
            let (title, content) = dataset::post_text(&mut self.rng);
            let id = Id::new().to_string();
            let post = Post {
                id: id.clone(),
                kind: Kind::Post,
                post_id: id.clone(),
                user_id: author.id,
                user_username: author.username,
                title,
                description: None,
                content,
                comment_count: 0,
                like_count: 0,
                creation_date: domain::now(),
                updated_at: None,
                bookmark_count: 0,
                tags: Vec::new(),
            };
            loader
                .create(Container::Posts, &id, [domain::to_value(&post)])
                .await?;
            pb.inc(1);
        }
        loader.finish().await?;
        pb.finish_and_clear();
        // The change feed projects every one of them (a copy in the author's partition, the
        // feed): far more than a row's work, so a wait of its own, growing with the posts.
        let limit = SETTLE_LIMIT.max(PROJECT_ONE * added as u32);
        dataset::settle(&*self.store, limit).await?;
        let posts_after = self.live_posts().await?;
        let setup_seconds = started.elapsed().as_secs_f64();
        let s2 = self
            .row_v3("S2", "Search posts, 10× the posts", searches.to_vec())
            .await?;
        self.searches_find_posts(searches).await?;
        let ratio = |a: f64, b: f64| a / b.max(f64::EPSILON);
        let growth = SearchGrowth {
            posts_before,
            posts_after,
            setup_seconds,
            operations_ratio: ratio(s2.v3.operations.mean, s1.v3.operations.mean),
            request_charge_ratio: s2
                .v3
                .request_charge
                .zip(s1.v3.request_charge)
                .map(|(a, b)| ratio(a.mean, b.mean)),
            p50_ratio: ratio(s2.v3.p50_ms, s1.v3.p50_ms),
        };
        eprintln!(
            "bench: [S2] {posts_after} posts: {:.2}× the operations, {:.2}× the p50 of S1",
            growth.operations_ratio, growth.p50_ratio
        );
        Ok((s2, growth))
    }

    /// The live posts in `posts`: one count across its partitions.
    async fn live_posts(&self) -> anyhow::Result<u64> {
        let q = Query::cross_partition().of_kind(Kind::Post).live();
        Ok(self.store.count(Container::Posts, &q).await?)
    }
}
