//! The full price of a command: its request's store work plus the change-feed work it sets off
//! (recounts, author look-ups, copies into `users` and `feed`, fan-out), read from the product's
//! own meter of the projections (`blog::store::metrics::projections`), which counts the pump's
//! change-feed reads that bring changes, its projections and its checkpoints.
//!
//! Two ways: one at a time (each write row's V3 requests, then the change feed settled: see
//! [`ChangeFeedPrice::since`]), and under the hot-post load (`--concurrency` clients writing to
//! one post as fast as they can, where a batch of the change feed carries many changes and the
//! price per command should fall).

use std::time::{Duration, Instant};

use anyhow::Context as _;
use blog::store::metrics;
use indicatif::ProgressBar;
use serde_json::json;
use tokio::task::JoinSet;

use crate::measure::Req;
use crate::results::{ChangeFeedPrice, PriceUnderLoad};
use crate::runner::Bench;

impl Bench {
    /// C3 and C4 under the hot-post load.
    pub async fn prices_under_load(&mut self) -> anyhow::Result<Vec<PriceUnderLoad>> {
        Ok(vec![
            self.price_under_load("C3").await?,
            self.price_under_load("C4").await?,
        ])
    }

    /// `--concurrency` clients send `request` (C3: comment, C4: like) to one post for
    /// `--seconds` (as long as a throughput run); then the change feed is settled and its work divided by the commands.
    /// A like needs a user who has not liked the post yet: C4's clients first create users
    /// of their own (not measured).
    async fn price_under_load(&mut self, request: &'static str) -> anyhow::Result<PriceUnderLoad> {
        let clients = self.args.concurrency;
        let hot = self.posts(1).remove(0);
        let likers = if request == "C4" {
            let per_client = (self.args.seconds * LIKES_PER_CLIENT_SECOND).ceil() as usize;
            self.fresh_users(clients * per_client).await?
        } else {
            Vec::new()
        };
        let authors = self.users(clients);
        self.settle().await?;
        let seconds = self.args.seconds;
        let pb = ProgressBar::new_spinner().with_message(format!("{request} under load"));
        pb.enable_steady_tick(Duration::from_millis(200));
        let before = metrics::projections();
        let started = Instant::now();
        let deadline = started + Duration::from_secs_f64(seconds);
        let mut workers = JoinSet::new();
        for (i, author) in authors.into_iter().enumerate() {
            let (client, hot) = (self.client.clone(), hot.clone());
            let mine: Vec<String> = likers.iter().skip(i).step_by(clients).cloned().collect();
            workers.spawn(async move {
                let (mut commands, mut operations, mut charge) = (0usize, 0u64, 0.0f64);
                let mut likers = mine.into_iter();
                while Instant::now() < deadline {
                    let req = match request {
                        "C3" => Req::post(
                            format!("/api/posts/{hot}/comments"),
                            json!({ "userId": author.id, "content": "hot" }),
                        ),
                        _ => match likers.next() {
                            Some(user) => Req::post(
                                format!("/api/posts/{hot}/likes"),
                                json!({ "userId": user }),
                            ),
                            None => break,
                        },
                    };
                    let a = client.send(&req).await?;
                    commands += 1;
                    operations += u64::from(a.sample.operations);
                    charge += a.sample.request_charge;
                }
                anyhow::Ok((commands, operations, charge))
            });
        }
        let (mut commands, mut operations, mut charge) = (0usize, 0u64, 0.0f64);
        while let Some(r) = workers.join_next().await {
            let (c, o, ch) = r.context("a load worker panicked")??;
            commands += c;
            operations += o;
            charge += ch;
        }
        let elapsed = started.elapsed().as_secs_f64();
        self.settle().await?;
        pb.finish_and_clear();
        let change_feed = ChangeFeedPrice::since(before, commands);
        let n = commands.max(1) as f64;
        eprintln!(
            "bench: [{request}] under load: {commands} commands, {:.2} request ops and {:.2} \
             change-feed ops per command",
            operations as f64 / n,
            change_feed.operations_per_command
        );
        Ok(PriceUnderLoad {
            request,
            clients,
            seconds: elapsed,
            commands_per_second: commands as f64 / elapsed,
            request_operations_per_command: operations as f64 / n,
            request_charge_per_command: (charge > 0.0).then_some(charge / n),
            change_feed,
        })
    }

    /// Create `n` users over HTTP (C1, not measured), `--concurrency` at a time; their ids.
    pub async fn fresh_users(&mut self, n: usize) -> anyhow::Result<Vec<String>> {
        let clients = self.args.concurrency;
        let mut workers = JoinSet::new();
        for c in 0..clients {
            let client = self.client.clone();
            workers.spawn(async move {
                let mut ids = Vec::new();
                for i in (c..n).step_by(clients) {
                    let body = json!({ "username": format!("liker {i}") });
                    let a = client.send(&Req::post("/api/users", body)).await?;
                    let id = a.body["id"].as_str().context("C1 answered no id")?;
                    ids.push(id.to_string());
                }
                anyhow::Ok(ids)
            });
        }
        let mut ids = Vec::with_capacity(n);
        while let Some(r) = workers.join_next().await {
            ids.extend(r.context("a worker creating users panicked")??);
        }
        Ok(ids)
    }
}

/// Likes each client can send per second of the load (each by a user of its own, made first):
/// above what one client sends on a small machine. A client without users left stops early;
/// the price stays per command sent.
const LIKES_PER_CLIENT_SECOND: f64 = 150.0;
