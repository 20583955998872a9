//! Change-feed projections (CONTRACT §4): the article's V2/V3 denormalizations.
//!
//! Each change is treated as a *notification*: the projection re-reads the source of truth (the
//! post, the author, the counts, the feed) and writes what follows from it. A repeated or stale
//! batch therefore re-writes the current state and never an older one, and a username that raced
//! a new post, comment or like is corrected when that item is next seen.
//!
//! Planning is pure ([`plan_posts`], [`plan_rename`]): changed documents plus the facts read for
//! them in, the writes they imply out. [`project_posts`] and [`project_users`] gather the facts,
//! plan and apply; the embedded pump and the Functions triggers both call them.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use serde_json::Value;

use crate::domain::{Post, FEED_SIZE};
use crate::store::{Container, Order, PatchOp, Query, Store, StoreError, StoreResult};

/// The partition key of every item in `feed`.
pub const FEED_PK: &str = "post";

/// One write a projection implies.
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    Upsert {
        container: Container,
        pk: String,
        item: Value,
    },
    Patch {
        container: Container,
        pk: String,
        id: String,
        ops: Vec<PatchOp>,
        /// Only if the item is still at this `_etag`; if it changed, the newer change is on its
        /// way through the feed and will be projected in turn, so the patch is moot.
        if_match: Option<String>,
    },
    Delete {
        container: Container,
        pk: String,
        id: String,
    },
}

impl Write {
    /// `container/pk/id`, for logs naming what was not applied.
    pub fn target(&self) -> String {
        let (c, pk, id) = match self {
            Write::Upsert {
                container,
                pk,
                item,
            } => (
                container,
                pk,
                item.get("id").and_then(Value::as_str).unwrap_or("?"),
            ),
            Write::Patch {
                container, pk, id, ..
            }
            | Write::Delete { container, pk, id } => (container, pk, id.as_str()),
        };
        format!("{}/{}/{}", c.name(), pk, id)
    }
}

fn str_field<'a>(v: &'a Value, f: &str) -> Option<&'a str> {
    v.get(f).and_then(Value::as_str)
}

/// A feed entry as far as ordering goes: newest first by `creationDate`, then `id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeedEntry {
    pub id: String,
    pub creation_date: String,
}

/// What a batch from the `posts` change feed needs to be read before it can be planned.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct PostsNeeds {
    /// Posts to read (every post touched by a changed post, comment or like).
    pub posts: BTreeSet<String>,
    /// Posts whose comments / likes must be recounted.
    pub comment_counts: BTreeSet<String>,
    pub like_counts: BTreeSet<String>,
    /// Authors whose current username is checked.
    pub users: BTreeSet<String>,
    /// Whether the feed's current entries are needed (a post changed).
    pub feed: bool,
}

/// Facts read for a `posts` batch. A post or user missing from the maps does not exist.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct PostsFacts {
    pub posts: HashMap<String, Post>,
    /// The `_etag` of each post as read, so a recount never overwrites a newer increment.
    pub etags: HashMap<String, String>,
    pub comment_counts: HashMap<String, u64>,
    pub like_counts: HashMap<String, u64>,
    pub usernames: HashMap<String, String>,
    /// The feed's entries, newest first.
    pub feed: Vec<FeedEntry>,
}

pub fn posts_needs(changes: &[Value]) -> PostsNeeds {
    let mut needs = PostsNeeds::default();
    for doc in changes {
        let (Some(post_id), Some(kind)) = (str_field(doc, "postId"), str_field(doc, "type")) else {
            continue;
        };
        match kind {
            // A post change recounts both: a recount that ran between a comment's create and
            // its `incr` leaves the count one high, and the `incr` itself arrives as a post change.
            "post" => {
                needs.feed = true;
                needs.comment_counts.insert(post_id.into());
                needs.like_counts.insert(post_id.into());
            }
            "comment" => {
                needs.comment_counts.insert(post_id.into());
            }
            "like" => {
                needs.like_counts.insert(post_id.into());
            }
            _ => continue,
        }
        needs.posts.insert(post_id.into());
        if let Some(u) = str_field(doc, "userId") {
            needs.users.insert(u.into());
        }
    }
    needs
}

