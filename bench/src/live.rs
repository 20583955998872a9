//! Live updates: `--live-streams` streams of `GET /api/events` open at once, then a steady
//! stream of writes, and what reaches the streams.
//!
//! - **The cast**, made over HTTP on the bench's server and projected before anything is timed:
//!   an author with a hot post, a follower of the author for each timeline stream, a commenter,
//!   and a user of its own for each like.
//! - **The server**: one of its own, over the bench's store and beside the bench's server (whose
//!   pump projects the writes), built as `handler` is but for the stream caps, raised to the
//!   streams (`BLOG_LIVE_STREAMS`, no cap per address: every stream comes from this machine) and
//!   the connection cap above them. Its follower of the change feed counts its own store work
//!   (`Hub::spent`).
//! - **Topics**: stream `i` is on `post:<hot post>` when `i % 3 == 0`, on
//!   `timeline:<a follower of the author>` (each its own follower) when 1, on `user:<author>`
//!   when 2.
//! - **One stream first**: stream 0 opens alone; the follower's store work while nothing is
//!   written is counted over [`IDLE`], then comments on the hot post at `--live-rate` give the
//!   lag with one stream. Then the others open (the time until the last is `ready`), and the
//!   idle work is counted again with all of them.
//! - **Delivery**: `--live-writes` writes at `--live-rate` a second, in turn a comment on the
//!   hot post, a like of it and a post by the author, each sent once the one before is
//!   answered. A write is named by one event on each stream of its topic (a comment by its id
//!   and a like by its liker on `post:`, a post by its id on `timeline:` and `user:`); the lag
//!   runs from its 201 to each of those events, and the run waits until every one has come or
//!   [`DELIVERY_LIMIT`] has passed (what has not come by then is lost). Events per second are
//!   every event the streams received from the first write until the last named one came.
//! - **Memory**: the bench's process's resident set (the server and the streams' readers):
//!   before any stream, with every stream open and idle, and its peak during delivery (see
//!   `fanout`). Not on Linux: no figure.

mod reader;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use blog::live::hub::{Hub, Limits};
use blog::server::ServerLimits;
use blog::settings::LiveStreams;
use blog::startup::Application;
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::task::{JoinHandle, JoinSet};

use crate::fanout::{reset_peak_rss, status_kib};
use crate::measure::{Client, Req};
use crate::results::latency_of;
use crate::results::live::{LiveIdle, LiveUpdates};
use crate::runner::Bench;
use reader::{Counts, Receipt};

/// How long the follower's store work is counted while nothing is written.
const IDLE: Duration = Duration::from_secs(3);
/// The most the run waits, after the last write, for the events still to come.
const DELIVERY_LIMIT: Duration = Duration::from_secs(60);
/// Comments on the hot post with one stream open.
const ONE_STREAM_WRITES: usize = 20;
/// Streams opening at once.
const OPENING: usize = 32;

/// The row's users and post.
struct Cast {
    author: String,
    hot: String,
    commenter: String,
    followers: Vec<String>,
    likers: Vec<String>,
}

/// The streams open, and what they received.
struct Streams {
    tasks: Vec<JoinHandle<()>>,
    counts: Arc<Counts>,
    receipts: mpsc::UnboundedReceiver<Receipt>,
    sender: mpsc::UnboundedSender<Receipt>,
    http: reqwest::Client,
    origin: String,
}

impl Drop for Streams {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// The topics of stream `i`.
fn topics(i: usize, cast: &Cast) -> String {
    match i % 3 {
        0 => format!("post:{}", cast.hot),
        1 => format!("timeline:{}", cast.followers[i / 3]),
        _ => format!("user:{}", cast.author),
    }
}

/// Raise the soft limit of open files to what `streams` need (a socket at each end, and room
/// for the rest of the run), within the hard limit; above it, fail saying so.
fn open_files_for(streams: usize) -> anyhow::Result<()> {
    let need = (streams * 2 + 1024) as libc::rlim_t;
    let mut l = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `getrlimit` writes the limits into the struct it is given, which outlives the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) } != 0 {
        bail!("cannot read the limit of open files");
    }
    if l.rlim_cur >= need {
        return Ok(());
    }
    if l.rlim_max < need {
        bail!(
            "--live-streams {streams} needs {need} open files, over this process's hard limit of \
             {}: raise it (`ulimit -Hn`) or open fewer streams",
            l.rlim_max
        );
    }
    l.rlim_cur = need;
    // SAFETY: `setrlimit` only reads the struct it is given.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &l) } != 0 {
        bail!("cannot raise the limit of open files to {need}");
    }
    Ok(())
}

fn mib(kib: Option<u64>) -> Option<f64> {
    kib.map(|k| k as f64 / 1024.0)
}

