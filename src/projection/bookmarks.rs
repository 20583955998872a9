//! Bookmarks: a user's saved posts, two kinds of item (their types in `crate::domain::bookmarks`).
//! - [`Bookmark`] `bookmark-<U>` in post P's partition of `posts` (U bookmarked P), written by
//!   the request, marked when taken back; its post's deletion marks it (`super::cascade`).
//! - [`Bookmarked`] `bookmarked-<P>` in U's partition of `users`: the copy of P that U's list
//!   shows (short form, dated by the bookmark, no counts: the list reads them from the post),
//!   so a page is one query and a point read per post shown.
//!
//! [`POSTS`]: a bookmark's change writes or removes its copy and recounts `bookmarkCount`; a
//! change of a bookmarked post (a stored `bookmarkCount` above 0) whose copy would differ from
//! what its job item `timelineJob-bookmarks-<P>` records rewrites every copy, [`PAGE`](super::engine::PAGE) a step,
//! the job item's change bringing the next ([`STEPS`]): the job protocol of
//! [`super::fanout`], whose [`Audience`] the bookmarkers are. A copy holds no counts, so a like,
//! a comment or a bookmark starts no fan-out.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use futures::future::BoxFuture;

use super::change::{Change, ChangeKind, Item};
use super::engine::{
    apply_one, current_job, delete_item, failed, newest, newest_change, read_not_older, wrote,
    Unit, PAGE,
};
use super::fanout::{self, Audience, Copies, Owners, Paged};
use super::write::Write;
use crate::domain::bookmarks::{Bookmark, Bookmarked, BOOKMARK};
use crate::domain::follows::edge_tombstone_ops;
use crate::domain::jobs::{bookmarks_job_id, Work};
use crate::domain::{is_deleted, to_value, Kind, Meta, PatchOp, Post};
use crate::store::{retry, Container, Query, Store, StoreError, StoreResult};

/// A change of `user_id`'s bookmark of `post_id` (`None`: a recount) for `verify --repair`.
pub fn notification(post_id: &str, user_id: Option<&str>) -> Value {
    to_value(&Notification {
        id: Bookmark::id_of(user_id.unwrap_or_default()),
        kind: BOOKMARK,
        post_id,
        user_id,
    })
}

/// What [`notification`] delivers: a bookmark's identity, without its date.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Notification<'a> {
    id: String,
    #[serde(rename = "type")]
    kind: &'a str,
    post_id: &'a str,
    user_id: Option<&'a str>,
}

/// Posts feed: bookmarks' copies and counts, bookmarked posts' changes ([`project_posts`]).
pub const POSTS: Unit = Unit {
    name: "bookmarks",
    feed: Container::Posts,
    watches: &[ChangeKind::Post, ChangeKind::Bookmark],
    reads: &[Container::Posts, Container::Users],
    writes: &[Container::Posts, Container::Users],
    project: |store, changes| {
        Box::pin(async move {
            let r = project_posts(store, changes).await;
            r.map(wrote)
                .map_err(|e| failed(Container::Posts, changes, e))
        })
    },
};

/// Users feed: the next step of a bookmarked post's fan-out ([`project_steps`]).
pub const STEPS: Unit = Unit {
    name: "bookmark-steps",
    feed: Container::Users,
    watches: &[ChangeKind::BookmarksJob],
    reads: &[Container::Users, Container::Posts],
    writes: &[Container::Users],
    project: |store, changes| {
        Box::pin(async move {
            let r = project_steps(store, changes).await;
            r.map(wrote)
                .map_err(|e| failed(Container::Users, changes, e))
        })
    },
};

