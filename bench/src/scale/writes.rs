//! W: the store writes one like costs, by the liked author's audience. For each of `--audiences`
//! an author is written with that many followers (already projected, as the fan-out rows write
//! them) and posts twice through the API, so that the change feed copies each post wherever it
//! goes. Then `--likes` users like the first post at `--like-rate` a second, and as many others
//! like the second post all at once; each run lasts until every lane of the change feed has
//! applied what the likes set off. Its writes are every item written meanwhile (the requests'
//! and the change feed's), over the likes.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use blog::store::metrics;
use serde_json::json;
use tokio::task::JoinSet;

use crate::measure::{self, Req};
use crate::results::scale::{LikeRun, WritesPerLike};
use crate::runner::Bench;

impl Bench {
    pub async fn writes_per_like(&mut self) -> anyhow::Result<WritesPerLike> {
        let started = Instant::now();
        let likes = self.args.likes;
        let audiences = self.args.audiences.clone();
        let mut posts = Vec::new();
        for (k, &n) in audiences.iter().enumerate() {
            let author = format!("audience-{}-{k}-{n}", self.args.seed);
            let followers: Vec<String> = (0..n).map(|i| format!("{author}-f{i}")).collect();
            self.write_followed_author(&author, &followers).await?;
            self.settle().await?;
            let steady = self.create_post(&author).await?;
            let burst = self.create_post(&author).await?;
            posts.push((n, steady, burst));
        }
        let mut likers = self
            .fresh_users(2 * likes * audiences.len())
            .await?
            .into_iter();
        self.settle().await?;
        let setup_seconds = started.elapsed().as_secs_f64();
        let mut runs = Vec::new();
        for (n, steady, burst) in posts {
            for (mode, post) in [("steady", steady), ("burst", burst)] {
                let who: Vec<String> = likers.by_ref().take(likes).collect();
                let run = self.like_run(n, mode, &post, who).await?;
                eprintln!(
                    "bench: [W] {n} followers, {mode}: {:.1} writes per like, applied in {:.0} ms",
                    run.writes_per_like, run.applied_ms
                );
                runs.push(run);
            }
        }
        Ok(WritesPerLike {
            likes,
            steady_per_second: self.args.like_rate,
            setup_seconds,
            runs,
        })
    }

    /// `likers` like `post`, steadily or all at once; until the change feed is done.
    async fn like_run(
        &mut self,
        followers: usize,
        mode: &'static str,
        post: &str,
        likers: Vec<String>,
    ) -> anyhow::Result<LikeRun> {
        self.settle().await?;
        let every = (mode == "steady").then(|| Duration::from_secs_f64(1.0 / self.args.like_rate));
        let writes_before = measure::writes();
        let cf_before = metrics::projections();
        let started = Instant::now();
        let mut requests = JoinSet::new();
        for (i, user) in likers.iter().enumerate() {
            if let Some(every) = every {
                tokio::time::sleep_until((started + every * i as u32).into()).await;
            }
            let client = self.client.clone();
            let req = Req::post(
                format!("/api/posts/{post}/likes"),
                json!({ "userId": user }),
            );
            requests.spawn(async move { client.send(&req).await });
        }
        let (mut operations, mut charge) = (0u64, 0.0f64);
        while let Some(a) = requests.join_next().await {
            let a = a.context("a like panicked")??;
            operations += u64::from(a.sample.operations);
            charge += a.sample.request_charge;
        }
        self.settle().await?;
        let applied = started.elapsed();
        let cf = metrics::projections();
        let n = likers.len().max(1) as f64;
        let after = measure::writes();
        let by_container: BTreeMap<&'static str, f64> = after
            .iter()
            .map(|(c, w)| {
                (
                    *c,
                    (w - writes_before.get(c).copied().unwrap_or(0)) as f64 / n,
                )
            })
            .filter(|(_, w)| *w > 0.0)
            .collect();
        let cf_charge = cf.request_charge - cf_before.request_charge;
        let shown = self
            .client
            .send(&Req::get(format!("/api/posts/{post}")))
            .await?;
        Ok(LikeRun {
            followers,
            mode,
            likes: likers.len(),
            applied_ms: measure::ms(applied),
            writes_per_like: by_container.values().sum(),
            writes_per_like_by_container: by_container,
            request_operations_per_like: operations as f64 / n,
            change_feed_operations_per_like: (cf.operations - cf_before.operations) as f64 / n,
            request_charge_per_like: (charge > 0.0).then_some(charge / n),
            change_feed_charge_per_like: (cf_charge > 0.0).then_some(cf_charge / n),
            like_count: shown.body["likeCount"]
                .as_u64()
                .context("the post has no likeCount")?,
        })
    }
}
