//! The posts projection (main lane, `posts` feed): what a change of a post, a comment, a like
//! or a pending count implies for the post's counters ([`counters`]), the author's name on each
//! item, the post's short-form copy in its author's partition of `users`, and the feed
//! ([`feed`]). A deleted post's copies go, and its comments and likes are swept a page at a time
//! ([`super::cascade`]).
//!
//! Watches the `posts` feed (posts, comments, likes, pending counts, rechecks); reads the posts,
//! their pending counts and items, the authors, the feed and the stored copies ([`gather`]);
//! writes counter and name patches to `posts`, copies to `users` and `feed`. Planning is pure
//! ([`plan_posts`]: the changes and the facts read for them in, the writes out), so its rules
//! are tested with tables of cases.

pub mod counters;
pub mod feed;
pub mod gather;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use serde_json::Value;

use self::counters::{answered, counter_fix, Counted, CounterFix, PendingCount};
use self::feed::{plan_feed, FeedEntry};
use super::cascade::{self, remove_copies};
use super::change::{Change, ChangeKind, Item, Pending};
use super::engine::apply;
use super::engine::{failed, Unit};
use super::write::Write;
use super::{ProjectionError, Report};
use crate::domain::{tombstone_ops, Kind, Meta, Post};
use crate::store::{Container, PatchOp, Store};

/// The posts projection, main lane.
pub const UNIT: Unit = Unit {
    name: "posts",
    feed: Container::Posts,
    watches: &[
        ChangeKind::Post,
        ChangeKind::Recheck,
        ChangeKind::Comment,
        ChangeKind::Like,
        ChangeKind::PendingCount,
    ],
    reads: &[Container::Posts, Container::Users, Container::Feed],
    writes: &[Container::Posts, Container::Users, Container::Feed],
    project: |store, changes| Box::pin(project(store, changes)),
};

/// What a batch from the `posts` change feed needs to be read before it can be planned.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct PostsNeeds {
    /// Posts to read, and whose counters are checked (every post touched by a changed post,
    /// comment or like, or a recheck).
    pub posts: BTreeSet<String>,
    /// Authors whose current username is checked.
    pub users: BTreeSet<String>,
    /// Whether the feed's current entries are needed (a post changed).
    pub feed: bool,
    /// The copies in `users` of the changed posts, as (author, post), read so that a copy that
    /// already holds what the projection would write is not written again.
    pub copies: BTreeSet<(String, String)>,
}

/// Facts read for a `posts` batch. A post or user missing from the maps does not exist.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct PostsFacts {
    /// Each post at the newest version seen: the one read, or the changed document when the read
    /// was older than the change being handled.
    pub posts: HashMap<String, Post>,
    /// The `_etag` of each post at that version, so a recount never overwrites a newer increment.
    pub etags: HashMap<String, String>,
    /// Each post's counters as stored at that version (a decrement that overtook an increment
    /// leaves one below zero for a moment; [`Post`] reads it as 0).
    pub counters: HashMap<(String, Counted), i64>,
    /// The pending counts in each live post's partition (see [`crate::domain::pending`]): read
    /// after the post, and read again after a recount.
    pub pending: HashMap<String, Vec<PendingCount>>,
    /// The number of live comments / likes, only for the posts recounted: those whose pending
    /// counts were all past [`INCREMENT_GRACE`], before and after the count.
    pub counts: HashMap<(String, Counted), u64>,
    /// Pending counts made before this instant (`creationDate` form) are past [`INCREMENT_GRACE`].
    pub settled_before: String,
    /// When the facts were read (`creationDate` form): the date of a pending count this batch
    /// files.
    pub now: String,
    pub usernames: HashMap<String, String>,
    /// Posts read as deleted (tombstones), with their authors: not in `posts`.
    pub deleted_posts: HashMap<String, String>,
    /// Authors read as deleted (erased accounts): not in `usernames`.
    pub deleted_users: HashSet<String>,
    /// The feed's entries, newest first.
    pub feed: Vec<FeedEntry>,
    /// The stored copies of the changed posts, by container (`users` or `feed`) and post id,
    /// without the store's properties: `Some(None)` when read and absent; a copy not read is
    /// not in the map. A copy found holding what the plan would write is not written again.
    pub stored: HashMap<(Container, String), Option<Value>>,
}