/// Each bookmark changed (its copy, then its post's count), then each bookmarked post changed
/// (a recheck of the counters carries no `bookmarkCount`). Returns the writes made.
pub async fn project_posts(store: &dyn Store, changes: &[&Change]) -> StoreResult<usize> {
    let (mut marks, mut posts) = (BTreeMap::<_, BTreeSet<_>>::new(), BTreeMap::new());
    for c in changes {
        match &c.item {
            Item::Bookmark(b) => {
                let user = b.user_id.as_deref();
                marks.entry(b.post_id.as_str()).or_default().insert(user);
            }
            Item::Post(a) => {
                posts.insert(a.post_id.as_str(), a);
            }
            _ => {}
        }
    }
    let mut written = 0;
    for (post_id, users) in marks {
        let post = live_post(store, changes, post_id).await?;
        for user in users.into_iter().flatten() {
            written += bookmark_changed(store, changes, post_id, user, post.as_ref()).await?;
        }
        if post.is_some() {
            written += set_bookmark_count(store, post_id).await?;
        }
    }
    for (post_id, delivered) in posts {
        // A deleted post's job item goes whatever its count: one is left by every post that was
        // ever bookmarked, its bookmarks all taken back or not.
        let author = delivered.user_id.as_str();
        written += match delivered.bookmark_count {
            _ if delivered.deleted => {
                delete_item(store, Container::Users, author, &bookmarks_job_id(post_id)).await?
            }
            1.. => post_changed(store, changes, post_id).await?,
            0 => 0,
        };
    }
    Ok(written)
}

/// Post `post_id` as it is now (never older than its change), unless gone or deleted.
async fn live_post(store: &dyn Store, changes: &[&Change], id: &str) -> StoreResult<Option<Post>> {
    let changed = newest_change(changes, ChangeKind::Post, id);
    let post = read_not_older(store, Container::Posts, id, id, changed).await?;
    let post = post.filter(|p| !is_deleted(p));
    Ok(post.and_then(|p| Post::deserialize(&p).ok()))
}

/// `user`'s bookmark of `post_id` changed: live on a live post, its copy is written; live on a
/// post gone, it is marked (it raced the post's deletion); else its copy goes.
async fn bookmark_changed(
    store: &dyn Store,
    changes: &[&Change],
    post_id: &str,
    user: &str,
    post: Option<&Post>,
) -> StoreResult<usize> {
    let id = Bookmark::id_of(user);
    let changed = newest(
        changes,
        |c| matches!(&c.item, Item::Bookmark(b) if b.id == id && b.post_id == post_id),
    );
    let read = read_not_older(store, Container::Posts, post_id, &id, changed).await?;
    let copy_id = Bookmarked::id_of(post_id);
    match (read.as_ref().and_then(Bookmark::live), post) {
        (Some(b), Some(p)) => {
            let copy = to_value(&copy(&b, p));
            apply_one(store, &Write::upsert(Container::Users, user, copy)).await?;
            Ok(1)
        }
        (Some(_), None) => {
            let mark = Write::patch(Container::Posts, post_id, &id, edge_tombstone_ops());
            apply_one(store, &mark).await?;
            Ok(1 + delete_item(store, Container::Users, user, &copy_id).await?)
        }
        (None, _) => delete_item(store, Container::Users, user, &copy_id).await,
    }
}

/// The copy of `post` (live, as stored) that its bookmarker keeps for `bookmark` (live): what a
/// bookmark's change writes, and what `handler verify` expects of every copy.
pub fn copy(bookmark: &Bookmark, post: &Post) -> Bookmarked {
    Bookmarked::new(&bookmark.user_id, &bookmark.creation_date, post)
}

/// Post `post_id`'s live bookmarks: what its `bookmarkCount` counts.
pub fn live_bookmarks(post_id: &str) -> Query {
    Query::partition(post_id).eq(Kind::FIELD, BOOKMARK).live()
}

/// Attempts at setting a post's `bookmarkCount`: each lost to a write of the post landing
/// between its read and its set (a like's count, an edit), most without counting again.
const COUNT_ATTEMPTS: usize = 16;

