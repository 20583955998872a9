//! The article's dummy dataset, scaled to `--users`: every user writes 5–50 posts, every post
//! gets 0–25 comments and 0–100 likes (likes by distinct users, so at most `--users` of them).
//!
//! Generated deterministically from `--seed` (ids, names, texts, counts and who comments or
//! likes what; only the creation dates move with the clock, so that posts created by the bench
//! itself are always the newest) and loaded *already converged*: the items are built from
//! `blog::domain`'s types, and the copies (short-form posts in `users`, the newest in `feed`)
//! are the writes `blog::projection::plan_posts` plans for them. Loading is transactional
//! batches per partition, several in flight, straight through the `Store` trait.

use std::collections::BTreeMap;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context as _};
use blog::domain::FEED_PK;
use blog::domain::{self, Kind, User};
use blog::projection::posts::counters::Counted;
use blog::projection::{self, PostsFacts, Write};
use blog::store::{BatchOp, Container, Store};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use serde_json::Value;
use tokio::task::JoinSet;

mod check;
mod generate;

pub use check::{ensure_empty, settle, verify, Verification};
pub use generate::{comment_text, post_text};
use generate::{Generator, PostData};

/// Cosmos DB's limit on the operations of one transactional batch.
const MAX_BATCH: usize = 100;
/// Batches in flight while loading: enough to keep the store busy while the next ones are
/// generated (the embedded store serializes writes anyway; Cosmos DB gains from more).
const IN_FLIGHT: usize = 16;

/// A user of the dataset, as the measurements need it.
#[derive(Debug, Clone)]
pub struct UserRef {
    pub id: String,
    pub username: String,
}

/// What was loaded: the users and posts requests are drawn from, and how much of everything.
pub struct Dataset {
    pub users: Vec<UserRef>,
    pub post_ids: Vec<String>,
    pub summary: DatasetSummary,
}

#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DatasetSummary {
    pub seed: u64,
    pub users: usize,
    pub posts: usize,
    pub comments: usize,
    pub likes: usize,
    /// Short-form post copies in `users` (one per post).
    pub user_post_copies: usize,
    /// Short-form copies in `feed` (the newest, at most `FEED_KEEP`).
    pub feed_copies: usize,
    /// Every item written.
    pub items: usize,
    pub batches: usize,
    pub load_seconds: f64,
    pub items_per_second: f64,
}

/// The feed being built: the newest posts' short forms by `(creationDate, id)`.
#[derive(Default)]
struct Feed(BTreeMap<(String, String), Value>);

impl Feed {
    /// Newest first.
    #[cfg(test)]
    fn ids(&self) -> Vec<String> {
        self.0.keys().rev().map(|(_, id)| id.clone()).collect()
    }
}

fn str_of<'a>(v: &'a Value, field: &str) -> &'a str {
    v.get(field).and_then(Value::as_str).unwrap_or_default()
}

/// The copies the change feed would write for `author`'s posts, planned by the product's own
/// planner against the loaded state: the `users` items to create. The counters and names being
/// right already, the plan must patch nothing. The feed is what the projection converges to,
/// the [`domain::FEED_KEEP`] newest posts, updated in place (authors are loaded out of time
/// order, which the projection never sees, so its feed rule is not replayed here).
fn plan_copies(
    author: &UserRef,
    posts: &[PostData],
    feed: &mut Feed,
) -> anyhow::Result<Vec<Value>> {
    let changes: Vec<Value> = posts.iter().map(|p| domain::to_value(&p.post)).collect();
    let facts = PostsFacts {
        posts: posts
            .iter()
            .map(|p| (p.post.id.clone(), p.post.clone()))
            .collect(),
        counts: posts
            .iter()
            .flat_map(|p| {
                [
                    (
                        (p.post.id.clone(), Counted::Comments),
                        p.comments.len() as u64,
                    ),
                    ((p.post.id.clone(), Counted::Likes), p.likes.len() as u64),
                ]
            })
            .collect(),
        usernames: HashMap::from([(author.id.clone(), author.username.clone())]),
        ..PostsFacts::default()
    };
    for p in posts {
        let key = (p.post.creation_date.clone(), p.post.id.clone());
        feed.0.insert(key, domain::to_value(&p.post.summary()));
        while feed.0.len() > domain::FEED_KEEP {
            feed.0.pop_first();
        }
    }
    let mut copies = Vec::new();
    let changes = projection::change::decoded(Container::Posts, &changes)
        .map_err(|e| anyhow::anyhow!("{}: {}", e.label, e.error))?;
    let changes: Vec<&projection::change::Change> = changes.iter().collect();
    let needs = projection::posts_needs(&changes);
    for w in projection::plan_posts(&changes, &needs, &facts) {
        match w {
            Write::Upsert {
                container: Container::Users,
                item,
                ..
            } => copies.push(item),
            Write::Upsert {
                container: Container::Feed,
                ..
            } => {}
            other => bail!(
                "the generated data is not converged: the projection plans {}",
                other.target()
            ),
        }
    }
    Ok(copies)
}

