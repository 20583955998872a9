//! Throughput: `--concurrency` workers repeat one request for `--seconds`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use indicatif::ProgressBar;
use rand::seq::IndexedRandom;
use rand::SeedableRng;
use rand_pcg::Pcg64;
use tokio::task::JoinSet;

use crate::measure::Req;
use crate::results::{latency_of, Throughput};
use crate::runner::Bench;
use crate::v1;

impl Bench {
    /// Q2 and Q6, V3 and V1, each with `--concurrency` workers for `--seconds`; and Q6 on V3 as
    /// a client taking gzip (`V3 gzip`), to compare with the plain `V3` row of the same run.
    pub async fn throughput(&mut self) -> anyhow::Result<Vec<Throughput>> {
        self.settle().await?;
        let mut out = Vec::new();
        for (request, version) in [
            ("Q2", "V3"),
            ("Q2", "V1"),
            ("Q6", "V3"),
            ("Q6", "V3 gzip"),
            ("Q6", "V1"),
        ] {
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
                        (_, "V3 gzip") => {
                            client
                                .send_gzip(&Req::get(format!("/api/feed?limit={feed_limit}")))
                                .await?;
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
