//! The randomized model test of the projections: random interleavings of user creates, renames
//! (back and forth among a few names), posts, comments, likes, increments lost with a crashed
//! process, deletes (unlikes, comments, posts, whole accounts), follows and unfollows, and
//! change-feed deliveries to both lanes (main and timeline), by two followers per lane and feed
//! (concurrent leases), including redelivered and stale batches, restarts from an older
//! checkpoint, and a lane crashing part-way through a batch while the other goes on. After draining, every
//! copy must equal what a projection from scratch computes: usernames on posts, comments and
//! likes, both counters, the post copies in `users`, the feed, the follow lists both ways with
//! their counters, and every timeline; and nothing live may remain on a deleted post or of an
//! erased user.
//!
//! The lanes and feeds delivered to are those of the table of units (`projection::UNITS`), and
//! the default cases on the embedded store must hand each unit every kind of change it watches
//! (but those [`NOT_MODELLED`], with why): a unit or a kind the operations never reach is named.
//!
//! Seeded and short by default; `BLOG_MODEL_CASES=<n>` runs more cases, `BLOG_MODEL_SEED=<s>` starts
//! at another seed (a failure names its seed and the operations that led to it).

use std::collections::{BTreeMap, BTreeSet};

use blog::domain::{follows, is_deleted, Post, FEED_PK, FEED_SIZE};
use blog::projection::change::{decode, ChangeKind};
use blog::projection::{self, Lane};
use blog::store::{BatchOp, Container, Query, Store, StoreError};
use futures::{FutureExt as _, StreamExt};
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;
use serde_json::{json, Value};

use crate::helpers::{id, Fixture, TestApp};
use crate::hooks::Hooked;

const NAMES: [&str; 3] = ["ana", "bea", "cy"];

fn cases(default: u64) -> (u64, u64) {
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    (
        env("BLOG_MODEL_SEED").unwrap_or(1),
        env("BLOG_MODEL_CASES").unwrap_or(default),
    )
}

/// A change-feed follower that delivers pages of random size and checkpoints only sometimes.
#[derive(Default, Clone)]
struct Lease {
    continuation: Option<String>,
    checkpoint: Option<String>,
}

struct World<'a> {
    app: &'a TestApp,
    rng: Pcg64,
    users: Vec<String>,
    posts: Vec<String>,
    leases: BTreeMap<(&'static str, &'static str, usize), Lease>,
    delivered: Vec<(Lane, Container, Vec<Value>)>,
    /// Posts a projection deferred, as a driver keeps them for a later look.
    deferred: BTreeSet<String>,
    /// Each unit with each kind of change it was handed.
    exercised: BTreeSet<(&'static str, ChangeKind)>,
    trace: Vec<String>,
}

/// The followers of a pump: each lane over each feed its units follow, from the table of units
/// (a unit on a lane or feed of its own is delivered to as well).
fn feeds() -> Vec<(Lane, Container)> {
    let mut out = Vec::new();
    for (lane, unit) in projection::UNITS {
        if !out.contains(&(*lane, unit.feed)) {
            out.push((*lane, unit.feed));
        }
    }
    out
}

/// What the operations below never make, by unit and kind of change, and why: every other
/// kind each unit of the table watches must be delivered to it in the cases run, or the test
/// names what is missing.
const NOT_MODELLED: [(&str, ChangeKind, &str); 2] = [
    (
        "bookmarks",
        ChangeKind::Bookmark,
        "bookmarks are the bookmarks suite's",
    ),
    (
        "bookmark-steps",
        ChangeKind::BookmarksJob,
        "bookmarks are the bookmarks suite's",
    ),
];

