//! Change-feed lag: a post is created (C2) and Q6 is polled until the post is its newest entry;
//! the lag is from the 201 to the answer that shows it. "Lag under load" measures the same while
//! `--concurrency` clients comment on one hot post as fast as they can; "lag during a large
//! delete", while a post with `--large-delete-comments` comments is being deleted.

use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use indicatif::ProgressBar;
use serde_json::json;
use tokio::task::JoinSet;

use crate::dataset::{self, bar};
use crate::measure::{self, Client, Req};
use blog::store::{BatchOp, Container, Query};

use crate::results::{latency_of, Lag, LagDuringDelete, LagUnderLoad};
use crate::runner::{Bench, SETTLE_LIMIT};

/// How often Q6 is polled while measuring the change-feed lag. Slept on a blocking-pool thread
/// (see [`pause`]): tokio's timer counts whole milliseconds, so its 1 ms sleep lasts 1–2 ms and
/// would add that much to a lag measured in milliseconds.
pub const LAG_POLL: Duration = Duration::from_micros(100);

/// Wait `d` with the operating system's sleep, to the microsecond rather than tokio's millisecond.
pub async fn pause(d: Duration) {
    tokio::task::spawn_blocking(move || std::thread::sleep(d))
        .await
        .expect("a sleep does not panic");
}

/// Create a post (C2) by `author` through `client` and poll Q6 until it is the newest entry: the
/// time from the 201 (at most `limit`).
pub async fn post_and_wait(
    client: &Client,
    author: &str,
    (title, content): (String, String),
    limit: Duration,
) -> anyhow::Result<Duration> {
    let created = client
        .send(&Req::post(
            "/api/posts",
            json!({ "userId": author, "title": title, "content": content }),
        ))
        .await?;
    let acked = Instant::now();
    let id = created.body["id"].clone();
    loop {
        let feed = client.send(&Req::get("/api/feed?limit=1")).await?;
        if feed.body["items"][0]["id"] == id {
            return Ok(acked.elapsed());
        }
        if acked.elapsed() > limit {
            bail!("post {id} never showed in the feed");
        }
        pause(LAG_POLL).await;
    }
}

impl Bench {
    /// Create a post (C2) and poll Q6 until it is the newest entry: the time from the 201 (at
    /// most `limit`).
    pub async fn post_and_wait_for_the_feed(
        &mut self,
        limit: Duration,
    ) -> anyhow::Result<Duration> {
        let author = self.users(1).remove(0);
        let text = dataset::post_text(&mut self.rng);
        post_and_wait(&self.client, &author.id, text, limit).await
    }

    /// C2 acknowledged → the post visible as the newest entry of Q6.
    pub async fn lag(&mut self) -> anyhow::Result<Lag> {
        self.settle().await?;
        let total = self.args.lag_samples + 1;
        let pb = bar(total as u64, "lag");
        let mut lags = Vec::new();
        for i in 0..total {
            let lag = self.post_and_wait_for_the_feed(SETTLE_LIMIT).await?;
            // The first is a warm-up: the pump may still be waking from its idle sleep.
            if i > 0 {
                lags.push(lag);
            }
            pb.inc(1);
        }
        pb.finish_and_clear();
        Ok(Lag {
            latency: latency_of(&lags),
            poll_interval_ms: measure::ms(LAG_POLL),
        })
    }