/// What `changes` need read, computed once per batch: the plan, the deferred and the settled
/// rechecks all take it.
pub fn posts_needs(changes: &[&Change]) -> PostsNeeds {
    let mut needs = PostsNeeds::default();
    for c in changes {
        match &c.item {
            // Its post's counters are looked at (a change on its way), or, on a deleted post,
            // it goes. A recheck only looks at the counters, which copies nothing.
            Item::PendingCount(Pending { post_id, .. }) | Item::Recheck { post_id } => {
                needs.posts.insert(post_id.clone());
            }
            Item::Post(a) | Item::Comment(a) | Item::Like(a) => {
                if matches!(c.item, Item::Post(_)) {
                    needs.feed = true;
                    needs.copies.insert((a.user_id.clone(), a.post_id.clone()));
                }
                needs.posts.insert(a.post_id.clone());
                needs.users.insert(a.user_id.clone());
            }
            _ => {}
        }
    }
    needs
}

/// The writes a batch of changed `posts` items implies, given what it needs ([`posts_needs`])
/// and the facts read for it.
pub fn plan_posts(changes: &[&Change], needs: &PostsNeeds, facts: &PostsFacts) -> Vec<Write> {
    let mut writes = Vec::new();
    let mut changed_posts: BTreeMap<String, Post> = BTreeMap::new();

    // Comments and likes: correct the author's name on the item itself when it raced a rename.
    let mut seen = BTreeSet::new();
    for c in changes {
        let (kind, a) = match &c.item {
            Item::Comment(a) => (Kind::Comment, a),
            Item::Like(a) => (Kind::Like, a),
            _ => continue,
        };
        let (post_id, id) = (a.post_id.as_str(), a.id.as_str());
        if !seen.insert((post_id, id)) || a.deleted {
            continue;
        }
        // On a deleted post or by an erased user (it raced the deletion): it goes too.
        let author = a.user_id.as_str();
        if facts.deleted_posts.contains_key(post_id) || facts.deleted_users.contains(author) {
            if !facts.deleted_posts.contains_key(post_id) {
                // It counts on a live post: the mark lowers the number of its items, which a
                // recount (after the grace) makes the counter's. One per item, so a
                // redelivered batch files the same one.
                let mut pending = crate::domain::pending::pending_count(post_id, &facts.now);
                pending["id"] = format!("pending-mark-{id}").into();
                writes.push(Write::upsert(Container::Posts, post_id, pending));
            }
            writes.push(Write::patch(
                Container::Posts,
                post_id,
                id,
                tombstone_ops(kind),
            ));
            continue;
        }
        if let Some(name) = &a.user_username {
            if let Some(current) = facts.usernames.get(author) {
                if current != name {
                    writes.push(Write::patch(
                        Container::Posts,
                        post_id,
                        id,
                        vec![PatchOp::set("/userUsername", current.as_str())],
                    ));
                }
            }
        }
    }

    // Posts: counters and author name made true on the post, then its copies written. A
    // deleted post's copies go; a post by an erased author (it raced the erasure) is deleted.
    // Copies are written (or removed) for a change of the post itself, never for a comment, a
    // like or a recheck: those leave the post's copies as they are.
    let copied: BTreeSet<&str> = changes
        .iter()
        .filter_map(|c| match &c.item {
            Item::Post(a) => Some(a.post_id.as_str()),
            _ => None,
        })
        .collect();
    // Pending counts filed on a deleted post (by a request that raced the deletion) go: its
    // counters go with it.
    for c in changes {
        if let Item::PendingCount(p) = &c.item {
            if facts.deleted_posts.contains_key(&p.post_id) {
                writes.push(Write::delete(Container::Posts, &p.post_id, &p.id));
            }
        }
    }
    let mut deleted: BTreeSet<String> = BTreeSet::new();
    for post_id in needs.posts.iter().cloned() {
        if let Some(author) = facts.deleted_posts.get(&post_id) {
            if copied.contains(post_id.as_str()) {
                writes.extend(remove_copies(&post_id, author));
            }
            deleted.insert(post_id);
            continue;
        }
        let Some(post) = facts.posts.get(&post_id) else {
            continue;
        };
        if facts.deleted_users.contains(&post.user_id) {
            writes.push(Write::patch(
                Container::Posts,
                post_id.clone(),
                post_id.clone(),
                tombstone_ops(Kind::Post),
            ));
            continue;
        }
        let (post, ops) = as_copied(facts, post);
        let post_changed = copied.contains(post_id.as_str());
        if !ops.is_empty() {
            // The patch comes back through the change feed, which then refreshes the copies.
            writes.push(Write::Patch {
                container: Container::Posts,
                pk: post_id.clone(),
                id: post_id.clone(),
                ops,
                if_match: facts.etags.get(&post_id).cloned(),
            });
        }
        if post_changed {
            changed_posts.insert(post_id, post);
        }
    }

    // The feed entries of deleted posts went with their copies above. The feed first: the
    // author's copy wakes the users feed's followers (and the timeline fan-out), whose writes
    // would otherwise run beside the feed entry's and hold it back.
    let feed: Vec<FeedEntry> = facts
        .feed
        .iter()
        .filter(|e| !deleted.contains(&e.id))
        .cloned()
        .collect();
    writes.extend(plan_feed(changed_posts.values(), &feed));
    for post in changed_posts.values() {
        writes.push(Write::upsert(
            Container::Users,
            post.user_id.clone(),
            crate::domain::to_value(&post.summary()),
        ));
    }
    // A copy already holding what would be written is left alone (a redelivered batch, a
    // change that alters nothing a copy holds), and so is the removal of one already gone.
    writes.retain(|w| !already_stored(w, facts));
    writes.extend(answered(facts));
    writes
}

