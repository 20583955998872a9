//! The tags projection (main lane, `posts` feed): each tagged post's short form copied into
//! the partition of each of its tags, so that a tag's page is one query of one partition, and
//! each tag's count of posts, so that the tag list is one query of one partition too.
//!
//! Where (`feed`, partition key `type`; [`crate::domain::tags`]):
//! - `tag:<tag>`: one copy per post carrying the tag, its id the post's: the post as a copy
//!   outside its author's lists shows it ([`Post::as_copied`]: the short form, the author's
//!   current name, the tags, and no counts: a tag's page reads them from the post when shown)
//!   with `type` the partition.
//! - `tagged`: one record per tagged post, its id the post's: the short form as the copies were
//!   last written, tags included. A change of the post is compared with it (one point read): a
//!   change that alters nothing a copy holds writes nothing, and an edit that drops a tag finds
//!   the copy to remove there.
//! - `tagCount`: one item per tag some post carries, its id the tag: `postCount`, the number of
//!   copies in the tag's partition (a `COUNT` of that partition, set only when a post joined or
//!   left the tag), and `creationDate`, which the stores' ordered queries order by: here the
//!   count, zero-padded, so the most used tags come first. A count that reaches zero is deleted
//!   ([`set_tag_count`]), so the items are as many as the tags in use.
//!
//! Each change of a post is a notification: the post is read as it is now (never older than
//! the change), and its copies are brought in line with it: written when they differ from the
//! record, removed from the tags it no longer carries (or all of them when it is deleted, its
//! account erased, or renamed: a rename patches the post, which comes through here). The record
//! is written last, so a batch that fails half-way is projected again whole. A like or a comment
//! changes nothing a copy holds, so it writes no copy and no record (one point read of the
//! record); counts a record or copy written by an earlier release holds are not compared.
//!
//! **Counts stay exact under replay and concurrency.** A count is never incremented: it is set
//! to the `COUNT` of the tag's partition, read after the copy was written or removed, and set
//! only if the count item is still at the version read before the `COUNT` (else read, counted
//! and set again). Whichever projection sets last counted after every copy written before its
//! read; a copy written after that read has its own projection's set come later, or find the
//! item changed and count again.

use std::collections::BTreeSet;

use serde::Deserialize;
use serde_json::Value;

use super::change::{Change, ChangeKind, Item};
use super::engine::{apply_all, failed, newest_change, read_not_older, wrote, Unit, CONCURRENCY};
use super::write::Write;
use crate::domain::tags::{self, TagCount, COUNTS, TAGGED};
use crate::domain::{is_deleted, is_live, Kind, Meta, Post};
use crate::store::{retry, Container, Query, Store, StoreError, StoreResult};

/// The tags projection, main lane.
pub const UNIT: Unit = Unit {
    name: "tags",
    feed: Container::Posts,
    watches: &[ChangeKind::Post],
    reads: &[Container::Posts, Container::Feed],
    writes: &[Container::Feed],
    project: |store, changes| {
        Box::pin(async move {
            project(store, changes)
                .await
                .map(wrote)
                .map_err(|e| failed(Container::Posts, changes, e))
        })
    },
};

/// Attempts at setting a tag's count before the batch fails (each lost only to another
/// projection's set of the same count, which is then retried).
const COUNT_ATTEMPTS: usize = 8;

/// The posts feed: every changed post's tag copies and the counts of the tags it joined or
/// left. Returns the writes made.
pub async fn project(store: &dyn Store, changes: &[&Change]) -> StoreResult<usize> {
    let posts: BTreeSet<&str> = changes
        .iter()
        .filter_map(|c| match &c.item {
            Item::Post(a) => Some(a.id.as_str()),
            _ => None,
        })
        .collect();
    let mut written = 0;
    for id in posts {
        let changed = newest_change(changes, ChangeKind::Post, id);
        if changed.is_some_and(never_tagged) {
            continue;
        }
        let post = read_not_older(store, Container::Posts, id, id, changed).await?;
        written += sync_post(store, id, post.as_ref()).await?;
    }
    Ok(written)
}

/// Whether a post, as a change delivered it, never carried a tag up to that change: it has none,
/// was never edited (tags are given only on create and edit) and is not deleted (a tombstone's
/// tags are emptied, `crate::domain::tombstone_ops`). Such a change is passed over without a
/// read: nothing of the post's is in a tag, and an edit that tags it comes through as a change
/// of its own. So a like or comment on an untagged post costs nothing here.
pub fn never_tagged(doc: &Value) -> bool {
    let t = Tagging::of(doc);
    t.tags.is_empty() && t.updated_at.is_none() && !is_deleted(doc)
}

