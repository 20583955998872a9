//! P: the price of one like on a post with `--price-likes` likes against one on a post with
//! [`SMALL_LIKES`]. Both posts are made through the API; their likes are written straight to the
//! store (as the dataset is loaded: a client would take minutes), each post's `likeCount`
//! counted up by as many as the requests would have, and the change feed then goes over them.
//! Then [`SAMPLES`] users like each post, one at a time, the change feed settled after each:
//! the like's request, the change-feed work it set off and the items written, per like.

use std::time::Instant;

use blog::domain::{self, Kind, Like};
use blog::store::{metrics, Container, PatchOp};
use serde_json::json;

use crate::dataset::Loader;
use crate::measure::{self, Req};
use crate::results::scale::{LikeCost, LikePrice};
use crate::runner::Bench;

/// Likes of the small post.
const SMALL_LIKES: usize = 10;
/// Likes measured on each post.
const SAMPLES: usize = 5;

impl Bench {
    pub async fn like_price(&mut self) -> anyhow::Result<LikePrice> {
        let started = Instant::now();
        // An author of their own, followed by nobody: the like's price is the counter's alone.
        let author = self.fresh_users(1).await?.remove(0);
        let small = self.create_post(&author).await?;
        let large = self.create_post(&author).await?;
        self.settle().await?;
        self.seed_likes(&small, SMALL_LIKES).await?;
        self.seed_likes(&large, self.args.price_likes).await?;
        let likers = self.fresh_users(2 * SAMPLES).await?;
        self.settle().await?;
        let setup_seconds = started.elapsed().as_secs_f64();
        let small = self
            .like_cost(&small, SMALL_LIKES, &likers[..SAMPLES])
            .await?;
        let large = self
            .like_cost(&large, self.args.price_likes, &likers[SAMPLES..])
            .await?;
        let operations_ratio = large.operations() / small.operations().max(f64::EPSILON);
        let request_charge_ratio = large
            .request_charge_total()
            .zip(small.request_charge_total())
            .map(|(l, s)| l / s.max(f64::EPSILON));
        eprintln!(
            "bench: [P] a like: {:.1} ops at {} likes, {:.1} ops at {} ({operations_ratio:.2}×)",
            small.operations(),
            SMALL_LIKES,
            large.operations(),
            self.args.price_likes
        );
        Ok(LikePrice {
            setup_seconds,
            small,
            large,
            operations_ratio,
            request_charge_ratio,
        })
    }

    /// `n` likes of `post` by users of their own, written to the store, and the post's count
    /// raised by as many, as the requests would have raised it.
    async fn seed_likes(&mut self, post: &str, n: usize) -> anyhow::Result<()> {
        let date = domain::now();
        let likes = (0..n).map(|i| {
            let user = format!("{post}-liker-{i}");
            domain::to_value(&Like {
                id: Like::id_of(&user),
                kind: Kind::Like,
                post_id: post.to_string(),
                user_id: user.clone(),
                user_username: user,
                creation_date: date.clone(),
            })
        });
        let mut loader = Loader::new(self.store.clone());
        loader.create(Container::Posts, post, likes).await?;
        loader.finish().await?;
        let raise = [PatchOp::incr("/likeCount", n as i64)];
        self.store
            .patch(Container::Posts, post, post, &raise, None)
            .await?;
        Ok(())
    }

    /// `likers` like `post` one at a time, the change feed settled after each.
    async fn like_cost(
        &mut self,
        post: &str,
        post_likes: usize,
        likers: &[String],
    ) -> anyhow::Result<LikeCost> {
        let (mut req_ops, mut req_charge, mut latencies) = (0u64, 0.0f64, Vec::new());
        let (mut cf_ops, mut cf_charge, mut writes) = (0u64, 0.0f64, 0u64);
        let mut applied = Vec::new();
        for user in likers {
            self.settle().await?;
            let (cf_before, writes_before) = (metrics::projections(), measure::writes_total());
            let started = Instant::now();
            let a = self
                .client
                .send(&Req::post(
                    format!("/api/posts/{post}/likes"),
                    json!({ "userId": user }),
                ))
                .await?;
            self.settle().await?;
            applied.push(started.elapsed());
            let cf = metrics::projections();
            req_ops += u64::from(a.sample.operations);
            req_charge += a.sample.request_charge;
            latencies.push(a.sample.latency);
            cf_ops += cf.operations - cf_before.operations;
            cf_charge += cf.request_charge - cf_before.request_charge;
            writes += measure::writes_total() - writes_before;
        }
        let n = likers.len().max(1) as f64;
        Ok(LikeCost {
            post_likes,
            samples: likers.len(),
            request_operations: req_ops as f64 / n,
            change_feed_operations: cf_ops as f64 / n,
            writes: writes as f64 / n,
            request_charge: (req_charge > 0.0).then_some(req_charge / n),
            change_feed_charge: (cf_charge > 0.0).then_some(cf_charge / n),
            request_p50_ms: crate::results::latency_of(&latencies).p50_ms,
            applied_p50_ms: crate::results::latency_of(&applied).p50_ms,
        })
    }
}
