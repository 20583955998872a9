//! `bench`: the article's measurements, repeated on this implementation.
//!
//! *How to model and partition data on Azure Cosmos DB using a real-world example* measures
//! every request of its blog — C1 create/edit a user, Q1 retrieve a user, C2 create/edit a post,
//! Q2 retrieve a post, Q3 list a user's posts in short form, C3 create a comment, Q4 list a
//! post's comments, C4 like a post, Q5 list a post's likes, Q6 list the newest posts in short
//! form (the feed) — under each version of its data model. This tool does the same for two:
//!
//! - **V3**, the product: the real `handler` application (`blog::startup::Application`, change-
//!   feed pump on) serving on `127.0.0.1:<ephemeral>`, driven with real HTTP requests. Every
//!   query is one single-partition operation thanks to the denormalized copies the change feed
//!   maintains (names and counters on every post, comment and like; post copies per user in
//!   `users`; the newest posts in `feed`).
//! - **V1**, the article's first version, on the same data: posts, comments and likes only in
//!   `posts`, no denormalization, so reads aggregate names and counts with extra queries and Q3
//!   and Q6 fan out across every partition of `posts` (see [`v1`]). It is implemented here,
//!   directly against the `Store` trait.
//!
//! How the numbers are made:
//!
//! - The dataset is the article's shape scaled to `--users` ([`dataset`]), deterministic for a
//!   `--seed`, loaded through the `Store` trait already converged (as if the change feed had
//!   caught up), after which the pump is checkpointed at the end of the change feed.
//! - Each row is `--warmup` discarded requests and `--samples` measured ones, sequential, on
//!   the same randomly drawn users and posts for V1 and V3. Latency is wall time: for V3 at
//!   the HTTP client (so it includes a loopback HTTP round trip, reported separately as the
//!   baseline), for V1 around its store calls. Store operations and request units come from
//!   `blog::store::metrics` — for V3 the `x-store-operations` / `x-request-charge` headers the
//!   app sends, for V1 the same accounting around the V1 code. Partitions touched are noted by
//!   a wrapper around the store ([`measure::Tally`]); for V3 from one extra request answered in
//!   process through the app's router (the first warm-up), since the HTTP server's tasks are
//!   out of the bench's reach.
//! - Reads run first, on the loaded data; then the writes (C1–C4), waiting after each for the
//!   pump to settle so that its work is not charged to the next row. V1's C4 likes are by the
//!   users V1's C1 created, V3's by V3's, so every like is a first like (201).
//! - Change-feed lag: a post is created (C2) and Q6 is polled until the post is the newest
//!   entry; the lag is from the 201 to the answer that shows it. "Lag under load" measures the
//!   same while `--concurrency` clients comment on one hot post as fast as they can.
//! - Throughput: `--concurrency` workers repeat Q2 (random posts) or Q6 for `--seconds`.
//! - Request units are reported where the store reports them (Cosmos DB); the embedded store
//!   reports none, shown as "—".

mod dataset;
mod measure;
mod report;
mod v1;

use std::future::Future;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use blog::domain::{self, Comment, Id, Like, Post, User, Username};
use blog::settings::{Settings, StoreKind};
use blog::startup::Application;
use blog::store::Store;
use clap::{Parser, ValueEnum};
use indicatif::ProgressBar;
use rand::seq::IndexedRandom;
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;
use serde::Serialize;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::task::JoinSet;

use dataset::{bar, Dataset, UserRef};
use measure::{measured, stats, Client, Req, Sample, Stats};
use report::{Lag, LagUnderLoad, Latency, Phase, Report, Row, Throughput};

/// About 183,000 items: on 2 cores a release run loads them in 7–14 s and finishes in about
/// 95–125 s (half of it waiting for the change feed to absorb the C1 rows' new users).
const DEFAULT_USERS: usize = 100;
/// Q3–Q5 ask for this many items: every post of a user (≤ 50), comment (≤ 25) and like
/// (≤ 100) in one page, as the article lists them all.
const LIST_LIMIT: u32 = 100;
/// How long to wait for the change-feed pump before giving up.
const SETTLE_LIMIT: Duration = Duration::from_secs(120);
/// How often Q6 is polled while measuring the change-feed lag.
const LAG_POLL: Duration = Duration::from_millis(2);

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
enum StoreArg {
    /// SQLite in a scratch directory, removed afterwards.
    Embedded,
    /// The Cosmos DB account of the `COSMOS*` settings; the database must be empty.
    Cosmos,
}

