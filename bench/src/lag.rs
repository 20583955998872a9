//! Change-feed lag: a post is created (C2) and Q6 is polled until the post is its newest entry;
//! the lag is from the 201 to the answer that shows it.

use std::time::{Duration, Instant};

use anyhow::bail;
use serde_json::json;

use crate::dataset::{self, bar};
use crate::measure::{self, Req};
use crate::report::Lag;
use crate::runner::{latency_of, Bench, SETTLE_LIMIT};

/// How often Q6 is polled while measuring the change-feed lag.
const LAG_POLL: Duration = Duration::from_millis(1);

impl Bench {
    /// C2 acknowledged → the post visible as the newest entry of Q6.
    pub async fn lag(&mut self) -> anyhow::Result<Lag> {
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
}