/// The writes a batch of changed `posts` items implies, given the facts read for it.
pub fn plan_posts(changes: &[Value], facts: &PostsFacts) -> Vec<Write> {
    let mut writes = Vec::new();
    let mut changed_posts: BTreeMap<String, Post> = BTreeMap::new();

    // Comments and likes: correct the author's name on the item itself when it raced a rename.
    let mut seen = BTreeSet::new();
    for doc in changes {
        let (Some(kind), Some(post_id), Some(id)) = (
            str_field(doc, "type"),
            str_field(doc, "postId"),
            str_field(doc, "id"),
        ) else {
            continue;
        };
        if !matches!(kind, "comment" | "like") || !seen.insert((post_id, id)) {
            continue;
        }
        if let (Some(user), Some(name)) = (str_field(doc, "userId"), str_field(doc, "userUsername"))
        {
            if let Some(current) = facts.usernames.get(user) {
                if current != name {
                    writes.push(Write::Patch {
                        container: Container::Posts,
                        pk: post_id.into(),
                        id: id.into(),
                        ops: vec![PatchOp::set("/userUsername", current.as_str())],
                        if_match: None,
                    });
                }
            }
        }
    }

    // Posts: counters and author name made true on the post, then its copies written.
    for post_id in posts_needs(changes).posts {
        let Some(post) = facts.posts.get(&post_id) else {
            continue;
        };
        let mut post = post.clone();
        let mut ops = Vec::new();
        if let Some(&n) = facts.comment_counts.get(&post_id) {
            if n != post.comment_count {
                ops.push(PatchOp::set("/commentCount", n));
                post.comment_count = n;
            }
        }
        if let Some(&n) = facts.like_counts.get(&post_id) {
            if n != post.like_count {
                ops.push(PatchOp::set("/likeCount", n));
                post.like_count = n;
            }
        }
        if let Some(name) = facts.usernames.get(&post.user_id) {
            if *name != post.user_username {
                ops.push(PatchOp::set("/userUsername", name.as_str()));
                post.user_username = name.clone();
            }
        }
        let post_changed = changes.iter().any(|d| {
            str_field(d, "type") == Some("post") && str_field(d, "postId") == Some(&post_id)
        });
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

    for post in changed_posts.values() {
        let summary = crate::domain::to_value(&post.summary());
        writes.push(Write::Upsert {
            container: Container::Users,
            pk: post.user_id.clone(),
            item: summary,
        });
    }
    writes.extend(plan_feed(changed_posts.values(), &facts.feed));
    writes
}

/// Insert the changed posts that belong among the [`FEED_SIZE`] newest; delete what falls beyond.
/// Never deletes a post that is among the newest, whatever else runs concurrently: anything
/// beyond the newest of a subset is beyond the newest of the whole.
pub fn plan_feed<'a>(posts: impl Iterator<Item = &'a Post>, feed: &[FeedEntry]) -> Vec<Write> {
    let mut all: BTreeMap<(String, String), Option<&Post>> = feed
        .iter()
        .map(|e| ((e.creation_date.clone(), e.id.clone()), None))
        .collect();
    for p in posts {
        all.insert((p.creation_date.clone(), p.id.clone()), Some(p));
    }
    let mut writes = Vec::new();
    for (rank, ((_, id), post)) in all.iter().rev().enumerate() {
        match (rank < FEED_SIZE, post) {
            (true, Some(p)) => writes.push(Write::Upsert {
                container: Container::Feed,
                pk: FEED_PK.into(),
                item: crate::domain::to_value(&p.summary()),
            }),
            (false, _) if feed.iter().any(|e| e.id == *id) => writes.push(Write::Delete {
                container: Container::Feed,
                pk: FEED_PK.into(),
                id: id.clone(),
            }),
            _ => {}
        }
    }
    writes
}

