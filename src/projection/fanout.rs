//! Copies of a post kept in the partitions of the users related to it: a personal timeline's
//! entries (the author's followers) and a bookmarked post's copies (its bookmarkers). What such
//! a projection has in common, written once: a page of the related users (the owners) read from
//! the relation's items, each given its copy (made from the owner and that item), and the copies
//! taken back that raced the end of the relation or of the post. The projection says where the
//! copies live, what one holds, who the owners are, and how to tell that an owner is still
//! related; it records the cursor between steps (in a job item, `super::engine`).
//!
//! A step is bounded (one page of owners) and idempotent (a copy is upserted whole, a removal
//! of a copy already gone is moot), so a step repeated after a crash writes the same state.
//!
//! **One job protocol** ([`Audience`], [`start`], [`next`]) drives every such fan-out, so each
//! kind of copy is a small typed piece (where its job item is, what its work records, how one
//! page is written), not a copy of the loop:
//! - a fan-out starts when the copy a post's change implies differs from the one its job item
//!   records (what every copy holds, the same for all owners: never the counts, which are read
//!   when shown, so a like or a comment starts none);
//! - each step writes one page of owners and records where the next starts in the job item,
//!   whose change brings the next step through the users feed, behind the changes written
//!   meanwhile; a crash resumes from the last recorded step;
//! - a newer copy supersedes the fan-out under way: it restarts from the first page, and a
//!   step whose job item changed since it was delivered does nothing (the newer version's own
//!   change carries on). A start that loses the race to save the job item (a step of the older
//!   fan-out saved it meanwhile) reads it again and starts over, so the newer copy is never
//!   dropped: an edit racing a fan-out reaches every copy.

use std::collections::BTreeSet;

use futures::future::BoxFuture;
use serde_json::Value;

use super::engine::{apply_all, delete_item, query_all, read_job, save_job, CONCURRENCY};
use super::write::{str_field, Write};
use crate::domain::jobs::{Job, Work};
use crate::store::{retry, Container, Query, Store, StoreError, StoreResult};

/// What one page of a fan-out did: the writes made, and where the next page starts (`None`:
/// this was the last).
pub type Paged = (usize, Option<String>);

/// One kind of copy of a post fanned out to its audience under the job protocol: a user of
/// [`start`] and [`next`].
pub trait Audience: Sync {
    /// The id of post `post_id`'s job item (in its author's partition of `users`).
    fn job_id(&self, post_id: &str) -> String;
    /// The work a job item records: copies holding `entry`, the next page from `cursor`.
    fn work(&self, post_id: &str, entry: Value, cursor: Option<String>) -> Work;
    /// Whether a job item recording `recorded` has `entry` copied (or copying) already. A record
    /// written by an earlier release may hold what copies no longer do.
    fn records(&self, recorded: &Value, entry: &Value) -> bool {
        recorded == entry
    }
    /// One page of copies holding `entry`, owners from `cursor` (`None`: the first page).
    fn page<'a>(
        &'a self,
        store: &'a dyn Store,
        author: &'a str,
        entry: &'a Value,
        cursor: Option<&'a str>,
    ) -> BoxFuture<'a, StoreResult<Paged>>;
    /// The first step of a fan-out of `entry`: its first page, unless the audience does more
    /// (or less) when a fan-out starts.
    fn first<'a>(
        &'a self,
        store: &'a dyn Store,
        author: &'a str,
        entry: &'a Value,
    ) -> BoxFuture<'a, StoreResult<Paged>> {
        self.page(store, author, entry, None)
    }
}

/// Attempts at starting a fan-out, each lost only to a step of another fan-out of the same
/// post saving its job item meanwhile.
const START_ATTEMPTS: usize = 8;