fn creates(items: impl IntoIterator<Item = Value>) -> Vec<BatchOp> {
    items
        .into_iter()
        .map(|item| BatchOp::Create { item })
        .collect()
}

/// Loads batches with a bounded number in flight; the first failure stops the load.
pub struct Loader {
    store: Arc<dyn Store>,
    tasks: JoinSet<anyhow::Result<usize>>,
    items: usize,
    batches: usize,
}

impl Loader {
    pub fn new(store: Arc<dyn Store>) -> Loader {
        Loader {
            store,
            tasks: JoinSet::new(),
            items: 0,
            batches: 0,
        }
    }

    /// Create `items` in partition `pk` of `c`, a batch at a time.
    pub async fn create(
        &mut self,
        c: Container,
        pk: &str,
        items: impl IntoIterator<Item = Value>,
    ) -> anyhow::Result<()> {
        self.submit(c, pk, creates(items)).await
    }

    async fn submit(&mut self, c: Container, pk: &str, ops: Vec<BatchOp>) -> anyhow::Result<()> {
        for chunk in ops.chunks(MAX_BATCH) {
            while self.tasks.len() >= IN_FLIGHT {
                self.items += self.join_one().await?;
            }
            let (store, pk, chunk) = (self.store.clone(), pk.to_string(), chunk.to_vec());
            self.tasks.spawn(async move {
                let n = chunk.len();
                blog::store::retry(|| store.batch(c, &pk, chunk.clone()))
                    .await
                    .with_context(|| format!("loading a batch into {}/{pk}", c.name()))?;
                Ok(n)
            });
            self.batches += 1;
        }
        Ok(())
    }

    async fn join_one(&mut self) -> anyhow::Result<usize> {
        match self.tasks.join_next().await {
            Some(r) => r.context("a load task panicked")?,
            None => Ok(0),
        }
    }

    pub async fn finish(&mut self) -> anyhow::Result<()> {
        while !self.tasks.is_empty() {
            self.items += self.join_one().await?;
        }
        Ok(())
    }
}

pub fn bar(len: u64, what: &str) -> ProgressBar {
    let pb = ProgressBar::new(len);
    pb.set_style(
        ProgressStyle::with_template(
            "{prefix:>12} [{bar:30}] {pos}/{len} {msg} ({elapsed}, eta {eta})",
        )
        .expect("progress template")
        .progress_chars("=> "),
    );
    pb.set_prefix(what.to_string());
    pb
}

