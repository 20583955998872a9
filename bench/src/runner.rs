//! The measurement run's shared machinery: the running app and its client, the loaded data,
//! the random draws, and how one row (V1 against V3) is measured.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use blog::store::{metrics, Store};
use indicatif::ProgressBar;
use rand::seq::IndexedRandom;
use rand_pcg::Pcg64;
use serde_json::Value;

use crate::args::Args;
use crate::dataset::{self, bar, Dataset, UserRef};
use crate::measure::{measured, stats, Client, Req, Sample, Stats};
use crate::results::{latency_of, ChangeFeedPrice, Latency, Row};

/// How long to wait for the change-feed pump before giving up.
pub const SETTLE_LIMIT: Duration = Duration::from_secs(120);

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
pub struct Bench {
    pub args: Args,
    pub store: Arc<dyn Store>,
    pub client: Client,
    pub data: Dataset,
    pub rng: Pcg64,
    /// Authors written with their followers ([`Bench::write_followed_author`]) and not yet
    /// retired ([`Bench::retire_big_authors`]): the author and their followers.
    pub big_authors: Vec<(String, Vec<String>)>,
}

impl Bench {
    pub fn n(&self) -> usize {
        self.args.warmup + self.args.samples
    }

    pub fn users(&mut self, n: usize) -> Vec<UserRef> {
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

    pub fn posts(&mut self, n: usize) -> Vec<String> {
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
    pub async fn row<F, Fut>(
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
        let before = metrics::projections();
        let (v3, v3_answers) = self.v3_row(&pb, &reqs).await?;
        let v3_settle = if writes {
            Some(self.settle().await?)
        } else {
            None
        };
        let change_feed = writes.then(|| ChangeFeedPrice::since(before, reqs.len()));
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
            v1: Some(v1),
            v3,
            v1_settle_seconds: v1_settle,
            v3_settle_seconds: v3_settle,
            change_feed,
        };
        Ok((row, v1_answers, v3_answers))
    }

    /// A request only V3 has (the deletes): measured as [`Bench::row`] measures V3, then the
    /// change feed settled.
    pub async fn row_v3(
        &self,
        request: &'static str,
        title: &'static str,
        reqs: Vec<Req>,
    ) -> anyhow::Result<Row> {
        let pb = bar(self.n() as u64, request);
        let before = metrics::projections();
        let (v3, _) = self.v3_row(&pb, &reqs).await?;
        let settle = self.settle().await?;
        // A read (the timeline's T1) sets off no change-feed work: it has no price beyond its own.
        let writes = reqs[0].method != reqwest::Method::GET;
        let change_feed = writes.then(|| ChangeFeedPrice::since(before, reqs.len()));
        pb.finish_and_clear();
        eprintln!(
            "bench: [{request}] V3 p50 {:.2} ms, {:.1} ops; the change feed settled in {settle:.1} s",
            v3.p50_ms, v3.operations.mean
        );
        Ok(Row {
            request,
            title,
            route: format!("{} {}", reqs[0].method, route_of(&reqs[0].path)),
            v1: None,
            v3,
            v1_settle_seconds: None,
            v3_settle_seconds: Some(settle),
            change_feed,
        })
    }

    /// Wait for the change-feed pump to apply everything; returns the seconds it took.
    pub async fn settle(&self) -> anyhow::Result<f64> {
        let started = Instant::now();
        dataset::settle(&*self.store, SETTLE_LIMIT).await?;
        Ok(started.elapsed().as_secs_f64())
    }

    pub async fn http_baseline(&mut self) -> anyhow::Result<Latency> {
        let mut durations = Vec::new();
        for i in 0..self.n() {
            let a = self.client.send(&Req::get("/")).await?;
            if i >= self.args.warmup {
                durations.push(a.sample.latency);
            }
        }
        Ok(latency_of(&durations))
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
            (Some("likes"), p) if !p.is_empty() => "{userId}".to_string(),
            (Some("comments"), p) if !p.is_empty() => "{commentId}".to_string(),
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
}