    /// The change-feed lag while `--concurrency` clients comment on one hot post as fast as
    /// they can for `--load-seconds`: a post is created every 100 ms and Q6 polled until
    /// it is the newest entry. Then the hot post's count is awaited until it is exact.
    pub async fn lag_under_load(&mut self) -> anyhow::Result<LagUnderLoad> {
        self.settle().await?;
        let hot = self.posts(1).remove(0);
        let before = self
            .client
            .send(&Req::get(format!("/api/posts/{hot}")))
            .await?
            .body["commentCount"]
            .as_u64()
            .context("the hot post has no commentCount")?;
        let seconds = self.args.load_seconds;
        let deadline = Instant::now() + Duration::from_secs_f64(seconds);
        let pb = ProgressBar::new_spinner().with_message("lag under load");
        pb.enable_steady_tick(Duration::from_millis(200));
        let mut workers = JoinSet::new();
        for author in self.users(self.args.concurrency) {
            let (client, hot) = (self.client.clone(), hot.clone());
            workers.spawn(async move {
                let mut comments = 0u64;
                let body = json!({ "userId": author.id, "content": "hot" });
                while Instant::now() < deadline {
                    let path = format!("/api/posts/{hot}/comments");
                    client.send(&Req::post(path, body.clone())).await?;
                    comments += 1;
                }
                anyhow::Ok(comments)
            });
        }
        let mut lags = Vec::new();
        while lags.is_empty() || Instant::now() < deadline {
            lags.push(self.post_and_wait_for_the_feed(SETTLE_LIMIT).await?);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let mut comments = 0;
        while let Some(r) = workers.join_next().await {
            comments += r.context("a commenting worker panicked")??;
        }
        let stopped = Instant::now();
        let expected = before + comments;
        loop {
            let post = self
                .client
                .send(&Req::get(format!("/api/posts/{hot}")))
                .await?;
            if post.body["commentCount"] == expected {
                break;
            }
            if stopped.elapsed() > SETTLE_LIMIT {
                bail!(
                    "the hot post's commentCount is {} after the load, not {expected}",
                    post.body["commentCount"]
                );
            }
            pause(LAG_POLL).await;
        }
        pb.finish_and_clear();
        Ok(LagUnderLoad {
            lag: Lag {
                latency: latency_of(&lags),
                poll_interval_ms: measure::ms(LAG_POLL),
            },
            hot_clients: self.args.concurrency,
            seconds,
            comments_per_second: comments as f64 / seconds,
            count_exact_after_ms: measure::ms(stopped.elapsed()),
        })
    }

    /// Other users' posts' change-feed lag while a post with `--large-delete-comments` comments
    /// is deleted: the post is created through the API and its comments written straight to the
    /// store (a client would take minutes), then projected; then it is deleted, and posts by
    /// other users are created one after another, each polled until it is the newest entry of
    /// Q6, until every comment of the deleted post is marked (at least one sample).
    pub async fn lag_during_large_delete(
        &mut self,
        quiet: &Lag,
    ) -> anyhow::Result<LagDuringDelete> {
        let comments = self.args.large_delete_comments;
        let mut people = self.users(2);
        let (author, commenter) = (people.remove(0), people.remove(0));
        let created = self
            .client
            .send(&Req::post(
                "/api/posts",
                json!({ "userId": author.id, "title": "large", "content": "to be deleted" }),
            ))
            .await?;
        let post = created.body["id"]
            .as_str()
            .context("the created post has no id")?
            .to_string();
        let pb = bar(comments as u64, "large delete: comments");
        for start in (0..comments).step_by(100) {
            let ops: Vec<BatchOp> = (start..comments.min(start + 100))
                .map(|i| BatchOp::Create {
                    item: json!({ "id": format!("large-{i}"), "type": "comment",
                        "postId": post, "userId": commenter.id, "userUsername": "bench",
                        "content": "c", "creationDate": blog::domain::now() }),
                })
                .collect();
            pb.inc(ops.len() as u64);
            self.store.batch(Container::Posts, &post, ops).await?;
        }
        pb.finish_and_clear();
        self.settle().await?;
        let live = Query::partition(post.clone()).live();
        let started = Instant::now();
        self.client
            .send(&Req::delete(format!("/api/posts/{post}")))
            .await?;
        let answered = started.elapsed();
        let pb = ProgressBar::new_spinner().with_message("lag during a large delete");
        pb.enable_steady_tick(Duration::from_millis(200));
        let mut lags = Vec::new();
        let swept = loop {
            let left = self.store.count(Container::Posts, &live).await?;
            if left == 0 && !lags.is_empty() {
                break started.elapsed();
            }
            if started.elapsed() > SETTLE_LIMIT {
                bail!("{left} comments of the deleted post are still live");
            }
            lags.push(self.post_and_wait_for_the_feed(SETTLE_LIMIT).await?);
        };
        pb.finish_and_clear();
        let lag = Lag {
            latency: latency_of(&lags),
            poll_interval_ms: measure::ms(LAG_POLL),
        };
        let max_over_quiet_p50 = lag.latency.max_ms / quiet.latency.p50_ms.max(f64::EPSILON);
        Ok(LagDuringDelete {
            comments,
            delete_answered_ms: measure::ms(answered),
            all_marked_after_ms: measure::ms(swept),
            lag,
            max_over_quiet_p50,
        })
    }
}
