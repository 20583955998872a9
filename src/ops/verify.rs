//! `handler verify`: read the sources, check every derived value against [`super::expected`].
//!
//! Work is grouped by partition and paged, so memory stays bounded whatever the data:
//! 1. posts, page by page across partitions; for each post (a few at a time) its partition is
//!    read (the post, its comments and likes: names and counters) and its copy in `users` is
//!    point-read; the newest posts are kept for step 3;
//! 2. users, page by page; each user's partition is read for copies whose post is gone;
//! 3. the feed's one partition, against the newest posts.
//!
//! Only the drifted items' ids are kept (for `--repair`), with a few examples per kind for the
//! report. Read-only; every read retries transient errors like the projections do.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;

use futures::stream::{self, StreamExt, TryStreamExt};
use serde_json::{json, Value};

use super::expected::{self, str_field, Drift, DriftKind};
use super::newest::{self, Newest};
use super::progress::Progress;
use crate::projection::{retry, FEED_PK};
use crate::store::metrics::{self, Usage};
use crate::store::{Container, Query, Store, StoreResult};

/// Partitions read at the same time.
pub const CONCURRENCY: usize = 8;
/// Items per page of the traversal's queries.
const PAGE: u32 = 100;
/// Examples kept per kind of drift.
pub const EXAMPLES: usize = 5;
/// The kinds of derived items counted in [`Report::checked`], in report order.
pub const ITEM_KINDS: [&str; 5] = ["posts", "comments", "likes", "post copies", "feed entries"];
/// Usernames remembered between posts (cleared when full, so memory stays bounded).
const NAME_CACHE: usize = 100_000;

/// What a verification found.
#[derive(Debug, Default, Clone)]
pub struct Report {
    /// Derived items checked, per kind of item (`posts`, `comments`, `likes`, `post copies`,
    /// `feed entries`).
    pub checked: BTreeMap<&'static str, u64>,
    /// Findings per kind of drift.
    pub drift: BTreeMap<DriftKind, u64>,
    /// The first few findings of each kind.
    pub examples: BTreeMap<DriftKind, Vec<Drift>>,
    /// Distinct items with at least one finding.
    pub drifted_items: u64,
    /// The store operations and request units the run used (request units on Cosmos DB only).
    pub usage: Usage,
    /// What `--repair` works from.
    pub(super) todo: Todo,
}

/// The ids a repair needs, kept for drifted items only.
#[derive(Debug, Default, Clone)]
pub(super) struct Todo {
    /// Per post: the changed documents to hand to the posts projection again (the post itself
    /// as a notification, and drifted comments and likes).
    pub replay: BTreeMap<String, Vec<Value>>,
    /// Copies in `users` (`userId`, `postId`) whose post is gone.
    pub extra_copies: Vec<(String, String)>,
    /// Feed entries that are not among the newest posts.
    pub extra_feed: Vec<String>,
    /// The oldest of the newest posts as gathered; an extra feed entry at or below it can
    /// never rank again.
    pub oldest_newest: Option<newest::FeedKey>,
}

impl Todo {
    fn docs(&mut self, post: &Value) -> &mut Vec<Value> {
        let id = str_field(post, "postId").unwrap_or_default().to_string();
        self.replay.entry(id).or_default()
    }

    /// Replay the post itself (its counters, name and copies are planned from it).
    pub fn replay_post(&mut self, post: &Value) {
        let docs = self.docs(post);
        if !docs.iter().any(|d| str_field(d, "type") == Some("post")) {
            docs.insert(0, notification(post));
        }
    }

    /// Replay these documents of the post's partition.
    fn replay_items(&mut self, post: &Value, items: Vec<Value>) {
        if !items.is_empty() {
            self.docs(post).extend(items);
        }
    }
}

impl Report {
    pub fn total_checked(&self) -> u64 {
        self.checked.values().sum()
    }

    pub fn is_clean(&self) -> bool {
        self.drifted_items == 0
    }

    fn checked(&mut self, what: &'static str, n: u64) {
        *self.checked.entry(what).or_default() += n;
    }

    /// Record the findings of one group of items (no item appears in two groups).
    fn record(&mut self, findings: Vec<Drift>) {
        let items: BTreeSet<String> = findings.iter().map(Drift::target).collect();
        self.drifted_items += items.len() as u64;
        for d in findings {
            *self.drift.entry(d.kind).or_default() += 1;
            let ex = self.examples.entry(d.kind).or_default();
            if ex.len() < EXAMPLES {
                ex.push(d);
            }
        }
    }

