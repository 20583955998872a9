//! Bookmarks: a user's saved posts. Two kinds of item, both this module's:
//! - [`Bookmark`], `bookmark-<U>` (`type: bookmark`) in post P's partition of `posts`: user U
//!   bookmarked P. The fact, written by the request (`crate::api::bookmarks`); taking it back is
//!   a mark, so the change feed carries it. In the post's partition, like its likes: a post's
//!   bookmarkers are one query of one partition, and a post's deletion marks them with its own
//!   items (`super::erase`).
//! - [`Bookmarked`], `bookmarked-<P>` (`type: bookmarked`) in U's partition of `users`: the copy
//!   of P that U's bookmarks list shows (the short form, its counts included, dated when U
//!   bookmarked it), so that the list is one query of one partition, newest bookmark first.
//!
//! The main lane keeps the copies and the post's `bookmarkCount` ([`POSTS`]): a bookmark's change
//! writes (or removes) its one copy and recounts the post's live bookmarks (a `COUNT` in the
//! partition, set only when it differs and only if the post is still at the version read); a
//! change of a bookmarked post whose copy would differ from what its job item records (an edit,
//! its author's rename, a like or comment: the list shows the counts) rewrites every copy, a page
//! of [`PAGE`] bookmarkers a step ([`super::fanout`]), the job item `timelineJob-bookmarks-<P>` in
//! the author's partition carrying the cursor through the users feed ([`STEPS`]). A post whose
//! stored `bookmarkCount` is 0 is passed over without a read. A deleted post, an erased author
//! or bookmarker: the bookmarks are marked with the other items (`super::erase`), and each mark
//! removes its copy.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::engine::{
    apply_one, current_job, delete_item, failed, newest, read_job, read_not_older, save_job, wrote,
    Unit, JOB,
};
use super::fanout::{self, Copies, Owners};
use super::posts::counters::is_recheck;
use super::write::{str_field, Write};
use crate::domain::{is_deleted, now, to_value, Kind, PatchOp, Post, DELETED, TOMBSTONE_TTL_SECS};
use crate::store::{retry, Container, Query, Store, StoreError, StoreResult};

/// `type` of a bookmark, in its post's partition of `posts`.
pub const BOOKMARK: &str = "bookmark";
/// `type` of a bookmarked post's copy, in the bookmarking user's partition of `users`.
pub const BOOKMARKED: &str = "bookmarked";
/// Bookmarkers whose copies one step writes.
pub const PAGE: u32 = 200;

/// User `user_id`'s bookmark of post `post_id`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Bookmark {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub post_id: String,
    pub user_id: String,
    /// When it was made: the order of the user's list.
    pub creation_date: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deleted: bool,
}

impl Bookmark {
    pub fn new(post_id: &str, user_id: &str) -> Bookmark {
        Bookmark {
            id: Bookmark::id_of(user_id),
            kind: BOOKMARK.into(),
            post_id: post_id.into(),
            user_id: user_id.into(),
            creation_date: now(),
            deleted: false,
        }
    }

    /// The id of `user_id`'s bookmark of a post (so a repeat is a conflict).
    pub fn id_of(user_id: &str) -> String {
        format!("{BOOKMARK}-{user_id}")
    }

    /// A stored item as a bookmark, live or marked, if it reads as one.
    pub fn read(item: &Value) -> Option<Bookmark> {
        Bookmark::deserialize(item)
            .ok()
            .filter(|b| b.kind == BOOKMARK)
    }
}

/// The patch marking a bookmark deleted.
pub fn tombstone_ops() -> Vec<PatchOp> {
    vec![
        PatchOp::set(&format!("/{DELETED}"), true),
        PatchOp::set("/ttl", TOMBSTONE_TTL_SECS),
    ]
}

/// The copy of a bookmarked post in its bookmarker's partition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Bookmarked {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    /// The bookmarker.
    pub user_id: String,
    pub post_id: String,
    /// The bookmark's date (the list's order), not the post's.
    pub creation_date: String,
    /// The post as the list shows it ([`Bookmarked::shown`]).
    pub post: Post,
}