/// Post `post_id` (by `author`) now implies copies holding `entry`: unless its job item records
/// that entry, the fan-out starts over with it (its first step now), superseding any under way.
/// Should the job item change between its read and its save, it is read again and the start
/// made again. Returns the writes made.
pub async fn start(
    store: &dyn Store,
    audience: &dyn Audience,
    author: &str,
    post_id: &str,
    entry: &Value,
) -> StoreResult<usize> {
    let id = audience.job_id(post_id);
    let mut written = 0;
    for _ in 0..START_ATTEMPTS {
        let job = read_job(store, author, &id).await?;
        let recorded = job.as_ref().and_then(|j| j.work.entry());
        if recorded.is_some_and(|r| audience.records(r, entry)) {
            // This entry reached every owner, or its fan-out is under way.
            return Ok(written);
        }
        let (n, cursor) = audience.first(store, author, entry).await?;
        written += n;
        let done = cursor.is_none();
        let work = audience.work(post_id, entry.clone(), cursor);
        if save_job(store, job.as_ref(), Job::new(author, work, 0, done)).await? {
            return Ok(written + 1);
        }
    }
    Err(StoreError::Other(format!(
        "the fan-out record of post {post_id} kept changing while it was written"
    )))
}

/// The next step of fan-out job `job` (as read now, not done): one page from its cursor, and
/// the job item moved on, unless it changed meanwhile (a newer start: its own change carries
/// on). Returns the writes made.
pub async fn next(store: &dyn Store, audience: &dyn Audience, job: &Job) -> StoreResult<usize> {
    let Some((post_id, entry, cursor)) = job.work.fanout() else {
        return Ok(0);
    };
    let author = job.user_id.as_str();
    let (written, next) = audience.page(store, author, entry, cursor).await?;
    let done = next.is_none();
    let work = audience.work(post_id, entry.clone(), next);
    let saved = save_job(
        store,
        Some(job),
        Job::new(author, work, job.steps + 1, done),
    )
    .await?;
    Ok(written + usize::from(saved))
}

/// The copies of one post.
pub struct Copies<'a> {
    /// The post they copy (in `posts`): a step finding it gone or deleted takes its copies back.
    pub post_id: &'a str,
    /// Where the copies live, each in its owner's partition.
    pub container: Container,
    /// The id of the copy in each owner's partition.
    pub id: String,
    /// The copy for an owner, made from the owner and the relation's item naming them (the
    /// item may date the copy, say).
    pub item: &'a (dyn Fn(&str, &Value) -> Value + Sync),
}

/// Who holds the copies: the items of a relation (a follow's mirror, say), read a page at a
/// time, each naming an owner.
pub struct Owners<'a> {
    /// Where the relation's items are.
    pub container: Container,
    /// The relation's live items, the page size as its limit (the step sets the cursor).
    pub query: Query,
    /// The field of a relation item naming its owner.
    pub owner: &'static str,
    /// The query finding, among some owners, those still related (a query across partitions,
    /// at most one item per owner), in `container`; and the field naming the owner there.
    pub still: &'a (dyn Fn(&[&str]) -> Query + Sync),
    pub still_owner: &'static str,
}

/// What a step did.
#[derive(Debug, Default)]
pub struct Step {
    pub written: usize,
    /// The owners of the page (none when the post is gone: its copies were taken back).
    pub owners: Vec<String>,
    /// Where the next page starts (`None`: this was the last, or the post is gone).
    pub next: Option<String>,
}

/// One step of a fan-out: the page of `owners` from `cursor` each given their copy; then, if
/// the post went meanwhile (its deletion's removal may have run before these copies landed),
/// the page's copies taken back and the fan-out ended; else the copy taken back from each owner
/// no longer related (the relation's end removes the copies it finds: a copy written after
/// that would stay).
pub async fn step(
    store: &dyn Store,
    copies: &Copies<'_>,
    owners: &Owners<'_>,
    cursor: Option<&str>,
) -> StoreResult<Step> {
    let q = owners.query.clone().continuation(cursor.map(String::from));
    let page = retry(|| store.query(owners.container, &q)).await?;
    let related: Vec<(&str, &Value)> = page
        .items
        .iter()
        .filter_map(|m| Some((str_field(m, owners.owner)?, m)))
        .collect();
    let writes: Vec<Write> = related
        .iter()
        .map(|(o, m)| Write::upsert(copies.container, *o, (copies.item)(o, m)))
        .collect();
    let page_owners: Vec<&str> = related.iter().map(|(o, _)| *o).collect();
    apply_all(store, &writes, CONCURRENCY).await?;
    let mut written = writes.len();
    if page_owners.is_empty() {
        return Ok(Step {
            written: 0,
            owners: Vec::new(),
            next: page.continuation,
        });
    }
    let post_id = copies.post_id;
    let post = retry(|| store.read(Container::Posts, post_id, post_id)).await?;
    if post.as_ref().is_none_or(crate::domain::is_deleted) {
        written += remove(store, copies, &page_owners).await?;
        return Ok(Step {
            written,
            owners: Vec::new(),
            next: None,
        });
    }
    let q = (owners.still)(&page_owners)
        .live()
        .limit(page_owners.len() as u32);
    let still = query_all(store, owners.container, q).await?;
    let still: BTreeSet<&str> = still
        .iter()
        .filter_map(|e| str_field(e, owners.still_owner))
        .collect();
    let gone: Vec<&str> = page_owners
        .iter()
        .copied()
        .filter(|o| !still.contains(o))
        .collect();
    written += remove(store, copies, &gone).await?;
    Ok(Step {
        written,
        owners: page_owners.into_iter().map(String::from).collect(),
        next: page.continuation,
    })
}