/// Measure C1–C4 and Q1–Q6 as the article does, V1 against V3, on a generated dataset.
#[derive(Debug, Clone, Parser, Serialize)]
#[command(name = "bench", version)]
#[serde(rename_all = "camelCase")]
struct Args {
    /// Users to generate (each with 5–50 posts, each post with 0–25 comments, 0–100 likes).
    #[arg(long, default_value_t = DEFAULT_USERS, value_parser = positive)]
    users: usize,
    /// Seed of the generated dataset and of the requests drawn from it.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// The store to measure.
    #[arg(long, value_enum, default_value_t = StoreArg::Embedded)]
    store: StoreArg,
    /// Also write the whole report as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Measured requests per row and version.
    #[arg(long, default_value_t = 100, value_parser = positive)]
    samples: usize,
    /// Requests per row and version before measuring (at least 1: V3's first shows partitions).
    #[arg(long, default_value_t = 5, value_parser = positive)]
    warmup: usize,
    /// Posts created to measure the change-feed lag.
    #[arg(long, default_value_t = 30, value_parser = positive)]
    lag_samples: usize,
    /// Duration of the lag-under-load run, in seconds.
    #[arg(long, default_value_t = 30.0, value_parser = seconds)]
    load_seconds: f64,
    /// Concurrent workers in the throughput runs (and commenting clients under load).
    #[arg(long, default_value_t = 16, value_parser = workers)]
    concurrency: usize,
    /// Duration of each throughput run, in seconds.
    #[arg(long, default_value_t = 5.0, value_parser = seconds)]
    seconds: f64,
    /// Posts Q6 asks for (the article's x).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=100))]
    feed_limit: u32,
    /// Replay the change feed through the product's planner after loading and require that it
    /// finds nothing to change (slow at scale: a full check that the load is converged).
    #[arg(long)]
    verify: bool,
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

fn seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x > 0.0 && x <= 600.0 => Ok(x),
        _ => Err("a number of seconds above 0 and at most 600".into()),
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    // The app logs every request at info; only warnings (a pump retrying, say) matter here,
    // and they go to stderr, away from the report on stdout.
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// A scratch directory for the embedded store, removed when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The store to measure, by kind: the one place that knows how each is opened. Both go through
/// `blog::startup::open_store`, so the bench opens exactly what `handler` would.
async fn open_store(kind: StoreArg) -> anyhow::Result<(Arc<dyn Store>, Option<Scratch>)> {
    match kind {
        StoreArg::Embedded => {
            let nanos = time::OffsetDateTime::now_utc().unix_timestamp_nanos();
            let dir = Scratch(
                std::env::temp_dir().join(format!("blog-bench-{}-{nanos}", std::process::id())),
            );
            // Defaults, not the environment: `BLOG_*` settings are the handler's business.
            let mut settings = Settings::from_lookup(|_| None)?;
            settings.db_path = dir.0.join("blog.db");
            Ok((blog::startup::open_store(&settings).await?, Some(dir)))
        }
        StoreArg::Cosmos => {
            let mut settings = Settings::from_env()?;
            if settings.cosmos.connection.is_none() {
                bail!("--store cosmos needs `COSMOS` or `COSMOS__accountEndpoint` (see docs/performance.md)");
            }
            settings.store = StoreKind::Cosmos;
            Ok((blog::startup::open_store(&settings).await?, None))
        }
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    let started = Instant::now();
    // Fail now rather than after the whole run when the report cannot be written.
    if let Some(path) = &args.json {
        std::fs::write(path, b"")
            .with_context(|| format!("cannot write the report to {}", path.display()))?;
    }
    let (raw, _scratch) = open_store(args.store).await?;
    let store: Arc<dyn Store> = Arc::new(measure::Tally(raw));
    dataset::ensure_empty(&*store).await?;

    eprintln!(
        "bench: loading {} users (seed {}) into the {} store",
        args.users,
        args.seed,
        store.kind()
    );
    let mut phases = Phases::new();
    let data = dataset::load(store.clone(), args.users, args.seed).await?;
    phases.done("load");
    let d = &data.summary;
    eprintln!(
        "bench: loaded {} items ({} posts, {} comments, {} likes) in {:.1} s",
        d.items, d.posts, d.comments, d.likes, d.load_seconds
    );
    let verification = if args.verify {
        let v = dataset::verify(&*store).await?;
        eprintln!(
            "bench: verified: {} changes replayed, nothing left to project ({:.1} s)",
            v.changes_replayed, v.seconds
        );
        phases.done("verify");
        Some(v)
    } else {
        None
    };
    // Everything is projected already: the pump starts after it.
    blog::pump::checkpoint_at_end(&*store).await?;
    phases.done("checkpoint");

    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let origin = format!("http://{}", listener.local_addr()?);
    let app = Application::new(listener, store.clone(), true);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(app.run_until(async {
        let _ = stopped.await;
    }));

    let mut bench = Bench {
        rng: Pcg64::seed_from_u64(args.seed.wrapping_add(1)),
        client: Client::new(origin, store.clone()),
        store,
        data,
        args: args.clone(),
    };
    let measured = async {
        let baseline = bench.http_baseline().await?;
        let [q1, q2, q3, q4, q5, q6] = bench.reads().await?;
        phases.done("reads");
        let [c1, c2, c3, c4] = bench.writes().await?;
        phases.done("writes");
        let lag = bench.lag().await?;
        phases.done("lag");
        let lag_under_load = bench.lag_under_load().await?;
        phases.done("lag under load");
        let throughput = bench.throughput().await?;
        phases.done("throughput");
        let rows = vec![c1, q1, c2, q2, q3, c3, q4, c4, q5, q6];
        anyhow::Ok((baseline, rows, lag, lag_under_load, throughput))
    }
    .await;
    let _ = stop.send(());
    server.await.context("the server task failed")??;
    let (http_baseline, rows, change_feed_lag, change_feed_lag_under_load, throughput) = measured?;

    let report = Report {
        generated_at: domain::now(),
        machine: report::Machine::this(),
        store: bench.store.kind().to_string(),
        config: serde_json::to_value(&args)?,
        dataset: bench.data.summary.clone(),
        verification,
        http_baseline,
        rows,
        change_feed_lag,
        change_feed_lag_under_load,
        throughput,
        phases: phases.list,
        total_seconds: started.elapsed().as_secs_f64(),
    };
    println!("{}", report::markdown(&report));
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)
            .with_context(|| format!("cannot write the report to {}", path.display()))?;
        eprintln!("bench: report written to {}", path.display());
    }
    eprintln!("bench: done in {:.1} s", report.total_seconds);
    Ok(())
}

