//! L: other users' lag while one author with `--hot-followers` followers acts. The author is
//! written with its followers already projected, the fan-out limit is set to that many (so the
//! author sits at it), and the author posts `--hot-likes` + 1 times through the API. Then, one
//! scenario at a time, one ordinary user likes `--hot-likes` of those posts at `--like-rate`, the
//! author renames, deletes the last post, and is taken over the limit and back (one user
//! follows and, once the follow shows in the author's followers, unfollows: two 204s).
//! Meanwhile, over and over until the change feed has applied all of it, another user posts and
//! `GET /api/feed` is polled until the post is the newest, and another user follows a third and
//! `GET /api/users/{id}/followers` is polled until the follow shows. A quiet run (the same probes
//! with nothing else going on) comes first.

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use serde_json::json;

use crate::lag::{pause, LAG_POLL};
use crate::limit;
use crate::measure::{self, Client, Req};
use crate::results::latency_of;
use crate::results::scale::{LagScenario, OthersLag};
use crate::runner::Bench;

/// What the author does in a scenario, run beside the probes.
type Action = Pin<Box<dyn Future<Output = anyhow::Result<()>> + Send>>;

/// Probe pairs of the quiet run.
const QUIET_PROBES: usize = 5;
/// How long after a probe pair the change feed may take to be done before another pair is sent.
/// The probes set the change feed work of their own (a post, two users, a follow), which it
/// applies in milliseconds when nothing holds it up; checked at once, the feed would seldom be
/// found done, each probe setting off the next one's wait.
const PROBE_GRACE: Duration = Duration::from_secs(1);
/// How long a scenario, and a probe's wait within it, may take before the row gives up: on a
/// design that copies into every follower's timeline a big author's rename is minutes of work.
const SCENARIO_LIMIT: Duration = Duration::from_secs(600);

impl Bench {
    pub async fn others_lag(&mut self) -> anyhow::Result<OthersLag> {
        let n = self.args.hot_followers;
        let was = limit::set(&*self.store, n as u64).await?;
        let out = self.others_lag_at_the_limit(n).await;
        limit::set(&*self.store, was).await?;
        out
    }

    async fn others_lag_at_the_limit(&mut self, n: usize) -> anyhow::Result<OthersLag> {
        let started = Instant::now();
        let author = format!("hot-{}", self.args.seed);
        let followers: Vec<String> = (0..n).map(|i| format!("{author}-f{i}")).collect();
        self.write_followed_author(&author, &followers).await?;
        self.settle().await?;
        self.post_all(vec![author.clone(); usize::from(self.args.hot_likes)])
            .await?;
        let doomed = self.create_post(&author).await?;
        // The author's posts as the API lists them: their copies, which the change feed writes.
        self.settle().await?;
        let page = self
            .client
            .send(&Req::get(format!(
                "/api/users/{author}/posts?limit={}",
                self.args.hot_likes + 1
            )))
            .await?;
        let liked: Vec<String> = page.body["items"]
            .as_array()
            .context("the author's posts")?
            .iter()
            .filter_map(|p| p["id"].as_str())
            .filter(|id| *id != doomed)
            .map(String::from)
            .collect();
        if liked.len() != usize::from(self.args.hot_likes) {
            bail!(
                "the big author has {} posts to like, not {}",
                liked.len(),
                self.args.hot_likes
            );
        }
        let mut people = self.fresh_users(2).await?;
        let (liker, joiner) = (people.remove(0), people.remove(0));
        self.settle().await?;
        let setup_seconds = started.elapsed().as_secs_f64();

        let quiet = self
            .scenario(
                "quiet",
                "nothing else going on".into(),
                QUIET_PROBES,
                None,
                0.0,
            )
            .await?;
        let per_probe = quiet.store_writes as f64 / quiet.feed_lag.samples.max(1) as f64;
        let mut scenarios = Vec::new();

        let (client, every) = (
            self.client.clone(),
            Duration::from_secs_f64(1.0 / self.args.like_rate),
        );
        let what = format!(
            "one user likes {} of the author's posts at {}/s",
            liked.len(),
            self.args.like_rate
        );
        let likes: Action = Box::pin(async move {
            let start = Instant::now();
            for (i, post) in liked.iter().enumerate() {
                tokio::time::sleep_until((start + every * i as u32).into()).await;
                let req = Req::post(
                    format!("/api/posts/{post}/likes"),
                    json!({ "userId": liker }),
                );
                client.send(&req).await?;
            }
            Ok(())
        });
        scenarios.push(
            self.scenario("liked", what, 1, Some(likes), per_probe)
                .await?,
        );

        let client = self.client.clone();
        let (a, new_name) = (author.clone(), format!("{author}.renamed"));
        let rename: Action = Box::pin(async move {
            let body = json!({ "userId": a, "username": new_name });
            client
                .send(&Req::put(format!("/api/users/{a}"), Some(body)))
                .await?;
            Ok(())
        });
        scenarios.push(
            self.scenario("renamed", "one rename".into(), 1, Some(rename), per_probe)
                .await?,
        );

        let client = self.client.clone();
        let delete: Action = Box::pin(async move {
            client
                .send(&Req::delete(format!("/api/posts/{doomed}")))
                .await?;
            Ok(())
        });
        scenarios.push(
            self.scenario(
                "deleted a post",
                "one post deleted".into(),
                1,
                Some(delete),
                per_probe,
            )
            .await?,
        );

        // The unfollow once the follow shows in the author's followers: the change feed has
        // taken the follow up by then, so it sees the author over the limit before it sees them
        // back at it (sent at once, one batch would see only the end state).
        let client = self.client.clone();
        let (path, a, j) = (
            format!("/api/users/{joiner}/following/{author}"),
            author.clone(),
            joiner.clone(),
        );
        let cross: Action = Box::pin(async move {
            client.send(&Req::put(path.clone(), None)).await?;
            wait_for_follower(&client, &a, &j, Instant::now()).await?;
            client.send(&Req::delete(path)).await?;
            Ok(())
        });
        let what = format!("one follow and one unfollow of an author at the limit ({n})");
        scenarios.push(
            self.scenario("crossed the limit", what, 1, Some(cross), per_probe)
                .await?,
        );
        Ok(OthersLag {
            followers: n,
            fanout_limit: n as u64,
            setup_seconds,
            quiet,
            scenarios,
        })
    }

