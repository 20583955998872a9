//! The bookmarks part of `handler verify`: the counts and copies the bookmarks projection
//! (`crate::projection::bookmarks`) keeps, checked, and with `--repair` mended through it.
//!
//! 1. Posts, page by page across partitions: each live post's live bookmarks (a query of its
//!    partition, [`bookmarks::live_bookmarks`]); its `bookmarkCount` is their number, and each
//!    one's copy in its bookmarker's partition of `users` (one query across `users`, on a post
//!    with bookmarks) is the copy the projection writes of the post as stored
//!    ([`bookmarks::copy`]). A name or a count the post itself has wrong is the posts part's
//!    finding; the change feed carries its repair to the copies.
//! 2. Users, page by page: a bookmarked post's copy in a user's partition (the post its id
//!    names) is extra unless the user's bookmark of the post is live, and so is the post.
//!
//! Every finding is about one post: its count, or a copy of it. What a first look finds is looked
//! at again inside a window of the change feeds ([`part::judge`]), at once with `settle` zero, else
//! `settle` later, up to [`part::LATER_LOOKS`] times: the posts and copies found wrong, not the
//! whole store. A finding is drift at the first such look that finds it wrong while no change of
//! its post's partition was in flight or made during the look; still lagging at the last look, its
//! post counts as lagging ([`Check::lagging`]) and the repair leaves it to the change feed. Where
//! the lanes' positions are not known (the Functions host), what is still wrong at the next look is
//! drift.
//!
//! The repair hands each finding to the projection as its bookmark's change
//! ([`bookmarks::notification`]): it reads the bookmark and the post afresh and writes or
//! removes the copy, or recounts the post.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use futures::stream::{self, StreamExt, TryStreamExt};
use serde::Deserialize;
use serde_json::Value;

use super::expected::differences;
use super::part::{self, Finding, Found, Look, Mend, Part, Pass, Tally, EXAMPLES};
use super::progress::Progress;
use super::traversal::pages;
use super::{PARTITIONS_IN_FLIGHT, TRAVERSAL_PAGE};
use crate::domain::bookmarks::{Bookmark, Bookmarked, BOOKMARKED};
use crate::domain::{is_deleted, Kind, Meta, Post, User};
use crate::projection::bookmarks;
use crate::projection::engine::query_all;
use crate::store::{retry, Container, Query, Store, StoreResult};

pub const PART: Part = Part {
    name: "bookmarks",
    run: |store, pass| Box::pin(run(store, pass)),
};

async fn run(store: &dyn Store, pass: &Pass<'_>) -> anyhow::Result<Box<dyn Found>> {
    let look = async || verify(store, &(pass.progress)(), pass.settle).await;
    let outcome = Outcome::of(pass.repair, look, async |found: &Check| {
        repair(store, found).await
    })
    .await?;
    Ok(part::found(outcome))
}

/// The kinds of finding, in report order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DriftKind {
    /// A post's `bookmarkCount` is not the number of its live bookmarks.
    Count,
    /// A live bookmark's copy is missing or differs, or a copy has no live bookmark or no live
    /// post.
    Copy,
}

impl DriftKind {
    pub fn name(self) -> &'static str {
        match self {
            DriftKind::Count => "bookmark count",
            DriftKind::Copy => "bookmark copy",
        }
    }
}

/// A count or a copy that is not what the bookmarks and the post say it should be.
#[derive(Debug, Clone, PartialEq)]
pub struct Drift {
    pub kind: DriftKind,
    /// The post it is about.
    pub post: String,
    /// Whose copy it is; `None`: the post's count.
    pub user: Option<String>,
    /// What differs.
    pub detail: String,
}

impl Drift {
    /// `container/pk/id`.
    pub fn target(&self) -> String {
        match &self.user {
            None => format!("posts/{0}/{0}", self.post),
            Some(u) => format!("users/{u}/{}", Bookmarked::id_of(&self.post)),
        }
    }

    /// The change that has the projection mend it.
    fn change(&self) -> Value {
        bookmarks::notification(&self.post, self.user.as_deref())
    }
}

/// What the check found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Check {
    /// Bookmarks' copies checked.
    pub checked: u64,
    /// Each finding, by the item at fault ([`Drift::target`]).
    pub findings: BTreeMap<String, Drift>,
    /// Posts found wrong while a change of theirs was still on its way at every look: not drift.
    pub lagging: u64,
}

impl Check {
    pub fn is_clean(&self) -> bool {
        self.findings.is_empty()
    }

    fn found(&mut self, found: Vec<Drift>) {
        self.findings
            .extend(found.into_iter().map(|d| (d.target(), d)));
    }

    /// The findings of each kind, in report order.
    fn by_kind(&self) -> BTreeMap<DriftKind, Vec<&Drift>> {
        let mut out: BTreeMap<DriftKind, Vec<&Drift>> = BTreeMap::new();
        for d in self.findings.values() {
            out.entry(d.kind).or_default().push(d);
        }
        out
    }
}

impl Look for Check {
    fn tally(&self) -> Tally {
        Tally {
            checked: self.checked,
            drifted: self.findings.len() as u64,
            lagging: self.lagging,
            quarantined: 0,
        }
    }