/// Wall time per phase of the run, logged as each ends.
struct Phases {
    last: Instant,
    list: Vec<Phase>,
}

impl Phases {
    fn new() -> Self {
        Phases {
            last: Instant::now(),
            list: Vec::new(),
        }
    }

    fn done(&mut self, name: &'static str) {
        let seconds = self.last.elapsed().as_secs_f64();
        self.last = Instant::now();
        eprintln!("bench: {name} took {seconds:.1} s");
        self.list.push(Phase { name, seconds });
    }
}

fn latency_of(durations: &[Duration]) -> Latency {
    let (p50_ms, p99_ms, mean_ms, max_ms) = measure::latency(durations);
    Latency {
        samples: durations.len(),
        p50_ms,
        p99_ms,
        mean_ms,
        max_ms,
    }
}

/// Measure a V1 request: `warmup` discarded runs, then `samples` measured ones; `f(i)` does
/// the `i`-th. Returns the figures and every answer.
async fn v1_row<F, Fut>(
    pb: &ProgressBar,
    warmup: usize,
    samples: usize,
    mut f: F,
) -> anyhow::Result<(Stats, Vec<Value>)>
where
    F: FnMut(usize) -> Fut,
    Fut: Future<Output = anyhow::Result<Value>>,
{
    let mut kept = Vec::with_capacity(samples);
    let mut answers = Vec::with_capacity(warmup + samples);
    for i in 0..warmup + samples {
        let (out, sample) = measured(f(i)).await;
        answers.push(out?);
        if i >= warmup {
            kept.push(sample);
        }
        pb.inc(1);
    }
    Ok((stats(&kept), answers))
}

/// The measurement run, over the loaded data and the running app.
struct Bench {
    args: Args,
    store: Arc<dyn Store>,
    client: Client,
    data: Dataset,
    rng: Pcg64,
}

impl Bench {
    fn n(&self) -> usize {
        self.args.warmup + self.args.samples
    }

