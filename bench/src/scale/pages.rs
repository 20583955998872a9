//! T2/T3: a timeline page. T2's reader follows [`ORDINARY_FOLLOWS`] authors of the dataset,
//! whose posts the change feed copies into the reader's timeline. T3's reader follows
//! `--merged-authors` authors over the fan-out limit: the limit is set to 0 for the row (every
//! followed author is merged), the authors are created and post `--feed-limit` times each
//! through the API (each could fill the page alone, so a read weighs them all), and the reader
//! follows them all. Each reader's first page (`--feed-limit`
//! posts) is read `--warmup` + `--samples` times one after another; then T3's page is read by
//! `--timeline-readers` clients at once, and the process's peak resident set above its resident
//! set before those reads is the memory figure (the app runs in the bench's process; Linux
//! only).

use std::collections::BTreeSet;
use std::time::Instant;

use anyhow::{bail, Context as _};
use tokio::task::JoinSet;

use crate::fanout::{reset_peak_rss, status_kib};
use crate::limit;
use crate::measure::{self, Req};
use crate::results::latency_of;
use crate::results::scale::{ConcurrentReads, PageRead, TimelinePages};
use crate::runner::Bench;

/// Authors T2's reader follows.
const ORDINARY_FOLLOWS: usize = 10;

impl Bench {
    pub async fn timeline_pages(&mut self) -> anyhow::Result<TimelinePages> {
        let started = Instant::now();
        let reader = self.fresh_users(1).await?.remove(0);
        let authors: BTreeSet<String> = self
            .users(ORDINARY_FOLLOWS)
            .into_iter()
            .map(|u| u.id)
            .collect();
        self.follow_all(&reader, authors.iter().cloned().collect())
            .await?;
        self.settle().await?;
        let ordinary = self.page_reads(&reader, authors.len(), 0).await?;
        let was = limit::set(&*self.store, 0).await?;
        let merged = self.merged_pages(started).await;
        limit::set(&*self.store, was).await?;
        let (merged, concurrent, setup_seconds) = merged?;
        eprintln!(
            "bench: [T2/T3] a timeline page: ordinary {:.1} ops, {} merged authors {:.1} ops; \
             {} at once: {} answered, peak RSS +{:.1} MiB",
            ordinary.operations_mean,
            merged.merged_authors,
            merged.operations_mean,
            concurrent.readers,
            concurrent.answered,
            concurrent.peak_rss_above_idle_mib.unwrap_or_default()
        );
        Ok(TimelinePages {
            page_limit: self.args.feed_limit,
            ordinary,
            merged,
            concurrent,
            setup_seconds,
        })
    }

    /// T3, the limit at 0: the merged reader's page, sequential and concurrent.
    async fn merged_pages(
        &mut self,
        started: Instant,
    ) -> anyhow::Result<(PageRead, ConcurrentReads, f64)> {
        let n = self.args.merged_authors;
        let authors = self.fresh_users(n).await?;
        let each = self.args.feed_limit as usize;
        let mut posts = Vec::with_capacity(n * each);
        for _ in 0..each {
            for a in &authors {
                posts.push(a.clone());
            }
        }
        self.post_all(posts).await?;
        let reader = self.fresh_users(1).await?.remove(0);
        self.follow_all(&reader, authors).await?;
        self.settle().await?;
        let setup_seconds = started.elapsed().as_secs_f64();
        let merged = self.page_reads(&reader, n, n).await?;
        let concurrent = self.concurrent_reads(&reader).await?;
        Ok((merged, concurrent, setup_seconds))
    }