/// Take the copy back from each of `owners`. Returns the writes made.
pub async fn remove(store: &dyn Store, copies: &Copies<'_>, owners: &[&str]) -> StoreResult<usize> {
    let mut removed = 0;
    for o in owners {
        removed += delete_item(store, copies.container, o, &copies.id).await?;
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::store::embedded::EmbeddedStore;

    /// Bob's post `p1` and its copies in `timelines`; the relation is a mirror in Bob's
    /// partition of `users` per owner, and an owner is still related while their own edge is.
    async fn setup(owners: &[&str], still: &[&str]) -> (tempfile::TempDir, EmbeddedStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(&dir.path().join("b.db")).unwrap();
        let post = json!({"id": "p1", "type": "post", "postId": "p1", "userId": "bob"});
        store.create(Container::Posts, "p1", post).await.unwrap();
        for o in owners {
            let mirror = json!({"id": format!("mirror-{o}"), "type": "m", "userId": "bob", "o": o});
            store.create(Container::Users, "bob", mirror).await.unwrap();
        }
        for o in still {
            let edge = json!({"id": "edge-bob", "type": "e", "userId": o});
            store.create(Container::Users, o, edge).await.unwrap();
        }
        (dir, store)
    }

    async fn holders(store: &EmbeddedStore, owners: &[&str]) -> Vec<String> {
        let mut held = Vec::new();
        for o in owners {
            if store
                .read(Container::Timelines, o, "copy-p1")
                .await
                .unwrap()
                .is_some()
            {
                held.push(o.to_string());
            }
        }
        held
    }

    async fn run(store: &EmbeddedStore) -> Step {
        let item = |o: &str, _: &Value| json!({"id": "copy-p1", "type": "copy", "userId": o});
        let copies = Copies {
            post_id: "p1",
            container: Container::Timelines,
            id: "copy-p1".into(),
            item: &item,
        };
        let still = |os: &[&str]| {
            Query::cross_partition()
                .eq("id", "edge-bob")
                .any_of("userId", os.iter().map(|o| o.to_string()))
        };
        let owners = Owners {
            container: Container::Users,
            query: Query::partition("bob").eq("type", "m").limit(2),
            owner: "o",
            still: &still,
            still_owner: "userId",
        };
        let mut step = step(store, &copies, &owners, None).await.unwrap();
        while let Some(next) = step.next.take() {
            let more = super::step(store, &copies, &owners, Some(&next))
                .await
                .unwrap();
            step.written += more.written;
            step.owners.extend(more.owners);
            step.next = more.next;
        }
        step
    }

    #[tokio::test]
    async fn every_related_owner_gets_a_copy_and_a_former_one_none() {
        let all = ["ana", "cy", "dee"];
        let (_dir, store) = setup(&all, &["ana", "dee"]).await;
        let step = run(&store).await;
        assert_eq!(step.owners.len(), 3, "three owners in two pages");
        assert_eq!(holders(&store, &all).await, ["ana", "dee"]);
    }

    #[tokio::test]
    async fn a_post_gone_meanwhile_takes_its_copies_back() {
        let all = ["ana", "cy"];
        let (_dir, store) = setup(&all, &all).await;
        let ops = crate::domain::tombstone_ops(crate::domain::Kind::Post);
        store
            .patch(Container::Posts, "p1", "p1", &ops, None)
            .await
            .unwrap();
        let step = run(&store).await;
        assert!(step.next.is_none() && step.owners.is_empty());
        assert!(holders(&store, &all).await.is_empty());
    }
}