    fn users(&mut self, n: usize) -> Vec<UserRef> {
        (0..n)
            .map(|_| {
                self.data
                    .users
                    .choose(&mut self.rng)
                    .expect("users")
                    .clone()
            })
            .collect()
    }

    fn posts(&mut self, n: usize) -> Vec<String> {
        (0..n)
            .map(|_| {
                self.data
                    .post_ids
                    .choose(&mut self.rng)
                    .expect("posts")
                    .clone()
            })
            .collect()
    }

    /// Measure V3: the first request in process (partitions touched), the rest of the warm-up
    /// over HTTP and discarded, then the samples over HTTP. Returns the figures and answers.
    async fn v3_row(&self, pb: &ProgressBar, reqs: &[Req]) -> anyhow::Result<(Stats, Vec<Value>)> {
        let probe = self.client.probe(&reqs[0]).await?;
        pb.inc(1);
        let mut answers = vec![probe.body];
        let mut kept = Vec::with_capacity(self.args.samples);
        for (i, r) in reqs.iter().enumerate().skip(1) {
            let a = self.client.send(r).await?;
            if a.sample.operations != probe.sample.operations && r.method == reqwest::Method::GET {
                // Same code path, same data: a read must cost the same in process and over HTTP.
                tracing::warn!(route = %r.path, "operations differ between probe and HTTP");
            }
            answers.push(a.body);
            if i >= self.args.warmup {
                kept.push(Sample {
                    touched: probe.sample.touched.clone(),
                    ..a.sample
                });
            }
            pb.inc(1);
        }
        Ok((stats(&kept), answers))
    }

    /// Both versions of one request; `v1` gets the index of the request and its V3 twin's
    /// inputs are in `reqs`.
    async fn row<F, Fut>(
        &self,
        request: &'static str,
        title: &'static str,
        reqs: Vec<Req>,
        v1: F,
    ) -> anyhow::Result<(Row, Vec<Value>, Vec<Value>)>
    where
        F: FnMut(usize) -> Fut,
        Fut: Future<Output = anyhow::Result<Value>>,
    {
        // A write sets the change feed to work: wait until it is done after each version, so
        // that its work is not charged to the other (and note how long it took).
        let writes = reqs[0].method != reqwest::Method::GET;
        let pb = bar(2 * self.n() as u64, request);
        let (v3, v3_answers) = self.v3_row(&pb, &reqs).await?;
        let v3_settle = if writes {
            Some(self.settle().await?)
        } else {
            None
        };
        let (v1, v1_answers) = v1_row(&pb, self.args.warmup, self.args.samples, v1).await?;
        let v1_settle = if writes {
            Some(self.settle().await?)
        } else {
            None
        };
        pb.finish_and_clear();
        eprintln!(
            "bench: [{request}] V1 p50 {:.2} ms, {:.1} ops; V3 p50 {:.2} ms, {:.1} ops",
            v1.p50_ms, v1.operations.mean, v3.p50_ms, v3.operations.mean
        );
        if let (Some(a), Some(b)) = (v3_settle, v1_settle) {
            eprintln!("bench: [{request}] the change feed settled in {a:.1} s after V3, {b:.1} s after V1");
        }
        let row = Row {
            request,
            title,
            route: format!("{} {}", reqs[0].method, route_of(&reqs[0].path)),
            v1,
            v3,
            v1_settle_seconds: v1_settle,
            v3_settle_seconds: v3_settle,
        };
        Ok((row, v1_answers, v3_answers))
    }

    /// Wait for the change-feed pump to apply everything; returns the seconds it took.
    async fn settle(&self) -> anyhow::Result<f64> {
        let started = Instant::now();
        dataset::settle(&*self.store, SETTLE_LIMIT).await?;
        Ok(started.elapsed().as_secs_f64())
    }

    async fn http_baseline(&mut self) -> anyhow::Result<Latency> {
        let mut durations = Vec::new();
        for i in 0..self.n() {
            let a = self.client.send(&Req::get("/")).await?;
            if i >= self.args.warmup {
                durations.push(a.sample.latency);
            }
        }
        Ok(latency_of(&durations))
    }