    /// `--warmup` + `--samples` reads of `reader`'s first page; the warm-up's are not kept.
    async fn page_reads(
        &mut self,
        reader: &str,
        follows: usize,
        merged_authors: usize,
    ) -> anyhow::Result<PageRead> {
        let req = Req::get(format!(
            "/api/users/{reader}/timeline?limit={}",
            self.args.feed_limit
        ));
        let (mut latencies, mut ops, mut charges, mut items) = (vec![], vec![], vec![], 0);
        for i in 0..self.n() {
            let a = self.client.send(&req).await?;
            if i < self.args.warmup {
                continue;
            }
            items = a.body["items"].as_array().map_or(0, Vec::len);
            latencies.push(a.sample.latency);
            ops.push(a.sample.operations);
            charges.push(a.sample.request_charge);
        }
        if items == 0 {
            bail!("{reader}'s timeline is empty");
        }
        let k = ops.len().max(1) as f64;
        let charge: f64 = charges.iter().sum();
        Ok(PageRead {
            follows,
            merged_authors,
            items,
            operations_mean: ops.iter().map(|o| f64::from(*o)).sum::<f64>() / k,
            operations_max: ops.iter().copied().max().unwrap_or_default(),
            request_charge_mean: (charge > 0.0).then_some(charge / k),
            latency: latency_of(&latencies),
        })
    }

    /// `--timeline-readers` reads of `reader`'s first page at once.
    async fn concurrent_reads(&mut self, reader: &str) -> anyhow::Result<ConcurrentReads> {
        let readers = self.args.timeline_readers;
        let path = format!(
            "/api/users/{reader}/timeline?limit={}",
            self.args.feed_limit
        );
        let idle = reset_peak_rss();
        let started = Instant::now();
        let mut reads = JoinSet::new();
        for _ in 0..readers {
            let (client, req) = (self.client.clone(), Req::get(path.clone()));
            reads.spawn(async move { client.send(&req).await });
        }
        let (mut latencies, mut first_failure) = (Vec::new(), None);
        while let Some(r) = reads.join_next().await {
            match r.context("a timeline reader panicked")? {
                Ok(a) => latencies.push(a.sample.latency),
                Err(e) => {
                    first_failure.get_or_insert_with(|| format!("{e:#}"));
                }
            }
        }
        let wall = started.elapsed();
        let peak = idle.zip(status_kib("VmHWM:"));
        Ok(ConcurrentReads {
            readers,
            answered: latencies.len(),
            first_failure,
            wall_ms: measure::ms(wall),
            latency: latency_of(&latencies),
            peak_rss_above_idle_mib: peak
                .map(|(idle, high)| high.saturating_sub(idle) as f64 / 1024.0),
        })
    }

    /// `reader` follows each of `authors` (204s), `--concurrency` at a time.
    async fn follow_all(&mut self, reader: &str, authors: Vec<String>) -> anyhow::Result<()> {
        let reqs = authors
            .into_iter()
            .filter(|a| a != reader)
            .map(|a| Req::put(format!("/api/users/{reader}/following/{a}"), None))
            .collect();
        self.send_all(reqs).await
    }

    /// A post by each of `authors` (one per entry), `--concurrency` at a time.
    pub async fn post_all(&mut self, authors: Vec<String>) -> anyhow::Result<()> {
        let mut reqs = Vec::with_capacity(authors.len());
        for a in authors {
            let (title, content) = crate::dataset::post_text(&mut self.rng);
            reqs.push(Req::post(
                "/api/posts",
                serde_json::json!({ "userId": a, "title": title, "content": content }),
            ));
        }
        self.send_all(reqs).await
    }

    /// Send `reqs`, `--concurrency` at a time; each must succeed.
    async fn send_all(&mut self, reqs: Vec<Req>) -> anyhow::Result<()> {
        let clients = self.args.concurrency;
        let mut workers = JoinSet::new();
        let reqs = std::sync::Arc::new(reqs);
        for c in 0..clients {
            let (client, reqs) = (self.client.clone(), reqs.clone());
            workers.spawn(async move {
                for r in reqs.iter().skip(c).step_by(clients) {
                    client.send(r).await?;
                }
                anyhow::Ok(())
            });
        }
        while let Some(r) = workers.join_next().await {
            r.context("a worker panicked")??;
        }
        Ok(())
    }
}