/// Each unit of the table, with each kind of change it watches that `docs` of `c` in `lane`
/// hold.
fn exercised(lane: Lane, c: Container, docs: &[Value]) -> BTreeSet<(&'static str, ChangeKind)> {
    let kinds: BTreeSet<ChangeKind> = decode(c, docs)
        .into_iter()
        .filter_map(|d| d.ok()?.item.kind())
        .collect();
    let mut out = BTreeSet::new();
    let units = projection::UNITS
        .iter()
        .filter(|(l, u)| *l == lane && u.feed == c);
    for (_, unit) in units {
        for k in unit.watches.iter().filter(|k| kinds.contains(k)) {
            out.insert((unit.name, *k));
        }
    }
    out
}

impl World<'_> {
    fn store(&self) -> &dyn Store {
        &*self.app.store
    }

    fn pick<T: Clone>(&mut self, items: &[T]) -> Option<T> {
        (!items.is_empty()).then(|| items[self.rng.random_range(0..items.len())].clone())
    }

    /// The next page for lease `k` of feed `c` in `lane`, advancing it (and maybe its
    /// checkpoint).
    async fn next_page(&mut self, (lane, c): (Lane, Container), k: usize) -> Vec<Value> {
        let max = self.rng.random_range(1..=8);
        let save = self.rng.random_bool(0.7);
        let lease = self.leases.entry((lane.name(), c.name(), k)).or_default();
        let page = self
            .app
            .store
            .changes(c, lease.continuation.as_deref(), max)
            .await
            .expect("change feed");
        lease.continuation = Some(page.continuation);
        if save {
            lease.checkpoint = lease.continuation.clone();
        }
        page.items
    }

    async fn project(&mut self, (lane, c): (Lane, Container), docs: Vec<Value>) {
        if docs.is_empty() {
            return;
        }
        let report = projection::project_lane(self.store(), lane, c, &docs)
            .await
            .unwrap_or_else(|e| panic!("projection failed: {e}; trace {:?}", self.trace));
        self.exercised.extend(exercised(lane, c, &docs));
        self.deferred.extend(report.deferred);
        self.delivered.push((lane, c, docs));
    }

    fn pick_feed(&mut self) -> (Lane, Container) {
        let feeds = feeds();
        feeds[self.rng.random_range(0..feeds.len())]
    }

    async fn step(&mut self) {
        let roll = self.rng.random_range(0..116);
        let app = self.app;
        match roll {
            0..=7 => {
                let name = self.pick(&NAMES).unwrap();
                let u = id(&app.create_user(name).await);
                self.trace.push(format!("user {u} {name}"));
                self.users.push(u);
            }
            8..=20 => {
                let (Some(u), Some(name)) = (self.pick(&self.users.clone()), self.pick(&NAMES))
                else {
                    return;
                };
                let r = app
                    .put(&format!("/api/users/{u}"), json!({ "username": name }))
                    .await;
                // 404: an erased user.
                assert!(r.status == 200 || r.status == 404, "{r:?}");
                self.trace.push(format!("rename {u} {name}: {}", r.status));
            }
            21..=30 => {
                let Some(u) = self.pick(&self.users.clone()) else {
                    return;
                };
                let r = app
                    .post(
                        "/api/posts",
                        json!({ "userId": u, "title": "t", "content": "c".repeat(250) }),
                    )
                    .await;
                if r.status == 422 {
                    self.trace.push(format!("post by erased {u}"));
                    return;
                }
                assert_eq!(r.status, 201, "{r:?}");
                let p = id(&r.body);
                self.trace.push(format!("post {p} by {u}"));
                self.posts.push(p);
            }
            31..=41 => {
                let (Some(u), Some(p)) = (
                    self.pick(&self.users.clone()),
                    self.pick(&self.posts.clone()),
                ) else {
                    return;
                };
                let status = app.comment(&p, &u, "hi").await.status;
                // 404: a deleted post; 422: an erased user.
                assert!([201, 404, 422].contains(&status), "{status}");
                self.trace.push(format!("comment {p} by {u}: {status}"));
            }
            42..=49 => {
                let (Some(u), Some(p)) = (
                    self.pick(&self.users.clone()),
                    self.pick(&self.posts.clone()),
                ) else {
                    return;
                };
                let status = app.like(&p, &u).await.status;
                assert!([201, 200, 404, 422].contains(&status), "{status}");
                self.trace.push(format!("like {p} by {u}: {status}"));
            }
            50..=52 => {
                let (Some(u), Some(p)) = (
                    self.pick(&self.users.clone()),
                    self.pick(&self.posts.clone()),
                ) else {
                    return;
                };
                let status = app
                    .delete(&format!("/api/posts/{p}/likes/{u}"))
                    .await
                    .status;
                assert_eq!(status, 204);
                self.trace.push(format!("unlike {p} by {u}"));
            }
            53 => {
                let Some(p) = self.pick(&self.posts.clone()) else {
                    return;
                };
                let comments = app.get(&format!("/api/posts/{p}/comments?limit=100")).await;
                let Some(c) = self.pick(comments.items()) else {
                    return;
                };
                let status = app
                    .delete(&format!("/api/posts/{p}/comments/{}", id(&c)))
                    .await
                    .status;
                assert_eq!(status, 204);
                self.trace.push(format!("delete comment {p} {}", id(&c)));
            }
            54 => {
                let Some(p) = self.pick(&self.posts.clone()) else {
                    return;
                };
                let status = app.delete(&format!("/api/posts/{p}")).await.status;
                assert!(status == 204 || status == 404, "{status}");
                self.trace.push(format!("delete post {p}: {status}"));
            }
            55 if self.rng.random_bool(0.4) => {
                let Some(u) = self.pick(&self.users.clone()) else {
                    return;
                };
                let status = app.delete(&format!("/api/users/{u}")).await.status;
                assert!(status == 204 || status == 404, "{status}");
                self.trace.push(format!("erase {u}: {status}"));
            }
            55 => {}
            56 => {
                // A comment stored by a process that died before its increment, long ago: its
                // batch wrote the comment and the pending count announcing the increment.
                let (Some(u), Some(p)) = (
                    self.pick(&self.users.clone()),
                    self.pick(&self.posts.clone()),
                ) else {
                    return;
                };
                // The user's name, or none when erased (the item goes anyway).
                let name = app.get(&format!("/api/users/{u}")).await.body["username"].clone();
                let c = format!("lost-{}", self.rng.random_range(0..u32::MAX));
                let item = json!({ "id": c, "type": "comment", "postId": p, "userId": u,
                    "userUsername": name, "content": "lost", "creationDate": "2020-01-01T00:00:00.000Z" });
                let pending = blog::domain::pending::pending_count(&p, "2020-01-01T00:00:00.000Z");
                self.store()
                    .batch(
                        Container::Posts,
                        &p,
                        vec![BatchOp::Create { item }, BatchOp::Create { item: pending }],
                    )
                    .await
                    .unwrap();
                self.trace.push(format!("lost increment {p} {c}"));
            }
            57..=79 => {
                let f = self.pick_feed();
                let k = self.rng.random_range(0..2);
                let docs = self.next_page(f, k).await;
                self.trace.push(format!(
                    "deliver {} {} lease {k}: {}",
                    f.0.name(),
                    f.1.name(),
                    docs.len()
                ));
                self.project(f, docs).await;
            }
            80..=87 => {
                // Both leases of one lane's feed project at once.
                let (lane, c) = self.pick_feed();
                let a = self.next_page((lane, c), 0).await;
                let b = self.next_page((lane, c), 1).await;
                self.trace.push(format!(
                    "concurrent {} {} {} + {}",
                    lane.name(),
                    c.name(),
                    a.len(),
                    b.len()
                ));
                let store = self.store();
                let (ra, rb) = tokio::join!(
                    projection::project_lane(store, lane, c, &a),
                    projection::project_lane(store, lane, c, &b)
                );
                let (ra, rb) = (ra.expect("projection a"), rb.expect("projection b"));
                self.deferred
                    .extend(ra.deferred.into_iter().chain(rb.deferred));
                self.delivered.push((lane, c, a));
                self.delivered.push((lane, c, b));
            }
            88..=94 => {
                // A batch delivered before, delivered again (redelivery, or a stale batch).
                let Some((lane, c, docs)) = self.pick(&self.delivered.clone()) else {
                    return;
                };
                self.trace.push(format!(
                    "redeliver {} {} {}",
                    lane.name(),
                    c.name(),
                    docs.len()
                ));
                self.project((lane, c), docs).await;
            }
            95..=99 => {
                // A lane's process crashes part-way through a batch (after a few writes): its
                // lease is not advanced, and the batch comes again; the other lane goes on.
                let f = self.pick_feed();
                let k = self.rng.random_range(0..2);
                let before = self
                    .leases
                    .entry((f.0.name(), f.1.name(), k))
                    .or_default()
                    .clone();
                let docs = self.next_page(f, k).await;
                let budget = self.rng.random_range(0..6);
                let writes = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
                let crashing = Hooked::new(self.app.store.clone()).before(move |call| {
                    let write = !matches!(call.op, "read" | "query" | "count" | "changes");
                    let n = if write {
                        writes.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
                    } else {
                        0
                    };
                    async move {
                        if write && n >= budget {
                            return Err(StoreError::Other("the process stopped".into()));
                        }
                        Ok(())
                    }
                    .boxed()
                });
                let r = projection::project_lane(&crashing, f.0, f.1, &docs).await;
                self.trace.push(format!(
                    "crash {} {} lease {k} after {budget} writes: {}",
                    f.0.name(),
                    f.1.name(),
                    if r.is_ok() { "done first" } else { "cut" }
                ));
                if let Ok(report) = r {
                    self.deferred.extend(report.deferred);
                }
                *self.leases.get_mut(&(f.0.name(), f.1.name(), k)).unwrap() = before;
            }
            100..=106 => {
                let (Some(u), Some(x)) = (
                    self.pick(&self.users.clone()),
                    self.pick(&self.users.clone()),
                ) else {
                    return;
                };
                let r = app
                    .put(&format!("/api/users/{u}/following/{x}"), Value::Null)
                    .await;
                // 400: oneself; 404: an erased user.
                assert!([204, 400, 404].contains(&r.status), "{r:?}");
                assert_eq!(r.status == 400, u == x, "{r:?}");
                self.trace.push(format!("follow {u} {x}: {}", r.status));
            }
            107..=109 => {
                let (Some(u), Some(x)) = (
                    self.pick(&self.users.clone()),
                    self.pick(&self.users.clone()),
                ) else {
                    return;
                };
                let r = app.delete(&format!("/api/users/{u}/following/{x}")).await;
                assert_eq!(r.status, 204, "{r:?}");
                self.trace.push(format!("unfollow {u} {x}"));
            }
            _ => {
                // A restart: the lease resumes from its last saved checkpoint.
                let (lane, c) = self.pick_feed();
                let k = self.rng.random_range(0..2);
                let lease = self.leases.entry((lane.name(), c.name(), k)).or_default();
                lease.continuation = lease.checkpoint.clone();
                self.trace
                    .push(format!("restart {} {} lease {k}", lane.name(), c.name()));
            }
        }
    }

    /// Let lease 0 of each lane's feed catch up, projecting deferred posts again once the grace
    /// period has passed (as a pump does), until a round finds nothing new.
    async fn drain(&mut self) {
        let mut deferred = std::mem::take(&mut self.deferred);
        for _ in 0..50 {
            let mut quiet = true;
            if !deferred.is_empty() {
                quiet = false;
                tokio::time::sleep(projection::INCREMENT_GRACE).await;
                let rechecks: Vec<Value> = std::mem::take(&mut deferred)
                    .iter()
                    .map(|p| projection::recheck(p))
                    .collect();
                let report = projection::project(self.store(), Container::Posts, &rechecks)
                    .await
                    .expect("recheck");
                self.exercised
                    .extend(exercised(Lane::Main, Container::Posts, &rechecks));
                deferred.extend(report.deferred);
            }
            for (lane, c) in feeds() {
                loop {
                    let key = (lane.name(), c.name(), 0);
                    let lease = self.leases.entry(key).or_default().clone();
                    let page = self
                        .store()
                        .changes(c, lease.continuation.as_deref(), 100)
                        .await
                        .unwrap();
                    if page.items.is_empty() {
                        break;
                    }
                    quiet = false;
                    let report = projection::project_lane(self.store(), lane, c, &page.items)
                        .await
                        .expect("drain");
                    self.exercised.extend(exercised(lane, c, &page.items));
                    deferred.extend(report.deferred);
                    self.leases.get_mut(&key).unwrap().continuation = Some(page.continuation);
                }
            }
            if quiet {
                return;
            }
        }
        panic!("the projections never went quiet; trace {:?}", self.trace);
    }
}