/// `post` as its copies hold it: counters made true by the recount and the author's current
/// name; with the patch that makes the post itself so.
fn as_copied(facts: &PostsFacts, post: &Post) -> (Post, Vec<PatchOp>) {
    let mut post = post.clone();
    let mut ops = Vec::new();
    for c in Counted::BOTH {
        if let CounterFix::Set(n) = counter_fix(facts, &post, c) {
            ops.push(PatchOp::set(c.path(), n));
            c.set(&mut post, n);
        }
    }
    if let Some(name) = facts.usernames.get(&post.user_id) {
        if *name != post.user_username {
            ops.push(PatchOp::set("/userUsername", name.as_str()));
            post.user_username = name.clone();
        }
    }
    (post, ops)
}

/// Held by the copies an earlier release wrote (its record of their fan-out); the timeline lane
/// keeps that record apart now. A copy compares without it.
pub const TIMELINE_PENDING: &str = "timelinePending";

/// A copy as its content compares, whatever its fan-out's state.
pub fn without_pending(copy: &Value) -> Value {
    let mut copy = copy.clone();
    if let Some(o) = copy.as_object_mut() {
        o.remove(TIMELINE_PENDING);
    }
    copy
}

/// Whether `w` would leave a copy read for this batch as it is (a copy in `users` whose fan-out
/// is pending or done alike: the fan-out's state is not the copy's content).
fn already_stored(w: &Write, facts: &PostsFacts) -> bool {
    let (container, id, wanted) = match w {
        Write::Upsert {
            container, item, ..
        } => (*container, Meta::of(item).id, Some(item)),
        Write::Delete { container, id, .. } => (*container, Some(id.as_str()), None),
        Write::Patch { .. } => return false,
    };
    if !matches!(container, Container::Users | Container::Feed) {
        return false;
    }
    let Some(stored) = id.and_then(|id| facts.stored.get(&(container, id.to_string()))) else {
        return false;
    };
    stored.as_ref().map(without_pending) == wanted.map(without_pending)
}

