//! F1/F2: the fan-out of one post by an author with `--fanout-followers` followers (V3 only),
//! with the fan-out threshold (`BLOG_TIMELINE_FANOUT_LIMIT`) off and on.
//!
//! The followers are written straight to the store, already projected (each a user with their
//! `following` edge, and the mirror edges in the author's partition), as the dataset is; the
//! change feed then goes over them once, and is settled before anything is timed. Then, for each
//! threshold:
//!
//! - **F1, off** (the limit above the followers): the author posts (C2) and the time runs from
//!   the request to the change feed having applied everything it set off (every follower's copy
//!   written, and the users feed past those copies); the store operations are the projections'
//!   own meter (`blog::store::metrics::projections`) over that time; the copies are counted.
//! - **F2, on** (the limit a tenth of the followers): the author is first taken over the limit
//!   (the recount writes every follower's marker; not timed), then posts as above, and one
//!   follower's timeline is read `--warmup` + `--samples` times (1 + 1 store operations: the
//!   timeline, then the author's posts).
//!
//! The app runs in the bench's process, so the peak memory is that process's: its resident-set
//! high-water mark (`VmHWM`) is reset at the start of each post (`/proc/self/clear_refs`) and the
//! figure is the mark at the end above the resident set at the start. It includes whatever else
//! the process did meanwhile (the client, the pump's polling), which is nothing else of weight.
//! Not on Linux: no figure.

use std::time::Instant;

use anyhow::{bail, Context as _};
use blog::domain::follows::{Edge, FollowKind, TIMELINE};
use blog::domain::{self, Kind, User};
use blog::projection::timeline::set_follow_counts_and_cross;
use blog::store::{metrics, Container, Query};
use serde_json::json;

use crate::dataset::{self, Loader};
use crate::limit;
use crate::measure::Req;
use crate::results::{latency_of, Fanout, FanoutRun, TimelineRead};
use crate::runner::Bench;

/// The `i`-th follower of a run with `seed`.
fn follower_id(seed: u64, i: usize) -> String {
    format!("fanout-{seed}-{i}")
}

/// A value of `/proc/self/status` (`VmRSS:`, `VmHWM:`), KiB.
pub fn status_kib(field: &str) -> Option<u64> {
    std::fs::read_to_string("/proc/self/status")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix(field))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

/// Reset the process's peak resident set to its current one; the current one, KiB.
pub fn reset_peak_rss() -> Option<u64> {
    std::fs::write("/proc/self/clear_refs", "5").ok()?;
    status_kib("VmRSS:")
}

impl Bench {
    pub async fn fanout(&mut self) -> anyhow::Result<Fanout> {
        let n = self.args.fanout_followers;
        let off = n as u64 * 10;
        let was = limit::set(&*self.store, off).await?;
        let out = async {
            let started = Instant::now();
            let (author, follower_ids) = self.followed_author(n).await?;
            self.settle().await?;
            let setup_seconds = started.elapsed().as_secs_f64();
            let copied = self.fanout_post(&author, off).await?;
            // Over the limit: the recount that sees it writes each follower's marker.
            let on = n as u64 / 10;
            limit::set(&*self.store, on).await?;
            set_follow_counts_and_cross(&*self.store, &author).await?;
            self.settle().await?;
            let merged = self.fanout_post(&author, on).await?;
            let merged_read = self
                .timeline_read(&follower_ids[0], &merged.post_id)
                .await?;
            eprintln!(
                "bench: [F1/F2] {n} followers: copied {:.0} ms, {} change-feed ops; merged \
                 {:.0} ms, {} ops; a merged timeline read {} ops",
                copied.applied_ms,
                copied.change_feed_operations,
                merged.applied_ms,
                merged.change_feed_operations,
                merged_read.operations
            );
            anyhow::Ok(Fanout {
                followers: n,
                setup_seconds,
                copied,
                merged,
                merged_read,
            })
        }
        .await;
        limit::set(&*self.store, was).await?;
        out
    }

    /// An author with `n` followers, written already projected; the author's id and the
    /// followers'.
    async fn followed_author(&mut self, n: usize) -> anyhow::Result<(String, Vec<String>)> {
        let author = format!("fanout-author-{}", self.args.seed);
        let followers: Vec<String> = (0..n).map(|i| follower_id(self.args.seed, i)).collect();
        self.write_followed_author(&author, &followers).await?;
        Ok((author, followers))
    }