impl Bookmarked {
    pub fn id_of(post_id: &str) -> String {
        format!("{BOOKMARKED}-{post_id}")
    }

    /// What a copy shows of `post`: its short form, without its bookmark count (each bookmark
    /// would rewrite every other bookmarker's copy).
    pub fn shown(post: &Post) -> Post {
        Post {
            bookmark_count: 0,
            ..post.summary()
        }
    }

    /// `owner`'s copy of `post`, bookmarked at `date`.
    pub fn new(owner: &str, date: &str, post: &Post) -> Bookmarked {
        Bookmarked {
            id: Bookmarked::id_of(&post.post_id),
            kind: BOOKMARKED.into(),
            user_id: owner.into(),
            post_id: post.post_id.clone(),
            creation_date: date.into(),
            post: Bookmarked::shown(post),
        }
    }

    pub fn to_item(&self) -> Value {
        to_value(self)
    }
}

/// A change of post `post_id`'s bookmarks as the projection reads it (`user_id` `None`: only
/// recount): what `handler verify --repair` replays.
pub fn notification(post_id: &str, user_id: Option<&str>) -> Value {
    json!({
        "id": Bookmark::id_of(user_id.unwrap_or_default()), "type": BOOKMARK,
        "postId": post_id, "userId": user_id,
    })
}

/// The main lane's projection of the posts feed: bookmarks' copies and counts, and bookmarked
/// posts' changes carried to their copies ([`project_posts`]).
pub const POSTS: Unit = Unit {
    name: "bookmarks",
    feed: Container::Posts,
    watches: &["post", BOOKMARK],
    reads: &[Container::Posts, Container::Users],
    writes: &[Container::Posts, Container::Users],
    project: |store, changes| {
        Box::pin(async move {
            project_posts(store, changes)
                .await
                .map(wrote)
                .map_err(|e| failed(Container::Posts, changes, e))
        })
    },
};

/// The main lane's projection of the users feed: the next step of a bookmarked post's fan-out.
pub const STEPS: Unit = Unit {
    name: "bookmark-steps",
    feed: Container::Users,
    watches: &[JOB],
    reads: &[Container::Users, Container::Posts],
    writes: &[Container::Users],
    project: |store, changes| {
        Box::pin(async move {
            project_steps(store, changes)
                .await
                .map(wrote)
                .map_err(|e| failed(Container::Users, changes, e))
        })
    },
};

fn job_id(post_id: &str) -> String {
    format!("{JOB}-bookmarks-{post_id}")
}

/// The posts feed: each bookmark changed (its copy, then its post's count), then each post
/// changed. Returns the writes made.
pub async fn project_posts(store: &dyn Store, changes: &[Value]) -> StoreResult<usize> {
    let mut marks: BTreeMap<&str, BTreeSet<Option<&str>>> = BTreeMap::new();
    let mut posts = BTreeMap::new();
    for doc in changes {
        let Some(post_id) = str_field(doc, "postId") else {
            continue;
        };
        if str_field(doc, Kind::FIELD) == Some(BOOKMARK) {
            let user = str_field(doc, "userId");
            marks.entry(post_id).or_default().insert(user);
        } else if Kind::of(doc) == Some(Kind::Post) && !is_recheck(doc) {
            posts.insert(post_id, doc);
        }
    }
    let mut written = 0;
    for (post_id, users) in marks {
        let post = live_post(store, changes, post_id).await?;
        for user in users.into_iter().flatten() {
            written += bookmark_changed(store, changes, post_id, user, post.as_ref()).await?;
        }
        if post.is_some() {
            written += recount(store, post_id).await?;
        }
    }
    for (post_id, delivered) in posts {
        let author = str_field(delivered, "userId").unwrap_or_default();
        let bookmarked = delivered
            .get("bookmarkCount")
            .and_then(Value::as_u64)
            .is_some_and(|n| n > 0);
        if !bookmarked {
            continue;
        }
        if is_deleted(delivered) {
            written += delete_item(store, Container::Users, author, &job_id(post_id)).await?;
        } else {
            written += post_changed(store, changes, post_id).await?;
        }
    }
    Ok(written)
}