fn without_system_properties(mut v: Value) -> Value {
    if let Some(o) = v.as_object_mut() {
        o.retain(|k, _| !k.starts_with('_'));
    }
    v
}

async fn all(store: &dyn Store, c: Container, q: Query) -> Vec<Value> {
    let mut q = q.limit(100);
    let mut out = Vec::new();
    loop {
        let page = store.query(c, &q).await.unwrap();
        out.extend(page.items.into_iter().map(without_system_properties));
        match page.continuation {
            Some(t) => q.continuation = Some(t),
            None => return out,
        }
    }
}

/// Every copy equals what a projection from scratch computes from the users and the items.
async fn assert_converged(w: &World<'_>, seed: u64) {
    let store = w.store();
    let ctx = || format!("seed {seed}; trace {:#?}", w.trace);
    // Live users' names; an erased user has none, and nothing live may name them.
    let mut names = BTreeMap::new();
    for u in &w.users {
        let user = store.read(Container::Users, u, u).await.unwrap().unwrap();
        if is_deleted(&user) {
            assert_eq!(user["erased"], true, "{u}'s erasure completed: {}", ctx());
            let theirs = Query::cross_partition().eq("userId", u.as_str()).live();
            assert!(
                all(store, Container::Posts, theirs).await.is_empty(),
                "{u}: {}",
                ctx()
            );
            continue;
        }
        names.insert(u.clone(), user["username"].as_str().unwrap().to_string());
    }
    let mut summaries: BTreeMap<String, BTreeMap<String, Value>> = BTreeMap::new();
    let mut feed: Vec<Value> = Vec::new();
    for p in &w.posts {
        let stored = store.read(Container::Posts, p, p).await.unwrap().unwrap();
        let items = all(store, Container::Posts, Query::partition(p.as_str()).live()).await;
        if is_deleted(&stored) {
            assert!(
                items.is_empty(),
                "live items on deleted post {p}: {}",
                ctx()
            );
            continue;
        }
        let mut post = None;
        let (mut comments, mut likes) = (0u64, 0u64);
        for item in items {
            let author = names
                .get(item["userId"].as_str().unwrap())
                .unwrap_or_else(|| panic!("{item} by an erased user: {}", ctx()));
            assert_eq!(item["userUsername"], author.as_str(), "{item}: {}", ctx());
            match item["type"].as_str().unwrap() {
                "post" => post = Some(item),
                "comment" => comments += 1,
                "like" => likes += 1,
                "pendingCount" => panic!("a pending count left on {p}: {item}: {}", ctx()),
                other => panic!("unexpected item type {other}"),
            }
        }
        let post = post.expect("the post");
        assert_eq!(post["commentCount"], comments, "{post}: {}", ctx());
        assert_eq!(post["likeCount"], likes, "{post}: {}", ctx());
        let summary = serde_json::from_value::<Post>(post).unwrap().summary();
        let summary = blog::domain::to_value(&summary);
        summaries
            .entry(summary["userId"].as_str().unwrap().to_string())
            .or_default()
            .insert(p.clone(), summary.clone());
        feed.push(summary);
    }
    for u in &w.users {
        let copies = all(
            store,
            Container::Users,
            Query::partition(u.as_str()).eq("type", "post"),
        )
        .await;
        // Whether a copy's content has reached the followers' timelines is the fan-out's state,
        // not the copy's content (the timelines are compared on their own).
        let copies: BTreeMap<String, Value> = copies
            .into_iter()
            .map(|c| (id(&c), blog::projection::posts::without_pending(&c)))
            .collect();
        assert_eq!(
            copies,
            summaries.remove(u).unwrap_or_default(),
            "copies of {u}: {}",
            ctx()
        );
    }
    feed.sort_by(|a, b| {
        (b["creationDate"].as_str(), b["id"].as_str())
            .cmp(&(a["creationDate"].as_str(), a["id"].as_str()))
    });
    let stored = all(
        store,
        Container::Feed,
        Query::partition(FEED_PK).order_by_creation(blog::store::Order::Desc),
    )
    .await;
    // The newest live posts, at least as many as the feed shows (deletions may shorten the
    // margin beyond that, never leave a gap).
    assert!(
        stored.len() >= feed.len().min(FEED_SIZE),
        "the feed is short: {}",
        ctx()
    );
    feed.truncate(stored.len());
    assert_eq!(stored, feed, "the feed: {}", ctx());
    let unique: BTreeSet<String> = stored.iter().map(id).collect();
    assert_eq!(unique.len(), stored.len());
    assert_follows_converged(w, &names, &live_posts_by_author(w).await, &ctx).await;
}