/// Patches that set `username` on items still carrying another name.
pub fn plan_rename(container: Container, username: &str, stale: &[Value]) -> Vec<Write> {
    let pk_field = container.partition_key_field();
    stale
        .iter()
        .filter(|d| str_field(d, "userUsername").is_some_and(|n| n != username))
        .filter_map(|d| {
            Some(Write::Patch {
                container,
                pk: str_field(d, pk_field)?.into(),
                id: str_field(d, "id")?.into(),
                ops: vec![PatchOp::set("/userUsername", username)],
                if_match: None,
            })
        })
        .collect()
}

/// The name to fan out for this user item, unless every item of theirs already carries it.
/// A user item without the marker (written before it existed) is always fanned out.
pub fn name_to_propagate(user: &Value) -> Option<&str> {
    let name = str_field(user, "username")?;
    (str_field(user, "propagatedUsername") != Some(name)).then_some(name)
}

/// Users whose change in the `users` feed calls for a rename fan-out.
pub fn users_needs(changes: &[Value]) -> BTreeSet<String> {
    changes
        .iter()
        .filter(|d| str_field(d, "type") == Some("user"))
        .filter_map(|d| str_field(d, "userId").map(String::from))
        .collect()
}

/// A batch that could not be applied in full.
#[derive(Debug, thiserror::Error)]
#[error("{reason}; not applied: {}", not_applied.join(", "))]
pub struct ProjectionError {
    pub reason: String,
    /// The changed items (`container/pk/id`) whose consequences are not all written.
    pub not_applied: Vec<String>,
}

/// What a projection did, for logs.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Report {
    pub changes: usize,
    pub writes: usize,
}

const ATTEMPTS: u32 = 5;

/// Run `op`, retrying transient store errors a bounded number of times with backoff.
pub async fn retry<T, F, Fut>(mut op: F) -> StoreResult<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = StoreResult<T>>,
{
    let mut attempt = 0;
    loop {
        match op().await {
            Err(e) if e.is_transient() && attempt + 1 < ATTEMPTS => {
                let wait = match e.root() {
                    StoreError::Throttled { retry_after } => *retry_after,
                    _ => Duration::from_millis(50 << attempt),
                };
                tracing::warn!(error = %e, attempt, "transient store error; retrying");
                tokio::time::sleep(wait.min(Duration::from_secs(5))).await;
                attempt += 1;
            }
            other => return other,
        }
    }
}

fn source_ids(container: Container, changes: &[Value]) -> Vec<String> {
    let pk_field = container.partition_key_field();
    changes
        .iter()
        .map(|d| {
            format!(
                "{}/{}/{}",
                container.name(),
                str_field(d, pk_field).unwrap_or("?"),
                str_field(d, "id").unwrap_or("?")
            )
        })
        .collect()
}

fn failed(container: Container, changes: &[Value], e: impl std::fmt::Display) -> ProjectionError {
    ProjectionError {
        reason: e.to_string(),
        not_applied: source_ids(container, changes),
    }
}

/// Apply planned writes in order. A patch or delete of an item that no longer exists is moot.
pub async fn apply(store: &dyn Store, writes: &[Write]) -> Result<(), (usize, StoreError)> {
    for (i, w) in writes.iter().enumerate() {
        let result = retry(|| async {
            match w {
                Write::Upsert {
                    container,
                    pk,
                    item,
                } => store.upsert(*container, pk, item.clone()).await.map(drop),
                Write::Patch {
                    container,
                    pk,
                    id,
                    ops,
                    if_match,
                } => match store
                    .patch(*container, pk, id, ops, if_match.as_deref())
                    .await
                {
                    Err(StoreError::PreconditionFailed) if if_match.is_some() => Ok(()),
                    other => other.map(drop),
                },
                Write::Delete { container, pk, id } => store.delete(*container, pk, id).await,
            }
        })
        .await;
        match result {
            Ok(()) | Err(StoreError::NotFound) => {}
            Err(e) => return Err((i, e)),
        }
    }
    Ok(())
}