impl Streams {
    fn new(origin: String) -> anyhow::Result<Streams> {
        let (sender, receipts) = mpsc::unbounded_channel();
        Ok(Streams {
            tasks: Vec::new(),
            counts: Counts::new(),
            receipts,
            sender,
            http: reqwest::Client::builder().build()?,
            origin,
        })
    }

    /// Open the streams `range` of `cast`, [`OPENING`] at a time, each until its `ready`.
    async fn open(&mut self, range: std::ops::Range<usize>, cast: &Cast) -> anyhow::Result<()> {
        let mut opening = JoinSet::new();
        for i in range {
            if opening.len() >= OPENING {
                self.tasks
                    .push(opening.join_next().await.context("opening")???);
            }
            let url = format!("{}/api/events?topics={}", self.origin, topics(i, cast));
            let (http, counts, sender) =
                (self.http.clone(), self.counts.clone(), self.sender.clone());
            opening.spawn(async move { reader::open(&http, &url, counts, sender).await });
        }
        while let Some(t) = opening.join_next().await {
            self.tasks.push(t??);
        }
        Ok(())
    }

    /// The lags of `writes` (each write's token, the instant of its 201 and the streams that
    /// should receive it), waiting until every expected receipt came or `limit` passed: the
    /// lags, and the receipts that came.
    async fn lags(
        &mut self,
        writes: &HashMap<String, Instant>,
        expected: u64,
        limit: Duration,
    ) -> (Vec<Duration>, u64) {
        let deadline = tokio::time::Instant::now() + limit;
        let mut lags = Vec::with_capacity(expected as usize);
        while (lags.len() as u64) < expected {
            let Ok(Some(r)) = tokio::time::timeout_at(deadline, self.receipts.recv()).await else {
                break;
            };
            if let Some(acked) = writes.get(&r.token) {
                lags.push(r.at.saturating_duration_since(*acked));
            }
        }
        let delivered = lags.len() as u64;
        (lags, delivered)
    }
}

impl Bench {
    pub async fn live_updates(&mut self) -> anyhow::Result<LiveUpdates> {
        let n = self.args.live_streams;
        open_files_for(n)?;
        let cast = self.live_cast(n).await?;
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let origin = format!("http://{}", listener.local_addr()?);
        // The caps raised as the settings would raise them; the connection cap above them.
        let caps = LiveStreams {
            total: n,
            per_client: 0,
        };
        let app = Application::new(listener, self.store.clone(), false)
            .limits(ServerLimits {
                max_connections: n + ServerLimits::default().max_connections,
                max_connections_per_ip: 0,
                ..ServerLimits::default()
            })
            .live_limits(Limits::streams(caps));
        let hub = app.state().live.clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(app.run_until(async {
            let _ = stopped.await;
        }));
        let measured = self.live_run(&cast, &hub, origin).await;
        let _ = stop.send(());
        server.await.context("the live updates' server failed")??;
        measured
    }

    /// The row's users and hot post, made over HTTP and projected.
    async fn live_cast(&mut self, n: usize) -> anyhow::Result<Cast> {
        let (timelines, likes) = ((n + 1) / 3, self.args.live_writes.div_ceil(3));
        let mut users = self.fresh_users(2 + timelines + likes).await?;
        let likers = users.split_off(2 + timelines);
        let followers = users.split_off(2);
        let (author, commenter) = (users[0].clone(), users[1].clone());
        let body = json!({ "userId": author, "title": "Live", "content": "Watch this" });
        let hot = self.client.send(&Req::post("/api/posts", body)).await?.body["id"]
            .as_str()
            .context("a post without an id")?
            .to_string();
        let mut follows = JoinSet::new();
        for (c, mine) in followers
            .chunks(followers.len().div_ceil(8).max(1))
            .enumerate()
        {
            let (client, mine, author) = (self.client.clone(), mine.to_vec(), author.clone());
            follows.spawn(async move {
                for f in mine {
                    let path = format!("/api/users/{f}/following/{author}");
                    client.send(&Req::put(path, None)).await?;
                }
                anyhow::Ok(c)
            });
        }
        while let Some(r) = follows.join_next().await {
            r.context("a follower panicked")??;
        }
        self.settle().await?;
        Ok(Cast {
            author,
            hot,
            commenter,
            followers,
            likers,
        })
    }

