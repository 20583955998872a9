//! The newest posts of the *merged* authors (more followers than the timeline fan-out limit),
//! kept together in one shared partition, so that a timeline read finds the posts of every
//! merged author its reader follows with one query.
//!
//! Where: container `feed`, partition `"merged"` (the container's partition key is `/type`, so
//! every item has `type: "merged"`). The feed itself lives in partition `"post"`, and every read
//! of it (`GET /api/feed`, its projection, `verify`, `--repair`) queries that partition alone.
//!
//! An item: `{ id: <postId>, type: "merged", postId, userId: <the author>, userUsername, title,
//! content (short form), creationDate }`: what changes rarely. No counts: a timeline reads those
//! from the post itself when it shows it, so a like or a comment writes nothing here.
//!
//! Each author keeps at most their [`TIMELINE_SIZE`] newest posts here (a timeline shows no
//! more). Every function is idempotent (a second call with the same input writes nothing), and
//! bounded: it reads at most [`PAGE`] of an author's items at a time, writes at most that many,
//! and never deletes one of an author's [`TIMELINE_SIZE`] newest, whatever runs concurrently
//! (an item beyond the newest of what was read is beyond the newest of the whole).

use std::collections::BTreeMap;

use futures::stream::{self, StreamExt, TryStreamExt};
use serde::Deserialize;
use serde_json::Value;

use super::engine::{CONCURRENCY, PAGE};
use crate::domain::follows::{MergedPost, MERGED, TIMELINE_SIZE};
use crate::domain::{Kind, Post};
use crate::store::{retry, Container, Order, Query, Store, StoreError, StoreResult};

/// The partition (and `type`) of the merged authors' posts in `feed`.
pub const PARTITION: &str = MERGED;

/// The stored item for `post` (any form; its content is cut to the short form): a
/// [`MergedPost`].
pub fn item(post: &Post) -> Value {
    MergedPost::new(post).to_item()
}

/// The query of `author`'s items, newest first.
pub fn of_author(author_id: &str) -> Query {
    Query::partition(PARTITION)
        .eq("userId", author_id)
        .order_by_creation(Order::Desc)
}

/// The query of the newest items of any of `authors`, newest first (what a timeline read asks).
pub fn of_authors(authors: impl IntoIterator<Item = String>, limit: u32) -> Query {
    Query::partition(PARTITION)
        .any_of("userId", authors)
        .order_by_creation(Order::Desc)
        .limit(limit)
}

/// Where a rename fan-out finds the items carrying `author_id`'s name.
pub fn naming(author_id: &str) -> (Container, Query) {
    (
        Container::Feed,
        Query::partition(PARTITION).eq("userId", author_id),
    )
}

/// Copy `post` (its current state, not deleted) among its author's items, and trim that author
/// to their [`TIMELINE_SIZE`] newest. A post older than all of those is not written. Returns
/// the writes made.
pub async fn upsert_post(store: &dyn Store, post: &Post) -> StoreResult<usize> {
    sync(store, &post.user_id, vec![MergedPost::new(post)]).await
}

/// Remove post `post_id`'s item (one delete; nothing when it is not there). Returns the writes
/// made.
pub async fn remove_post(store: &dyn Store, post_id: &str) -> StoreResult<usize> {
    delete(store, post_id).await.map(usize::from)
}

/// Copy `author_id`'s [`TIMELINE_SIZE`] newest live posts, under the name `username`, from their
/// post copies in `users` (the author just went over the fan-out limit, or their items are being
/// repaired). Returns the writes made.
pub async fn copy_author(store: &dyn Store, author_id: &str, username: &str) -> StoreResult<usize> {
    let q = Query::partition(author_id)
        .of_kind(Kind::Post)
        .live()
        .order_by_creation(Order::Desc)
        .limit(TIMELINE_SIZE as u32);
    let page = retry(|| store.query(Container::Users, &q)).await?;
    let wanted = page
        .items
        .into_iter()
        .filter_map(|i| serde_json::from_value::<Post>(i).ok())
        .filter(|p| p.user_id == author_id)
        .map(|mut p| {
            p.user_username = username.to_string();
            MergedPost::new(&p)
        })
        .collect();
    sync(store, author_id, wanted).await
}

