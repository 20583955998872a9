//! Copies of a post kept in the partitions of the users related to it: a personal timeline's
//! entries (the author's followers) today. What such a projection has in common, written once:
//! a page of the related users (the owners) read from the relation's items, each given its copy,
//! and the copies taken back that raced the end of the relation or of the post. The projection
//! says where the copies live, what one holds, who the owners are, and how to tell that an owner
//! is still related; it records the cursor between steps (in a job item, `super::engine`).
//!
//! A step is bounded (one page of owners) and idempotent (a copy is upserted whole, a removal
//! of a copy already gone is moot), so a step repeated after a crash writes the same state.

use std::collections::BTreeSet;

use serde_json::Value;

use super::engine::{apply_all, delete_item, query_all};
use super::write::{str_field, Write};
use crate::store::{retry, Container, Query, Store, StoreResult};

/// The copies of one post.
pub struct Copies<'a> {
    /// The post they copy (in `posts`): a step finding it gone or deleted takes its copies back.
    pub post_id: &'a str,
    /// Where the copies live, each in its owner's partition.
    pub container: Container,
    /// The id of the copy in each owner's partition.
    pub id: String,
    /// The copy for an owner.
    pub item: &'a (dyn Fn(&str) -> Value + Sync),
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

/// Writes in flight at once.
pub const CONCURRENCY: usize = 8;

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
    let page_owners: Vec<&str> = page
        .items
        .iter()
        .filter_map(|m| str_field(m, owners.owner))
        .collect();
    let writes: Vec<Write> = page_owners
        .iter()
        .map(|o| Write::upsert(copies.container, *o, (copies.item)(o)))
        .collect();
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
