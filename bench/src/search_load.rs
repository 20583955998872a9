//! SL: searches from one address against everyone else. `--searchers` clients at one client
//! address (127.0.0.1) send `GET /api/search` back to back for `--seconds`, each answer read
//! and the next sent at once, whatever its status (a client that ignores `Retry-After`), while a
//! user at another address (127.0.0.2) reads posts (Q2), comments (C3) and posts (C2), waiting
//! for each post to show as the newest entry of the feed (Q6): the latency of each, and the
//! change-feed lag of their posts.
//!
//! It runs after S2, on ten times the posts, with the searches of S1 and S2 (two words of the
//! dataset's vocabulary, which most posts hold). Each run has a server of its own, over the
//! bench's store and beside the bench's own server (whose pump projects the user's writes),
//! set up as `handler` is by default: the server's limits and `BLOG_SEARCHES_PER_MINUTE`'s
//! default budget per address, then no budget, so that the cap on searches in flight is
//! measured alone. Neither has a budget of writes: the user's writes are measured, not refused.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use blog::api::search_limit::DEFAULT_SEARCHES_IN_FLIGHT;
use blog::domain::Kind;
use blog::server::ServerLimits;
use blog::settings::DEFAULT_SEARCHES_PER_MINUTE;
use blog::startup::Application;
use blog::store::{Container, Query, SEARCHABLE};
use indicatif::ProgressBar;
use rand::seq::IndexedRandom;
use rand::SeedableRng;
use rand_pcg::Pcg64;
use serde_json::json;
use tokio::net::TcpListener;
use tokio::task::JoinSet;

use crate::dataset::{self, UserRef};
use crate::lag::{post_and_wait, LAG_POLL};
use crate::measure::{self, Client, Req};
use crate::results::{latency_of, Lag, SearchLoad, SearchLoadRun};
use crate::runner::{Bench, SETTLE_LIMIT};

/// The searchers' address.
const SEARCHERS: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1));
/// The other user's address.
const USER: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
/// The other user's pause after each read or comment, and after each post shows in the feed: a
/// person's pace rather than a second load.
const USER_PAUSE: Duration = Duration::from_millis(10);
const POST_PAUSE: Duration = Duration::from_millis(100);

/// The searches' answers and their latencies.
#[derive(Default)]
struct Answers {
    ok: Vec<Duration>,
    too_many: Vec<Duration>,
    unavailable: u64,
    other: u64,
}

impl Bench {
    /// SL with `searches` (S1's): a run with the default budget per address, then one without.
    pub async fn search_load(&mut self, searches: &[Req]) -> anyhow::Result<SearchLoad> {
        self.settle().await?;
        let posts = self
            .store
            .count(
                Container::Posts,
                &Query::cross_partition().of_kind(Kind::Post).live(),
            )
            .await?;
        let posts_found = self.posts_found(&searches[0]).await?;
        let mut runs = Vec::new();
        for per_minute in [DEFAULT_SEARCHES_PER_MINUTE, 0] {
            runs.push(self.search_load_run(searches, per_minute).await?);
            self.settle().await?;
        }
        Ok(SearchLoad {
            searchers: self.args.searchers,
            seconds: self.args.seconds,
            posts,
            posts_found,
            runs,
        })
    }

    /// The live posts `search` finds: one count of them.
    async fn posts_found(&self, search: &Req) -> anyhow::Result<u64> {
        let q = search
            .path
            .split_once("q=")
            .and_then(|(_, rest)| rest.split('&').next())
            .context("a search without `q`")?;
        let words = q.split('+').map(str::to_string).collect();
        let query = Query::cross_partition()
            .of_kind(Kind::Post)
            .live()
            .containing_words(&SEARCHABLE, words);
        Ok(self.store.count(Container::Posts, &query).await?)
    }

    async fn search_load_run(
        &mut self,
        searches: &[Req],
        per_minute: u32,
    ) -> anyhow::Result<SearchLoadRun> {
        let listener = TcpListener::bind((SEARCHERS, 0)).await?;
        let origin = format!("http://{}", listener.local_addr()?);
        // The bench's server pumps the change feed; this one serves the run's requests.
        let app = Application::new(listener, self.store.clone(), false)
            .limits(ServerLimits::default())
            .with_feed_cache(Duration::ZERO)
            .with_search_limit(per_minute, DEFAULT_SEARCHES_IN_FLIGHT);
        let client = Client::new(origin, app.state().clone());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(app.run_until(async {
            let _ = stopped.await;
        }));
        let measured = self.under_searches(&client, searches, per_minute).await;
        let _ = stop.send(());
        server.await.context("the search load's server failed")??;
        measured
    }