/// Set post `post_id`'s `bookmarkCount` to its live bookmarks if it differs, only if the post is
/// still at the version read. A set lost to another write of the post is made again on the post
/// read afresh: with the same count when the stored `bookmarkCount` is still the one it was
/// counted against (no other recount set it meanwhile; a bookmark changed since has its own
/// recount to come), else counted again. So likes and comments pouring onto a hot post never
/// fail the batch. Returns the writes made.
pub async fn set_bookmark_count(store: &dyn Store, post_id: &str) -> StoreResult<usize> {
    let q = live_bookmarks(post_id);
    // The count made, and the stored count it was made against.
    let mut counted: Option<(Option<u64>, u64)> = None;
    for _ in 0..COUNT_ATTEMPTS {
        let post = retry(|| store.read(Container::Posts, post_id, post_id)).await?;
        let Some(post) = post.filter(|p| !is_deleted(p)) else {
            return Ok(0);
        };
        let stored = Post::deserialize(&post).ok().map(|p| p.bookmark_count);
        let n = match counted {
            Some((against, n)) if against == stored => n,
            _ => retry(|| store.count(Container::Posts, &q)).await?,
        };
        if stored == Some(n) {
            return Ok(0);
        }
        let ops = [PatchOp::set("/bookmarkCount", n)];
        let etag = Meta::of(&post).etag;
        match retry(|| store.patch(Container::Posts, post_id, post_id, &ops, etag)).await {
            Ok(_) => return Ok(1),
            Err(StoreError::PreconditionFailed) => counted = Some((stored, n)),
            Err(StoreError::NotFound) => return Ok(0),
            Err(e) => return Err(e),
        }
    }
    Err(StoreError::Other(format!(
        "the bookmark count of post {post_id} kept changing"
    )))
}

/// A bookmarked post changed: unless its job item records the copy as it shows now, its
/// fan-out starts over (its first page now; [`fanout::start`]).
async fn post_changed(store: &dyn Store, changes: &[&Change], post_id: &str) -> StoreResult<usize> {
    let Some(post) = live_post(store, changes, post_id).await? else {
        return Ok(0);
    };
    if post.bookmark_count == 0 {
        return Ok(0);
    }
    let entry = to_value(&Bookmarked::new("", "", &post).post);
    fanout::start(store, &Bookmarkers, &post.user_id, post_id, &entry).await
}

/// The next step of each bookmarks job item delivered, unless it changed since.
pub async fn project_steps(store: &dyn Store, changes: &[&Change]) -> StoreResult<usize> {
    let mut written = 0;
    let delivered = changes.iter().filter_map(|c| match &c.item {
        Item::Job(j) if matches!(j.work, Work::Bookmarks { .. }) => Some(j),
        _ => None,
    });
    for delivered in delivered {
        if let Some(job) = current_job(store, delivered).await? {
            written += fanout::next(store, &Bookmarkers, &job).await?;
        }
    }
    Ok(written)
}

/// A post's bookmarkers, each given their copy of it ([`Bookmarked`]), dated by their
/// bookmark; the job item `timelineJob-bookmarks-<P>` records the copy.
struct Bookmarkers;

impl Audience for Bookmarkers {
    fn job_id(&self, post_id: &str) -> String {
        bookmarks_job_id(post_id)
    }

    fn work(&self, post_id: &str, entry: Value, cursor: Option<String>) -> Work {
        Work::Bookmarks {
            post_id: post_id.into(),
            entry,
            cursor,
        }
    }

    /// A record of an earlier release holds the counts its copies held: not compared.
    fn records(&self, recorded: &Value, entry: &Value) -> bool {
        match Post::deserialize(recorded) {
            Ok(p) => to_value(&p.as_copied()) == *entry,
            Err(_) => recorded == entry,
        }
    }

    fn page<'a>(
        &'a self,
        store: &'a dyn Store,
        _author: &'a str,
        entry: &'a Value,
        cursor: Option<&'a str>,
    ) -> BoxFuture<'a, StoreResult<Paged>> {
        Box::pin(fan_out(store, entry, cursor))
    }
}