    /// Q1–Q6, on the data as loaded.
    async fn reads(&mut self) -> anyhow::Result<[Row; 6]> {
        let n = self.n();
        let store = self.store.clone();
        let limit = LIST_LIMIT;

        let users = self.users(n);
        let reqs = users
            .iter()
            .map(|u| Req::get(format!("/api/users/{}", u.id)))
            .collect();
        let (q1, _, _) = self
            .row("Q1", "Retrieve a user", reqs, |i| {
                let (store, id) = (store.clone(), users[i].id.clone());
                async move { v1::get_user(&*store, &id).await }
            })
            .await?;

        let posts = self.posts(n);
        let reqs = posts
            .iter()
            .map(|p| Req::get(format!("/api/posts/{p}")))
            .collect();
        let (q2, _, _) = self
            .row("Q2", "Retrieve a post", reqs, |i| {
                let (store, id) = (store.clone(), posts[i].clone());
                async move { v1::get_post(&*store, &id).await }
            })
            .await?;

        let users = self.users(n);
        let reqs = users
            .iter()
            .map(|u| Req::get(format!("/api/users/{}/posts?limit={limit}", u.id)))
            .collect();
        let (q3, _, _) = self
            .row("Q3", "List a user's posts in short form", reqs, |i| {
                let (store, id) = (store.clone(), users[i].id.clone());
                async move { v1::user_posts(&*store, &id, limit).await }
            })
            .await?;

        let posts = self.posts(n);
        let reqs = posts
            .iter()
            .map(|p| Req::get(format!("/api/posts/{p}/comments?limit={limit}")))
            .collect();
        let (q4, _, _) = self
            .row("Q4", "List a post's comments", reqs, |i| {
                let (store, id) = (store.clone(), posts[i].clone());
                async move { v1::comments(&*store, &id, limit).await }
            })
            .await?;

        let posts = self.posts(n);
        let reqs = posts
            .iter()
            .map(|p| Req::get(format!("/api/posts/{p}/likes?limit={limit}")))
            .collect();
        let (q5, _, _) = self
            .row("Q5", "List a post's likes", reqs, |i| {
                let (store, id) = (store.clone(), posts[i].clone());
                async move { v1::likes(&*store, &id, limit).await }
            })
            .await?;

        let feed_limit = self.args.feed_limit;
        let reqs = (0..n)
            .map(|_| Req::get(format!("/api/feed?limit={feed_limit}")))
            .collect();
        let (q6, _, _) = self
            .row(
                "Q6",
                "List the x most recent posts in short form (feed)",
                reqs,
                |_| {
                    let store = store.clone();
                    async move { v1::feed(&*store, feed_limit).await }
                },
            )
            .await?;
        Ok([q1, q2, q3, q4, q5, q6])
    }

