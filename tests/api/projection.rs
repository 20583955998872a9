//! The change-feed projections driven step by step through the one entry, `project`: renames that
//! go back and forth, reads older than the change handled, a fan-out over many items, an overfull
//! feed, counters whose increment is still on its way, and a hot post under load (more on the
//! counters in `counters`).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use blog::domain::{FEED_KEEP, FEED_PK, FEED_SIZE};
use blog::projection::{self, Report};
use blog::store::{BatchOp, Container, PatchOp, Query, Store, StoreError};
use futures::FutureExt as _;
use serde_json::{json, Value};

use crate::helpers::{eventually, id, Fixture, TestApp};
use crate::hooks::Hooked;

/// Follows one container's change feed from its start, projecting every page, like a pump that
/// runs only when told to.
pub struct Follower {
    pub c: Container,
    pub continuation: Option<String>,
}

impl Follower {
    pub fn new(c: Container) -> Self {
        Follower {
            c,
            continuation: None,
        }
    }

    /// Project everything new; the reports of each page.
    pub async fn drain(&mut self, store: &dyn Store) -> Vec<Report> {
        let mut reports = Vec::new();
        loop {
            let page = store
                .changes(self.c, self.continuation.as_deref(), 100)
                .await
                .expect("change feed");
            if page.items.is_empty() {
                return reports;
            }
            reports.push(
                projection::project(store, self.c, &page.items)
                    .await
                    .expect("projected"),
            );
            self.continuation = Some(page.continuation);
        }
    }
}

/// What a spy saw: the order of queries and patches, and how many patches were in flight at once.
#[derive(Default)]
pub struct Seen {
    log: Mutex<Vec<&'static str>>,
    patching: AtomicUsize,
    max_patching: AtomicUsize,
}

