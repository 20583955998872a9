//! The feed snapshot: what serving `GET /api/feed` from the per-process snapshot saves. A
//! second instance of the application (snapshots on, default settings, no pump of its own) runs
//! over the same store as the measured one (snapshots off); `--concurrency` clients read the feed
//! from it for `--seconds` while a post is created every [`POST_EVERY`], so the snapshot keeps
//! being dropped as a live blog would drop it. Store operations are counted from the answers'
//! `x-store-operations`; on Cosmos DB the request units saved are the operations saved times the
//! measured charge of one feed query (Q6, V3).

use std::time::{Duration, Instant};

use anyhow::Context as _;
use blog::startup::Application;
use serde_json::json;
use tokio::net::TcpListener;
use tokio::task::JoinSet;

use crate::dataset;
use crate::measure::{Client, Req};
use crate::results::{FeedSnapshot, Row};
use crate::runner::Bench;

/// How often a post is created while the feed is read.
const POST_EVERY: Duration = Duration::from_millis(100);

impl Bench {
    pub async fn feed_snapshot(&mut self, q6: &Row) -> anyhow::Result<FeedSnapshot> {
        self.settle().await?;
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let origin = format!("http://{}", listener.local_addr()?);
        let app = Application::new(listener, self.store.clone(), false);
        let reader = Client::new(origin, app.state().clone());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(app.run_until(async {
            let _ = stopped.await;
        }));

        let started = Instant::now();
        let deadline = started + Duration::from_secs_f64(self.args.seconds);
        let path = format!("/api/feed?limit={}", self.args.feed_limit);
        let mut readers = JoinSet::new();
        for _ in 0..self.args.concurrency {
            let (client, req) = (reader.clone(), Req::get(path.clone()));
            readers.spawn(async move {
                let (mut reads, mut ops) = (0u64, 0u64);
                while Instant::now() < deadline {
                    let a = client.send(&req).await?;
                    reads += 1;
                    ops += u64::from(a.sample.operations);
                }
                anyhow::Ok((reads, ops))
            });
        }
        let mut posts_created = 0;
        while Instant::now() < deadline {
            let author = self.users(1).remove(0);
            let (title, content) = dataset::post_text(&mut self.rng);
            let body = json!({ "userId": author.id, "title": title, "content": content });
            self.client.send(&Req::post("/api/posts", body)).await?;
            posts_created += 1;
            tokio::time::sleep(POST_EVERY).await;
        }
        let (mut reads, mut ops) = (0, 0);
        while let Some(r) = readers.join_next().await {
            let (r, o) = r.context("a feed reader panicked")??;
            reads += r;
            ops += o;
        }
        let seconds = started.elapsed().as_secs_f64();
        let _ = stop.send(());
        server.await.context("the snapshot server failed")??;

        let saved = 1000.0 * (reads.saturating_sub(ops)) as f64 / reads.max(1) as f64;
        let per_query = q6.v3.request_charge.map(|rc| rc.mean);
        eprintln!(
            "bench: feed snapshot: {reads} reads made {ops} queries ({saved:.0} saved per 1,000)"
        );
        Ok(FeedSnapshot {
            concurrency: self.args.concurrency,
            seconds,
            posts_created,
            reads,
            store_operations: ops,
            operations_saved_per_1000_reads: saved,
            request_units_per_query: per_query,
            request_units_saved_per_1000_reads: per_query.map(|ru| ru * saved),
        })
    }
}