    /// Write `author`, followed by each of `followers`, already projected: the users (the author
    /// named as their id), the `following` edges and their mirrors. Not timed; the change feed
    /// then goes over them (settle before measuring).
    pub async fn write_followed_author(
        &mut self,
        author: &str,
        followers: &[String],
    ) -> anyhow::Result<()> {
        let n = followers.len();
        let date = domain::now();
        let user = |id: &str, followers: usize, following: usize| {
            domain::to_value(&User {
                id: id.into(),
                kind: Kind::User,
                user_id: id.into(),
                username: id.into(),
                rename_version: 0,
                propagated_version: Some(0),
                follower_count: followers as u64,
                following_count: following as u64,
                bio: None,
                image: None,
                email: None,
            })
        };
        // The author first: the change feed takes an edge to a user it cannot find for one that
        // raced the user's erasure, and marks it deleted.
        let mut loader = Loader::new(self.store.clone());
        let mirrors = followers
            .iter()
            .map(|f| Edge::new(FollowKind::Follower, author, f, f, &date).to_item());
        let author_items = std::iter::once(user(author, n, 0)).chain(mirrors);
        loader
            .create(Container::Users, author, author_items)
            .await?;
        loader.finish().await?;
        let pb = dataset::bar(n as u64, "followers");
        for f in followers {
            let items = [
                user(f, 0, 1),
                Edge::new(FollowKind::Following, f, author, author, &date).to_item(),
            ];
            loader.create(Container::Users, f, items).await?;
            pb.inc(1);
        }
        loader.finish().await?;
        pb.finish_and_clear();
        self.big_authors
            .push((author.to_string(), followers.to_vec()));
        Ok(())
    }

    /// The author posts; the run from the request to the change feed done.
    async fn fanout_post(&mut self, author: &str, limit: u64) -> anyhow::Result<FanoutRun> {
        self.settle().await?;
        let (title, content) = dataset::post_text(&mut self.rng);
        let rss_at_start = reset_peak_rss();
        let before = metrics::projections();
        let started = Instant::now();
        let created = self
            .client
            .send(&Req::post(
                "/api/posts",
                json!({ "userId": author, "title": title, "content": content }),
            ))
            .await?;
        self.settle().await?;
        let applied = started.elapsed();
        let change_feed_operations = metrics::projections().operations - before.operations;
        let peak = rss_at_start.zip(status_kib("VmHWM:"));
        let post_id = created.body["id"]
            .as_str()
            .context("the created post has no id")?
            .to_string();
        let copies = Query::cross_partition()
            .eq("type", TIMELINE)
            .eq("postId", post_id.as_str());
        Ok(FanoutRun {
            fanout_limit: limit,
            request_operations: created.sample.operations,
            applied_ms: crate::measure::ms(applied),
            change_feed_operations,
            timeline_copies: self.store.count(Container::Timelines, &copies).await?,
            peak_rss_above_start_mib: peak
                .map(|(start, high)| high.saturating_sub(start) as f64 / 1024.0),
            post_id,
        })
    }