/// Post `post_id` as it is now (never older than its change in `changes`), unless gone or
/// deleted.
async fn live_post(
    store: &dyn Store,
    changes: &[Value],
    post_id: &str,
) -> StoreResult<Option<Post>> {
    let changed = super::engine::newest_change(changes, Kind::Post, post_id);
    let post = read_not_older(store, Container::Posts, post_id, post_id, changed).await?;
    Ok(post
        .filter(|p| !is_deleted(p))
        .and_then(|p| Post::deserialize(&p).ok()))
}

/// `user`'s bookmark of `post_id` changed: live on a live post, its copy is written; live on a
/// post gone, it is marked (it raced the post's deletion); marked or gone, its copy goes.
async fn bookmark_changed(
    store: &dyn Store,
    changes: &[Value],
    post_id: &str,
    user: &str,
    post: Option<&Post>,
) -> StoreResult<usize> {
    let id = Bookmark::id_of(user);
    let changed = newest(changes, |d| {
        str_field(d, "id") == Some(&id) && str_field(d, "postId") == Some(post_id)
    });
    let read = read_not_older(store, Container::Posts, post_id, &id, changed).await?;
    let live = read
        .as_ref()
        .and_then(Bookmark::read)
        .filter(|b| !b.deleted);
    let copy_id = Bookmarked::id_of(post_id);
    match (live, post) {
        (Some(b), Some(p)) => {
            let copy = Bookmarked::new(user, &b.creation_date, p).to_item();
            apply_one(store, &Write::upsert(Container::Users, user, copy)).await?;
            Ok(1)
        }
        (Some(_), None) => {
            let mark = Write::patch(Container::Posts, post_id, &id, tombstone_ops());
            apply_one(store, &mark).await?;
            Ok(1 + delete_item(store, Container::Users, user, &copy_id).await?)
        }
        (None, _) => delete_item(store, Container::Users, user, &copy_id).await,
    }
}

/// Set post `post_id`'s `bookmarkCount` to its live bookmarks, if it differs, and only if the
/// post is still at the version read (else it is read and counted again). Returns the writes.
pub async fn recount(store: &dyn Store, post_id: &str) -> StoreResult<usize> {
    let q = Query::partition(post_id).eq(Kind::FIELD, BOOKMARK).live();
    for _ in 0..4 {
        let Some(post) = retry(|| store.read(Container::Posts, post_id, post_id))
            .await?
            .filter(|p| !is_deleted(p))
        else {
            return Ok(0);
        };
        let n = retry(|| store.count(Container::Posts, &q)).await?;
        if post
            .get("bookmarkCount")
            .and_then(Value::as_u64)
            .unwrap_or(0)
            == n
        {
            return Ok(0);
        }
        let ops = [PatchOp::set("/bookmarkCount", n)];
        let etag = str_field(&post, "_etag");
        match retry(|| store.patch(Container::Posts, post_id, post_id, &ops, etag)).await {
            Ok(_) => return Ok(1),
            Err(StoreError::PreconditionFailed) => continue,
            Err(StoreError::NotFound) => return Ok(0),
            Err(e) => return Err(e),
        }
    }
    Err(StoreError::Other(format!(
        "the bookmark count of post {post_id} kept changing while it was set"
    )))
}