    /// C1–C4, letting the change feed settle after each row so that its work is not charged
    /// to the next.
    async fn writes(&mut self) -> anyhow::Result<[Row; 4]> {
        let n = self.n();
        let store = self.store.clone();
        let names: Vec<String> = (0..n)
            .map(|i| format!("bench{}-{i}", self.rng.random_range(0..1000u32)))
            .collect();
        let reqs = names
            .iter()
            .map(|name| Req::post("/api/users", json!({ "username": name })))
            .collect();
        let (c1, v1_users, v3_users) = self
            .row("C1", "Create a user", reqs, |i| {
                let (store, name) = (store.clone(), names[i].clone());
                async move {
                    let user = User::new(&Id::new(), &Username::parse(&name)?);
                    v1::create_user(&*store, &user).await
                }
            })
            .await?;

        let authors = self.users(n);
        let texts: Vec<(String, String)> =
            (0..n).map(|_| dataset::post_text(&mut self.rng)).collect();
        let reqs = authors
            .iter()
            .zip(&texts)
            .map(|(u, (title, content))| {
                Req::post(
                    "/api/posts",
                    json!({ "userId": u.id, "title": title, "content": content }),
                )
            })
            .collect();
        let (c2, _, _) = self
            .row("C2", "Create a post", reqs, |i| {
                let store = store.clone();
                let (author, (title, content)) = (authors[i].clone(), texts[i].clone());
                async move {
                    let id = Id::new();
                    let post = Post {
                        id: id.to_string(),
                        kind: "post".into(),
                        post_id: id.to_string(),
                        user_id: author.id,
                        user_username: String::new(),
                        title,
                        content,
                        comment_count: 0,
                        like_count: 0,
                        creation_date: domain::now(),
                    };
                    v1::create_post(&*store, &post).await
                }
            })
            .await?;

        let (posts, authors) = (self.posts(n), self.users(n));
        let texts: Vec<String> = (0..n)
            .map(|_| dataset::comment_text(&mut self.rng))
            .collect();
        let reqs = (0..n)
            .map(|i| {
                Req::post(
                    format!("/api/posts/{}/comments", posts[i]),
                    json!({ "userId": authors[i].id, "content": texts[i] }),
                )
            })
            .collect();
        let (c3, _, _) = self
            .row("C3", "Create a comment", reqs, |i| {
                let store = store.clone();
                let comment = Comment {
                    id: Id::new().to_string(),
                    kind: "comment".into(),
                    post_id: posts[i].clone(),
                    user_id: authors[i].id.clone(),
                    user_username: String::new(),
                    content: texts[i].clone(),
                    creation_date: domain::now(),
                };
                async move { v1::create_comment(&*store, &comment).await }
            })
            .await?;

        // Each version's likes come from the users its C1 created: first likes, all of them.
        let id_of = |v: &Value| v["id"].as_str().unwrap_or_default().to_string();
        let v3_likers: Vec<String> = v3_users.iter().map(id_of).collect();
        let v1_likers: Vec<String> = v1_users.iter().map(id_of).collect();
        let posts = self.posts(n);
        let reqs = (0..n)
            .map(|i| {
                Req::post(
                    format!("/api/posts/{}/likes", posts[i]),
                    json!({ "userId": v3_likers[i] }),
                )
            })
            .collect();
        let (c4, _, v3_likes) = self
            .row("C4", "Like a post", reqs, |i| {
                let store = store.clone();
                let like = Like {
                    id: domain::like_id(&v1_likers[i]),
                    kind: "like".into(),
                    post_id: posts[i].clone(),
                    user_id: v1_likers[i].clone(),
                    user_username: String::new(),
                    creation_date: domain::now(),
                };
                async move { v1::create_like(&*store, &like).await }
            })
            .await?;
        if v3_likes.iter().any(|l| l["userUsername"].is_null()) {
            bail!("a V3 like came back without its author's name");
        }
        Ok([c1, c2, c3, c4])
    }