/// What a post, a change of one or a tag record says of its tags, read without reading it whole
/// (what does not read, none).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Tagging {
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default)]
    updated_at: Option<String>,
}

impl Tagging {
    fn of(item: &Value) -> Tagging {
        Tagging::deserialize(item).unwrap_or_default()
    }
}

/// What post `id`'s record and copies should be, from the post as stored (`None`: gone):
/// the post as a copy shows it ([`Post::as_copied`]), or nothing for a deleted or untagged post
/// (or one that does not read as a post).
pub fn wanted(post: Option<&Value>) -> Option<Post> {
    let post = post.filter(|p| is_live(p, Kind::Post))?;
    let post: Post = serde_json::from_value(post.clone()).ok()?;
    (!post.tags.is_empty()).then(|| post.as_copied())
}

/// The stored form of `post` (a short form) in partition `place` of `feed`: the post's fields,
/// with `type` the partition.
pub fn item(post: &Post, place: &str) -> Value {
    let mut v = crate::domain::to_value(post);
    v[Kind::FIELD] = place.into();
    v
}

/// A stored copy or record as the post it holds (its `type` read as `post`), counts and all.
pub fn post_of(item: &Value) -> Option<Post> {
    let mut v = item.clone();
    v[Kind::FIELD] = Kind::Post.into();
    serde_json::from_value(v).ok()
}

/// A stored copy or record as it would be written today: [`post_of`] without the counts an
/// earlier release copied (a copy holds none; they are read from the post when shown).
pub fn copied_of(item: &Value) -> Option<Post> {
    post_of(item).map(|p| p.as_copied())
}

/// Bring post `id`'s copies, record and counts in line with `post` (as read now). Returns the
/// writes made.
pub async fn sync_post(store: &dyn Store, id: &str, post: Option<&Value>) -> StoreResult<usize> {
    let want = wanted(post);
    let record = retry(|| store.read(Container::Feed, TAGGED, id)).await?;
    let had: Option<Post> = record.as_ref().and_then(copied_of);
    if record.is_none() && want.is_none() {
        return Ok(0);
    }
    if record.is_some() && had == want {
        return Ok(0);
    }
    let old_tags: BTreeSet<String> = match (&had, &record) {
        (Some(p), _) => p.tags.iter().cloned().collect(),
        // A record that does not read as a post: whatever tags it names.
        (None, Some(r)) => Tagging::of(r).tags.into_iter().collect(),
        (None, None) => BTreeSet::new(),
    };
    let new_tags: BTreeSet<String> = want
        .as_ref()
        .map(|p| p.tags.iter().cloned().collect())
        .unwrap_or_default();
    let mut writes: Vec<Write> = Vec::new();
    if let Some(p) = &want {
        for t in &new_tags {
            let place = tags::partition(t);
            writes.push(Write::upsert(Container::Feed, &place, item(p, &place)));
        }
    }
    for t in old_tags.difference(&new_tags) {
        writes.push(Write::delete(Container::Feed, tags::partition(t), id));
    }
    apply_all(store, &writes, CONCURRENCY).await?;
    let mut written = writes.len();
    for t in old_tags.symmetric_difference(&new_tags) {
        written += set_tag_count(store, t).await?;
    }
    let last = match &want {
        Some(p) => Write::upsert(Container::Feed, TAGGED, item(p, TAGGED)),
        None => Write::delete(Container::Feed, TAGGED, id),
    };
    apply_all(store, std::slice::from_ref(&last), 1).await?;
    Ok(written + 1)
}

/// Remove a post's copies from the tags it carries (`post` as stored before its deletion), as
/// the request that deletes it does, so that it leaves its tags' pages at once, as it leaves the
/// feed; the change feed then removes its record and sets the counts. Returns the writes made.
pub async fn remove_copies_now(store: &dyn Store, post: &Value) -> StoreResult<usize> {
    let (Some(id), Ok(post)) = (
        Meta::of(post).id,
        serde_json::from_value::<Post>(post.clone()),
    ) else {
        return Ok(0);
    };
    let writes: Vec<Write> = post
        .tags
        .iter()
        .map(|t| Write::delete(Container::Feed, tags::partition(t), id))
        .collect();
    apply_all(store, &writes, CONCURRENCY).await?;
    Ok(writes.len())
}