/// A bookmarked post changed: unless its job item records the copy as it shows now, its
/// fan-out starts over (its first page now).
async fn post_changed(store: &dyn Store, changes: &[Value], post_id: &str) -> StoreResult<usize> {
    let Some(post) = live_post(store, changes, post_id).await? else {
        return Ok(0);
    };
    let shown = Bookmarked::shown(&post);
    let entry = to_value(&shown);
    let job = read_job(store, &post.user_id, &job_id(post_id)).await?;
    if post.bookmark_count == 0 || job.as_ref().and_then(|j| j.get("entry")) == Some(&entry) {
        return Ok(0);
    }
    let (written, next) = fan_out(store, &shown, None).await?;
    let saved = save_job(store, &post.user_id, job.as_ref(), job_item(&entry, next)).await?;
    Ok(written + usize::from(saved))
}

fn job_item(entry: &Value, cursor: Option<String>) -> Value {
    let post_id = str_field(entry, "postId").unwrap_or_default();
    json!({
        "id": job_id(post_id), "job": "bookmarks", "postId": post_id,
        "entry": entry, "cursor": cursor, "done": cursor.is_none(),
    })
}

/// The users feed: the next step of each bookmarks job delivered.
pub async fn project_steps(store: &dyn Store, changes: &[Value]) -> StoreResult<usize> {
    let mut written = 0;
    for doc in changes {
        if str_field(doc, Kind::FIELD) != Some(JOB) || str_field(doc, "job") != Some("bookmarks") {
            continue;
        }
        let Some(author) = str_field(doc, "userId") else {
            continue;
        };
        let Some(job) = current_job(store, author, doc).await? else {
            continue;
        };
        let Some(shown) = job.get("entry").and_then(|e| Post::deserialize(e).ok()) else {
            continue;
        };
        let (n, next) = fan_out(store, &shown, str_field(&job, "cursor")).await?;
        let saved = save_job(store, author, Some(&job), job_item(&job["entry"], next)).await?;
        written += n + usize::from(saved);
    }
    Ok(written)
}

/// One page of post `shown`'s bookmarkers (from `cursor`) given its copy
/// ([`fanout::step_with`]). Returns the writes made and where the next page starts.
async fn fan_out(
    store: &dyn Store,
    shown: &Post,
    cursor: Option<&str>,
) -> StoreResult<(usize, Option<String>)> {
    let post_id = shown.post_id.as_str();
    let copies = Copies {
        post_id,
        container: Container::Users,
        id: Bookmarked::id_of(post_id),
        // Each copy is dated by its bookmark: made by the step below from the bookmark itself.
        item: &|_| Value::Null,
    };
    let bookmarks = || Query::partition(post_id).eq(Kind::FIELD, BOOKMARK);
    let still = |users: &[&str]| bookmarks().any_of("userId", users.iter().map(|u| u.to_string()));
    let owners = Owners {
        container: Container::Posts,
        query: bookmarks().live().limit(PAGE),
        owner: "userId",
        still: &still,
        still_owner: "userId",
    };
    let copy = |owner: &str, bookmark: &Value| {
        let date = str_field(bookmark, "creationDate").unwrap_or_default();
        Bookmarked::new(owner, date, shown).to_item()
    };
    let step = fanout::step_with(store, &copies, &owners, cursor, &copy).await?;
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
            content: "c".into(),
            comment_count: 0,
            like_count: 0,
            creation_date: "2026-01-01T00:00:00.000Z".into(),
            updated_at: None,
            bookmark_count: bookmarks,
        }
    }

    /// Run the post's change, then each job step it leaves, as the feeds would deliver them.
    async fn project_change(store: &EmbeddedStore) -> usize {
        let p = store
            .read(Container::Posts, "p1", "p1")
            .await
            .unwrap()
            .unwrap();
        let mut steps = 0;
        project_posts(store, &[p]).await.unwrap();
        loop {
            let job = store
                .read(Container::Users, "bob", &job_id("p1"))
                .await
                .unwrap();
            let Some(job) = job.filter(|j| j["done"] == false) else {
                return steps;
            };
            project_steps(store, &[job]).await.unwrap();
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
        assert_eq!(project_posts(&store, &[p]).await.unwrap(), 0);
    }
}