    async fn live_run(
        &mut self,
        cast: &Cast,
        hub: &Arc<Hub>,
        origin: String,
    ) -> anyhow::Result<LiveUpdates> {
        let (n, rate) = (self.args.live_streams, self.args.live_rate);
        let rss_before = status_kib("VmRSS:");
        let mut streams = Streams::new(origin)?;
        streams.open(0..1, cast).await?;
        let mut idle = vec![idle_work(hub, 1).await];
        // One stream: comments on the hot post.
        let mut acked = HashMap::new();
        let started = Instant::now();
        for w in 0..ONE_STREAM_WRITES {
            pace(started, w, rate).await;
            let (token, at) = write(&self.client, cast, 0).await?;
            acked.insert(token, at);
        }
        let expected = ONE_STREAM_WRITES as u64;
        let (one, got) = streams.lags(&acked, expected, DELIVERY_LIMIT).await;
        if got < expected {
            bail!("one stream received {got} of its {expected} comments");
        }
        self.settle().await?;
        let opening = Instant::now();
        streams.open(1..n, cast).await?;
        let open_seconds = opening.elapsed().as_secs_f64();
        eprintln!("bench: [live] {n} streams open in {open_seconds:.1} s");
        idle.push(idle_work(hub, n).await);
        let rss_idle = status_kib("VmRSS:");

        // Delivery.
        let post_streams = n.div_ceil(3);
        let (timeline_streams, user_streams) = ((n + 1) / 3, n / 3);
        let writes = self.args.live_writes;
        let (mut acked, mut expected) = (HashMap::new(), 0u64);
        let before = streams.counts.events();
        reset_peak_rss();
        let started = Instant::now();
        for w in 0..writes {
            pace(started, w, rate).await;
            let (token, at) = write(&self.client, cast, w).await?;
            acked.insert(token, at);
            expected += match w % 3 {
                2 => (timeline_streams + user_streams) as u64,
                _ => post_streams as u64,
            };
        }
        let write_seconds = started.elapsed().as_secs_f64();
        let (lags, delivered) = streams.lags(&acked, expected, DELIVERY_LIMIT).await;
        let rss_peak = status_kib("VmHWM:");
        let delivery_seconds = (streams.counts.last() - started).as_secs_f64();
        let events = streams.counts.events() - before;
        drop(streams);
        let lag = latency_of(&lags);
        eprintln!(
            "bench: [live] {delivered} of {expected} events delivered, {:.0} events/s, lag p50 \
             {:.1} ms p99 {:.1} ms (one stream: p99 {:.1} ms)",
            events as f64 / delivery_seconds,
            lag.p50_ms,
            lag.p99_ms,
            latency_of(&one).p99_ms
        );
        Ok(LiveUpdates {
            streams: n,
            post_streams,
            timeline_streams,
            user_streams,
            writes,
            write_rate: writes as f64 / write_seconds,
            open_seconds,
            expected,
            delivered,
            events,
            delivery_seconds,
            events_per_second: events as f64 / delivery_seconds,
            lag,
            one_stream_lag: latency_of(&one),
            rss_before_mib: mib(rss_before),
            rss_idle_mib: mib(rss_idle),
            rss_delivery_peak_mib: mib(rss_peak),
            idle,
        })
    }
}

/// Wait until write `w` of a run that started at `started` is due at `rate` a second.
async fn pace(started: Instant, w: usize, rate: f64) {
    let due = started + Duration::from_secs_f64(w as f64 / rate);
    tokio::time::sleep_until(due.into()).await;
}

/// Write `w` of the run: a comment on the hot post, a like of it, a post by its author, in turn;
/// the token its events name, and when its 201 came.
async fn write(client: &Client, cast: &Cast, w: usize) -> anyhow::Result<(String, Instant)> {
    let (req, token) = match w % 3 {
        0 => (
            Req::post(
                format!("/api/posts/{}/comments", cast.hot),
                json!({ "userId": cast.commenter, "content": format!("live {w}") }),
            ),
            None,
        ),
        1 => {
            let liker = cast.likers[w / 3].clone();
            let body = json!({ "userId": liker });
            (
                Req::post(format!("/api/posts/{}/likes", cast.hot), body),
                Some(liker),
            )
        }
        _ => (
            Req::post(
                "/api/posts",
                json!({ "userId": cast.author, "title": format!("Live {w}"), "content": "news" }),
            ),
            None,
        ),
    };
    let answer = client.send(&req).await?;
    let at = Instant::now();
    let token = match token {
        Some(t) => t,
        None => answer.body["id"]
            .as_str()
            .context("a write answered without an id")?
            .to_string(),
    };
    Ok((token, at))
}

/// The follower's store work over [`IDLE`] with `streams` open and nothing written.
async fn idle_work(hub: &Hub, streams: usize) -> LiveIdle {
    let before = hub.spent();
    tokio::time::sleep(IDLE).await;
    let after = hub.spent();
    let operations = u64::from(after.operations - before.operations);
    let charge = after.request_charge - before.request_charge;
    LiveIdle {
        streams,
        seconds: IDLE.as_secs_f64(),
        operations,
        request_charge: (charge > 0.0).then_some(charge),
        operations_per_second: operations as f64 / IDLE.as_secs_f64(),
    }
}