    /// Every example, in report order.
    pub fn findings(&self) -> impl Iterator<Item = &Drift> {
        self.examples.values().flatten()
    }
}

/// The user items' names, read on demand.
struct Names<'s> {
    store: &'s dyn Store,
    cache: Mutex<HashMap<String, Option<String>>>,
}

impl Names<'_> {
    async fn get(&self, user_id: &str) -> StoreResult<Option<String>> {
        if let Some(hit) = self.cache.lock().expect("cache").get(user_id) {
            return Ok(hit.clone());
        }
        let user = retry(|| self.store.read(Container::Users, user_id, user_id)).await?;
        let name = user.and_then(|u| str_field(&u, "username").map(String::from));
        let mut cache = self.cache.lock().expect("cache");
        if cache.len() >= NAME_CACHE {
            cache.clear();
        }
        cache.insert(user_id.to_string(), name.clone());
        Ok(name)
    }
}

/// Every page of a query, one after another.
fn pages<'s>(
    store: &'s dyn Store,
    c: Container,
    q: Query,
) -> impl futures::Stream<Item = StoreResult<Vec<Value>>> + 's {
    stream::try_unfold(Some(q), move |q| async move {
        let Some(q) = q else { return Ok(None) };
        let page = retry(|| store.query(c, &q)).await?;
        let next = page.continuation.map(|t| q.clone().continuation(Some(t)));
        Ok(Some((page.items, next)))
    })
}

/// The result of checking one post's partition and its copy.
struct PostCheck {
    findings: Vec<Drift>,
    comments: u64,
    likes: u64,
    /// The post as it should be (for the newest posts), when the item is a readable post.
    expected: Option<Value>,
    replay: Vec<Value>,
}

async fn check_post(store: &dyn Store, names: &Names<'_>, post: Value) -> StoreResult<PostCheck> {
    let (Some(post_id), Some(user_id)) = (str_field(&post, "postId"), str_field(&post, "userId"))
    else {
        return Ok(PostCheck {
            findings: Vec::new(),
            comments: 0,
            likes: 0,
            expected: None,
            replay: Vec::new(),
        });
    };
    let mut findings = Vec::new();
    let mut replay_items = Vec::new();
    let (mut comments, mut likes) = (0, 0);
    let (post_id, user_id) = (post_id.to_string(), user_id.to_string());
    let (post_id, user_id) = (post_id.as_str(), user_id.as_str());
    let mut post = post;
    let items = pages(
        store,
        Container::Posts,
        Query::partition(post_id).limit(1000),
    );
    futures::pin_mut!(items);
    while let Some(page) = items.try_next().await? {
        for item in page {
            match str_field(&item, "type") {
                Some("comment") => comments += 1,
                Some("like") => likes += 1,
                // The partition's post as read now is the one to check.
                Some("post") if str_field(&item, "id") == Some(post_id) => {
                    post = item;
                    continue;
                }
                _ => continue,
            }
            let author = match str_field(&item, "userId") {
                Some(u) => names.get(u).await?,
                None => None,
            };
            if let Some(d) = expected::author_drift(&item, author.as_deref()) {
                findings.push(d);
                replay_items.push(item);
            }
        }
    }
    let author = names.get(user_id).await?;
    findings.extend(expected::author_drift(&post, author.as_deref()));
    findings.extend(expected::count_drift(&post, comments, likes));
    let should_be = expected::expected_post(&post, author.as_deref(), comments, likes);
    let copy = retry(|| store.read(Container::Users, user_id, post_id)).await?;
    findings.extend(expected::copy_drift(
        Container::Users,
        copy.as_ref(),
        &expected::short_form(&should_be),
    ));
    // Anything beyond the comments' and likes' own names is planned from the post.
    let mut replay = Vec::new();
    if findings.len() > replay_items.len() {
        replay.push(notification(&post));
    }
    replay.extend(replay_items);
    Ok(PostCheck {
        findings,
        comments,
        likes,
        expected: Some(should_be),
        replay,
    })
}

/// A post as a change notification: the projections read everything else themselves.
pub(super) fn notification(post: &Value) -> Value {
    json!({
        "id": post.get("id"),
        "type": "post",
        "postId": post.get("postId"),
        "userId": post.get("userId"),
    })
}