    fn render(&self) -> String {
        let mut out = format!(
            "bookmarks: {} copies checked, {} drifted, {} lagging\n",
            self.checked,
            self.findings.len(),
            self.lagging
        );
        for (kind, found) in self.by_kind() {
            out.push_str(&format!("drift: {}: {}\n", kind.name(), found.len()));
            for d in found.iter().take(EXAMPLES) {
                out.push_str(&format!("  {}: {}\n", d.target(), d.detail));
            }
            if found.len() > EXAMPLES {
                out.push_str("  …\n");
            }
        }
        out
    }

    fn findings(&self) -> Vec<Finding> {
        let by_kind = self.by_kind();
        let shown = by_kind.values().flat_map(|f| f.iter().take(EXAMPLES));
        shown
            .map(|d| Finding {
                kind: d.kind.name(),
                target: d.target(),
                detail: d.detail.clone(),
            })
            .collect()
    }
}

/// What a repair did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Mended {
    /// Bookmarks' changes handed to the projection.
    pub replayed: usize,
    pub written: usize,
    pub failed: Vec<String>,
}

impl Mend for Mended {
    fn summary(&self) -> String {
        format!(
            "{} bookmark changes replayed through the projection, {} items written",
            self.replayed, self.written
        )
    }

    fn failed(&self) -> &[String] {
        &self.failed
    }
}

/// A check, and with `--repair` the repair and the check after it.
pub type Outcome = part::Outcome<Check, Mended>;

/// Check every bookmark's count and copies, telling lag from drift (see the module's
/// documentation). A first look that finds nothing is the answer.
pub async fn verify(
    store: &dyn Store,
    progress: &Progress,
    settle: Duration,
) -> StoreResult<Check> {
    let first = look(store, progress).await?;
    progress.finish();
    if first.is_clean() {
        return Ok(first);
    }
    let judged = part::judge(
        store,
        settle,
        first.findings,
        async |pending| look_again(store, pending).await,
        async |touched, found| {
            Ok(found
                .iter()
                .filter(|(_, d)| touched.post_lagging(&d.post, &[]))
                .map(|(k, _)| k.clone())
                .collect())
        },
    )
    .await?;
    let lagging: BTreeSet<&str> = judged.lagging.values().map(|d| d.post.as_str()).collect();
    Ok(Check {
        checked: first.checked,
        findings: judged.drift,
        lagging: lagging.len() as u64,
    })
}

/// One look at every live post's bookmarks and every user's bookmarked copies.
async fn look(store: &dyn Store, progress: &Progress) -> StoreResult<Check> {
    let mut check = Check::default();
    progress.stage("bookmarks");
    let q = Query::cross_partition().of_kind(Kind::Post).live();
    let posts = pages(store, Container::Posts, q.limit(TRAVERSAL_PAGE));
    futures::pin_mut!(posts);
    while let Some(page) = posts.try_next().await? {
        let looked: Vec<(u64, Vec<Drift>)> = stream::iter(page)
            .map(|p| check_post(store, p))
            .buffered(PARTITIONS_IN_FLIGHT)
            .try_collect()
            .await?;
        progress.inc(looked.len() as u64);
        for (checked, found) in looked {
            check.checked += checked;
            check.found(found);
        }
    }
    progress.stage("bookmarked copies");
    let q = Query::cross_partition().of_kind(Kind::User).live();
    let users = pages(store, Container::Users, q.limit(TRAVERSAL_PAGE));
    futures::pin_mut!(users);
    while let Some(page) = users.try_next().await? {
        let ids = page.iter().filter_map(|u| User::deserialize(u).ok());
        let extra: Vec<Vec<Drift>> = stream::iter(ids.map(|u| u.user_id))
            .map(|u| extra_copies(store, u))
            .buffered(PARTITIONS_IN_FLIGHT)
            .try_collect()
            .await?;
        progress.inc(extra.len() as u64);
        for found in extra {
            // Every other copy was counted with its bookmark.
            check.checked += found.len() as u64;
            check.found(found);
        }
    }
    Ok(check)
}

/// What was `pending`, looked at again: each post's count and copies, and each copy.
async fn look_again(
    store: &dyn Store,
    pending: &BTreeMap<String, Drift>,
) -> StoreResult<BTreeMap<String, Drift>> {
    let mut found = Vec::new();
    let posts: BTreeSet<&str> = pending.values().map(|d| d.post.as_str()).collect();
    for id in posts {
        let post = retry(|| store.read(Container::Posts, id, id)).await?;
        if let Some(post) = post.filter(|p| !is_deleted(p)) {
            found.extend(check_post(store, post).await?.1);
        }
    }
    for d in pending.values() {
        if let Some(user) = &d.user {
            found.extend(extra_bookmark(store, user, &d.post).await?);
        }
    }
    Ok(found.into_iter().map(|d| (d.target(), d)).collect())
}