/// Read what [`plan_posts`] needs.
pub async fn posts_facts(store: &dyn Store, needs: &PostsNeeds) -> StoreResult<PostsFacts> {
    let mut facts = PostsFacts::default();
    for id in &needs.posts {
        if let Some(v) = retry(|| store.read(Container::Posts, id, id)).await? {
            if let Some(etag) = str_field(&v, "_etag") {
                facts.etags.insert(id.clone(), etag.to_string());
            }
            if let Ok(post) = serde_json::from_value::<Post>(v) {
                facts.posts.insert(id.clone(), post);
            }
        }
    }
    for (set, kind, out) in [
        (&needs.comment_counts, "comment", &mut facts.comment_counts),
        (&needs.like_counts, "like", &mut facts.like_counts),
    ] {
        for id in set {
            let q = Query::partition(id.clone()).eq("type", kind);
            out.insert(
                id.clone(),
                retry(|| store.count(Container::Posts, &q)).await?,
            );
        }
    }
    for user in &needs.users {
        if let Some(v) = retry(|| store.read(Container::Users, user, user)).await? {
            if let Some(name) = str_field(&v, "username") {
                facts.usernames.insert(user.clone(), name.to_string());
            }
        }
    }
    if needs.feed {
        // Enough to see every entry even when concurrent batches overshot the size for a while.
        let q = Query::partition(FEED_PK)
            .eq("type", "post")
            .order_by_creation(Order::Desc)
            .limit(10 * FEED_SIZE as u32);
        let page = retry(|| store.query(Container::Feed, &q)).await?;
        facts.feed = page
            .items
            .iter()
            .filter_map(|v| {
                Some(FeedEntry {
                    id: str_field(v, "id")?.into(),
                    creation_date: str_field(v, "creationDate")?.into(),
                })
            })
            .collect();
    }
    Ok(facts)
}

/// How long a recount waits for an in-flight request's increment before correcting a counter
/// that is behind its items.
pub const SETTLE: Duration = Duration::from_millis(250);

/// Whether some counter is below the number of its items. Usually that is a request between its
/// create and its increment; only if it persists was the increment lost.
pub fn counts_behind(facts: &PostsFacts) -> bool {
    facts.posts.iter().any(|(id, post)| {
        let behind = |counts: &HashMap<String, u64>, counter: u64| {
            counts.get(id).is_some_and(|n| *n > counter)
        };
        behind(&facts.comment_counts, post.comment_count)
            || behind(&facts.like_counts, post.like_count)
    })
}

/// Project a batch from the `posts` change feed: gather facts, plan, apply.
pub async fn project_posts(
    store: &dyn Store,
    changes: &[Value],
) -> Result<Report, ProjectionError> {
    let needs = posts_needs(changes);
    let gather = || async {
        posts_facts(store, &needs)
            .await
            .map_err(|e| failed(Container::Posts, changes, e))
    };
    let mut facts = gather().await?;
    if counts_behind(&facts) {
        // Correcting now would race the pending increment and count the item twice.
        tokio::time::sleep(SETTLE).await;
        facts = gather().await?;
    }
    let writes = plan_posts(changes, &facts);
    apply(store, &writes).await.map_err(|(i, e)| {
        failed(
            Container::Posts,
            changes,
            format!("{} failed: {e}", writes[i].target()),
        )
    })?;
    Ok(Report {
        changes: changes.len(),
        writes: writes.len(),
    })
}

