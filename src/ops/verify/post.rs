//! Step 1 of the walk (`super`): one post's partition (the post, its comments and likes: names
//! and counters) and its copy in `users`, checked against [`crate::ops::expected`], with the
//! fingerprint of its sources that tells a second look whether anything changed in between.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Mutex;

use futures::stream::{self, StreamExt, TryStreamExt};
use serde::Deserialize;
use serde_json::Value;

use crate::domain::{is_deleted, Authored, Kind, Meta, Post, User};
use crate::ops::expected::{self, Drift};
use crate::ops::report::notification;
use crate::ops::traversal::pages;
use crate::ops::PARTITIONS_IN_FLIGHT;
use crate::store::{retry, Container, Query, Store, StoreResult};

/// Usernames remembered between posts (cleared when full, so memory stays bounded).
const NAME_CACHE: usize = 100_000;

/// The user items' names, read on demand.
pub(super) struct Names<'s> {
    store: &'s dyn Store,
    cache: Mutex<HashMap<String, Option<String>>>,
}

impl<'s> Names<'s> {
    pub(super) fn new(store: &'s dyn Store) -> Self {
        Names {
            store,
            cache: Mutex::new(HashMap::new()),
        }
    }

    async fn get(&self, user_id: &str) -> StoreResult<Option<String>> {
        if let Some(hit) = self.cache.lock().expect("cache").get(user_id) {
            return Ok(hit.clone());
        }
        let user = retry(|| self.store.read(Container::Users, user_id, user_id)).await?;
        // An erased user's name is on nothing (and what is still theirs is reported elsewhere).
        let name = user
            .filter(|u| !is_deleted(u))
            .and_then(|u| User::deserialize(&u).ok())
            .map(|u| u.username);
        let mut cache = self.cache.lock().expect("cache");
        if cache.len() >= NAME_CACHE {
            cache.clear();
        }
        cache.insert(user_id.to_string(), name.clone());
        Ok(name)
    }
}

/// The result of checking one post's partition and its copy.
pub(super) struct PostCheck {
    pub(super) findings: Vec<Drift>,
    pub(super) comments: u64,
    pub(super) likes: u64,
    /// The post as it should be (for the newest posts), when the item is a readable post.
    pub(super) expected: Option<Post>,
    pub(super) replay: Vec<Value>,
    /// The sources as read (the post, its live comments and likes, its author's name): equal
    /// fingerprints at two looks mean nothing the projections work from changed in between.
    pub(super) sources: u64,
    /// The users whose names the findings were judged by: the post's author, and the author of
    /// each comment or like found with a stale name.
    pub(super) users: Vec<String>,
}

/// One value for a set of items' versions, whatever order they were read in.
#[derive(Default)]
struct Fingerprint(u64);

impl Fingerprint {
    fn add(&mut self, part: impl Hash) {
        let mut h = DefaultHasher::new();
        part.hash(&mut h);
        self.0 = self.0.wrapping_add(h.finish());
    }

    fn item(&mut self, item: &Value) {
        self.add((Meta::of(item).id, Meta::of(item).etag));
    }
}

async fn check_post(store: &dyn Store, names: &Names<'_>, stored: Value) -> StoreResult<PostCheck> {
    let unread = PostCheck {
        findings: Vec::new(),
        comments: 0,
        likes: 0,
        expected: None,
        replay: Vec::new(),
        sources: 0,
        users: Vec::new(),
    };
    let Ok(post) = Post::deserialize(&stored) else {
        // Written by no version of this service (each reads the posts every earlier one wrote:
        // the unit tests hold `Post` to it); the API answers it 500, and there is nothing here
        // to derive its copies from.
        tracing::warn!(
            id = Meta::of(&stored).id.unwrap_or_default(),
            "a stored post does not read as one; not verified"
        );
        return Ok(unread);
    };
    let mut findings = Vec::new();
    let mut replay_items = Vec::new();
    let (mut comments, mut likes) = (0, 0);
    let (post_id, user_id) = (post.post_id.clone(), post.user_id.clone());
    let (post_id, user_id) = (post_id.as_str(), user_id.as_str());
    let (mut post, mut stored) = (post, stored);
    let mut sources = Fingerprint::default();
    let mut users = Vec::new();
    let items = pages(
        store,
        Container::Posts,
        Query::partition(post_id).live().limit(1000),
    );
    futures::pin_mut!(items);
    while let Some(page) = items.try_next().await? {
        for item in page {
            sources.item(&item);
            match Kind::of(&item) {
                Some(Kind::Comment) => comments += 1,
                Some(Kind::Like) => likes += 1,
                // The partition's post as read now is the one to check.
                Some(Kind::Post) => {
                    if let Ok(p) = Post::deserialize(&item) {
                        if p.id == post_id {
                            (post, stored) = (p, item);
                        }
                    }
                    continue;
                }
                // Bookmarks and the counters' bookkeeping: not the posts projection's sources.
                _ => continue,
            }
            let Ok(authored) = Authored::deserialize(&item) else {
                continue;
            };
            let author = names.get(&authored.user_id).await?;
            if let Some(d) = expected::author_drift(&authored, author.as_deref()) {
                findings.push(d);
                users.push(authored.user_id);
                replay_items.push(item);
            }
        }
    }
    let author = names.get(user_id).await?;
    sources.add(&author);
    users.push(user_id.to_string());
    if let Ok(a) = Authored::deserialize(&stored) {
        findings.extend(expected::author_drift(&a, author.as_deref()));
    }
    findings.extend(expected::count_drift(&post, &stored, comments, likes));
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
        sources: sources.0,
        users,
    })
}

pub(super) async fn check_posts(
    store: &dyn Store,
    names: &Names<'_>,
    posts: Vec<Value>,
) -> StoreResult<Vec<PostCheck>> {
    stream::iter(posts)
        .map(|p| check_post(store, names, p))
        .buffered(PARTITIONS_IN_FLIGHT)
        .try_collect()
        .await
}