/// A live post's (as stored) count, and each of its live bookmarks' copy; with the number of
/// copies checked. A copy no bookmark accounts for is found in its user's partition
/// ([`extra_copies`]).
async fn check_post(store: &dyn Store, stored: Value) -> StoreResult<(u64, Vec<Drift>)> {
    // A post that does not read is reported by the posts part.
    let Ok(post) = Post::deserialize(&stored) else {
        return Ok((0, Vec::new()));
    };
    let p = post.post_id.as_str();
    let marks = query_all(store, Container::Posts, bookmarks::live_bookmarks(p)).await?;
    let marks: Vec<Bookmark> = marks.iter().filter_map(Bookmark::live).collect();
    let n = marks.len() as u64;
    let mut out = Vec::new();
    let count = post.bookmark_count;
    if count != n {
        out.push(Drift {
            kind: DriftKind::Count,
            post: p.into(),
            user: None,
            detail: format!("bookmarkCount: {count}, expected {n}"),
        });
    }
    let mut copies = HashMap::new();
    if n > 0 {
        let q = Query::cross_partition()
            .eq(Kind::FIELD, BOOKMARKED)
            .eq("postId", p);
        for c in query_all(store, Container::Users, q.live()).await? {
            copies.insert(Meta::of(&c).user_id.unwrap_or_default().to_string(), c);
        }
    }
    for b in &marks {
        let want = bookmarks::copy(b, &post);
        let found = copies.remove(&b.user_id);
        let detail = match found.map(|f| Bookmarked::deserialize(&f)) {
            // Counts a copy of an earlier release holds are never shown: not compared.
            Some(Ok(f)) if f.as_written() == want => continue,
            None => "no copy".to_string(),
            Some(Ok(f)) => {
                let (found, date) = (&f.creation_date, &want.creation_date);
                let dated =
                    (found != date).then(|| format!("creationDate: {found}, expected {date}"));
                let d = differences(&f.as_written().post, &want.post)
                    .into_iter()
                    .chain(dated);
                d.collect::<Vec<_>>().join("; ")
            }
            Some(Err(e)) => format!("does not read as a bookmarked post: {e}"),
        };
        out.push(Drift {
            kind: DriftKind::Copy,
            post: p.into(),
            user: Some(b.user_id.clone()),
            detail,
        });
    }
    Ok((n, out))
}

/// The bookmarked posts' copies in `user_id`'s partition that no live bookmark of a live post
/// accounts for ([`extra_bookmark`]).
async fn extra_copies(store: &dyn Store, user_id: String) -> StoreResult<Vec<Drift>> {
    let mut found = Vec::new();
    let q = Query::partition(user_id.clone()).eq(Kind::FIELD, BOOKMARKED);
    let copies = pages(store, Container::Users, q.limit(TRAVERSAL_PAGE));
    futures::pin_mut!(copies);
    // The post a copy is of is the one its id names (the id a repair removes).
    let prefix = Bookmarked::id_of("");
    while let Some(page) = copies.try_next().await? {
        let ids = page.iter().filter_map(|c| Meta::of(c).id);
        for post_id in ids.filter_map(|id| id.strip_prefix(&prefix)) {
            found.extend(extra_bookmark(store, &user_id, post_id).await?);
        }
    }
    Ok(found)
}

/// `user_id`'s copy of bookmarked post `post_id` is extra unless the user's bookmark of the
/// post is live and so is the post (whether the copy is as it should be is checked with its
/// post).
async fn extra_bookmark(
    store: &dyn Store,
    user_id: &str,
    post_id: &str,
) -> StoreResult<Option<Drift>> {
    let mark = Bookmark::id_of(user_id);
    let mark = retry(|| store.read(Container::Posts, post_id, &mark)).await?;
    let detail = if mark.as_ref().and_then(Bookmark::live).is_none() {
        "its bookmark does not exist"
    } else {
        let post = retry(|| store.read(Container::Posts, post_id, post_id)).await?;
        if post.is_some_and(|p| !is_deleted(&p)) {
            return Ok(None);
        }
        "its post does not exist"
    };
    Ok(Some(Drift {
        kind: DriftKind::Copy,
        post: post_id.into(),
        user: Some(user_id.into()),
        detail: detail.into(),
    }))
}

/// Hand each finding to the projection as its bookmark's change, a post's at a time.
pub async fn repair(store: &dyn Store, check: &Check) -> Mended {
    let mut done = Mended::default();
    let mut changes: BTreeMap<&str, Vec<Value>> = BTreeMap::new();
    for d in check.findings.values() {
        changes.entry(&d.post).or_default().push(d.change());
    }
    for (post, changes) in changes {
        let decoded = match crate::projection::change::decoded(Container::Posts, &changes) {
            Ok(decoded) => decoded,
            Err(e) => {
                done.failed.push(format!("{}: {}", e.label, e.error));
                continue;
            }
        };
        let decoded: Vec<&crate::projection::change::Change> = decoded.iter().collect();
        match bookmarks::project_posts(store, &decoded).await {
            Ok(n) => {
                done.replayed += changes.len();
                done.written += n;
            }
            Err(e) => done.failed.push(format!("posts/{post}/{post}: {e}")),
        }
    }
    done
}