/// Remove every item of `author_id` (back under the fan-out limit, or erased), a page at a
/// time. Returns the writes made.
pub async fn remove_author(store: &dyn Store, author_id: &str) -> StoreResult<usize> {
    let q = of_author(author_id).limit(PAGE);
    let mut removed = 0;
    let mut last_first: Option<String> = None;
    loop {
        let page = retry(|| store.query(Container::Feed, &q)).await?;
        let ids: Vec<String> = page.items.iter().filter_map(id_of).collect();
        let Some(first) = ids.first().cloned() else {
            return Ok(removed);
        };
        // The first item again means the deletes did not take: stop, not spin.
        if last_first.as_ref() == Some(&first) {
            return Err(StoreError::Other(
                "merged items stay after being deleted".into(),
            ));
        }
        last_first = Some(first);
        removed += delete_all(store, ids).await?;
    }
}

/// What orders a stored item among its author's: its date and id, whatever else it holds (an
/// item that does not read as a [`MergedPost`] is still ranked, so it is trimmed or replaced).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Ranked {
    id: String,
    creation_date: String,
}

fn ranked(item: &Value) -> Option<Ranked> {
    Ranked::deserialize(item).ok()
}

fn id_of(item: &Value) -> Option<String> {
    ranked(item).map(|r| r.id)
}

/// An item as stored, without what the store adds (`_etag`, `_ts`, …).
fn content(item: &Value) -> Value {
    let mut item = item.clone();
    if let Some(o) = item.as_object_mut() {
        o.retain(|k, _| !k.starts_with('_'));
    }
    item
}

/// Whether the delete found the item.
async fn delete(store: &dyn Store, id: &str) -> StoreResult<bool> {
    match retry(|| store.delete(Container::Feed, PARTITION, id)).await {
        Ok(()) => Ok(true),
        Err(StoreError::NotFound) => Ok(false),
        Err(e) => Err(e),
    }
}

async fn delete_owned(store: &dyn Store, id: String) -> StoreResult<bool> {
    delete(store, &id).await
}

async fn upsert(store: &dyn Store, item: Value) -> StoreResult<()> {
    retry(|| store.upsert(Container::Feed, PARTITION, item.clone()))
        .await
        .map(drop)
}

async fn delete_all(store: &dyn Store, ids: Vec<String>) -> StoreResult<usize> {
    let deletes: Vec<_> = ids.into_iter().map(|id| delete_owned(store, id)).collect();
    let found: Vec<bool> = stream::iter(deletes)
        .buffer_unordered(CONCURRENCY)
        .try_collect()
        .await?;
    Ok(found.into_iter().filter(|f| *f).count())
}

