//! A per-process snapshot of posts' counts (`commentCount`, `likeCount`) for the lists read from
//! copies kept for an audience: the timeline, the bookmarks list, a tag's page.
//!
//! Such a copy holds what changes rarely (title, short content, author's name, tags); the counts
//! change with every comment and like, so a page reads them from the post itself (one point read
//! in `posts` per post shown) when it is shown ([`CountsCache::shown`]): a like or a comment
//! rewrites no copy, and counts an older copy still holds are never shown. The snapshot spares
//! those reads while it holds, with the freshness the feed's snapshot has:
//!
//! - on a store that signals its commits (the embedded one), a post's counts hold exactly until
//!   the next commit to `posts` (any post, comment or like): never older than the store;
//! - elsewhere (Cosmos DB), for at most the snapshot age (`BLOG_FEED_CACHE_MS`); 0 turns the
//!   snapshot off on every store.
//!
//! A post that is gone or marked deleted is remembered as such. A deletion in this process drops
//! the snapshot at once ([`CountsCache::forget`]). The snapshot holds at most [`MAX_POSTS`]
//! posts: when full, what no longer holds is dropped, and if that is not enough, all of it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures::stream::{self, StreamExt, TryStreamExt};
use serde_json::Value;

use super::views::PostSummaryView;
use crate::domain::is_deleted;
use crate::store::{ChangeNotifier, Container, Store, StoreResult};

/// The most posts the snapshot holds (some 100 bytes each).
pub const MAX_POSTS: usize = 10_000;
/// Point reads of one page in flight at once.
const READS_IN_FLIGHT: usize = 16;

/// A post's counts as the post holds them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub comment_count: u64,
    pub like_count: u64,
}

impl Counts {
    /// The counts of a stored post; `None` when it is gone or marked deleted.
    fn of(post: Option<&Value>) -> Option<Counts> {
        let post = post.filter(|p| !is_deleted(p))?;
        let n = |f: &str| post.get(f).and_then(Value::as_u64).unwrap_or(0);
        Some(Counts {
            comment_count: n("commentCount"),
            like_count: n("likeCount"),
        })
    }
}

#[derive(Debug, Clone, Copy)]
struct Stamp {
    version: u64,
    forgotten: u64,
    at: Instant,
}

pub struct CountsCache {
    /// Commits to `posts`, where the store signals them.
    changes: Option<ChangeNotifier>,
    /// How long a post's counts hold where the store does not signal commits; 0: no snapshot.
    max_age: Duration,
    posts: Mutex<HashMap<String, (Stamp, Option<Counts>)>>,
    /// Bumped by [`CountsCache::forget`]: counts stamped before are dropped.
    forgotten: AtomicU64,
}

impl CountsCache {
    pub fn new(store: &dyn Store, max_age: Duration) -> Self {
        CountsCache {
            changes: store.change_notifier(Container::Posts),
            max_age,
            posts: Mutex::new(HashMap::new()),
            forgotten: AtomicU64::new(0),
        }
    }

    fn stamp(&self) -> Stamp {
        Stamp {
            version: self.changes.as_ref().map_or(0, |c| *c.borrow()),
            forgotten: self.forgotten.load(Ordering::Acquire),
            at: Instant::now(),
        }
    }

    fn holds(&self, stamp: &Stamp, now: &Stamp) -> bool {
        if self.max_age.is_zero() || stamp.forgotten != now.forgotten {
            return false;
        }
        match &self.changes {
            Some(_) => stamp.version == now.version,
            None => stamp.at.elapsed() < self.max_age,
        }
    }

    /// Drop every post's counts, and any a read under way would keep: call after deleting posts.
    pub fn forget(&self) {
        self.forgotten.fetch_add(1, Ordering::AcqRel);
        self.posts.lock().expect("counts cache lock").clear();
    }

    /// The counts of each of `post_ids`, in order (`None`: the post is gone or deleted): from
    /// the snapshot where it holds, else one point read per post.
    pub async fn counts(
        &self,
        store: &dyn Store,
        post_ids: &[String],
    ) -> StoreResult<Vec<Option<Counts>>> {
        // Taken before reading, so that a commit during the reads makes them stale rather than
        // hiding behind them.
        let now = self.stamp();
        let mut found: Vec<Option<Option<Counts>>> = {
            let posts = self.posts.lock().expect("counts cache lock");
            post_ids
                .iter()
                .map(|id| {
                    posts
                        .get(id)
                        .filter(|(s, _)| self.holds(s, &now))
                        .map(|(_, c)| *c)
                })
                .collect()
        };
        let missing: Vec<(usize, &String)> = post_ids
            .iter()
            .enumerate()
            .filter(|(i, _)| found[*i].is_none())
            .collect();
        // The futures made first, then run: a closure handed to the stream would not be `Send`
        // for every lifetime, as the router needs.
        let reads: Vec<_> = missing
            .into_iter()
            .map(|(i, id)| read_counts(store, i, id.clone()))
            .collect();
        let read: Vec<(usize, Option<Counts>)> = stream::iter(reads)
            .buffered(READS_IN_FLIGHT)
            .try_collect()
            .await?;
        if !read.is_empty() && !self.max_age.is_zero() {
            let mut posts = self.posts.lock().expect("counts cache lock");
            if posts.len() + read.len() > MAX_POSTS {
                let current = self.stamp();
                posts.retain(|_, (s, _)| self.holds(s, &current));
                if posts.len() + read.len() > MAX_POSTS {
                    posts.clear();
                }
            }
            for (i, counts) in &read {
                posts.insert(post_ids[*i].clone(), (now, *counts));
            }
        }
        for (i, counts) in read {
            found[i] = Some(counts);
        }
        Ok(found.into_iter().map(Option::flatten).collect())
    }
}

impl CountsCache {
    /// The posts of a page read from copies, each with the counts its post holds now (at most
    /// one point read per post, none while the snapshot holds); a post found gone or deleted is
    /// left out (its copies are on their way out).
    pub async fn shown(
        &self,
        store: &dyn Store,
        posts: Vec<PostSummaryView>,
    ) -> StoreResult<Vec<PostSummaryView>> {
        let ids: Vec<String> = posts.iter().map(|p| p.post_id.clone()).collect();
        let counts = self.counts(store, &ids).await?;
        Ok(posts
            .into_iter()
            .zip(counts)
            .filter_map(|(mut p, counts)| {
                let c = counts?;
                p.comment_count = c.comment_count;
                p.like_count = c.like_count;
                Some(p)
            })
            .collect())
    }
}

async fn read_counts(
    store: &dyn Store,
    i: usize,
    id: String,
) -> StoreResult<(usize, Option<Counts>)> {
    let post = store.read(Container::Posts, &id, &id).await?;
    Ok((i, Counts::of(post.as_ref())))
}
