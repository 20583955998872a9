//! W: the store writes one like costs, by the liked post's audiences. For each of `--audiences`
//! an author is written with that many followers (already projected, as the fan-out rows write
//! them) and posts twice through the API, so that the change feed copies each post wherever it
//! goes. For each of `--bookmarkers`, the author with the most followers posts twice more, each
//! post carrying `--post-tags` tags and bookmarked by that many users (their bookmarks written
//! straight into the post's partition, their copies made by the change feed): every audience of
//! a post at once. Then `--likes` users like the first post of each at `--like-rate` a second,
//! and as many others like the second post all at once; each run lasts until every lane of the
//! change feed has applied what the likes set off. Its writes are every item written meanwhile
//! (the requests' and the change feed's), over the likes.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use blog::domain::{self, bookmarks::Bookmark};
use blog::store::{metrics, Container};
use serde_json::json;
use tokio::task::JoinSet;

use crate::dataset::{self, Loader};
use crate::measure::{self, Req};
use crate::results::scale::{LikeRun, WritesPerLike};
use crate::runner::Bench;

/// Who a liked post reaches: its author's followers, its bookmarkers, its tags' pages.
#[derive(Debug, Clone, Copy)]
struct Audience {
    followers: usize,
    bookmarkers: usize,
    tags: usize,
}

impl Bench {
    pub async fn writes_per_like(&mut self) -> anyhow::Result<WritesPerLike> {
        let started = Instant::now();
        let likes = self.args.likes;
        let audiences = self.args.audiences.clone();
        let mut posts = Vec::new();
        let mut biggest: Option<(usize, String)> = None;
        for (k, &n) in audiences.iter().enumerate() {
            let author = format!("audience-{}-{k}-{n}", self.args.seed);
            let followers: Vec<String> = (0..n).map(|i| format!("{author}-f{i}")).collect();
            self.write_followed_author(&author, &followers).await?;
            self.settle().await?;
            let steady = self.create_post(&author).await?;
            let burst = self.create_post(&author).await?;
            let audience = Audience {
                followers: n,
                bookmarkers: 0,
                tags: 0,
            };
            posts.push((audience, steady, burst));
            if biggest.as_ref().is_none_or(|(m, _)| n > *m) {
                biggest = Some((n, author));
            }
        }
        let tags: Vec<String> = (0..self.args.post_tags)
            .map(|i| format!("w{}-t{i}", self.args.seed))
            .collect();
        if let Some((followers, author)) = biggest {
            for &b in &self.args.bookmarkers.clone() {
                let steady = self.create_tagged_post(&author, &tags).await?;
                let burst = self.create_tagged_post(&author, &tags).await?;
                for post in [&steady, &burst] {
                    self.write_bookmarkers(post, b).await?;
                }
                self.settle().await?;
                let audience = Audience {
                    followers,
                    bookmarkers: b,
                    tags: tags.len(),
                };
                posts.push((audience, steady, burst));
            }
        }
        let mut likers = self.fresh_users(2 * likes * posts.len()).await?.into_iter();
        self.settle().await?;
        let setup_seconds = started.elapsed().as_secs_f64();
        let mut runs = Vec::new();
        for (audience, steady, burst) in posts {
            for (mode, post) in [("steady", steady), ("burst", burst)] {
                let who: Vec<String> = likers.by_ref().take(likes).collect();
                let run = self.like_run(audience, mode, &post, who).await?;
                eprintln!(
                    "bench: [W] {} followers, {} bookmarkers, {} tags, {mode}: {:.1} writes per \
                     like, applied in {:.0} ms",
                    audience.followers,
                    audience.bookmarkers,
                    audience.tags,
                    run.writes_per_like,
                    run.applied_ms
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

    /// `author` posts through the API (C2) with `tags`; the post's id.
    async fn create_tagged_post(
        &mut self,
        author: &str,
        tags: &[String],
    ) -> anyhow::Result<String> {
        let (title, content) = dataset::post_text(&mut self.rng);
        let body = json!({ "userId": author, "title": title, "content": content, "tags": tags });
        let created = self.client.send(&Req::post("/api/posts", body)).await?;
        Ok(created.body["id"]
            .as_str()
            .context("the created post has no id")?
            .to_string())
    }

    /// `n` users' bookmarks of `post`, written straight into its partition (as a bookmark's
    /// request writes one); the change feed makes their copies and the post's count.
    async fn write_bookmarkers(&mut self, post: &str, n: usize) -> anyhow::Result<()> {
        let mut loader = Loader::new(self.store.clone());
        let bookmarks =
            (0..n).map(|i| domain::to_value(&Bookmark::new(post, &format!("{post}-b{i}"))));
        loader.create(Container::Posts, post, bookmarks).await?;
        loader.finish().await
    }

    /// `likers` like `post`, steadily or all at once; until the change feed is done.
    async fn like_run(
        &mut self,
        audience: Audience,
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
            followers: audience.followers,
            bookmarkers: audience.bookmarkers,
            tags: audience.tags,
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