/// One page of the bookmarkers (from `cursor`) of the post `entry` shows, each given their copy
/// ([`fanout::step`]), dated by their bookmark. Returns the writes made and where the next page
/// starts.
async fn fan_out(store: &dyn Store, entry: &Value, cursor: Option<&str>) -> StoreResult<Paged> {
    let Ok(shown) = Post::deserialize(entry) else {
        return Ok((0, None));
    };
    let post_id = shown.post_id.as_str();
    let bookmarks = || Query::partition(post_id).eq(Kind::FIELD, BOOKMARK);
    let still = |users: &[&str]| bookmarks().any_of("userId", users.iter().map(|u| u.to_string()));
    let owners = Owners {
        container: Container::Posts,
        query: bookmarks().live().limit(PAGE),
        owner: "userId",
        still: &still,
        still_owner: "userId",
    };
    let copy = |owner: &str, b: &Value| {
        let date = Meta::of(b).creation_date.unwrap_or_default();
        to_value(&Bookmarked::new(owner, date, &shown))
    };
    let copies = Copies {
        post_id,
        container: Container::Users,
        id: Bookmarked::id_of(post_id),
        item: &copy,
    };
    let step = fanout::step(store, &copies, &owners, cursor).await?;
    Ok((step.written, step.next))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::embedded::EmbeddedStore;

    fn post(title: &str, bookmarks: u64) -> Post {
        Post {
            id: "p1".into(),
            kind: Kind::Post,
            post_id: "p1".into(),
            user_id: "bob".into(),
            user_username: "bob".into(),
            title: title.into(),
            description: None,
            content: "c".into(),
            comment_count: 0,
            like_count: 0,
            creation_date: "2026-01-01T00:00:00.000Z".into(),
            updated_at: None,
            bookmark_count: bookmarks,
            tags: Vec::new(),
        }
    }

    fn one(feed: Container, doc: &Value) -> Change {
        crate::projection::change::decode_one(feed, doc).unwrap()
    }

    /// Run the post's change, then each job step it leaves, as the feeds would deliver them.
    async fn project_change(store: &EmbeddedStore) -> usize {
        let p = store
            .read(Container::Posts, "p1", "p1")
            .await
            .unwrap()
            .unwrap();
        let mut steps = 0;
        project_posts(store, &[&one(Container::Posts, &p)])
            .await
            .unwrap();
        loop {
            let job = store
                .read(Container::Users, "bob", &bookmarks_job_id("p1"))
                .await
                .unwrap();
            let Some(job) = job.filter(|j| j["done"] == false) else {
                return steps;
            };
            project_steps(store, &[&one(Container::Users, &job)])
                .await
                .unwrap();
            steps += 1;
        }
    }

    async fn titles(store: &EmbeddedStore, owners: &[String]) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for o in owners {
            let copy = store
                .read(Container::Users, o, "bookmarked-p1")
                .await
                .unwrap();
            let copy: Bookmarked = serde_json::from_value(copy.expect("a copy")).unwrap();
            assert_eq!(
                copy.creation_date,
                format!("date-{o}"),
                "dated by its bookmark"
            );
            out.insert(copy.post.title);
        }
        out
    }

    /// More bookmarkers than a page: the fan-out writes a page, and its job item's change the
    /// rest; a later edit reaches every copy the same way.
    #[tokio::test]
    async fn a_post_change_reaches_every_bookmarker_a_page_a_step() {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(&dir.path().join("b.db")).unwrap();
        let owners: Vec<String> = (0..PAGE + 5).map(|i| format!("u{i:03}")).collect();
        let p = to_value(&post("first", owners.len() as u64));
        store.create(Container::Posts, "p1", p).await.unwrap();
        for o in &owners {
            let b = Bookmark {
                creation_date: format!("date-{o}"),
                ..Bookmark::new("p1", o)
            };
            store
                .create(Container::Posts, "p1", to_value(&b))
                .await
                .unwrap();
        }
        assert_eq!(project_change(&store).await, 1, "a second step");
        assert_eq!(
            titles(&store, &owners).await,
            BTreeSet::from(["first".into()])
        );

        let edit = [PatchOp::set("/title", "edited")];
        store
            .patch(Container::Posts, "p1", "p1", &edit, None)
            .await
            .unwrap();
        assert_eq!(project_change(&store).await, 1);
        assert_eq!(
            titles(&store, &owners).await,
            BTreeSet::from(["edited".into()])
        );
        // Delivered again, the same change writes nothing.
        let p = store
            .read(Container::Posts, "p1", "p1")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            project_posts(&store, &[&one(Container::Posts, &p)])
                .await
                .unwrap(),
            0
        );
    }
}
