//! Reading the facts a plan needs: the source of truth, never older than the change handled.

use std::collections::{HashMap, HashSet};
use std::time::SystemTime;

use serde_json::Value;

use super::counters::{Counted, PendingCount, INCREMENT_GRACE};
use super::feed::FeedEntry;
use super::{PostsFacts, PostsNeeds};
use crate::domain::pending::PENDING_COUNT;
use crate::domain::{is_deleted, Kind, Meta, Post, FEED_KEEP, FEED_PK};
use crate::projection::change::{Change, ChangeKind};
use crate::projection::engine::{newest_change, read_not_older};
use crate::projection::write::content;
use crate::store::{retry, Container, Order, Query, Store, StoreResult};

/// Read what [`super::plan_posts`] needs for `changes`. Posts and their counters, the
/// authors, and the feed are read concurrently (each kind's items one after the other, so a large
/// batch keeps at most three reads in flight): a new post needs five reads, and one after the
/// other they were most of the time between the post's 201 and its showing in the feed (on
/// Cosmos DB, five round trips). A post is read before its pending counts and any recount: see
/// [`check_counters`].
pub async fn posts_facts(
    store: &dyn Store,
    changes: &[&Change],
    needs: &PostsNeeds,
) -> StoreResult<PostsFacts> {
    // Taken before reading: a pending count made after this is not settled whatever the reads
    // find.
    let now = time::OffsetDateTime::from(SystemTime::now());
    let settled_before = crate::domain::format_time(now - INCREMENT_GRACE);
    let posts_then_counters = async {
        let read = read_posts(store, changes, needs).await?;
        let counters = check_counters(store, &read, &settled_before).await?;
        Ok((read, counters))
    };
    let ((read, (pending, counts)), users, feed) = futures::try_join!(
        posts_then_counters,
        read_users(store, needs),
        read_feed(store, needs),
    )?;
    let (feed, feed_copies) = feed;
    let mut stored = users.copies;
    stored.extend(feed_copies);
    Ok(PostsFacts {
        settled_before,
        now: crate::domain::format_time(now),
        posts: read.posts,
        etags: read.etags,
        counters: read.counters,
        pending,
        counts,
        deleted_posts: read.deleted,
        usernames: users.usernames,
        deleted_users: users.deleted,
        feed,
        stored,
    })
}

/// The pending counts of each live post read, and the counts of those to recount. A post with
/// no pending count costs one query that finds none, whatever its number of items; one with a
/// pending count younger than the grace is only noted (it is looked at again later). Only when
/// every pending count is past the grace are its comments and likes counted, and its pending
/// counts read again: one that appeared meanwhile announces a change the count may or may not
/// hold, so the count is not used. The post was read before all of this, and a counter is set
/// only if the post is still at that version: a change made after the read voids the set, and
/// one made before it is in the counter read and in the count (its pending count, made before
/// its item's write, is seen unless that change had landed already).
async fn check_counters(
    store: &dyn Store,
    read: &PostsRead,
    settled_before: &str,
) -> StoreResult<(
    HashMap<String, Vec<PendingCount>>,
    HashMap<(String, Counted), u64>,
)> {
    let mut pending = HashMap::new();
    let mut counts = HashMap::new();
    let mut ids: Vec<&String> = read.posts.keys().collect();
    ids.sort();
    let young = |p: &[PendingCount]| p.iter().any(|p| p.since.as_str() >= settled_before);
    for id in ids {
        let found = pending_counts(store, id).await?;
        if found.is_empty() || young(&found) {
            pending.insert(id.clone(), found);
            continue;
        }
        let mut n = Vec::with_capacity(2);
        for c in Counted::BOTH {
            let q = Query::partition(id.clone()).of_kind(c.kind()).live();
            n.push((c, retry(|| store.count(Container::Posts, &q)).await?));
        }
        let again = pending_counts(store, id).await?;
        if !young(&again) {
            counts.extend(n.into_iter().map(|(c, n)| ((id.clone(), c), n)));
        }
        pending.insert(id.clone(), again);
    }
    Ok((pending, counts))
}

/// The pending counts in post `id`'s partition: a query of the few there are, whatever the
/// number of the post's items.
async fn pending_counts(store: &dyn Store, id: &str) -> StoreResult<Vec<PendingCount>> {
    let mut q = Query::partition(id)
        .eq("type", PENDING_COUNT)
        .limit(PENDING_PAGE);
    let mut out = Vec::new();
    loop {
        let page = retry(|| store.query(Container::Posts, &q)).await?;
        out.extend(page.items.iter().filter_map(|v| {
            Some(PendingCount {
                id: Meta::of(v).id?.into(),
                since: Meta::of(v).creation_date?.into(),
            })
        }));
        match page.continuation {
            Some(t) => q.continuation = Some(t),
            None => return Ok(out),
        }
    }
}

/// Pending counts read per query.
const PENDING_PAGE: u32 = 100;

/// The posts a batch touches, each at the newest version seen.
#[derive(Default)]
struct PostsRead {
    posts: HashMap<String, Post>,
    etags: HashMap<String, String>,
    /// The counters as stored, which [`Post`] reads as at least 0.
    counters: HashMap<(String, Counted), i64>,
    /// Posts read as deleted, with their authors.
    deleted: HashMap<String, String>,
}