/// Verify the whole database. `progress` reports how far it got (a bar on a terminal).
pub async fn verify(store: &dyn Store, progress: &Progress) -> StoreResult<Report> {
    let (result, usage) = metrics::scope(run(store, progress)).await;
    let mut report = result?;
    report.usage = usage;
    Ok(report)
}

async fn run(store: &dyn Store, progress: &Progress) -> StoreResult<Report> {
    let mut report = Report::default();
    let names = Names {
        store,
        cache: Mutex::new(HashMap::new()),
    };

    // 1. Posts, a few partitions at a time.
    progress.stage("posts");
    let mut newest = Newest::default();
    let posts = pages(
        store,
        Container::Posts,
        Query::cross_partition().eq("type", "post").limit(PAGE),
    );
    futures::pin_mut!(posts);
    while let Some(page) = posts.try_next().await? {
        let checks: Vec<PostCheck> = stream::iter(page)
            .map(|p| check_post(store, &names, p))
            .buffered(CONCURRENCY)
            .try_collect()
            .await?;
        for c in checks {
            let Some(expected) = c.expected else { continue };
            report.checked("posts", 1);
            report.checked("comments", c.comments);
            report.checked("likes", c.likes);
            report.checked("post copies", 1);
            newest.offer(&expected);
            report.todo.replay_items(&expected, c.replay);
            report.record(c.findings);
            progress.inc(1);
        }
    }

    // 2. Users: copies whose post is gone.
    progress.stage("users");
    let users = pages(
        store,
        Container::Users,
        Query::cross_partition().eq("type", "user").limit(PAGE),
    );
    futures::pin_mut!(users);
    while let Some(page) = users.try_next().await? {
        let user_ids: Vec<String> = page
            .iter()
            .filter_map(|u| str_field(u, "userId").map(String::from))
            .collect();
        let extras: Vec<Vec<Drift>> = stream::iter(user_ids)
            .map(|u| extra_copies(store, u))
            .buffered(CONCURRENCY)
            .try_collect()
            .await?;
        for found in extras {
            // Every other copy was counted with its post.
            report.checked("post copies", found.len() as u64);
            for d in &found {
                report.todo.extra_copies.push((d.pk.clone(), d.id.clone()));
            }
            report.record(found);
            progress.inc(1);
        }
    }

    // 3. The feed against the newest posts.
    progress.stage("feed");
    let mut feed = Vec::new();
    let entries = pages(
        store,
        Container::Feed,
        Query::partition(FEED_PK).eq("type", "post").limit(PAGE),
    );
    futures::pin_mut!(entries);
    while let Some(page) = entries.try_next().await? {
        feed.extend(page);
    }
    report.checked("feed entries", newest.len() as u64);
    let (drift, extra) = newest.feed_drift(&feed);
    for d in &drift {
        if let Some(expected) = newest.get(&d.id) {
            report.todo.replay_post(expected);
        }
    }
    report.record(drift);
    let mut real_extra = Vec::new();
    for d in extra {
        report.checked("feed entries", 1);
        // A post created after the posts were read may rightly be in the feed.
        let post = retry(|| store.read(Container::Posts, &d.id, &d.id)).await?;
        if post
            .as_ref()
            .and_then(newest::feed_key)
            .is_some_and(|k| newest.would_rank(&k))
        {
            continue;
        }
        report.todo.extra_feed.push(d.id.clone());
        real_extra.push(d);
    }
    report.record(real_extra);
    report.todo.oldest_newest = newest.oldest();
    progress.finish();
    Ok(report)
}

/// The copies in a user's partition whose post is gone.
async fn extra_copies(store: &dyn Store, user_id: String) -> StoreResult<Vec<Drift>> {
    let mut found = Vec::new();
    let copies = pages(
        store,
        Container::Users,
        Query::partition(user_id.clone())
            .eq("type", "post")
            .limit(PAGE),
    );
    futures::pin_mut!(copies);
    while let Some(page) = copies.try_next().await? {
        for copy in page {
            let Some(id) = str_field(&copy, "id") else {
                continue;
            };
            let post = retry(|| store.read(Container::Posts, id, id)).await?;
            found.extend(expected::extra_copy(&user_id, id, post.as_ref()));
        }
    }
    Ok(found)
}