    /// C2 acknowledged → the post visible as the newest entry of Q6.
    async fn lag(&mut self) -> anyhow::Result<Lag> {
        self.settle().await?;
        let total = self.args.lag_samples + 1;
        let pb = bar(total as u64, "lag");
        let mut lags = Vec::new();
        for i in 0..total {
            let author = self.users(1).remove(0);
            let (title, content) = dataset::post_text(&mut self.rng);
            let created = self
                .client
                .send(&Req::post(
                    "/api/posts",
                    json!({ "userId": author.id, "title": title, "content": content }),
                ))
                .await?;
            let acked = Instant::now();
            let id = created.body["id"].clone();
            loop {
                let feed = self.client.send(&Req::get("/api/feed?limit=1")).await?;
                if feed.body["items"][0]["id"] == id {
                    break;
                }
                if acked.elapsed() > SETTLE_LIMIT {
                    bail!("post {id} never showed in the feed");
                }
                tokio::time::sleep(LAG_POLL).await;
            }
            // The first is a warm-up: the pump may still be waking from its idle sleep.
            if i > 0 {
                lags.push(acked.elapsed());
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
    async fn lag_under_load(&mut self) -> anyhow::Result<LagUnderLoad> {
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
            let author = self.users(1).remove(0);
            let (title, content) = dataset::post_text(&mut self.rng);
            let created = self
                .client
                .send(&Req::post(
                    "/api/posts",
                    json!({ "userId": author.id, "title": title, "content": content }),
                ))
                .await?;
            let acked = Instant::now();
            let id = created.body["id"].clone();
            loop {
                let feed = self.client.send(&Req::get("/api/feed?limit=1")).await?;
                if feed.body["items"][0]["id"] == id {
                    break;
                }
                if acked.elapsed() > SETTLE_LIMIT {
                    bail!("post {id} never showed in the feed under load");
                }
                tokio::time::sleep(LAG_POLL).await;
            }
            lags.push(acked.elapsed());
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
            tokio::time::sleep(LAG_POLL).await;
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

    /// Q2 and Q6, V3 and V1, each with `--concurrency` workers for `--seconds`.
    async fn throughput(&mut self) -> anyhow::Result<Vec<Throughput>> {
        self.settle().await?;
        let mut out = Vec::new();
        for (request, version) in [("Q2", "V3"), ("Q2", "V1"), ("Q6", "V3"), ("Q6", "V1")] {
            let pb = ProgressBar::new_spinner()
                .with_message(format!("throughput [{request}] {version}"));
            pb.enable_steady_tick(Duration::from_millis(200));
            out.push(self.throughput_of(request, version).await?);
            pb.finish_and_clear();
        }
        Ok(out)
    }

    async fn throughput_of(
        &mut self,
        request: &'static str,
        version: &'static str,
    ) -> anyhow::Result<Throughput> {
        /// A bound on each worker besides the clock.
        const MAX_PER_WORKER: usize = 1_000_000;
        let started = Instant::now();
        let deadline = started + Duration::from_secs_f64(self.args.seconds);
        let posts = Arc::new(self.data.post_ids.clone());
        let feed_limit = self.args.feed_limit;
        let mut workers = JoinSet::new();
        for w in 0..self.args.concurrency {
            let (client, store, posts) = (self.client.clone(), self.store.clone(), posts.clone());
            let mut rng = Pcg64::seed_from_u64(self.args.seed.wrapping_add(1000 + w as u64));
            workers.spawn(async move {
                let mut durations = Vec::new();
                while Instant::now() < deadline && durations.len() < MAX_PER_WORKER {
                    let post = posts.choose(&mut rng).expect("posts").clone();
                    let t = Instant::now();
                    match (request, version) {
                        ("Q2", "V3") => {
                            client.send(&Req::get(format!("/api/posts/{post}"))).await?;
                        }
                        ("Q2", _) => {
                            v1::get_post(&*store, &post).await?;
                        }
                        (_, "V3") => {
                            client
                                .send(&Req::get(format!("/api/feed?limit={feed_limit}")))
                                .await?;
                        }
                        _ => {
                            v1::feed(&*store, feed_limit).await?;
                        }
                    }
                    durations.push(t.elapsed());
                }
                anyhow::Ok(durations)
            });
        }
        let mut durations = Vec::new();
        while let Some(r) = workers.join_next().await {
            durations.extend(r.context("a throughput worker panicked")??);
        }
        let seconds = started.elapsed().as_secs_f64();
        eprintln!(
            "bench: [{request}] {version} throughput {:.0} requests/s",
            durations.len() as f64 / seconds
        );
        Ok(Throughput {
            request,
            version,
            concurrency: self.args.concurrency,
            seconds,
            requests: durations.len(),
            requests_per_second: durations.len() as f64 / seconds,
            latency: latency_of(&durations),
        })
    }
}

/// A request path with its ids replaced by the route's parameters.
fn route_of(path: &str) -> String {
    let path = path.split('?').next().unwrap_or(path);
    let parts: Vec<&str> = path.split('/').collect();
    parts
        .iter()
        .enumerate()
        .map(|(i, p)| match (i.checked_sub(1).map(|j| parts[j]), *p) {
            (Some("users"), p) if !p.is_empty() => "{userId}".to_string(),
            (Some("posts"), p) if !p.is_empty() => "{postId}".to_string(),
            (_, p) => p.to_string(),
        })
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_name_their_parameters() {
        assert_eq!(
            route_of("/api/users/abc/posts?limit=5"),
            "/api/users/{userId}/posts"
        );
        assert_eq!(route_of("/api/posts/p1/likes"), "/api/posts/{postId}/likes");
        assert_eq!(route_of("/api/feed?limit=20"), "/api/feed");
        assert_eq!(route_of("/api/posts"), "/api/posts");
    }

    #[test]
    fn arguments_parse_with_defaults() {
        let a = Args::try_parse_from(["bench"]).unwrap();
        assert_eq!(a.users, DEFAULT_USERS);
        assert_eq!(a.store, StoreArg::Embedded);
        let a = Args::try_parse_from(["bench", "--users", "3", "--store", "cosmos"]).unwrap();
        assert_eq!((a.users, a.store), (3, StoreArg::Cosmos));
        assert!(Args::try_parse_from(["bench", "--users", "0"]).is_err());
        assert!(Args::try_parse_from(["bench", "--seconds", "0"]).is_err());
        assert!(Args::try_parse_from(["bench", "--feed-limit", "101"]).is_err());
    }
}