/// `inner`, recording its queries and patches in the returned [`Seen`]; each patch lasts long
/// enough for concurrent patches to overlap.
pub fn spy(inner: Arc<dyn Store>) -> (Hooked, Arc<Seen>) {
    let seen = Arc::new(Seen::default());
    let (before, after) = (seen.clone(), seen.clone());
    let store = Hooked::new(inner)
        .before(move |call| {
            let seen = before.clone();
            async move {
                if call.op == "query" || call.op == "patch" {
                    seen.log.lock().unwrap().push(call.op);
                }
                if call.op == "patch" {
                    let now = seen.patching.fetch_add(1, Ordering::SeqCst) + 1;
                    seen.max_patching.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                Ok(())
            }
            .boxed()
        })
        .after(move |call| {
            let seen = after.clone();
            async move {
                if call.op == "patch" {
                    seen.patching.fetch_sub(1, Ordering::SeqCst);
                }
                Ok(())
            }
            .boxed()
        });
    (store, seen)
}

async fn rename(app: &TestApp, user: &str, name: &str) {
    let r = app
        .put(&format!("/api/users/{user}"), json!({ "username": name }))
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
}

/// Every name a user's items and copies carry, with where.
async fn names_of(store: &dyn Store, user: &str, post: &str) -> Vec<(String, String)> {
    let mut names = Vec::new();
    let q = Query::partition(post).limit(100);
    for item in store.query(Container::Posts, &q).await.unwrap().items {
        if item["userId"] == user {
            names.push((
                format!("posts/{}", item["id"]),
                item["userUsername"].to_string(),
            ));
        }
    }
    let q = Query::partition(user).eq("type", "post").limit(100);
    for item in store.query(Container::Users, &q).await.unwrap().items {
        names.push((
            format!("users/{}", item["id"]),
            item["userUsername"].to_string(),
        ));
    }
    for item in store
        .query(Container::Feed, &Query::partition(FEED_PK).limit(100))
        .await
        .unwrap()
        .items
    {
        names.push((
            format!("feed/{}", item["id"]),
            item["userUsername"].to_string(),
        ));
    }
    names
}

/// Y → X → Y while the users feed sees only the last state, and the posts feed handed "X" to a
/// post and to a comment and a like written meanwhile: every copy ends on "Y".
pub async fn a_rename_back_and_forth_ends_on_the_last_name(fixture: Fixture) {
    let app = TestApp::spawn(fixture, false).await;
    let store = &*app.store;
    let (mut posts, mut users) = (
        Follower::new(Container::Posts),
        Follower::new(Container::Users),
    );
    let u = id(&app.create_user("Y").await);
    let p = id(&app.create_post(&u, "t", "c").await);
    assert_eq!(app.comment(&p, &u, "before").await.status, 201);
    posts.drain(store).await;
    users.drain(store).await;

    rename(&app, &u, "X").await;
    // Written while the name is "X"; the users feed lags and never sees "X".
    assert_eq!(app.comment(&p, &u, "during").await.status, 201);
    assert_eq!(app.like(&p, &u).await.status, 201);
    posts.drain(store).await;
    posts.drain(store).await;
    rename(&app, &u, "Y").await;
    users.drain(store).await;
    posts.drain(store).await;

    let names = names_of(store, &u, &p).await;
    assert!(names.len() >= 6, "{names:?}");
    for (at, name) in &names {
        assert_eq!(name, "\"Y\"", "{at} carries {name}");
    }
}

/// A user "A" with a post, a comment and a like, all projected, then renamed to "B"; the rename's
/// change is projected through a store where, at the fan-out's first patch of an item, `user_ops`
/// change the user, and every item the fan-out patches is set to `racing_name` at once. Returns
/// the user, the post, the posts and users followers (users past the rename) and the result.
async fn fan_out_of_b_raced(
    app: &TestApp,
    user_ops: Vec<PatchOp>,
    racing_name: &'static str,
) -> (
    String,
    String,
    Follower,
    Follower,
    Result<Report, projection::ProjectionError>,
) {
    let store = app.store.clone();
    let (mut posts, mut users) = (
        Follower::new(Container::Posts),
        Follower::new(Container::Users),
    );
    let u = id(&app.create_user("A").await);
    let p = id(&app.create_post(&u, "t", "c").await);
    assert_eq!(app.comment(&p, &u, "hi").await.status, 201);
    assert_eq!(app.like(&p, &u).await.status, 201);
    posts.drain(&*store).await;
    users.drain(&*store).await;
    rename(app, &u, "B").await;

    let raced = Arc::new(AtomicBool::new(false));
    let racing = Hooked::new(store.clone()).after({
        let (inner, u, raced) = (store.clone(), u.clone(), raced.clone());
        move |call| {
            let (inner, u, raced, user_ops) =
                (inner.clone(), u.clone(), raced.clone(), user_ops.clone());
            async move {
                if call.op != "patch" || call.id == u {
                    return Ok(());
                }
                if !raced.swap(true, Ordering::SeqCst) {
                    inner
                        .patch(Container::Users, &u, &u, &user_ops, None)
                        .await?;
                }
                let ops = [PatchOp::set("/userUsername", racing_name)];
                inner
                    .patch(call.container, &call.pk, &call.id, &ops, None)
                    .await?;
                Ok(())
            }
            .boxed()
        }
    });
    let page = store
        .changes(Container::Users, users.continuation.as_deref(), 100)
        .await
        .unwrap();
    assert!(
        page.items.iter().any(|d| d["username"] == "B"),
        "{:?}",
        page.items
    );
    let projected = projection::project(&racing, Container::Users, &page.items).await;
    assert!(raced.load(Ordering::SeqCst), "the fan-out of B ran");
    users.continuation = Some(page.continuation);
    (u, p, posts, users, projected)
}

/// A fan-out of "B" that a rename to "C" overtakes: while it runs, the user becomes "C" and every
/// item it patches to "B" is written back to "C" at once (the newer fan-out and the requests
/// racing it). The stale fan-out stops without an error instead of fighting the newer name, and
/// the newer rename's change leaves every copy on "C".
pub async fn a_fan_out_overtaken_by_a_newer_rename_stops(fixture: Fixture) {
    let app = TestApp::spawn(fixture, false).await;
    let store = app.store.clone();
    let newer = vec![
        PatchOp::set("/username", "C"),
        PatchOp::incr("/renameVersion", 1),
    ];
    let (u, p, mut posts, mut users, projected) = fan_out_of_b_raced(&app, newer, "C").await;
    assert!(
        projected.is_ok(),
        "the overtaken fan-out failed: {projected:?}"
    );

    // The newer rename's own change, then the posts feed carrying it into the feed.
    users.drain(&*store).await;
    posts.drain(&*store).await;
    let names = names_of(&*store, &u, &p).await;
    assert!(names.len() >= 5, "{names:?}");
    for (at, name) in &names {
        assert_eq!(name, "\"C\"", "{at} carries {name}");
    }
    assert_eq!(
        app.get(&format!("/api/users/{u}")).await.body["username"],
        "C"
    );
}

/// A fan-out of "B" whose user is erased while it runs (and whose items the erasure keeps
/// changing): the stale fan-out stops without an error instead of fighting the erasure, whose
/// own change takes over the user's items.
pub async fn a_fan_out_whose_user_is_erased_meanwhile_stops(fixture: Fixture) {
    let app = TestApp::spawn(fixture, false).await;
    let erase = vec![PatchOp::set(&format!("/{}", blog::domain::DELETED), true)];
    let (.., projected) = fan_out_of_b_raced(&app, erase, "").await;
    assert!(
        projected.is_ok(),
        "the fan-out of an erased user failed: {projected:?}"
    );
}

/// A projection whose point read returns a version older than the change it handles must not
/// write that version into a view.
pub async fn a_read_older_than_the_change_is_never_projected(fixture: Fixture) {
    let app = TestApp::spawn(fixture, false).await;
    let spy = Hooked::new(app.store.clone());
    let (mut posts, mut users) = (
        Follower::new(Container::Posts),
        Follower::new(Container::Users),
    );
    let u = id(&app.create_user("ana").await);
    let p = id(&app.create_post(&u, "first", "c").await);
    posts.drain(&spy).await;
    users.drain(&spy).await;
    let old_post = app
        .store
        .read(Container::Posts, &p, &p)
        .await
        .unwrap()
        .unwrap();
    let old_user = app
        .store
        .read(Container::Users, &u, &u)
        .await
        .unwrap()
        .unwrap();
    // A second, later version of each, then reads that keep seeing the first.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let r = app
        .put(
            &format!("/api/posts/{p}"),
            json!({ "userId": u, "title": "second", "content": "c" }),
        )
        .await;
    assert_eq!(r.status, 200);
    rename(&app, &u, "bea").await;
    spy.serve_stale(Container::Posts, &p, old_post);
    spy.serve_stale(Container::Users, &u, old_user);
    posts.drain(&spy).await;
    users.drain(&spy).await;

    let copy = app.get(&format!("/api/users/{u}/posts")).await;
    assert_eq!(copy.items()[0]["title"], "second", "{:?}", copy.body);
    let feed = app.get("/api/feed").await;
    assert_eq!(feed.items()[0]["title"], "second");
    let post = app.get(&format!("/api/posts/{p}")).await.body;
    assert_eq!(post["userUsername"], "bea", "the rename was fanned out");
}

/// A rename of a user with many items is applied page by page: the first patches are written
/// before the second page is read, and only a few at a time.
pub async fn a_large_fan_out_goes_page_by_page(fixture: Fixture) {
    const ITEMS: usize = 1_000;
    let app = TestApp::spawn(fixture, false).await;
    let (spy, seen) = spy(app.store.clone());
    let (mut posts, mut users) = (
        Follower::new(Container::Posts),
        Follower::new(Container::Users),
    );
    let u = id(&app.create_user("ana").await);
    let p = id(&app.create_post(&u, "t", "c").await);
    let comments: Vec<Value> = (0..ITEMS)
        .map(|i| {
            json!({ "id": format!("c{i:05}"), "type": "comment", "postId": p, "userId": u,
                    "userUsername": "ana", "content": "hi",
                    "creationDate": format!("2026-01-01T00:00:00.{:03}Z", i % 1000) })
        })
        .collect();
    for chunk in comments.chunks(100) {
        let ops = chunk
            .iter()
            .map(|item| BatchOp::Create { item: item.clone() })
            .collect();
        app.store.batch(Container::Posts, &p, ops).await.unwrap();
    }
    posts.drain(&*app.store).await;
    users.drain(&*app.store).await;
    rename(&app, &u, "bea").await;
    users.drain(&spy).await;

    let log = seen.log.lock().unwrap().clone();
    let first_patch = log.iter().position(|e| *e == "patch").expect("patches");
    assert_eq!(
        log[..first_patch].iter().filter(|e| **e == "query").count(),
        1,
        "one page read before its patches"
    );
    assert!(log.iter().filter(|e| **e == "patch").count() >= ITEMS);
    let max = seen.max_patching.load(Ordering::SeqCst);
    assert!(
        (1..=projection::rename::PATCHES_IN_FLIGHT).contains(&max),
        "{max} patches at once"
    );
    let q = Query::partition(p.as_str()).ne("userUsername", "bea");
    assert_eq!(app.store.count(Container::Posts, &q).await.unwrap(), 0);
}

/// While two projections insert at once the feed container may hold more than 100 posts; the
/// feed request never pages past the 100 newest, and the next projection trims the container.
pub async fn the_feed_never_pages_past_the_hundred_newest(fixture: Fixture) {
    let app = TestApp::spawn(fixture, false).await;
    let mut posts = Follower::new(Container::Posts);
    let u = id(&app.create_user("ana").await);
    let entry = |i: usize| {
        json!({ "id": format!("f{i:03}"), "type": "post", "postId": format!("f{i:03}"),
                "userId": u, "userUsername": "ana", "title": "t", "content": "c",
                "commentCount": 0, "likeCount": 0,
                "creationDate": format!("2026-01-01T00:00:{:02}.000Z", i % 60) })
    };
    let overfull = FEED_KEEP + 5;
    for i in 0..overfull {
        app.store
            .upsert(Container::Feed, FEED_PK, entry(i))
            .await
            .unwrap();
    }
    let mut newest: Vec<Value> = (0..overfull).map(entry).collect();
    newest.sort_by(|a, b| {
        (b["creationDate"].as_str(), b["id"].as_str())
            .cmp(&(a["creationDate"].as_str(), a["id"].as_str()))
    });
    let newest: Vec<String> = newest[..FEED_SIZE].iter().map(id).collect();

    let all = app.get("/api/feed?limit=100").await;
    assert_eq!(all.items().len(), FEED_SIZE);
    assert_eq!(
        all.body["continuationToken"],
        Value::Null,
        "nothing after the 100th"
    );
    let mut paged = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let path = match &token {
            None => "/api/feed?limit=30".to_string(),
            Some(t) => format!("/api/feed?limit=30&continuationToken={t}"),
        };
        let r = app.get(&path).await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        paged.extend(r.items().iter().map(id));
        match r.body["continuationToken"].as_str() {
            Some(t) => token = Some(t.to_string()),
            None => break,
        }
    }
    assert_eq!(paged, newest);

    // A new post's projection trims the container back to its 120, the new post among them.
    let p = id(&app.create_post(&u, "new", "c").await);
    posts.drain(&*app.store).await;
    let q = Query::partition(FEED_PK).eq("type", "post");
    assert_eq!(
        app.store.count(Container::Feed, &q).await.unwrap(),
        FEED_KEEP as u64
    );
    assert_eq!(
        app.get("/api/feed?limit=1").await.items()[0]["id"],
        p.as_str()
    );
}