/// The `posts` feed: gather facts, plan, apply. Never waits: a counter behind a young item is
/// left for a later recheck (see [`Report::deferred`]).
pub async fn project(store: &dyn Store, changes: &[&Change]) -> Result<Report, ProjectionError> {
    let needs = posts_needs(changes);
    let facts = gather::posts_facts(store, changes, &needs)
        .await
        .map_err(|e| failed(Container::Posts, changes, e))?;
    let writes = plan_posts(changes, &needs, &facts);
    apply(store, &writes).await.map_err(|(i, e)| {
        failed(
            Container::Posts,
            changes,
            format!("{} failed: {e}", writes[i].target()),
        )
    })?;
    // A deleted post's comments and likes go with it, a page each time its mark comes through
    // (the request marked the first page; a full page sends the mark round again). Only the
    // mark's own change sweeps: the marks of its items, which follow it, must not start sweeps
    // of their own, or the sweep would crowd out everything else.
    let mut marked = 0;
    let mut swept = HashSet::new();
    for c in changes.iter().rev() {
        let Item::Post(a) = &c.item else {
            continue;
        };
        let post_id = a.id.as_str();
        if !facts.deleted_posts.contains_key(post_id) || !swept.insert(post_id) {
            continue;
        }
        marked += cascade::sweep_post(store, &c.doc)
            .await
            .map_err(|e| failed(Container::Posts, changes, e))?;
    }
    let deferred = counters::deferred(&needs, &facts);
    let settled = counters::settled(&needs, &facts);
    Ok(Report {
        changes: changes.len(),
        writes: writes.len() + marked,
        deferred,
        settled,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::projection::change::{decoded, recheck};
    use serde_json::json;

    /// The batch's changes, decoded as the engine decodes them.
    fn changes_of(docs: &[Value]) -> Vec<Change> {
        decoded(Container::Posts, docs).unwrap()
    }

    fn posts_needs(docs: &[Value]) -> PostsNeeds {
        let changes = changes_of(docs);
        super::posts_needs(&changes.iter().collect::<Vec<_>>())
    }

    fn plan_posts(docs: &[Value], facts: &PostsFacts) -> Vec<Write> {
        let changes = changes_of(docs);
        let changes: Vec<&Change> = changes.iter().collect();
        super::plan_posts(&changes, &super::posts_needs(&changes), facts)
    }

    fn deferred(docs: &[Value], facts: &PostsFacts) -> Vec<String> {
        counters::deferred(&posts_needs(docs), facts)
    }

    fn settled(docs: &[Value], facts: &PostsFacts) -> Vec<String> {
        counters::settled(&posts_needs(docs), facts)
    }

    pub(super) fn post(
        id: &str,
        user: &str,
        name: &str,
        date: &str,
        comments: u64,
        likes: u64,
    ) -> Post {
        Post {
            id: id.into(),
            kind: Kind::Post,
            post_id: id.into(),
            user_id: user.into(),
            user_username: name.into(),
            title: "t".into(),
            description: None,
            content: "c".repeat(300),
            comment_count: comments,
            like_count: likes,
            creation_date: date.into(),
            updated_at: None,
            bookmark_count: 0,
            tags: Vec::new(),
        }
    }

    pub(super) fn change(p: &Post) -> Value {
        crate::domain::to_value(p)
    }

    pub(super) fn date(i: usize) -> String {
        format!("2026-01-01T00:00:{:02}.{:03}Z", i / 1000, i % 1000)
    }

    pub(super) fn entries(n: usize) -> Vec<FeedEntry> {
        (0..n)
            .rev()
            .map(|i| FeedEntry {
                id: format!("f{i}"),
                creation_date: date(i),
            })
            .collect()
    }

    pub(super) fn upserts(writes: &[Write], c: Container) -> Vec<&Value> {
        writes
            .iter()
            .filter_map(|w| match w {
                Write::Upsert {
                    container, item, ..
                } if *container == c => Some(item),
                _ => None,
            })
            .collect()
    }

    fn counts(post: &str, comments: u64, likes: u64) -> HashMap<(String, Counted), u64> {
        HashMap::from([
            ((post.into(), Counted::Comments), comments),
            ((post.into(), Counted::Likes), likes),
        ])
    }

    #[test]
    fn a_new_post_is_copied_in_short_form_to_its_author_and_the_feed() {
        let p = post("p1", "u1", "ana", &date(5), 0, 0);
        let facts = PostsFacts {
            posts: HashMap::from([("p1".into(), p.clone())]),
            usernames: HashMap::from([("u1".into(), "ana".into())]),
            ..Default::default()
        };
        let writes = plan_posts(&[change(&p)], &facts);
        assert_eq!(writes.len(), 2);
        // The feed entry first, before the author's copy wakes the users feed's followers.
        assert!(
            matches!(&writes[0], Write::Upsert { container: Container::Feed, pk, .. } if pk == "post"),
            "{writes:?}"
        );
        let Write::Upsert {
            container,
            pk,
            item,
        } = &writes[1]
        else {
            panic!("{writes:?}")
        };
        assert_eq!((*container, pk.as_str()), (Container::Users, "u1"));
        assert_eq!(item["content"].as_str().unwrap().chars().count(), 200);
    }

    #[test]
    fn a_copy_already_holding_the_post_is_not_written_again() {
        let p = post("p1", "u1", "ana", &date(5), 1, 0);
        let summary = crate::domain::to_value(&p.summary());
        let mut facts = PostsFacts {
            posts: HashMap::from([("p1".into(), p.clone())]),
            counts: counts("p1", 1, 0),
            usernames: HashMap::from([("u1".into(), "ana".into())]),
            stored: HashMap::from([
                ((Container::Users, "p1".into()), Some(summary.clone())),
                ((Container::Feed, "p1".into()), Some(summary)),
            ]),
            ..Default::default()
        };
        assert_eq!(plan_posts(&[change(&p)], &facts), vec![]);
        // A copy that differs (here the feed's, behind by a like) is written; one absent too.
        let mut behind = p.summary();
        behind.like_count = 0;
        let mut changed = p.clone();
        changed.like_count = 1;
        facts.posts.insert("p1".into(), changed.clone());
        facts.counts = counts("p1", 1, 1);
        facts.stored.insert(
            (Container::Feed, "p1".into()),
            Some(crate::domain::to_value(&behind)),
        );
        facts.stored.insert((Container::Users, "p1".into()), None);
        let writes = plan_posts(&[change(&changed)], &facts);
        assert_eq!(upserts(&writes, Container::Users).len(), 1);
        assert_eq!(upserts(&writes, Container::Feed).len(), 1);
    }

    #[test]
    fn a_recheck_recounts_and_copies_nothing() {
        let p = post("p1", "u1", "ana", &date(5), 2, 0);
        let facts = PostsFacts {
            posts: HashMap::from([("p1".into(), p)]),
            counts: counts("p1", 1, 0),
            etags: HashMap::from([("p1".into(), "\"e\"".into())]),
            ..Default::default()
        };
        let needs = posts_needs(&[recheck("p1")]);
        assert!(!needs.feed && needs.copies.is_empty() && needs.users.is_empty());
        assert_eq!(needs.posts.len(), 1);
        // The counter is corrected; its patch comes back as a change of the post, which copies.
        assert_eq!(
            plan_posts(&[recheck("p1")], &facts),
            vec![Write::Patch {
                container: Container::Posts,
                pk: "p1".into(),
                id: "p1".into(),
                ops: vec![PatchOp::set("/commentCount", 1)],
                if_match: Some("\"e\"".into()),
            }]
        );
    }

    #[test]
    fn copies_are_written_from_the_current_post_not_the_changed_document() {
        let stale = post("p1", "u1", "ana", &date(5), 0, 0);
        let mut current = stale.clone();
        current.title = "edited".into();
        current.like_count = 3;
        let facts = PostsFacts {
            posts: HashMap::from([("p1".into(), current)]),
            ..Default::default()
        };
        let writes = plan_posts(&[change(&stale)], &facts);
        for item in upserts(&writes, Container::Users)
            .into_iter()
            .chain(upserts(&writes, Container::Feed))
        {
            assert_eq!(item["title"], "edited");
            assert_eq!(item["likeCount"], 3);
        }
    }

    #[test]
    fn a_deleted_post_projects_nothing() {
        let p = post("p1", "u1", "ana", &date(5), 0, 0);
        assert!(plan_posts(&[change(&p)], &PostsFacts::default()).is_empty());
    }

    fn pending(since: &str) -> Vec<PendingCount> {
        vec![PendingCount {
            id: "pending-1".into(),
            since: since.into(),
        }]
    }

    #[test]
    fn counts_are_patched_only_when_they_differ() {
        let p = post("p1", "u1", "ana", &date(5), 2, 1);
        let comment =
            json!({"id":"c1","type":"comment","postId":"p1","userId":"u1","userUsername":"ana"});
        let like =
            json!({"id":"like-u1","type":"like","postId":"p1","userId":"u1","userUsername":"ana"});
        let mut facts = PostsFacts {
            posts: HashMap::from([("p1".into(), p)]),
            counts: counts("p1", 2, 1),
            usernames: HashMap::from([("u1".into(), "ana".into())]),
            ..Default::default()
        };
        assert!(plan_posts(&[comment.clone(), like.clone()], &facts).is_empty());

        // Behind and ahead: both corrected.
        facts.counts = counts("p1", 3, 0);
        facts.etags.insert("p1".into(), "\"e1\"".into());
        let writes = plan_posts(&[comment, like], &facts);
        assert_eq!(
            writes,
            vec![Write::Patch {
                container: Container::Posts,
                pk: "p1".into(),
                id: "p1".into(),
                ops: vec![
                    PatchOp::set("/commentCount", 3),
                    PatchOp::set("/likeCount", 0)
                ],
                // Conditional: a newer increment is never overwritten by this recount.
                if_match: Some("\"e1\"".into()),
            }]
        );
    }

    #[test]
    fn a_counter_is_trusted_until_a_pending_count_outlives_the_grace() {
        let p = post("p1", "u1", "ana", &date(5), 2, 0);
        let comment =
            json!({"id":"c3","type":"comment","postId":"p1","userId":"u1","userUsername":"ana"});
        let changes = std::slice::from_ref(&comment);
        let mut facts = PostsFacts {
            posts: HashMap::from([("p1".into(), p.clone())]),
            pending: HashMap::from([("p1".into(), vec![])]),
            settled_before: date(8),
            usernames: HashMap::from([("u1".into(), "ana".into())]),
            etags: HashMap::from([("p1".into(), "\"e\"".into())]),
            ..Default::default()
        };
        // No pending count: nothing counted, nothing to wait for.
        assert!(plan_posts(changes, &facts).is_empty());
        assert!(deferred(changes, &facts).is_empty());
        assert_eq!(settled(changes, &facts), vec!["p1"]);

        // A young one: a change on its way. Looked at again later, nothing corrected.
        facts.pending.insert("p1".into(), pending(&date(9)));
        assert!(plan_posts(changes, &facts).is_empty());
        assert_eq!(deferred(changes, &facts), vec!["p1"]);
        assert!(settled(changes, &facts).is_empty());

        // Past the grace, recounted: a counter that differs is set (the pending count stays
        // for the next look, which finds the set landed or not).
        facts.pending.insert("p1".into(), pending(&date(1)));
        facts.counts = counts("p1", 3, 0);
        assert_eq!(
            counter_fix(&facts, &p, Counted::Comments),
            CounterFix::Set(3)
        );
        assert_eq!(
            plan_posts(changes, &facts),
            vec![Write::Patch {
                container: Container::Posts,
                pk: "p1".into(),
                id: "p1".into(),
                ops: vec![PatchOp::set("/commentCount", 3)],
                if_match: Some("\"e\"".into()),
            }]
        );
        assert!(deferred(changes, &facts).is_empty());
        assert!(settled(changes, &facts).is_empty());

        // Recounted and right: the pending count has served.
        facts.counts = counts("p1", 2, 0);
        assert_eq!(
            plan_posts(changes, &facts),
            vec![Write::Delete {
                container: Container::Posts,
                pk: "p1".into(),
                id: "pending-1".into(),
            }]
        );
        assert_eq!(settled(changes, &facts), vec!["p1"]);
    }

    #[test]
    fn a_pending_count_looks_at_its_post_and_goes_with_a_deleted_one() {
        let pending = crate::domain::pending::pending_count("p1", &date(1));
        let needs = posts_needs(std::slice::from_ref(&pending));
        assert_eq!(needs.posts.into_iter().collect::<Vec<_>>(), vec!["p1"]);
        assert!(!needs.feed && needs.copies.is_empty() && needs.users.is_empty());
        let facts = PostsFacts {
            deleted_posts: HashMap::from([("p1".into(), "u1".into())]),
            ..Default::default()
        };
        assert_eq!(
            plan_posts(std::slice::from_ref(&pending), &facts),
            vec![Write::Delete {
                container: Container::Posts,
                pk: "p1".into(),
                id: pending["id"].as_str().unwrap().into(),
            }]
        );
        // On a live post it stays: the counters decide.
        let facts = PostsFacts {
            posts: HashMap::from([("p1".into(), post("p1", "u1", "ana", &date(0), 0, 0))]),
            ..Default::default()
        };
        assert!(plan_posts(&[pending], &facts).is_empty());
    }

    #[test]
    fn a_counter_below_zero_is_compared_as_stored() {
        // A decrement that overtook an increment, the increment then lost: the post reads 0
        // likes, the store holds -1, and the recount finds 0 likes.
        let p = post("p1", "u1", "ana", &date(5), 0, 0);
        let facts = PostsFacts {
            posts: HashMap::from([("p1".into(), p.clone())]),
            counters: HashMap::from([(("p1".into(), Counted::Likes), -1)]),
            counts: counts("p1", 0, 0),
            pending: HashMap::from([("p1".into(), pending(&date(1)))]),
            settled_before: date(8),
            ..Default::default()
        };
        assert_eq!(counter_fix(&facts, &p, Counted::Likes), CounterFix::Set(0));
        assert_eq!(counter_fix(&facts, &p, Counted::Comments), CounterFix::Keep);
    }

    #[test]
    fn an_item_that_raced_a_rename_gets_the_current_name() {
        let p = post("p1", "u1", "old", &date(5), 0, 0);
        let comment =
            json!({"id":"c1","type":"comment","postId":"p1","userId":"u2","userUsername":"old2"});
        let facts = PostsFacts {
            posts: HashMap::from([("p1".into(), p.clone())]),
            counts: counts("p1", 0, 0),
            usernames: HashMap::from([("u1".into(), "new".into()), ("u2".into(), "new2".into())]),
            ..Default::default()
        };
        let writes = plan_posts(&[change(&p), comment], &facts);
        assert!(writes.contains(&Write::Patch {
            container: Container::Posts,
            pk: "p1".into(),
            id: "c1".into(),
            ops: vec![PatchOp::set("/userUsername", "new2")],
            if_match: None,
        }));
        assert!(writes.contains(&Write::Patch {
            container: Container::Posts,
            pk: "p1".into(),
            id: "p1".into(),
            ops: vec![PatchOp::set("/userUsername", "new")],
            if_match: None,
        }));
        for item in upserts(&writes, Container::Users) {
            assert_eq!(item["userUsername"], "new");
        }
    }

    #[test]
    fn a_deleted_post_loses_its_copies_and_nothing_is_written_for_it() {
        let p = post("p1", "u1", "", &date(5), 0, 0);
        let mut tombstone = change(&p);
        tombstone["deleted"] = json!(true);
        let facts = PostsFacts {
            deleted_posts: HashMap::from([("p1".into(), "u1".into())]),
            feed: vec![FeedEntry {
                id: "p1".into(),
                creation_date: date(5),
            }],
            ..Default::default()
        };
        let writes = plan_posts(&[tombstone], &facts);
        assert_eq!(
            writes,
            vec![
                Write::Delete {
                    container: Container::Users,
                    pk: "u1".into(),
                    id: "p1".into()
                },
                Write::Delete {
                    container: Container::Feed,
                    pk: "post".into(),
                    id: "p1".into()
                },
            ]
        );
    }

    #[test]
    fn what_raced_a_deletion_is_deleted_too() {
        // A comment on a deleted post, a like by an erased user, a post by an erased user.
        let comment =
            json!({"id":"c1","type":"comment","postId":"p1","userId":"u2","userUsername":"bo"});
        let like =
            json!({"id":"like-u3","type":"like","postId":"p2","userId":"u3","userUsername":"cy"});
        let p3 = post("p3", "u3", "cy", &date(5), 0, 0);
        let facts = PostsFacts {
            posts: HashMap::from([
                ("p2".into(), post("p2", "u2", "bo", &date(1), 0, 1)),
                ("p3".into(), p3.clone()),
            ]),
            deleted_posts: HashMap::from([("p1".into(), "u1".into())]),
            deleted_users: HashSet::from(["u3".to_string()]),
            usernames: HashMap::from([("u2".into(), "bo".into())]),
            counts: counts("p2", 0, 1),
            ..Default::default()
        };
        let writes = plan_posts(&[comment, like, change(&p3)], &facts);
        let marked: Vec<(&str, &str)> = writes
            .iter()
            .filter_map(|w| match w {
                Write::Patch { pk, id, ops, .. }
                    if ops.contains(&PatchOp::set("/deleted", true)) =>
                {
                    Some((pk.as_str(), id.as_str()))
                }
                _ => None,
            })
            .collect();
        assert_eq!(marked, vec![("p1", "c1"), ("p2", "like-u3"), ("p3", "p3")]);
        // The like counted on a live post: a pending count has it recounted, filed before the
        // mark; the comment on the deleted post needs none.
        let pending: Vec<(usize, &str)> = writes
            .iter()
            .enumerate()
            .filter_map(|(i, w)| match w {
                Write::Upsert { item, pk, .. }
                    if crate::domain::pending::is_pending_count(item) =>
                {
                    Some((i, pk.as_str()))
                }
                _ => None,
            })
            .collect();
        let like_mark = writes
            .iter()
            .position(|w| matches!(w, Write::Patch { id, .. } if id == "like-u3"))
            .unwrap();
        assert_eq!(pending.len(), 1, "{writes:?}");
        assert_eq!(pending[0].1, "p2");
        assert!(pending[0].0 < like_mark);
        // The post by the erased author is not copied anywhere.
        assert!(upserts(&writes, Container::Users).is_empty());
        assert!(upserts(&writes, Container::Feed).is_empty());
    }

    #[test]
    fn a_deleted_comment_only_recounts() {
        let p = post("p1", "u1", "ana", &date(5), 1, 0);
        let tombstone = json!({"id":"c1","type":"comment","postId":"p1","userId":"u2",
            "userUsername":"","deleted":true});
        let facts = PostsFacts {
            posts: HashMap::from([("p1".into(), p)]),
            counts: counts("p1", 0, 0),
            usernames: HashMap::from([("u2".into(), "bo".into())]),
            etags: HashMap::from([("p1".into(), "\"e\"".into())]),
            ..Default::default()
        };
        assert_eq!(
            plan_posts(&[tombstone], &facts),
            vec![Write::Patch {
                container: Container::Posts,
                pk: "p1".into(),
                id: "p1".into(),
                ops: vec![PatchOp::set("/commentCount", 0)],
                if_match: Some("\"e\"".into()),
            }]
        );
    }

    #[test]
    fn needs_cover_every_touched_post_and_author() {
        let changes = [
            json!({"id":"c1","type":"comment","postId":"p1","userId":"u1"}),
            json!({"id":"like-u2","type":"like","postId":"p2","userId":"u2"}),
            json!({"id":"x","type":"other","postId":"p3","userId":"u3"}),
        ];
        let n = posts_needs(&changes);
        assert_eq!(n.posts.into_iter().collect::<Vec<_>>(), vec!["p1", "p2"]);
        assert_eq!(n.users.into_iter().collect::<Vec<_>>(), vec!["u1", "u2"]);
        assert!(!n.feed);
    }
}