/// Generate the dataset for `n_users` from `seed` and load it through `store`.
pub async fn load(store: Arc<dyn Store>, n_users: usize, seed: u64) -> anyhow::Result<Dataset> {
    let started = Instant::now();
    let now_ms = (time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000) as i64;
    let mut gen = Generator::new(seed, n_users, now_ms);
    let mut loader = Loader::new(store);
    let mut feed = Feed::default();
    let mut summary = DatasetSummary {
        seed,
        users: n_users,
        ..DatasetSummary::default()
    };
    let mut post_ids = Vec::new();
    let pb = bar(n_users as u64, "loading");
    for author in 0..n_users {
        let user = gen.users[author].clone();
        let posts = gen.posts_of(author);
        let copies = plan_copies(&user, &posts, &mut feed)?;
        summary.user_post_copies += copies.len();
        let user_item = User {
            id: user.id.clone(),
            kind: Kind::User,
            user_id: user.id.clone(),
            username: user.username.clone(),
            rename_version: 0,
            propagated_version: Some(0),
            follower_count: 0,
            following_count: 0,
            bio: None,
            image: None,
            email: None,
        };
        // The user's partition: the user and the short forms of their posts.
        let items = std::iter::once(domain::to_value(&user_item)).chain(copies);
        loader
            .submit(Container::Users, &user.id, creates(items))
            .await?;
        // Each post's partition: the post, its comments and its likes.
        for p in posts {
            summary.posts += 1;
            summary.comments += p.comments.len();
            summary.likes += p.likes.len();
            post_ids.push(p.post.id.clone());
            let items = std::iter::once(domain::to_value(&p.post))
                .chain(p.comments.iter().map(domain::to_value))
                .chain(p.likes.iter().map(domain::to_value));
            loader
                .submit(Container::Posts, &p.post.post_id, creates(items))
                .await?;
        }
        pb.inc(1);
        pb.set_message(format!("{} items", loader.items));
    }
    summary.feed_copies = feed.0.len();
    loader
        .submit(Container::Feed, FEED_PK, creates(feed.0.into_values()))
        .await?;
    loader.finish().await?;
    pb.finish_and_clear();
    summary.items = loader.items;
    summary.batches = loader.batches;
    summary.load_seconds = started.elapsed().as_secs_f64();
    summary.items_per_second = summary.items as f64 / summary.load_seconds.max(1e-9);
    Ok(Dataset {
        users: gen.users,
        post_ids,
        summary,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use blog::domain::Like;

    #[test]
    fn the_same_seed_generates_the_same_data() {
        let gen = |seed| {
            let mut g = Generator::new(seed, 4, 1_800_000_000_000);
            let posts = g.posts_of(0);
            (
                g.users.iter().map(|u| u.id.clone()).collect::<Vec<_>>(),
                posts
                    .iter()
                    .map(|p| (p.post.clone(), p.comments.len(), p.likes.len()))
                    .collect::<Vec<_>>(),
            )
        };
        assert_eq!(gen(7), gen(7));
        assert_ne!(gen(7).0, gen(8).0);
    }

    #[test]
    fn shapes_follow_the_article() {
        let mut g = Generator::new(1, 3, 1_800_000_000_000);
        for author in 0..3 {
            let posts = g.posts_of(author);
            assert!((5..=50).contains(&posts.len()));
            for p in &posts {
                assert!(p.comments.len() <= 25);
                assert!(p.likes.len() <= 3, "likes are by distinct users");
                assert_eq!(p.post.comment_count as usize, p.comments.len());
                assert_eq!(p.post.like_count as usize, p.likes.len());
                for l in &p.likes {
                    assert_eq!(l.id, Like::id_of(&l.user_id));
                    assert!(l.creation_date >= p.post.creation_date);
                }
            }
        }
    }

    #[test]
    fn the_feed_keeps_the_newest_and_copies_are_short() {
        let mut g = Generator::new(3, 10, 1_800_000_000_000);
        let mut feed = Feed::default();
        let mut all = Vec::new();
        for author in 0..10 {
            let user = g.users[author].clone();
            let posts = g.posts_of(author);
            let copies = plan_copies(&user, &posts, &mut feed).unwrap();
            assert_eq!(copies.len(), posts.len());
            for c in &copies {
                assert!(str_of(c, "content").chars().count() <= domain::SHORT_CONTENT_CHARS);
            }
            all.extend(posts.into_iter().map(|p| p.post));
        }
        all.sort_by(|a, b| (&b.creation_date, &b.id).cmp(&(&a.creation_date, &a.id)));
        let newest: Vec<_> = all.iter().take(domain::FEED_KEEP).map(|p| &p.id).collect();
        let in_feed = feed.ids();
        assert_eq!(in_feed.iter().collect::<Vec<_>>(), newest);
    }
}