/// What a comment request's batch writes before its increment: the comment, and the pending
/// count that announces the increment.
async fn comment_without_increment(store: &dyn Store, p: &str, u: &str) {
    let comment = json!({ "id": "c1", "type": "comment", "postId": p, "userId": u,
                          "userUsername": "ana", "content": "hi",
                          "creationDate": blog::domain::now() });
    let pending = blog::domain::pending::pending_count(p, &blog::domain::now());
    store
        .batch(
            Container::Posts,
            p,
            vec![
                BatchOp::Create { item: comment },
                BatchOp::Create { item: pending },
            ],
        )
        .await
        .unwrap();
}

/// A comment stored by a request whose increment has not landed yet: the projection leaves the
/// counter alone rather than count the comment before its increment does (which would count
/// it twice), and defers the post for a later look.
pub async fn a_pending_increment_is_never_counted_twice(fixture: Fixture) {
    let app = TestApp::spawn(fixture, false).await;
    let mut posts = Follower::new(Container::Posts);
    let u = id(&app.create_user("ana").await);
    let p = id(&app.create_post(&u, "t", "c").await);
    posts.drain(&*app.store).await;
    comment_without_increment(&*app.store, &p, &u).await;
    let reports = posts.drain(&*app.store).await;
    assert_eq!(reports.last().unwrap().deferred, vec![p.clone()]);
    // The request's increment lands only now.
    app.store
        .patch(
            Container::Posts,
            &p,
            &p,
            &[PatchOp::incr("/commentCount", 1)],
            None,
        )
        .await
        .unwrap();
    assert_eq!(
        app.get(&format!("/api/posts/{p}")).await.body["commentCount"],
        1
    );
    posts.drain(&*app.store).await;
    assert_eq!(
        app.get(&format!("/api/posts/{p}")).await.body["commentCount"],
        1
    );
}