async fn read_posts(
    store: &dyn Store,
    changes: &[&Change],
    needs: &PostsNeeds,
) -> StoreResult<PostsRead> {
    let mut out = PostsRead::default();
    for id in &needs.posts {
        let changed = newest_change(changes, ChangeKind::Post, id);
        if let Some(v) = read_not_older(store, Container::Posts, id, id, changed).await? {
            if is_deleted(&v) {
                let author = Meta::of(&v).user_id.unwrap_or_default().to_string();
                out.deleted.insert(id.clone(), author);
                continue;
            }
            if let Some(etag) = Meta::of(&v).etag {
                out.etags.insert(id.clone(), etag.to_string());
            }
            for c in Counted::BOTH {
                let field = c.path().trim_start_matches('/');
                if let Some(n) = v.get(field).and_then(Value::as_i64) {
                    out.counters.insert((id.clone(), c), n);
                }
            }
            if let Ok(post) = serde_json::from_value::<Post>(v) {
                out.posts.insert(id.clone(), post);
            }
        }
    }
    Ok(out)
}

/// The authors' current usernames, which of them are erased, and the copies in `users` of the
/// changed posts (see [`PostsFacts::stored`]).
#[derive(Default)]
struct UsersRead {
    usernames: HashMap<String, String>,
    deleted: HashSet<String>,
    copies: HashMap<(Container, String), Option<Value>>,
}

impl UsersRead {
    fn note(&mut self, needs: &PostsNeeds, item: &Value) {
        let (Some(id), Some(user)) = (Meta::of(item).id, Meta::of(item).user_id) else {
            return;
        };
        match Kind::of(item) {
            Some(Kind::User) if needs.users.contains(id) => {
                if is_deleted(item) {
                    self.deleted.insert(id.to_string());
                } else if let Ok(user) = crate::projection::engine::as_user(item) {
                    self.usernames.insert(id.to_string(), user.username);
                }
            }
            Some(Kind::Post) if needs.copies.contains(&(user.into(), id.into())) => {
                self.copies
                    .insert((Container::Users, id.to_string()), Some(content(item)));
            }
            _ => {}
        }
    }
}

/// Run `q` to its last page, noting every item.
async fn read_all(
    store: &dyn Store,
    needs: &PostsNeeds,
    out: &mut UsersRead,
    mut q: Query,
) -> StoreResult<()> {
    loop {
        let page = retry(|| store.query(Container::Users, &q)).await?;
        page.items.iter().for_each(|v| out.note(needs, v));
        match page.continuation {
            Some(t) => q.continuation = Some(t),
            None => return Ok(()),
        }
    }
}

async fn read_users(store: &dyn Store, needs: &PostsNeeds) -> StoreResult<UsersRead> {
    let mut out = UsersRead::default();
    let copies: Vec<String> = needs.copies.iter().map(|(_, p)| p.clone()).collect();
    if let [user] = needs.users.iter().collect::<Vec<_>>()[..] {
        if needs.copies.iter().all(|(a, _)| a == user) && !copies.is_empty() {
            // The author and their post copies share a partition: one query reads them all.
            let ids = std::iter::once(user.clone()).chain(copies.iter().cloned());
            let q = Query::partition(user.clone())
                .any_of("id", ids)
                .limit(copies.len() as u32 + 1);
            read_all(store, needs, &mut out, q).await?;
            // Every copy asked for and not found is absent.
            for id in copies {
                out.copies.entry((Container::Users, id)).or_insert(None);
            }
        } else if let Some(v) = retry(|| store.read(Container::Users, user, user)).await? {
            out.note(needs, &v);
        }
    } else {
        // Several authors (a busy post's batch has many): one query for all of them rather than
        // a read each, so the price of a batch does not grow with its number of authors. Paged
        // by the store's page size, a page per `AUTHORS_PAGE` authors. The post copies are not
        // read here: that would take a query more for copies such a batch has almost always
        // changed (the counts), so they are written.
        let users: Vec<String> = needs.users.iter().cloned().collect();
        for chunk in users.chunks(AUTHORS_PAGE) {
            let q = Query::cross_partition()
                .of_kind(Kind::User)
                .any_of("userId", chunk.iter().cloned())
                .limit(chunk.len() as u32);
            read_all(store, needs, &mut out, q).await?;
        }
    }
    Ok(out)
}

/// Authors read by one query of [`read_users`].
const AUTHORS_PAGE: usize = 100;

/// The stored copies in `feed`, by container and post id (see [`PostsFacts::stored`]).
type Copies = HashMap<(Container, String), Option<Value>>;

/// The feed's entries, newest first, when a post changed; and the entries of the changed posts
/// (absent ones too, when the query saw the whole feed).
async fn read_feed(store: &dyn Store, needs: &PostsNeeds) -> StoreResult<(Vec<FeedEntry>, Copies)> {
    if !needs.feed {
        return Ok(Default::default());
    }
    // Enough to see every entry even when concurrent batches overshot the size for a while.
    let q = Query::partition(FEED_PK)
        .of_kind(Kind::Post)
        .order_by_creation(Order::Desc)
        .limit(10 * FEED_KEEP as u32);
    let page = retry(|| store.query(Container::Feed, &q)).await?;
    let changed: HashSet<&str> = needs.copies.iter().map(|(_, p)| p.as_str()).collect();
    let mut copies = Copies::new();
    if page.continuation.is_none() {
        // The whole feed was read: a changed post not in it is absent.
        for id in &changed {
            copies.insert((Container::Feed, id.to_string()), None);
        }
    }
    for v in &page.items {
        if let Some(id) = Meta::of(v).id.filter(|id| changed.contains(id)) {
            copies.insert((Container::Feed, id.to_string()), Some(content(v)));
        }
    }
    let entries = page
        .items
        .iter()
        .filter_map(|v| {
            Some(FeedEntry {
                id: Meta::of(v).id?.into(),
                creation_date: Meta::of(v).creation_date?.into(),
            })
        })
        .collect();
    Ok((entries, copies))
}