    /// Run `action` beside the probes: at least `min_probes` pairs, and more until the action
    /// is done and the change feed has applied everything.
    async fn scenario(
        &mut self,
        name: &'static str,
        what: String,
        min_probes: usize,
        action: Option<Action>,
        writes_per_probe: f64,
    ) -> anyhow::Result<LagScenario> {
        self.settle().await?;
        let before = measure::writes_total();
        let started = Instant::now();
        let task = tokio::spawn(action.unwrap_or_else(|| Box::pin(async { Ok(()) })));
        let (mut feed, mut follow) = (Vec::new(), Vec::new());
        let mut applied = None;
        while applied.is_none() || feed.len() < min_probes {
            feed.push(self.post_and_wait_for_the_feed(SCENARIO_LIMIT).await?);
            follow.push(self.follow_and_wait().await?);
            if applied.is_none() && task.is_finished() && self.done_within(PROBE_GRACE).await? {
                applied = Some(started.elapsed());
            }
            if started.elapsed() > SCENARIO_LIMIT {
                bail!("{name}: the change feed did not settle within {SCENARIO_LIMIT:?}");
            }
        }
        task.await.context("the scenario panicked")??;
        let written = measure::writes_total() - before;
        let probes = (writes_per_probe * feed.len() as f64).round() as u64;
        let s = LagScenario {
            name,
            what,
            applied_ms: measure::ms(applied.unwrap_or_default()),
            store_writes: written.saturating_sub(probes),
            feed_lag: latency_of(&feed),
            follow_lag: latency_of(&follow),
        };
        eprintln!(
            "bench: [L] {name}: applied in {:.0} ms, {} writes; others' feed lag max {:.0} ms, \
             follow lag max {:.0} ms",
            s.applied_ms, s.store_writes, s.feed_lag.max_ms, s.follow_lag.max_ms
        );
        Ok(s)
    }

    /// Whether the change feed has applied everything within `grace`.
    async fn done_within(&self, grace: Duration) -> anyhow::Result<bool> {
        let deadline = Instant::now() + grace;
        loop {
            if blog::pump::caught_up(&*self.store).await? {
                return Ok(true);
            }
            if Instant::now() > deadline {
                return Ok(false);
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Two new users; the first follows the second (204), and the second's followers are polled
    /// until the first shows: the time from the 204.
    pub async fn follow_and_wait(&mut self) -> anyhow::Result<Duration> {
        let pair = self.fresh_users(2).await?;
        let (a, b) = (&pair[0], &pair[1]);
        self.client
            .send(&Req::put(format!("/api/users/{a}/following/{b}"), None))
            .await?;
        let acked = Instant::now();
        wait_for_follower(&self.client, b, a, acked).await
    }
}

/// Poll `user`'s followers until `follower` is the newest.
async fn wait_for_follower(
    client: &Client,
    user: &str,
    follower: &str,
    acked: Instant,
) -> anyhow::Result<Duration> {
    let req = Req::get(format!("/api/users/{user}/followers?limit=1"));
    loop {
        let page = client.send(&req).await?;
        if page.body["items"][0]["id"] == follower {
            return Ok(acked.elapsed());
        }
        if acked.elapsed() > SCENARIO_LIMIT {
            bail!("{follower}'s follow of {user} never showed in their followers");
        }
        pause(LAG_POLL).await;
    }
}