/// The short form of every live post, by author, as the timelines should show it.
async fn live_posts_by_author(w: &World<'_>) -> BTreeMap<String, Vec<Value>> {
    let store = w.store();
    let mut by_author: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for p in &w.posts {
        let stored = store.read(Container::Posts, p, p).await.unwrap().unwrap();
        if is_deleted(&stored) {
            continue;
        }
        let summary = serde_json::from_value::<Post>(stored).unwrap().summary();
        by_author
            .entry(summary.user_id.clone())
            .or_default()
            .push(blog::domain::to_value(&summary));
    }
    by_author
}

/// The follow edges, their mirrors, both counters and every timeline equal what follows from the
/// live `following` edges, the users' names and the live posts.
async fn assert_follows_converged(
    w: &World<'_>,
    names: &BTreeMap<String, String>,
    posts_by: &BTreeMap<String, Vec<Value>>,
    ctx: &impl Fn() -> String,
) {
    let store = w.store();
    let edges = |u: &str, kind: &str| {
        all(
            store,
            Container::Users,
            Query::partition(u).eq("type", kind).live(),
        )
    };
    let mut following: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for u in names.keys() {
        for e in edges(u, follows::FOLLOWING).await {
            let x = e[follows::REF_USER].as_str().unwrap().to_string();
            let name = names
                .get(&x)
                .unwrap_or_else(|| panic!("{u} follows erased {x}: {}", ctx()));
            assert_eq!(e["userUsername"], name.as_str(), "{e}: {}", ctx());
            following.entry(u.clone()).or_default().insert(x);
        }
    }
    for (u, name) in names {
        let mirrors = edges(u, follows::FOLLOWER).await;
        let got: BTreeSet<String> = mirrors
            .iter()
            .map(|m| m[follows::REF_USER].as_str().unwrap().to_string())
            .collect();
        let want: BTreeSet<String> = following
            .iter()
            .filter(|(_, xs)| xs.contains(u))
            .map(|(f, _)| f.clone())
            .collect();
        assert_eq!(got, want, "{u}'s followers ({name}): {}", ctx());
        for m in &mirrors {
            let f = m[follows::REF_USER].as_str().unwrap();
            assert_eq!(m["userUsername"], names[f].as_str(), "{m}: {}", ctx());
        }
        let user = store.read(Container::Users, u, u).await.unwrap().unwrap();
        let theirs = following.get(u).cloned().unwrap_or_default();
        assert_eq!(user["followerCount"], want.len(), "{u}: {}", ctx());
        assert_eq!(user["followingCount"], theirs.len(), "{u}: {}", ctx());

        let entries = all(
            store,
            Container::Timelines,
            Query::partition(u.as_str()).eq("type", follows::TIMELINE),
        )
        .await;
        // An entry holds the post's rarely-changing part, no counts.
        let got: BTreeMap<String, Post> = entries
            .iter()
            .map(|e| {
                assert!(e.get("likeCount").is_none(), "{e}: {}", ctx());
                let entry = serde_json::from_value::<follows::TimelineEntry>(e.clone());
                let post = entry
                    .unwrap_or_else(|err| panic!("{e}: {err}: {}", ctx()))
                    .post;
                (post.id.clone(), post)
            })
            .collect();
        let want: BTreeMap<String, Post> = theirs
            .iter()
            .flat_map(|x| posts_by.get(x).cloned().unwrap_or_default())
            .map(|p| {
                let post: Post = serde_json::from_value(p.clone()).unwrap();
                (id(&p), post.as_copied())
            })
            .collect();
        assert_eq!(got, want, "{u}'s timeline: {}", ctx());
    }
}