/// Bring `author`'s items in line with `wanted` (items of theirs, at most [`TIMELINE_SIZE`]):
/// each wanted item among the author's [`TIMELINE_SIZE`] newest is written unless stored as
/// it is; every stored item beyond those newest is deleted. Reads the author's newest
/// `TIMELINE_SIZE + PAGE` items, and again while a full page gave up items.
async fn sync(store: &dyn Store, author: &str, wanted: Vec<MergedPost>) -> StoreResult<usize> {
    let q = of_author(author).limit(TIMELINE_SIZE as u32 + PAGE);
    let mut wanted: Vec<MergedPost> = wanted
        .into_iter()
        .filter(|w| w.post.user_id == author)
        .collect();
    let mut written = 0;
    let mut last_first_beyond: Option<String> = None;
    loop {
        let page = retry(|| store.query(Container::Feed, &q)).await?;
        // Newest first: (creationDate, id) → (stored, wanted).
        let mut all: BTreeMap<(String, String), (Option<Value>, Option<Value>)> = BTreeMap::new();
        for stored in &page.items {
            if let Some(r) = ranked(stored) {
                all.entry((r.creation_date, r.id)).or_default().0 = Some(content(stored));
            }
        }
        for w in wanted.drain(..) {
            let k = (w.post.creation_date.clone(), w.post.id.clone());
            all.entry(k).or_default().1 = Some(w.to_item());
        }
        let mut upserts = Vec::new();
        let mut deletes = Vec::new();
        for (rank, ((_, id), (stored, want))) in all.into_iter().rev().enumerate() {
            if rank < TIMELINE_SIZE {
                if let Some(w) = want.filter(|w| stored.as_ref() != Some(w)) {
                    upserts.push(w);
                }
            } else if stored.is_some() {
                deletes.push(id);
            }
        }
        // One id under two dates (a post's date does not change, but a store edited by hand
        // may hold another): the upsert replaces the stored item, which must not be deleted.
        deletes.retain(|id| !upserts.iter().any(|u| id_of(u).as_deref() == Some(id)));
        let first_beyond = deletes.first().cloned();
        if first_beyond.is_some() && first_beyond == last_first_beyond {
            return Err(StoreError::Other(
                "merged items stay after being trimmed".into(),
            ));
        }
        last_first_beyond = first_beyond;
        written += upserts.len();
        let upserts: Vec<_> = upserts.into_iter().map(|w| upsert(store, w)).collect();
        stream::iter(upserts)
            .buffer_unordered(CONCURRENCY)
            .try_collect::<Vec<()>>()
            .await?;
        let trimmed = delete_all(store, deletes).await?;
        written += trimmed;
        // Another look only when the page was full and gave up items.
        if page.continuation.is_none() || trimmed == 0 {
            return Ok(written);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::FEED_PK;
    use crate::store::embedded::EmbeddedStore;

    fn open() -> (tempfile::TempDir, EmbeddedStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(&dir.path().join("blog.db")).unwrap();
        (dir, store)
    }

    fn post(author: &str, n: usize) -> Post {
        Post {
            id: format!("{author}-p{n:04}"),
            kind: Kind::Post,
            post_id: format!("{author}-p{n:04}"),
            user_id: author.into(),
            user_username: format!("{author}-name"),
            title: format!("title {n}"),
            description: None,
            content: "c".repeat(400),
            comment_count: 3,
            like_count: 7,
            creation_date: format!("2026-01-01T{:02}:{:02}:00.000Z", n / 60, n % 60),
            updated_at: None,
            bookmark_count: 0,
            tags: Vec::new(),
        }
    }

    async fn ids_of(store: &EmbeddedStore, author: &str) -> Vec<String> {
        let page = store
            .query(Container::Feed, &of_author(author).limit(1000))
            .await
            .unwrap();
        page.items.iter().filter_map(id_of).collect()
    }

    #[tokio::test]
    async fn a_post_is_copied_in_short_form_without_counts_once() {
        let (_d, store) = open();
        let p = post("ann", 1);
        assert_eq!(upsert_post(&store, &p).await.unwrap(), 1);
        let stored = store
            .read(Container::Feed, PARTITION, &p.id)
            .await
            .unwrap()
            .unwrap();
        let read = MergedPost::deserialize(&stored).unwrap().post;
        assert_eq!(
            (read.user_id.as_str(), read.user_username.as_str()),
            ("ann", "ann-name")
        );
        assert_eq!(read.content, p.summary().content);
        assert!(read.content.len() < 400);
        assert!(stored.get("likeCount").is_none() && stored.get("commentCount").is_none());
        // Again, and with other counts: nothing to write.
        let mut liked = p.clone();
        liked.like_count = 8;
        assert_eq!(upsert_post(&store, &liked).await.unwrap(), 0);
        // An edit is written.
        let mut edited = p.clone();
        edited.title = "new".into();
        assert_eq!(upsert_post(&store, &edited).await.unwrap(), 1);
        let stored = store.read(Container::Feed, PARTITION, &p.id).await.unwrap();
        let read = MergedPost::deserialize(&stored.unwrap()).unwrap();
        assert_eq!(read.post.title, "new");
    }

    #[tokio::test]
    async fn each_author_keeps_only_their_newest_posts() {
        let (_d, store) = open();
        for n in 0..TIMELINE_SIZE + 5 {
            upsert_post(&store, &post("ann", n)).await.unwrap();
        }
        upsert_post(&store, &post("bob", 0)).await.unwrap();
        let ann = ids_of(&store, "ann").await;
        assert_eq!(ann.len(), TIMELINE_SIZE);
        assert_eq!(ann.first().unwrap(), &post("ann", TIMELINE_SIZE + 4).id);
        assert_eq!(ann.last().unwrap(), &post("ann", 5).id);
        assert_eq!(ids_of(&store, "bob").await, vec![post("bob", 0).id]);
        // A post older than all that are kept is not written at all.
        assert_eq!(upsert_post(&store, &post("ann", 2)).await.unwrap(), 0);
        assert_eq!(ids_of(&store, "ann").await, ann);
    }

    #[tokio::test]
    async fn a_crowded_author_is_trimmed_a_page_at_a_time() {
        let (_d, store) = open();
        // More than one page beyond the kept ones, written behind the module's back.
        let n = TIMELINE_SIZE + 2 * PAGE as usize + 7;
        for i in 0..n {
            store
                .upsert(Container::Feed, PARTITION, item(&post("ann", i)))
                .await
                .unwrap();
        }
        let written = upsert_post(&store, &post("ann", n)).await.unwrap();
        assert_eq!(written, 1 + (n + 1 - TIMELINE_SIZE));
        let ann = ids_of(&store, "ann").await;
        assert_eq!(ann.len(), TIMELINE_SIZE);
        assert_eq!(ann[0], post("ann", n).id);
    }

    #[tokio::test]
    async fn removing_a_post_or_an_author_touches_no_one_else() {
        let (_d, store) = open();
        for n in 0..3 {
            upsert_post(&store, &post("ann", n)).await.unwrap();
            upsert_post(&store, &post("bob", n)).await.unwrap();
        }
        assert_eq!(remove_post(&store, &post("ann", 1).id).await.unwrap(), 1);
        assert_eq!(remove_post(&store, &post("ann", 1).id).await.unwrap(), 0);
        assert_eq!(
            ids_of(&store, "ann").await,
            vec![post("ann", 2).id, post("ann", 0).id]
        );
        for n in 3..PAGE as usize + 10 {
            store
                .upsert(Container::Feed, PARTITION, item(&post("ann", n)))
                .await
                .unwrap();
        }
        assert_eq!(
            remove_author(&store, "ann").await.unwrap(),
            PAGE as usize + 9
        );
        assert_eq!(remove_author(&store, "ann").await.unwrap(), 0);
        assert!(ids_of(&store, "ann").await.is_empty());
        assert_eq!(ids_of(&store, "bob").await.len(), 3);
    }

    #[tokio::test]
    async fn an_author_is_copied_from_their_post_copies_under_their_current_name() {
        let (_d, store) = open();
        for n in 0..TIMELINE_SIZE + 3 {
            let copy = crate::domain::to_value(&post("ann", n).summary());
            store.upsert(Container::Users, "ann", copy).await.unwrap();
        }
        // A deleted one is not copied; another user's items in the partition are not posts.
        let mut gone = crate::domain::to_value(&post("ann", TIMELINE_SIZE + 3).summary());
        gone["deleted"] = true.into();
        store.upsert(Container::Users, "ann", gone).await.unwrap();
        let written = copy_author(&store, "ann", "annie").await.unwrap();
        assert_eq!(written, TIMELINE_SIZE);
        let ann = ids_of(&store, "ann").await;
        assert_eq!(ann.len(), TIMELINE_SIZE);
        assert_eq!(ann[0], post("ann", TIMELINE_SIZE + 2).id);
        let first = store
            .read(Container::Feed, PARTITION, &ann[0])
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            MergedPost::deserialize(&first).unwrap().post.user_username,
            "annie"
        );
        assert_eq!(copy_author(&store, "ann", "annie").await.unwrap(), 0);
        // A rename fan-out finds every item carrying the name.
        let (container, q) = naming("ann");
        assert_eq!(container, Container::Feed);
        let q = q.ne("userUsername", "anna").live().limit(PAGE);
        let page = store.query(container, &q).await.unwrap();
        assert_eq!(page.items.len(), TIMELINE_SIZE);
    }

    #[tokio::test]
    async fn the_feed_does_not_see_the_merged_items() {
        let (_d, store) = open();
        upsert_post(&store, &post("ann", 1)).await.unwrap();
        let feed = Query::partition(FEED_PK)
            .of_kind(Kind::Post)
            .order_by_creation(Order::Desc);
        assert!(store
            .query(Container::Feed, &feed)
            .await
            .unwrap()
            .items
            .is_empty());
        let all = store
            .query(Container::Feed, &of_authors(["ann".to_string()], 10))
            .await
            .unwrap();
        assert_eq!(all.items.len(), 1);
    }
}