    /// `--warmup` + `--samples` reads of `follower`'s timeline; the warm-up's are not timed.
    async fn timeline_read(
        &mut self,
        follower: &str,
        post_id: &str,
    ) -> anyhow::Result<TimelineRead> {
        let limit = self.args.feed_limit;
        let req = Req::get(format!("/api/users/{follower}/timeline?limit={limit}"));
        let (mut latencies, mut operations, mut shows_post) = (Vec::new(), 0, true);
        for i in 0..self.n() {
            let a = self.client.send(&req).await?;
            let Some(items) = a.body["items"].as_array() else {
                bail!("the timeline answered no items: {}", a.body);
            };
            shows_post &= items.iter().any(|p| p["id"] == post_id);
            operations = operations.max(a.sample.operations);
            if i >= self.args.warmup {
                latencies.push(a.sample.latency);
            }
        }
        Ok(TimelineRead {
            operations,
            latency: latency_of(&latencies),
            shows_post,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use blog::settings::Settings;
    use blog::startup::Application;
    use blog::store::Store;
    use clap::Parser as _;
    use rand::SeedableRng as _;
    use rand_pcg::Pcg64;
    use tokio::net::TcpListener;

    use super::*;
    use crate::args::Args;
    use crate::measure::{Client, Tally};

    /// At a tiny scale, what a user would observe: off, the post is in every follower's timeline
    /// and the change feed wrote at least a copy each; on, no copy is written and every
    /// follower's timeline still shows the post, for one store operation more.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_post_reaches_every_follower_copied_or_merged() {
        blog::tls::install();
        let dir = tempfile::tempdir().unwrap();
        let mut settings = Settings::from_lookup(|_| None).unwrap();
        settings.db_path = dir.path().join("blog.db");
        let raw = blog::startup::open_store(&settings).await.unwrap();
        let store: Arc<dyn Store> = Arc::new(Tally(raw));
        let data = dataset::load(store.clone(), 2, 7).await.unwrap();
        blog::pump::checkpoint_at_end(&*store).await.unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let origin = format!("http://{}", listener.local_addr().unwrap());
        let app = Application::new(listener, store.clone(), true).with_feed_cache(Duration::ZERO);
        let state = app.state().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(app.run_until(async {
            let _ = stopped.await;
        }));
        let args = [
            "bench",
            "--fanout-followers",
            "12",
            "--samples",
            "2",
            "--warmup",
            "1",
        ];
        let mut bench = Bench {
            rng: Pcg64::seed_from_u64(1),
            client: Client::new(origin, state),
            store,
            data,
            args: Args::try_parse_from(args).unwrap(),
            big_authors: Vec::new(),
        };
        let limit_before = limit::current(&*bench.store).await;

        let f = bench.fanout().await.unwrap();
        assert_eq!(
            limit::current(&*bench.store).await,
            limit_before,
            "the limit is put back"
        );
        assert_eq!(f.copied.fanout_limit, 120);
        assert_eq!(f.copied.timeline_copies, 12, "a copy per follower");
        assert!(f.copied.change_feed_operations >= 12, "{f:?}");
        assert_eq!(f.merged.fanout_limit, 1);
        assert_eq!(f.merged.timeline_copies, 0, "nothing copied: {f:?}");
        assert!(f.merged_read.shows_post, "{f:?}");
        // The timeline, the merged authors' posts, and a read of the counts of each post shown
        // (no snapshot here: the bench turns it off).
        let bound = 2 + bench.args.feed_limit as u64;
        assert!(
            (3..=bound).contains(&(f.merged_read.operations as u64)),
            "the timeline, the author's posts, their counts: {f:?}"
        );
        assert_eq!(f.merged_read.latency.samples, 2);
        assert_eq!(f.followers, 12);
        for follower in (0..12).map(|i| follower_id(bench.args.seed, i)) {
            let path = format!("/api/users/{follower}/timeline");
            let a = bench.client.send(&Req::get(path)).await.unwrap();
            let ids: Vec<&str> = a.body["items"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|p| p["id"].as_str())
                .collect();
            assert_eq!(ids, [&f.merged.post_id, &f.copied.post_id], "{follower}");
        }

        // Retired, the author (merged by now) has no followers left, and a row that then sets a
        // limit of 0 (as T3 does) sends no one across it: no marker is written for anyone.
        let authors: Vec<String> = bench.big_authors.iter().map(|(a, _)| a.clone()).collect();
        assert_eq!(authors.len(), 1, "the row's author");
        bench.retire_big_authors().await.unwrap();
        assert!(bench.big_authors.is_empty());
        let was = limit::set(&*bench.store, 0).await.unwrap();
        for a in &authors {
            bench.create_post(a).await.unwrap();
        }
        bench.settle().await.unwrap();
        limit::set(&*bench.store, was).await.unwrap();
        for a in &authors {
            let user = bench
                .client
                .send(&Req::get(format!("/api/users/{a}")))
                .await
                .unwrap();
            assert_eq!(user.body["followerCount"], 0, "{a}");
            let naming = Query::cross_partition().eq(blog::domain::follows::REF_USER, a.as_str());
            let left = bench
                .store
                .count(Container::Timelines, &naming)
                .await
                .unwrap();
            assert_eq!(left, 0, "timeline items naming {a}");
        }
        let f0 = follower_id(bench.args.seed, 0);
        let gone = bench.store.read(Container::Users, &f0, &f0).await.unwrap();
        assert!(gone.is_none(), "a retired follower: {gone:?}");
        let _ = stop.send(());
        server.await.unwrap().unwrap();
    }
}