/// Run random cases on fresh stores from `fixture`, a few at a time. Run with its default cases
/// (seeds and number), `every_kind` also requires each unit of the table to have been handed
/// each kind of change it watches (but those [`NOT_MODELLED`]), naming what was not.
pub async fn run<F, Fut>(fixture: F, default_cases: u64, steps: usize, every_kind: bool)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Fixture>,
{
    let (first, cases) = cases(default_cases);
    let exercised = std::sync::Mutex::new(BTreeSet::new());
    let (seen, fixture) = (&exercised, &fixture);
    futures::stream::iter(first..first + cases)
        .for_each_concurrent(8, |seed| async move {
            let case = one_case(fixture, seed, steps).await;
            seen.lock().unwrap().extend(case);
        })
        .await;
    if !every_kind || (first, cases) != (1, default_cases) {
        return;
    }
    let exercised = exercised.into_inner().unwrap();
    let mut missing = Vec::new();
    for (_, unit) in projection::UNITS {
        for k in unit.watches {
            let skipped = NOT_MODELLED
                .iter()
                .any(|(u, n, _)| *u == unit.name && n == k);
            if !skipped && !exercised.contains(&(unit.name, *k)) {
                missing.push(format!("`{}` never handed a {k:?}", unit.name));
            }
        }
    }
    assert!(missing.is_empty(), "not exercised: {}", missing.join("; "));
}

async fn one_case<F, Fut>(
    fixture: &F,
    seed: u64,
    steps: usize,
) -> BTreeSet<(&'static str, ChangeKind)>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Fixture>,
{
    {
        let app = TestApp::spawn(fixture().await, false).await;
        let mut w = World {
            app: &app,
            rng: Pcg64::seed_from_u64(seed),
            users: Vec::new(),
            posts: Vec::new(),
            leases: BTreeMap::new(),
            delivered: Vec::new(),
            deferred: BTreeSet::new(),
            exercised: BTreeSet::new(),
            trace: Vec::new(),
        };
        for _ in 0..steps {
            w.step().await;
        }
        w.drain().await;
        assert_converged(&w, seed).await;
        w.exercised
    }
}

mod embedded {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn random_interleavings_converge_to_a_projection_from_scratch() {
        super::run(crate::helpers::embedded_fixture, 8, 80, true).await;
    }
}

mod cosmos {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn random_interleavings_converge_to_a_projection_from_scratch() {
        super::run(crate::cosmos::cosmos_fixture, 4, 60, false).await;
    }
}