/// Project a batch from the `users` change feed: fan each user's current name out to every item
/// of theirs that carries another one.
pub async fn project_users(
    store: &dyn Store,
    changes: &[Value],
) -> Result<Report, ProjectionError> {
    let mut total = 0;
    for user_id in users_needs(changes) {
        let result: StoreResult<usize> = async {
            let Some(user) = retry(|| store.read(Container::Users, &user_id, &user_id)).await?
            else {
                return Ok(0);
            };
            let Some(name) = name_to_propagate(&user) else {
                return Ok(0);
            };
            let mut writes = Vec::new();
            let targets = [
                (
                    Container::Posts,
                    Query::cross_partition().eq("userId", user_id.as_str()),
                ),
                (
                    Container::Users,
                    Query::partition(user_id.clone()).eq("type", "post"),
                ),
            ];
            for (container, q) in targets {
                let mut q = q.ne("userUsername", name).limit(500);
                loop {
                    let page = retry(|| store.query(container, &q)).await?;
                    writes.extend(plan_rename(container, name, &page.items));
                    match page.continuation {
                        Some(t) => q.continuation = Some(t),
                        None => break,
                    }
                }
            }
            apply(store, &writes).await.map_err(|(_, e)| e)?;
            // Remember the name is everywhere now, so the change this patch makes (and any
            // redelivery) costs no second fan-out. Only at the version read: after a newer
            // rename, that rename's own change fans out in turn.
            let mark = Write::Patch {
                container: Container::Users,
                pk: user_id.clone(),
                id: user_id.clone(),
                ops: vec![PatchOp::set("/propagatedUsername", name)],
                if_match: str_field(&user, "_etag").map(String::from),
            };
            apply(store, std::slice::from_ref(&mark))
                .await
                .map_err(|(_, e)| e)?;
            Ok(writes.len())
        }
        .await;
        total += result.map_err(|e| ProjectionError {
            reason: e.to_string(),
            not_applied: vec![format!("users/{user_id}/{user_id}")],
        })?;
    }
    Ok(Report {
        changes: changes.len(),
        writes: total,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn post(id: &str, user: &str, name: &str, date: &str, comments: u64, likes: u64) -> Post {
        Post {
            id: id.into(),
            kind: "post".into(),
            post_id: id.into(),
            user_id: user.into(),
            user_username: name.into(),
            title: "t".into(),
            content: "c".repeat(300),
            comment_count: comments,
            like_count: likes,
            creation_date: date.into(),
        }
    }

    fn change(p: &Post) -> Value {
        crate::domain::to_value(p)
    }

    fn date(i: usize) -> String {
        format!("2026-01-01T00:00:{:02}.{:03}Z", i / 1000, i % 1000)
    }

    fn entries(n: usize) -> Vec<FeedEntry> {
        (0..n)
            .rev()
            .map(|i| FeedEntry {
                id: format!("f{i}"),
                creation_date: date(i),
            })
            .collect()
    }

    fn upserts(writes: &[Write], c: Container) -> Vec<&Value> {
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
        let Write::Upsert {
            container,
            pk,
            item,
        } = &writes[0]
        else {
            panic!("{writes:?}")
        };
        assert_eq!((*container, pk.as_str()), (Container::Users, "u1"));
        assert_eq!(item["content"].as_str().unwrap().chars().count(), 200);
        assert!(
            matches!(&writes[1], Write::Upsert { container: Container::Feed, pk, .. } if pk == "post")
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

    #[test]
    fn counts_are_patched_only_when_they_differ() {
        let p = post("p1", "u1", "ana", &date(5), 2, 1);
        let comment =
            json!({"id":"c1","type":"comment","postId":"p1","userId":"u1","userUsername":"ana"});
        let like =
            json!({"id":"like-u1","type":"like","postId":"p1","userId":"u1","userUsername":"ana"});
        let mut facts = PostsFacts {
            posts: HashMap::from([("p1".into(), p)]),
            comment_counts: HashMap::from([("p1".into(), 2)]),
            like_counts: HashMap::from([("p1".into(), 1)]),
            usernames: HashMap::from([("u1".into(), "ana".into())]),
            ..Default::default()
        };
        assert!(plan_posts(&[comment.clone(), like.clone()], &facts).is_empty());

        facts.comment_counts.insert("p1".into(), 3);
        facts.like_counts.insert("p1".into(), 0);
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
    fn counts_behind_only_when_items_outnumber_the_counter() {
        let mut facts = PostsFacts {
            posts: HashMap::from([("p1".into(), post("p1", "u1", "ana", &date(1), 2, 1))]),
            comment_counts: HashMap::from([("p1".into(), 2)]),
            like_counts: HashMap::from([("p1".into(), 0)]),
            ..Default::default()
        };
        assert!(!counts_behind(&facts), "equal or ahead is not behind");
        facts.like_counts.insert("p1".into(), 2);
        assert!(counts_behind(&facts));
    }

    #[test]
    fn an_item_that_raced_a_rename_gets_the_current_name() {
        let p = post("p1", "u1", "old", &date(5), 0, 0);
        let comment =
            json!({"id":"c1","type":"comment","postId":"p1","userId":"u2","userUsername":"old2"});
        let facts = PostsFacts {
            posts: HashMap::from([("p1".into(), p.clone())]),
            comment_counts: HashMap::from([("p1".into(), 0)]),
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
    fn the_feed_keeps_the_newest_hundred() {
        // A full feed and a post newer than all of it: insert it, delete the oldest.
        let feed = entries(FEED_SIZE);
        let p = post("new", "u1", "ana", &date(500), 0, 0);
        let writes = plan_feed([&p].into_iter(), &feed);
        assert_eq!(writes.len(), 2);
        assert!(matches!(&writes[0], Write::Upsert { item, .. } if item["id"] == "new"));
        assert_eq!(
            writes[1],
            Write::Delete {
                container: Container::Feed,
                pk: "post".into(),
                id: "f0".into()
            }
        );
    }

    #[test]
    fn an_old_post_stays_out_of_a_full_feed() {
        let feed: Vec<FeedEntry> = entries(FEED_SIZE + 10)
            .into_iter()
            .take(FEED_SIZE)
            .collect();
        // Older than every entry.
        let p = post("old", "u1", "ana", &date(0), 0, 0);
        assert!(plan_feed([&p].into_iter(), &feed).is_empty());
    }

    #[test]
    fn an_overfull_feed_is_trimmed_and_a_feed_post_is_refreshed() {
        let feed = entries(FEED_SIZE + 3);
        let p = post("f102", "u1", "ana", &date(102), 0, 7);
        let writes = plan_feed([&p].into_iter(), &feed);
        assert!(matches!(&writes[0], Write::Upsert { item, .. } if item["likeCount"] == 7));
        let deleted: Vec<_> = writes
            .iter()
            .filter_map(|w| match w {
                Write::Delete { id, .. } => Some(id.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(deleted, vec!["f2", "f1", "f0"]);
    }

    #[test]
    fn rename_patches_only_items_with_another_name() {
        let stale = [
            json!({"id":"p1","postId":"p1","userUsername":"old"}),
            json!({"id":"c1","postId":"p1","userUsername":"new"}),
        ];
        assert_eq!(
            plan_rename(Container::Posts, "new", &stale),
            vec![Write::Patch {
                container: Container::Posts,
                pk: "p1".into(),
                id: "p1".into(),
                ops: vec![PatchOp::set("/userUsername", "new")],
                if_match: None,
            }]
        );
    }

    #[test]
    fn a_name_is_fanned_out_only_until_it_is_everywhere() {
        let new_user = crate::domain::to_value(&crate::domain::User::new(
            &crate::domain::Id::parse("id", "u1").unwrap(),
            &crate::domain::Username::parse("ana").unwrap(),
        ));
        assert_eq!(
            name_to_propagate(&new_user),
            None,
            "a new user has no items yet"
        );
        let renamed = json!({"id":"u1","type":"user","userId":"u1","username":"bea","propagatedUsername":"ana"});
        assert_eq!(name_to_propagate(&renamed), Some("bea"));
        let unmarked = json!({"id":"u1","type":"user","userId":"u1","username":"bea"});
        assert_eq!(name_to_propagate(&unmarked), Some("bea"));
    }

    #[test]
    fn only_users_start_a_rename_fan_out() {
        let changes = [
            json!({"id":"u1","type":"user","userId":"u1","username":"a"}),
            json!({"id":"p1","type":"post","userId":"u1","postId":"p1"}),
            json!({"id":"u2","type":"user","userId":"u2","username":"b"}),
        ];
        assert_eq!(
            users_needs(&changes).into_iter().collect::<Vec<_>>(),
            vec!["u1", "u2"]
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
        assert_eq!(n.comment_counts.into_iter().collect::<Vec<_>>(), vec!["p1"]);
        assert_eq!(n.like_counts.into_iter().collect::<Vec<_>>(), vec!["p2"]);
        assert_eq!(n.users.into_iter().collect::<Vec<_>>(), vec!["u1", "u2"]);
        assert!(!n.feed);
    }
}