    /// The searchers and the other user, together for `--seconds`.
    async fn under_searches(
        &mut self,
        client: &Client,
        searches: &[Req],
        per_minute: u32,
    ) -> anyhow::Result<SearchLoadRun> {
        let pb = ProgressBar::new_spinner().with_message(format!(
            "search load, {} searches a minute per address",
            if per_minute == 0 {
                "any".to_string()
            } else {
                per_minute.to_string()
            }
        ));
        pb.enable_steady_tick(Duration::from_millis(200));
        let deadline = Instant::now() + Duration::from_secs_f64(self.args.seconds);
        let searchers = client.sending_from(SEARCHERS)?;
        let user = client.sending_from(USER)?;
        let searches = Arc::new(searches.to_vec());
        let mut searching = JoinSet::new();
        for w in 0..self.args.searchers {
            let (client, searches) = (searchers.clone(), searches.clone());
            let mut rng = Pcg64::seed_from_u64(self.args.seed.wrapping_add(2000 + w as u64));
            searching.spawn(async move {
                let mut answers = Answers::default();
                // At least one each, however late the task starts.
                for sent in 0.. {
                    if sent > 0 && Instant::now() >= deadline {
                        break;
                    }
                    let search = searches.choose(&mut rng).expect("searches");
                    match client.status(search).await? {
                        (200, t) => answers.ok.push(t),
                        (429, t) => answers.too_many.push(t),
                        (503, _) => answers.unavailable += 1,
                        _ => answers.other += 1,
                    }
                }
                anyhow::Ok(answers)
            });
        }
        let reads = self.reading(&user, deadline);
        let writes = self.commenting(&user, deadline);
        let lags = self.posting(&user, deadline);
        let (reads, writes, lags) = tokio::try_join!(reads, writes, lags)?;
        let mut answers = Answers::default();
        while let Some(a) = searching.join_next().await {
            let a = a.context("a searching client panicked")??;
            answers.ok.extend(a.ok);
            answers.too_many.extend(a.too_many);
            answers.unavailable += a.unavailable;
            answers.other += a.other;
        }
        pb.finish_and_clear();
        let run = SearchLoadRun {
            searches_per_minute: per_minute,
            searches_in_flight: DEFAULT_SEARCHES_IN_FLIGHT,
            answered_ok: answers.ok.len() as u64,
            answered_too_many: answers.too_many.len() as u64,
            answered_unavailable: answers.unavailable,
            answered_other: answers.other,
            search_latency: latency_of(&answers.ok),
            refused_latency: latency_of(&answers.too_many),
            point_read: latency_of(&reads),
            write: latency_of(&writes),
            feed_lag: Lag {
                latency: latency_of(&lags),
                poll_interval_ms: measure::ms(LAG_POLL),
            },
        };
        eprintln!(
            "bench: [SL] {per_minute} a minute: searches {} / {} / {} (200 / 429 / 503); \
             Q2 p99 {:.2} ms, C3 p99 {:.2} ms, lag p99 {:.2} ms",
            run.answered_ok,
            run.answered_too_many,
            run.answered_unavailable,
            run.point_read.p99_ms,
            run.write.p99_ms,
            run.feed_lag.latency.p99_ms
        );
        Ok(run)
    }

    /// Q2 of random posts until `deadline` (at least one).
    fn reading(
        &mut self,
        user: &Client,
        deadline: Instant,
    ) -> impl std::future::Future<Output = anyhow::Result<Vec<Duration>>> {
        let (user, posts) = (user.clone(), self.posts(4096));
        async move {
            let mut out = Vec::new();
            for post in posts.iter().cycle() {
                if !out.is_empty() && Instant::now() >= deadline {
                    break;
                }
                let a = user.send(&Req::get(format!("/api/posts/{post}"))).await?;
                out.push(a.sample.latency);
                tokio::time::sleep(USER_PAUSE).await;
            }
            Ok(out)
        }
    }

    /// C3 on random posts by random users until `deadline` (at least one).
    fn commenting(
        &mut self,
        user: &Client,
        deadline: Instant,
    ) -> impl std::future::Future<Output = anyhow::Result<Vec<Duration>>> {
        let (user, posts, authors) = (user.clone(), self.posts(4096), self.users(4096));
        async move {
            let mut out = Vec::new();
            for (post, author) in posts.iter().zip(&authors).cycle() {
                if !out.is_empty() && Instant::now() >= deadline {
                    break;
                }
                let body = json!({ "userId": author.id, "content": "while others search" });
                let path = format!("/api/posts/{post}/comments");
                let a = user.send(&Req::post(path, body)).await?;
                out.push(a.sample.latency);
                tokio::time::sleep(USER_PAUSE).await;
            }
            Ok(out)
        }
    }

    /// C2 by random users, each awaited in Q6, until `deadline` (at least one): the lags.
    fn posting(
        &mut self,
        user: &Client,
        deadline: Instant,
    ) -> impl std::future::Future<Output = anyhow::Result<Vec<Duration>>> {
        let authors: Vec<UserRef> = self.users(64);
        let texts: Vec<_> = (0..authors.len())
            .map(|_| dataset::post_text(&mut self.rng))
            .collect();
        let user = user.clone();
        async move {
            let mut out = Vec::new();
            for (author, text) in authors.iter().zip(&texts).cycle() {
                if !out.is_empty() && Instant::now() >= deadline {
                    break;
                }
                out.push(post_and_wait(&user, &author.id, text.clone(), SETTLE_LIMIT).await?);
                tokio::time::sleep(POST_PAUSE).await;
            }
            Ok(out)
        }
    }
}