/// The number of copies in `tag`'s partition: one `COUNT` of it.
pub async fn count_copies(store: &dyn Store, tag: &str) -> StoreResult<u64> {
    let q = Query::partition(tags::partition(tag));
    retry(|| store.count(Container::Feed, &q)).await
}

/// Set `tag`'s count to the number of its copies, if the count item is still as read before
/// counting (else again); a tag no copy is left in has no count item: it is deleted, again only
/// if still as read, so a post taking the tag meanwhile (whose recount replaces or creates the
/// item) wins over the delete. Returns the writes made (0 when the count was right).
pub async fn set_tag_count(store: &dyn Store, tag: &str) -> StoreResult<usize> {
    for _ in 0..COUNT_ATTEMPTS {
        let stored = retry(|| store.read(Container::Feed, COUNTS, tag)).await?;
        let version = stored
            .as_ref()
            .and_then(|s| s["_etag"].as_str())
            .map(String::from);
        // A stored count that does not read is replaced, whatever its version.
        let stored = stored.map(|s| TagCount::read(&s).ok());
        let n = count_copies(store, tag).await?;
        let item = TagCount::new(tag, n).to_item();
        let result = match &stored {
            None if n == 0 => return Ok(0),
            Some(_) if n == 0 => match &version {
                Some(etag) => {
                    retry(|| store.delete_if_match(Container::Feed, COUNTS, tag, etag)).await
                }
                None => retry(|| store.delete(Container::Feed, COUNTS, tag)).await,
            }
            .map(|()| Value::Null),
            Some(Some(s)) if s.post_count == n => return Ok(0),
            Some(s) => {
                let etag = s.as_ref().and_then(|s| s.etag.as_deref());
                retry(|| store.replace(Container::Feed, COUNTS, tag, item.clone(), etag)).await
            }
            None => retry(|| store.create(Container::Feed, COUNTS, item.clone())).await,
        };
        match result {
            Ok(_) => return Ok(1),
            Err(StoreError::PreconditionFailed | StoreError::Conflict | StoreError::NotFound) => {
                continue
            }
            Err(e) => return Err(e),
        }
    }
    Err(StoreError::Other(format!(
        "the count of tag `{tag}` kept changing while it was set"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn stored(tags: &[&str]) -> Value {
        json!({"id": "p1", "type": "post", "postId": "p1", "userId": "u1", "userUsername": "ana",
               "title": "t", "content": "c".repeat(300), "commentCount": 1, "likeCount": 2,
               "creationDate": "2026-01-01T00:00:00.000Z", "tags": tags, "_etag": "\"e\""})
    }

    #[test]
    fn a_tagged_live_post_is_copied_in_short_form() {
        let p = wanted(Some(&stored(&["rust"]))).unwrap();
        assert!(p.content.chars().count() <= 200);
        assert_eq!(
            (p.tags.clone(), p.like_count, p.comment_count),
            (vec!["rust".to_string()], 0, 0),
            "no counts"
        );
        let copy = item(&p, "tag:rust");
        assert_eq!(copy["type"], "tag:rust");
        assert_eq!(post_of(&copy), Some(p));
        assert_eq!(wanted(Some(&stored(&[]))), None);
        let mut deleted = stored(&["rust"]);
        deleted["deleted"] = true.into();
        assert_eq!(wanted(Some(&deleted)), None);
        assert_eq!(wanted(None), None);
    }

    #[test]
    fn only_a_post_never_edited_and_untagged_is_passed_over() {
        assert!(never_tagged(&json!({"id": "p1", "type": "post"})));
        assert!(never_tagged(
            &json!({"id": "p1", "type": "post", "tags": []})
        ));
        assert!(!never_tagged(&stored(&["rust"])));
        let mut edited = stored(&[]);
        edited["updatedAt"] = "2026-01-02T00:00:00.000Z".into();
        assert!(!never_tagged(&edited), "an edit may have removed its tags");
        let mut deleted = stored(&[]);
        deleted["deleted"] = true.into();
        assert!(!never_tagged(&deleted), "a tombstone's tags are emptied");
    }

    #[test]
    fn counts_order_as_text_as_they_do_as_numbers() {
        let key = |n| {
            TagCount::new("t", n).to_item()["creationDate"]
                .as_str()
                .unwrap()
                .to_string()
        };
        assert!(key(9) < key(10) && key(10) < key(1_000_000) && key(0) < key(1));
        assert!(key(u64::MAX) > key(u64::MAX - 1));
    }
}