/// Facts for a post change are read concurrently, except that the post is read before its
/// pending counts (and any recount): a change landing after the read voids a correction made
/// from it. The post's read is slowed down to show the order.
pub async fn a_post_is_read_before_its_pending_counts_and_the_rest_alongside(fixture: Fixture) {
    let app = TestApp::spawn(fixture, false).await;
    let u = id(&app.create_user("ana").await);
    let p = id(&app.create_post(&u, "t", "c").await);
    let log = Arc::new(Mutex::new(Vec::<String>::new()));
    let (before, after) = (log.clone(), log.clone());
    let post = p.clone();
    let store = Hooked::new(app.store.clone())
        .before(move |call| {
            let log = before.clone();
            let slow = call.op == "read" && call.container == Container::Posts && call.id == post;
            async move {
                log.lock()
                    .unwrap()
                    .push(format!("start {} {}", call.op, call.container.name()));
                if slow {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Ok(())
            }
            .boxed()
        })
        .after(move |call| {
            let log = after.clone();
            async move {
                log.lock()
                    .unwrap()
                    .push(format!("end {} {}", call.op, call.container.name()));
                Ok(())
            }
            .boxed()
        });
    Follower::new(Container::Posts).drain(&store).await;
    let log = log.lock().unwrap().clone();
    let at = |e: &str| {
        log.iter()
            .position(|l| l == e)
            .unwrap_or_else(|| panic!("no `{e}` in {log:?}"))
    };
    assert!(at("end read posts") < at("start query posts"), "{log:?}");
    // The author (with their copy of the post, in one query of their partition).
    assert!(
        at("start query users") < at("end read posts"),
        "the author is not read alongside the post: {log:?}"
    );
    assert!(
        at("start query feed") < at("end read posts"),
        "the feed is not read alongside the post: {log:?}"
    );
}

/// An increment lost with a crashed process: the pump corrects the counter once the item is
/// past the grace period, also when the pump restarts in between.
pub async fn a_lost_increment_is_corrected_across_a_pump_restart(fixture: Fixture) {
    let app = TestApp::spawn(fixture, true).await;
    let u = id(&app.create_user("ana").await);
    let p = id(&app.create_post(&u, "t", "c").await);
    comment_without_increment(&*app.store, &p, &u).await;
    eventually("the post is deferred in the pump's checkpoint", || async {
        let lease = app
            .store
            .read(Container::Leases, "pump.posts", "pump.posts")
            .await
            .unwrap();
        lease.is_some_and(|l| l["deferred"] == json!([p]))
    })
    .await;
    let store = app.store.clone();
    let dir = app.stop().await;
    let app = TestApp::spawn(Fixture { store, dir }, true).await;
    eventually("the counter counts the orphan comment", || async {
        app.get(&format!("/api/posts/{p}")).await.body["commentCount"] == 1
    })
    .await;
}

/// 16 clients comment on one post as fast as they can; meanwhile new posts still reach the
/// feed promptly, and once the load stops the hot post's count is exact.
pub async fn a_hot_post_does_not_stall_the_feed(fixture: Fixture) {
    const CLIENTS: usize = 16;
    const LOAD: Duration = Duration::from_secs(8);
    /// Generous: far above the one second aimed for, far below the stall it guards against.
    const BOUND: Duration = Duration::from_secs(3);
    let app = Arc::new(TestApp::spawn(fixture, true).await);
    let u = id(&app.create_user("ana").await);
    let hot = id(&app.create_post(&u, "hot", "c").await);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let created = Arc::new(AtomicUsize::new(0));
    let mut clients = Vec::new();
    for _ in 0..CLIENTS {
        let (app, hot, u, stop, created) = (
            app.clone(),
            hot.clone(),
            u.clone(),
            stop.clone(),
            created.clone(),
        );
        clients.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                if app.comment(&hot, &u, "hi").await.status == 201 {
                    created.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    let started = Instant::now();
    let mut lags = Vec::new();
    while started.elapsed() < LOAD {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let p = id(&app.create_post(&u, "new", "c").await);
        let t = Instant::now();
        loop {
            if app
                .get("/api/feed?limit=5")
                .await
                .items()
                .iter()
                .any(|i| id(i) == p)
            {
                break;
            }
            assert!(
                t.elapsed() < BOUND,
                "a new post took over {BOUND:?} to reach the feed under load (lags so far {lags:?})"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        lags.push(t.elapsed());
    }
    stop.store(true, Ordering::Relaxed);
    println!("feed lags under load: {lags:?}");
    for c in clients {
        c.await.unwrap();
    }
    let n = created.load(Ordering::Relaxed);
    assert!(n > 0);
    let t = Instant::now();
    loop {
        let got = app.get(&format!("/api/posts/{hot}")).await.body["commentCount"].clone();
        if got == n {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "commentCount {got} after the load, {n} comments"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The price of a batch does not grow with its number of authors: the likes of many users on one
/// post are projected with the store operations of the likes of two (their authors are read by
/// one query, not one read each), and every like's author name is still checked.
pub async fn a_batch_reads_its_authors_at_once(fixture: Fixture) {
    let app = TestApp::spawn(fixture, false).await;
    let store = app.store.clone();
    let author = id(&app.create_user("ana").await);
    let mut batch_cost = Vec::new();
    let mut follower = Follower::new(Container::Posts);
    for likers in [2, 20] {
        let post = id(&app.create_post(&author, "p", "c").await);
        follower.drain(&*store).await;
        let mut users = Vec::new();
        for i in 0..likers {
            users.push(id(&app.create_user(&format!("liker {i}")).await));
        }
        for u in &users {
            assert_eq!(app.like(&post, u).await.status, 201);
        }
        let (reports, usage) = blog::store::metrics::scope(follower.drain(&*store)).await;
        // The likes, and the post whose count they raised.
        assert_eq!(reports.iter().map(|r| r.changes).sum::<usize>(), likers + 1);
        batch_cost.push(usage.operations);
        let likes = app.get(&format!("/api/posts/{post}/likes?limit=100")).await;
        assert!(likes.items().iter().all(|l| l["userUsername"]
            .as_str()
            .is_some_and(|n| n.starts_with("liker"))));
    }
    // One read per author would make it 18 more; a store that answers a query across
    // partitions a page per key range (Cosmos DB) may take a few more pages.
    assert!(
        batch_cost[1] <= batch_cost[0] + 4,
        "store operations to project 2 likes, then 20 (each by another user): {batch_cost:?}"
    );
}

/// A post's fan-out reads the author's followers; then an unfollow is projected (the mirror, then
/// the followee's entries removed); then the fan-out writes its copies. The copy of the follower
/// who left must not stay (the interleaving is forced: the unfollow is projected inside the
/// fan-out's read of the followers, after that read answered).
pub async fn an_unfollow_racing_a_fan_out_leaves_no_copy(fixture: Fixture) {
    let app = TestApp::spawn(fixture, false).await;
    let store = app.store.clone();
    let (mut posts, mut users) = (
        Follower::new(Container::Posts),
        Follower::new(Container::Users),
    );
    let ana = id(&app.create_user("ana").await);
    let bob = id(&app.create_user("bob").await);
    let edge = format!("/api/users/{ana}/following/{bob}");
    assert_eq!(app.put(&edge, Value::Null).await.status, 204);
    posts.drain(&*store).await;
    users.drain(&*store).await;
    let p = id(&app.create_post(&bob, "t", "c").await);
    assert_eq!(app.delete(&edge).await.status, 204);

    let from = Arc::new(Mutex::new(users.continuation.clone()));
    let raced = Arc::new(AtomicBool::new(false));
    let racing = Hooked::new(store.clone()).after({
        let (inner, bob, from, raced) = (store.clone(), bob.clone(), from.clone(), raced.clone());
        move |call| {
            let (inner, bob, from, raced) =
                (inner.clone(), bob.clone(), from.clone(), raced.clone());
            async move {
                // The first query in bob's partition: his followers.
                if call.op != "query"
                    || call.container != Container::Users
                    || call.pk != bob
                    || raced.swap(true, Ordering::SeqCst)
                {
                    return Ok(());
                }
                let at = from.lock().unwrap().clone();
                let page = inner.changes(Container::Users, at.as_deref(), 100).await?;
                projection::project(&*inner, Container::Users, &page.items)
                    .await
                    .map_err(|e| StoreError::Other(e.to_string()))?;
                *from.lock().unwrap() = Some(page.continuation);
                Ok(())
            }
            .boxed()
        }
    });
    posts.drain(&racing).await;
    assert!(
        raced.load(Ordering::SeqCst),
        "the fan-out read the followers"
    );
    // The pump goes on past the unfollow it projected.
    users.continuation = from.lock().unwrap().clone();
    users.drain(&*store).await;
    posts.drain(&*store).await;

    let entries = Query::partition(ana.clone()).eq("type", "timeline");
    assert_eq!(
        store.count(Container::Timelines, &entries).await.unwrap(),
        0,
        "ana's timeline keeps {p} after she unfollowed its author"
    );
    let r = app.get(&format!("/api/users/{ana}/timeline")).await;
    assert!(r.items().is_empty(), "{:?}", r.body);
}

/// A batch delivered again, and a recheck of a post whose counters are right, write nothing: a
/// copy already holding what the projection would write is left alone, and so is every entry in
/// the author's followers' timelines (the store meters each write it makes, so a rewrite of an
/// identical copy or entry would show).
pub async fn a_redelivered_batch_writes_nothing(fixture: Fixture) {
    let writes: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = writes.clone();
    let fixture = fixture.wrapped(move |inner| {
        Arc::new(Hooked::new(inner).before(move |call| {
            let seen = seen.clone();
            async move {
                if matches!(
                    call.op,
                    "create" | "upsert" | "replace" | "delete" | "patch" | "batch"
                ) {
                    let target = format!("{} {}/{}", call.op, call.container.name(), call.id);
                    seen.lock().unwrap().push(target);
                }
                Ok(())
            }
            .boxed()
        }))
    });
    let app = TestApp::spawn(fixture, false).await;
    let store = &*app.store;
    let (mut posts, mut users) = (
        Follower::new(Container::Posts),
        Follower::new(Container::Users),
    );
    let u = id(&app.create_user("ana").await);
    let mut followers = Vec::new();
    for name in ["bob", "cy"] {
        let f = id(&app.create_user(name).await);
        let edge = format!("/api/users/{f}/following/{u}");
        assert_eq!(app.put(&edge, Value::Null).await.status, 204);
        followers.push(f);
    }
    users.drain(store).await;
    let p = id(&app.create_post(&u, "t", "c").await);
    assert_eq!(app.comment(&p, &u, "hi").await.status, 201);
    assert_eq!(app.like(&p, &u).await.status, 201);
    posts.drain(store).await;
    users.drain(store).await;
    // The copies hold the counts; the followers' timelines hold the post without them.
    let copy = store.read(Container::Users, &u, &p).await.unwrap().unwrap();
    assert_eq!(
        (copy["commentCount"].as_u64(), copy["likeCount"].as_u64()),
        (Some(1), Some(1))
    );
    let entry = format!("timeline-{p}");
    let mut entries = Vec::new();
    for f in &followers {
        let e = store.read(Container::Timelines, f, &entry).await.unwrap();
        let e = e.unwrap_or_else(|| panic!("no entry of {p} in {f}'s timeline"));
        assert!(e.get("commentCount").is_none() && e.get("likeCount").is_none());
        entries.push(e);
    }

    // Every change of `posts` and `users` so far, as a driver replaying from the start would
    // deliver them.
    let all = store
        .changes(Container::Posts, None, 100)
        .await
        .unwrap()
        .items;
    let all_users = store
        .changes(Container::Users, None, 100)
        .await
        .unwrap()
        .items;
    assert!(all.iter().any(|d| d["id"] == p.as_str()), "{all:?}");
    for (what, c, batch) in [
        ("the whole feed again", Container::Posts, all.clone()),
        (
            "the post's change again",
            Container::Posts,
            all.iter()
                .filter(|d| d["type"] == "post")
                .cloned()
                .collect(),
        ),
        (
            "a recheck of the post",
            Container::Posts,
            vec![projection::recheck(&p)],
        ),
        (
            "the users feed again (follows, copies, the fan-out's record)",
            Container::Users,
            all_users.clone(),
        ),
    ] {
        writes.lock().unwrap().clear();
        let (report, usage) =
            blog::store::metrics::scope(projection::project(store, c, &batch)).await;
        let report = report.expect("projected");
        let made = writes.lock().unwrap().clone();
        assert!(
            made.is_empty() && report.writes == 0,
            "{what}: {} store operations, and these writes of copies already up to date: {made:?}",
            usage.operations
        );
        assert!(usage.operations > 0, "{what}: the projection read nothing");
    }
    // What the copies and the entries hold is unchanged, and still right.
    let again = store.read(Container::Users, &u, &p).await.unwrap().unwrap();
    assert_eq!(again["_etag"], copy["_etag"]);
    for (f, before) in followers.iter().zip(&entries) {
        let e = store
            .read(Container::Timelines, f, &entry)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(e["_etag"], before["_etag"], "{f}'s entry was rewritten");
    }
    let feed = app.get("/api/feed").await;
    assert_eq!(feed.items()[0]["likeCount"], 1);
}

/// A fan-out cut short (a follower's entry fails to be written) records nothing, so the
/// redelivered change of the author's copy fans out again, although the copy already holds the
/// post: skipping unchanged entries never skips one that was not written.
pub async fn a_fan_out_cut_short_is_done_by_the_redelivery(fixture: Fixture) {
    let app = TestApp::spawn(fixture, false).await;
    let store = app.store.clone();
    let (mut posts, mut users) = (
        Follower::new(Container::Posts),
        Follower::new(Container::Users),
    );
    let ana = id(&app.create_user("ana").await);
    let bob = id(&app.create_user("bob").await);
    let edge = format!("/api/users/{bob}/following/{ana}");
    assert_eq!(app.put(&edge, Value::Null).await.status, 204);
    users.drain(&*store).await;
    posts.drain(&*store).await;
    let p = id(&app.create_post(&ana, "t", "c").await);
    // The main lane writes ana's copy; its change is the timeline lane's batch.
    let batch = store
        .changes(Container::Posts, posts.continuation.as_deref(), 100)
        .await
        .unwrap()
        .items;
    projection::project_lane(&*store, projection::Lane::Main, Container::Posts, &batch)
        .await
        .expect("projected");
    let copy = store.read(Container::Users, &ana, &p).await.unwrap();
    let batch = vec![copy.expect("the copy")];
    let failing = Hooked::new(store.clone()).before({
        let bob = bob.clone();
        move |call| {
            let failed = call.op == "upsert" && call.pk == bob && call.id.starts_with("timeline-");
            async move {
                if failed {
                    return Err(StoreError::Other("the process stopped".into()));
                }
                Ok(())
            }
            .boxed()
        }
    });
    let timeline_lane = projection::Lane::Timeline;
    let cut = projection::project_lane(&failing, timeline_lane, Container::Users, &batch).await;
    assert!(cut.is_err(), "the entry's write failed: {cut:?}");
    let entry = format!("timeline-{p}");
    assert!(store
        .read(Container::Timelines, &bob, &entry)
        .await
        .unwrap()
        .is_none());

    projection::project_lane(&*store, timeline_lane, Container::Users, &batch)
        .await
        .expect("projected");
    let e = store
        .read(Container::Timelines, &bob, &entry)
        .await
        .unwrap();
    assert!(e.is_some(), "the redelivered batch left bob without {p}");
    let timeline = app.get(&format!("/api/users/{bob}/timeline")).await;
    assert_eq!(
        timeline.items()[0]["postId"],
        p.as_str(),
        "{:?}",
        timeline.body
    );
}

/// A comment whose increment is still on its way, then the increment, projected as a pump that
/// runs between the two sees them: the comment's batch defers the post without counting its
/// items (its pending count is that young), the increment's batch finds no pending count left
/// and reports the deferral answered (the pump drops the recheck), and a recheck that runs all
/// the same only reads the post and its pending counts: no count, no feed query, no copy
/// written.
pub async fn a_landed_increment_answers_the_deferral(fixture: Fixture) {
    let log: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = log.clone();
    let fixture = fixture.wrapped(move |inner| {
        Arc::new(Hooked::new(inner).before(move |call| {
            let seen = seen.clone();
            async move {
                seen.lock()
                    .unwrap()
                    .push(format!("{} {}", call.op, call.container.name()));
                Ok(())
            }
            .boxed()
        }))
    });
    let app = TestApp::spawn(fixture, false).await;
    let store = &*app.store;
    let mut posts = Follower::new(Container::Posts);
    let u = id(&app.create_user("ana").await);
    let p = id(&app.create_post(&u, "t", "c").await);
    posts.drain(store).await;
    comment_without_increment(store, &p, &u).await;
    log.lock().unwrap().clear();
    let reports = posts.drain(store).await;
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0].deferred, vec![p.clone()]);
    assert!(reports[0].settled.is_empty());
    let ops = std::mem::take(&mut *log.lock().unwrap());
    assert!(
        !ops.contains(&"count posts".to_string()),
        "the comment's batch counted the post's items: {ops:?}"
    );

    store
        .patch(
            Container::Posts,
            &p,
            &p,
            &[PatchOp::incr("/commentCount", 1)],
            None,
        )
        .await
        .unwrap();
    // The request then deletes the pending count that announced the increment.
    let q = Query::partition(p.as_str())
        .eq("type", blog::domain::pending::PENDING_COUNT)
        .limit(10);
    for pending in store.query(Container::Posts, &q).await.unwrap().items {
        store
            .delete(Container::Posts, &p, pending["id"].as_str().unwrap())
            .await
            .unwrap();
    }
    let reports = posts.drain(store).await;
    assert_eq!(reports.len(), 1);
    assert!(reports[0].deferred.is_empty());
    assert_eq!(reports[0].settled, vec![p.clone()]);

    log.lock().unwrap().clear();
    let report = projection::project(store, Container::Posts, &[projection::recheck(&p)])
        .await
        .unwrap();
    let ops = std::mem::take(&mut *log.lock().unwrap());
    assert_eq!(report.writes, 0);
    assert_eq!(
        ops,
        vec!["read posts", "query posts"],
        "a recheck does more than read the post and its pending counts"
    );
    assert_eq!(
        app.get(&format!("/api/posts/{p}")).await.body["commentCount"],
        1
    );
}

mod embedded {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_fan_out_cut_short_is_done_by_the_redelivery() {
        super::a_fan_out_cut_short_is_done_by_the_redelivery(embedded_fixture().await).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_unfollow_racing_a_fan_out_leaves_no_copy() {
        super::an_unfollow_racing_a_fan_out_leaves_no_copy(embedded_fixture().await).await;
    }

    use crate::helpers::embedded_fixture;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_redelivered_batch_writes_nothing() {
        super::a_redelivered_batch_writes_nothing(embedded_fixture().await).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_landed_increment_answers_the_deferral() {
        super::a_landed_increment_answers_the_deferral(embedded_fixture().await).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_rename_back_and_forth_ends_on_the_last_name() {
        super::a_rename_back_and_forth_ends_on_the_last_name(embedded_fixture().await).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_fan_out_overtaken_by_a_newer_rename_stops() {
        super::a_fan_out_overtaken_by_a_newer_rename_stops(embedded_fixture().await).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_fan_out_whose_user_is_erased_meanwhile_stops() {
        super::a_fan_out_whose_user_is_erased_meanwhile_stops(embedded_fixture().await).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_read_older_than_the_change_is_never_projected() {
        super::a_read_older_than_the_change_is_never_projected(embedded_fixture().await).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_large_fan_out_goes_page_by_page() {
        super::a_large_fan_out_goes_page_by_page(embedded_fixture().await).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_feed_never_pages_past_the_hundred_newest() {
        super::the_feed_never_pages_past_the_hundred_newest(embedded_fixture().await).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_pending_increment_is_never_counted_twice() {
        super::a_pending_increment_is_never_counted_twice(embedded_fixture().await).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lost_increment_is_corrected_across_a_pump_restart() {
        super::a_lost_increment_is_corrected_across_a_pump_restart(embedded_fixture().await).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_post_is_read_before_its_pending_counts_and_the_rest_alongside() {
        super::a_post_is_read_before_its_pending_counts_and_the_rest_alongside(
            embedded_fixture().await,
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_batch_reads_its_authors_at_once() {
        super::a_batch_reads_its_authors_at_once(embedded_fixture().await).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_hot_post_does_not_stall_the_feed() {
        super::a_hot_post_does_not_stall_the_feed(embedded_fixture().await).await;
    }
}

mod cosmos {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_fan_out_cut_short_is_done_by_the_redelivery() {
        super::a_fan_out_cut_short_is_done_by_the_redelivery(cosmos_fixture().await).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_unfollow_racing_a_fan_out_leaves_no_copy() {
        super::an_unfollow_racing_a_fan_out_leaves_no_copy(cosmos_fixture().await).await;
    }

    use crate::cosmos::cosmos_fixture;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_redelivered_batch_writes_nothing() {
        super::a_redelivered_batch_writes_nothing(cosmos_fixture().await).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_landed_increment_answers_the_deferral() {
        super::a_landed_increment_answers_the_deferral(cosmos_fixture().await).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_rename_back_and_forth_ends_on_the_last_name() {
        super::a_rename_back_and_forth_ends_on_the_last_name(cosmos_fixture().await).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_fan_out_overtaken_by_a_newer_rename_stops() {
        super::a_fan_out_overtaken_by_a_newer_rename_stops(cosmos_fixture().await).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_fan_out_whose_user_is_erased_meanwhile_stops() {
        super::a_fan_out_whose_user_is_erased_meanwhile_stops(cosmos_fixture().await).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_read_older_than_the_change_is_never_projected() {
        super::a_read_older_than_the_change_is_never_projected(cosmos_fixture().await).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_pending_increment_is_never_counted_twice() {
        super::a_pending_increment_is_never_counted_twice(cosmos_fixture().await).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_batch_reads_its_authors_at_once() {
        super::a_batch_reads_its_authors_at_once(cosmos_fixture().await).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_post_is_read_before_its_pending_counts_and_the_rest_alongside() {
        super::a_post_is_read_before_its_pending_counts_and_the_rest_alongside(
            cosmos_fixture().await,
        )
        .await;
    }
}
