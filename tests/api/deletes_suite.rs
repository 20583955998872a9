//! Deletes as a client sees them (`docs/api.md`, "Deletes"): each visible at once, each converging
//! once the change feed has carried it, races with new comments and likes included. Written once
//! and instantiated per store with `deletes_suite!(path::to::fixture_fn);`.

use std::sync::Arc;

use blog::store::{Container, Query};
use serde_json::{json, Value};

use crate::helpers::{id, next_millisecond, Fixture, TestApp};

#[macro_export]
macro_rules! deletes_suite {
    ($fixture:path) => {
        $crate::deletes_suite!(@tests $fixture;
            unlike_is_idempotent_and_counts_at_once, delete_a_comment, delete_a_post,
            erase_an_account, an_erased_account_may_start_afresh,
            comments_and_likes_racing_a_post_delete_go_too, writes_racing_an_erasure_go_too,
            the_feed_keeps_a_hundred_after_deletes, deletes_name_what_they_did_not_find);
    };
    (@tests $fixture:path; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let app = $crate::helpers::TestApp::spawn($fixture().await, false).await;
                $crate::deletes_suite::$name(&app).await;
            }
        )*
    };
}

async fn post_of(app: &TestApp, post_id: &str) -> Value {
    let r = app.get(&format!("/api/posts/{post_id}")).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    r.body
}

fn ids(r: &crate::helpers::Resp) -> Vec<String> {
    r.items().iter().map(id).collect()
}

/// Every item of a container the store still holds live (tombstones excluded), across
/// partitions.
async fn live_items(app: &TestApp, c: Container, field: &str, value: &str) -> Vec<Value> {
    let q = Query::cross_partition().eq(field, value).live().limit(1000);
    app.store.query(c, &q).await.unwrap().items
}

/// The post's copies in `users` and `feed` carry these counts once the change feed is settled.
async fn copies_count(app: &TestApp, author: &str, post_id: &str, comments: u64, likes: u64) {
    app.settled("the copies' counters", || {
        copies_hold(app, author, post_id, comments, likes)
    })
    .await;
}

/// Whether the post's copies in `users` and `feed` carry these counts.
async fn copies_hold(
    app: &TestApp,
    author: &str,
    post_id: &str,
    comments: u64,
    likes: u64,
) -> bool {
    let mine = app
        .get(&format!("/api/users/{author}/posts?limit=100"))
        .await;
    let feed = app.get("/api/feed?limit=100").await;
    [mine, feed].iter().all(|r| {
        r.items()
            .iter()
            .any(|p| p["id"] == post_id && p["commentCount"] == comments && p["likeCount"] == likes)
    })
}

pub async fn unlike_is_idempotent_and_counts_at_once(app: &TestApp) {
    let ana = id(&app.create_user("ana").await);
    let bo = id(&app.create_user("bo").await);
    let p = id(&app.create_post(&ana, "t", "c").await);
    assert_eq!(app.like(&p, &bo).await.status, 201);
    assert_eq!(app.like(&p, &ana).await.status, 201);

    let unlike = format!("/api/posts/{p}/likes/{bo}");
    let r = app.delete(&unlike).await;
    assert_eq!(r.status, 204, "{:?}", r.body);
    assert_eq!(r.body, Value::Null);
    // Read, a pending count, the mark, the decrement, the pending count deleted, the liker's
    // favorite edge deleted: however many likes the post has.
    assert_eq!(r.store_operations(), 6);
    // At once: the list and the count.
    let likes = app.get(&format!("/api/posts/{p}/likes")).await;
    assert_eq!(ids(&likes), vec![format!("like-{ana}")]);
    assert_eq!(post_of(app, &p).await["likeCount"], 1);
    // Again: still 204, nothing changes (the like read, the edge's delete finding none).
    let again = app.delete(&unlike).await;
    assert_eq!((again.status, again.store_operations()), (204, 2));
    assert_eq!(post_of(app, &p).await["likeCount"], 1);
    // A user who never liked it, on a post that does not exist: 204 all the same.
    assert_eq!(
        app.delete(&format!("/api/posts/{p}/likes/nobody"))
            .await
            .status,
        204
    );
    assert_eq!(
        app.delete(&format!("/api/posts/no-post/likes/{bo}"))
            .await
            .status,
        204
    );
    copies_count(app, &ana, &p, 0, 1).await;

    // Liking again after unliking is a new like, counted once.
    assert_eq!(app.like(&p, &bo).await.status, 201);
    assert_eq!(app.like(&p, &bo).await.status, 200);
    assert_eq!(post_of(app, &p).await["likeCount"], 2);
    let likes = app.get(&format!("/api/posts/{p}/likes")).await;
    assert_eq!(likes.items().len(), 2);
    copies_count(app, &ana, &p, 0, 2).await;
}

pub async fn delete_a_comment(app: &TestApp) {
    let ana = id(&app.create_user("ana").await);
    let bo = id(&app.create_user("bo").await);
    let p = id(&app.create_post(&ana, "t", "c").await);
    let first = app.comment(&p, &bo, "first").await.body;
    let second = app.comment(&p, &ana, "second").await.body;
    assert_eq!(post_of(app, &p).await["commentCount"], 2);

    let path = format!("/api/posts/{p}/comments/{}", id(&first));
    let r = app.delete(&path).await;
    assert_eq!(r.status, 204);
    // As for a like: read, a pending count, the mark, the decrement, the pending count deleted.
    assert_eq!(r.store_operations(), 5);
    let comments = app.get(&format!("/api/posts/{p}/comments")).await;
    assert_eq!(ids(&comments), vec![id(&second)]);
    assert_eq!(post_of(app, &p).await["commentCount"], 1);
    // It is gone: a second delete finds nothing.
    app.delete(&path).await.assert_problem(404);
    // Its text is gone from the store, not only hidden.
    let stored = app
        .store
        .read(Container::Posts, &p, &id(&first))
        .await
        .unwrap()
        .expect("the mark stays until its time to live");
    assert_eq!(
        (stored["content"].as_str(), stored["deleted"].as_bool()),
        (Some(""), Some(true))
    );
    copies_count(app, &ana, &p, 1, 0).await;
}

pub async fn delete_a_post(app: &TestApp) {
    let ana = id(&app.create_user("ana").await);
    let bo = id(&app.create_user("bo").await);
    let keep = id(&app.create_post(&ana, "kept", "c").await);
    let p = id(&app.create_post(&ana, "gone", "c").await);
    for i in 0..5 {
        assert_eq!(app.comment(&p, &bo, &format!("c{i}")).await.status, 201);
    }
    app.like(&p, &bo).await;
    copies_count(app, &ana, &p, 5, 1).await;

    assert_eq!(app.delete(&format!("/api/posts/{p}")).await.status, 204);
    // At once: the post, its comments and likes, its copies.
    app.get(&format!("/api/posts/{p}"))
        .await
        .assert_problem(404);
    assert!(app
        .get(&format!("/api/posts/{p}/comments"))
        .await
        .items()
        .is_empty());
    assert!(app
        .get(&format!("/api/posts/{p}/likes"))
        .await
        .items()
        .is_empty());
    assert_eq!(
        ids(&app.get(&format!("/api/users/{ana}/posts")).await),
        vec![keep.clone()]
    );
    assert!(!ids(&app.get("/api/feed").await).contains(&p));
    // Nothing more can be added to it, edited in it, or deleted again.
    app.comment(&p, &bo, "late").await.assert_problem(404);
    app.like(&p, &ana).await.assert_problem(404);
    app.put(
        &format!("/api/posts/{p}"),
        json!({"userId": ana, "title": "t", "content": "c"}),
    )
    .await
    .assert_problem(404);
    app.delete(&format!("/api/posts/{p}"))
        .await
        .assert_problem(404);
    // And it stays so once the change feed has carried it: no live item left in its partition.
    app.settled("the deleted post's copies stay gone", || async {
        let q = Query::partition(p.clone()).live();
        app.store
            .query(Container::Posts, &q)
            .await
            .unwrap()
            .items
            .is_empty()
            && !ids(&app.get("/api/feed").await).contains(&p)
            && ids(&app.get(&format!("/api/users/{ana}/posts")).await) == vec![keep.clone()]
    })
    .await;
    assert_eq!(post_of(app, &keep).await["title"], "kept");
}

/// Comments written straight to the store (a client would take far longer), on `post`.
async fn many_comments(app: &TestApp, post: &str, author: &str, n: usize) {
    for start in (0..n).step_by(100) {
        let ops = (start..n.min(start + 100))
            .map(|i| blog::store::BatchOp::Create {
                item: json!({"id": format!("bulk-{i}"), "type": "comment", "postId": post,
                    "userId": author, "userUsername": "bo", "content": "c",
                    "creationDate": blog::domain::now()}),
            })
            .collect();
        app.store.batch(Container::Posts, post, ops).await.unwrap();
    }
}

/// Holds the marking of one post's comments mid-way: once the first [`Gate::FREE`] patches of
/// items in the partition named with [`Gate::on`] have passed since, every further one waits until the
/// gate opens. What a test does meanwhile is then seen to happen before the sweep ends, however
/// fast or loaded the machine is; an implementation that finished the sweep first never would.
#[derive(Clone)]
struct Gate {
    partition: Arc<std::sync::Mutex<Option<String>>>,
    passed: Arc<std::sync::atomic::AtomicUsize>,
    open: Arc<tokio::sync::watch::Sender<bool>>,
}

impl Gate {
    /// Marks let through once the gate is on: a page.
    const FREE: usize = blog::projection::engine::PAGE as usize;

    /// A gate (closed, on no partition yet) and the fixture's store behind it.
    fn around(fixture: Fixture) -> (Self, Fixture) {
        use futures::FutureExt as _;
        let gate = Gate {
            partition: Arc::default(),
            passed: Arc::default(),
            open: Arc::new(tokio::sync::watch::channel(false).0),
        };
        let hooked = crate::hooks::Hooked::new(fixture.store.clone()).before({
            let gate = gate.clone();
            move |call| {
                let held = call.op == "patch"
                    && call.id != call.pk
                    && gate.partition.lock().unwrap().as_deref() == Some(call.pk.as_str())
                    && gate
                        .passed
                        .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
                        >= Self::FREE;
                let mut open = gate.open.subscribe();
                async move {
                    if held {
                        let _ = open.wait_for(|open| *open).await;
                    }
                    Ok(())
                }
                .boxed()
            }
        });
        let store: Arc<dyn blog::store::Store> = Arc::new(hooked);
        (
            gate,
            Fixture {
                store,
                dir: fixture.dir,
            },
        )
    }

    fn on(&self, partition: &str) {
        *self.partition.lock().unwrap() = Some(partition.to_string());
    }

    fn open(&self) {
        self.open.send_replace(true);
    }
}

/// Waits until the pump has projected everything written so far.
async fn caught_up(app: &TestApp, what: &str) {
    use std::time::{Duration, Instant};
    let deadline = Instant::now() + Duration::from_secs(120);
    while !blog::pump::caught_up(&*app.store).await.unwrap() {
        assert!(Instant::now() < deadline, "{what} never projected");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A post with thousands of comments is deleted: the answer and the post's disappearance are
/// immediate, and another user's new post reaches the feed while the comments are still being
/// marked, not after all of them. The sweep is held at a [`Gate`] until the other post is
/// written: from then on each further page of the sweep comes round the posts feed behind it.
pub async fn a_large_delete_does_not_hold_up_other_posts(fixture: Fixture) {
    use std::time::{Duration, Instant};

    const N: usize = 2000;
    let (gate, fixture) = Gate::around(fixture);
    let app = &TestApp::spawn(fixture, true).await;
    let ana = id(&app.create_user("ana").await);
    let bo = id(&app.create_user("bo").await);
    let big = id(&app.create_post(&ana, "big", "c").await);
    many_comments(app, &big, &bo, N).await;
    caught_up(app, "the comments").await;
    let live = Query::partition(big.clone()).live();
    let live_in_big = || async { app.store.count(Container::Posts, &live).await.unwrap() };

    assert_eq!(app.delete(&format!("/api/posts/{big}")).await.status, 204);
    // On once the request's own page is marked: the gate holds the projection's marks only.
    gate.on(&big);
    app.get(&format!("/api/posts/{big}"))
        .await
        .assert_problem(404);
    assert!(!ids(&app.get("/api/feed").await).contains(&big));
    let other = id(&app.create_post(&bo, "meanwhile", "c").await);
    gate.open();
    let deadline = Instant::now() + Duration::from_secs(120);
    let left = loop {
        // Counted once the post shows: had the sweep ended before, none would be left now.
        if ids(&app.get("/api/feed").await).contains(&other) {
            break live_in_big().await;
        }
        assert!(Instant::now() < deadline, "the other post never showed");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert!(
        left > 0,
        "the other post waited for all {N} comments of the deleted one to be marked"
    );
    let deadline = Instant::now() + Duration::from_secs(120);
    while live_in_big().await > 0 {
        assert!(Instant::now() < deadline, "the sweep never ended");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(app
        .get(&format!("/api/posts/{big}/comments"))
        .await
        .items()
        .is_empty());
}

/// The same for erasing an account with thousands of comments on another user's post. The
/// erasure runs in the users feed, beside the posts feed: its marks are held at a [`Gate`] until
/// the other post has reached the feed, which it can only do if nothing waits for the erasure.
pub async fn a_large_erasure_does_not_hold_up_other_posts(fixture: Fixture) {
    use std::time::{Duration, Instant};

    const N: usize = 2000;
    let (gate, fixture) = Gate::around(fixture);
    let app = &TestApp::spawn(fixture, false).await;
    let spam = id(&app.create_user("spam").await);
    let bo = id(&app.create_user("bo").await);
    let his = id(&app.create_post(&bo, "his", "c").await);
    app.beside_the_pump(async {
        many_comments(app, &his, &spam, N).await;
        caught_up(app, "the comments").await;
        let live = Query::cross_partition().eq("userId", spam.clone()).live();
        let live_of_spam = || async { app.store.count(Container::Posts, &live).await.unwrap() };

        assert_eq!(app.delete(&format!("/api/users/{spam}")).await.status, 204);
        gate.on(&his);
        app.get(&format!("/api/users/{spam}"))
            .await
            .assert_problem(404);
        let other = id(&app.create_post(&bo, "meanwhile", "c").await);
        let deadline = Instant::now() + Duration::from_secs(120);
        let left = loop {
            if ids(&app.get("/api/feed").await).contains(&other) {
                break live_of_spam().await;
            }
            assert!(Instant::now() < deadline, "the other post never showed");
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        gate.open();
        assert!(
            left > 0,
            "the other post waited for all {N} comments of the erased account to be marked"
        );
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let user = app
                .store
                .read(Container::Users, &spam, &spam)
                .await
                .unwrap()
                .unwrap();
            if live_of_spam().await == 0 && user["erased"] == true {
                break;
            }
            assert!(Instant::now() < deadline, "the erasure never completed");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    app.settled("the copies' counters", || copies_hold(app, &bo, &his, 0, 0))
        .await;
}

pub async fn erase_an_account(app: &TestApp) {
    let ana = id(&app.create_user("ana-to-erase").await);
    let bo = id(&app.create_user("bo").await);
    let hers = id(&app.create_post(&ana, "hers", "c").await);
    let his = id(&app.create_post(&bo, "his", "c").await);
    app.comment(&his, &ana, "from ana").await;
    app.comment(&his, &bo, "from bo").await;
    app.like(&his, &ana).await;
    app.comment(&hers, &bo, "on hers").await;
    app.like(&hers, &bo).await;
    copies_count(app, &bo, &his, 2, 1).await;

    assert_eq!(app.delete(&format!("/api/users/{ana}")).await.status, 204);
    // At once.
    app.get(&format!("/api/users/{ana}"))
        .await
        .assert_problem(404);
    app.get(&format!("/api/posts/{hers}"))
        .await
        .assert_problem(404);
    assert!(app
        .get(&format!("/api/users/{ana}/posts"))
        .await
        .items()
        .is_empty());
    let comments = app.get(&format!("/api/posts/{his}/comments")).await;
    assert_eq!(comments.items().len(), 1);
    assert_eq!(comments.items()[0]["userId"], bo);
    assert!(app
        .get(&format!("/api/posts/{his}/likes"))
        .await
        .items()
        .is_empty());
    // The erased user can write nothing more.
    app.comment(&his, &ana, "ghost").await.assert_problem(422);
    app.put(&format!("/api/users/{ana}"), json!({"username": "back"}))
        .await
        .assert_problem(404);
    app.delete(&format!("/api/users/{ana}"))
        .await
        .assert_problem(404);

    // Converged: counters exact, copies gone, the name on nothing (marks included).
    copies_count(app, &bo, &his, 1, 0).await;
    app.settled("nothing of the erased user remains", || async {
        live_items(app, Container::Posts, "userId", &ana)
            .await
            .is_empty()
            && live_items(app, Container::Posts, "userUsername", "ana-to-erase")
                .await
                .is_empty()
            && app
                .store
                .query(
                    Container::Posts,
                    &Query::cross_partition().eq("userUsername", "ana-to-erase"),
                )
                .await
                .unwrap()
                .items
                .is_empty()
            && !ids(&app.get("/api/feed").await).contains(&hers)
    })
    .await;
    assert_eq!(post_of(app, &his).await["commentCount"], 1);
}

pub async fn an_erased_account_may_start_afresh(app: &TestApp) {
    // With BLOG_AUTH=none ids are fresh anyway; what matters is that erasing completes: the
    // projection marks the tombstone erased.
    let ana = id(&app.create_user("ana").await);
    app.create_post(&ana, "t", "c").await;
    assert_eq!(app.delete(&format!("/api/users/{ana}")).await.status, 204);
    app.settled("the erasure completes", || async {
        let u = app.store.read(Container::Users, &ana, &ana).await.unwrap();
        u.is_some_and(|u| u["erased"] == true && u["username"] == "")
    })
    .await;
}

pub async fn comments_and_likes_racing_a_post_delete_go_too(app: &TestApp) {
    let ana = id(&app.create_user("ana").await);
    let p = id(&app.create_post(&ana, "t", "c").await);
    let mut fans = Vec::new();
    for i in 0..8 {
        fans.push(id(&app.create_user(&format!("fan{i}")).await));
    }
    let mut tasks = Vec::new();
    for fan in fans {
        let (origin, client, p) = (app.origin.clone(), app.client.clone(), p.clone());
        tasks.push(tokio::spawn(async move {
            for i in 0..10 {
                let body = json!({ "userId": fan, "content": format!("c{i}") });
                let url = format!("{origin}/api/posts/{p}/comments");
                let s = client.post(url).json(&body).send().await.unwrap().status();
                assert!(s == 201 || s == 404, "{s}");
                let url = format!("{origin}/api/posts/{p}/likes");
                let s = client
                    .post(url)
                    .json(&json!({"userId": fan}))
                    .send()
                    .await
                    .unwrap()
                    .status();
                assert!(s == 201 || s == 200 || s == 404, "{s}");
            }
        }));
    }
    tokio::time::sleep(std::time::Duration::from_millis(30)).await;
    assert_eq!(app.delete(&format!("/api/posts/{p}")).await.status, 204);
    for t in tasks {
        t.await.unwrap();
    }
    app.settled("nothing live remains in the deleted post", || async {
        let q = Query::partition(p.clone()).live();
        app.store
            .query(Container::Posts, &q)
            .await
            .unwrap()
            .items
            .is_empty()
    })
    .await;
    assert!(app
        .get(&format!("/api/posts/{p}/comments"))
        .await
        .items()
        .is_empty());
    assert!(app
        .get(&format!("/api/posts/{p}/likes"))
        .await
        .items()
        .is_empty());
}

pub async fn writes_racing_an_erasure_go_too(app: &TestApp) {
    let ana = id(&app.create_user("ana-racing").await);
    let bo = id(&app.create_user("bo").await);
    let his = id(&app.create_post(&bo, "his", "c").await);
    for i in 0..20 {
        app.create_post(&ana, &format!("t{i}"), "c").await;
        app.comment(&his, &ana, "c").await;
    }
    let (origin, client, a, h) = (
        app.origin.clone(),
        app.client.clone(),
        ana.clone(),
        his.clone(),
    );
    let writer = tokio::spawn(async move {
        for i in 0..30 {
            let _ = client
                .post(format!("{origin}/api/posts"))
                .json(&json!({ "userId": a, "title": format!("n{i}"), "content": "c" }))
                .send()
                .await;
            let _ = client
                .post(format!("{origin}/api/posts/{h}/comments"))
                .json(&json!({ "userId": a, "content": "c" }))
                .send()
                .await;
        }
    });
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    assert_eq!(app.delete(&format!("/api/users/{ana}")).await.status, 204);
    writer.await.unwrap();
    app.settled("nothing of the erased user remains", || async {
        live_items(app, Container::Posts, "userId", &ana)
            .await
            .is_empty()
            && app
                .get(&format!("/api/users/{ana}/posts"))
                .await
                .items()
                .is_empty()
            && post_of(app, &his).await["commentCount"] == 0
            && app
                .get("/api/feed?limit=100")
                .await
                .items()
                .iter()
                .all(|p| p["userId"] != ana)
    })
    .await;
}

pub async fn the_feed_keeps_a_hundred_after_deletes(app: &TestApp) {
    let ana = id(&app.create_user("ana").await);
    let mut posts = Vec::new();
    for i in 0..115 {
        posts.push(id(&app.create_post(&ana, &format!("t{i}"), "c").await));
        next_millisecond().await;
    }
    app.settled("the feed is full", || async {
        app.get("/api/feed?limit=1").await.items().first().map(id) == posts.last().cloned()
    })
    .await;
    // Delete the ten newest: the feed still shows a hundred, the next newest.
    for p in posts.iter().rev().take(10) {
        assert_eq!(app.delete(&format!("/api/posts/{p}")).await.status, 204);
    }
    let expected: Vec<String> = posts.iter().rev().skip(10).take(100).cloned().collect();
    app.settled(
        "the feed shows the hundred newest remaining posts",
        || async {
            let mut got = Vec::new();
            let mut path = "/api/feed?limit=100".to_string();
            loop {
                let r = app.get(&path).await;
                got.extend(ids(&r));
                match r.body["continuationToken"].as_str() {
                    Some(t) => path = format!("/api/feed?limit=100&continuationToken={t}"),
                    None => break,
                }
            }
            got == expected
        },
    )
    .await;
}

pub async fn deletes_name_what_they_did_not_find(app: &TestApp) {
    let ana = id(&app.create_user("ana").await);
    let p = id(&app.create_post(&ana, "t", "c").await);
    let r = app.delete(&format!("/api/posts/{p}/comments/nope")).await;
    r.assert_problem(404);
    assert!(r.body["detail"].as_str().unwrap().contains("nope"));
    // A post's id is no comment's.
    app.delete(&format!("/api/posts/{p}/comments/{p}"))
        .await
        .assert_problem(404);
    app.delete("/api/posts/nope").await.assert_problem(404);
    app.delete("/api/users/nope").await.assert_problem(404);
    // A user's id is no post's, nor the other way round.
    app.delete(&format!("/api/posts/{ana}"))
        .await
        .assert_problem(404);
    app.delete(&format!("/api/users/{p}"))
        .await
        .assert_problem(404);
    // Bad ids are 400, as everywhere.
    app.delete("/api/posts/a%23b").await.assert_problem(400);
    app.delete(&format!("/api/posts/{p}/comments/a%5Cb"))
        .await
        .assert_problem(400);
    assert_eq!(post_of(app, &p).await["title"], "t");
}

/// The posts projection may see a delete's mark before the request has corrected the counter:
/// the request must not count the deletion a second time (a decrement after the projection's
/// recount left `-1`). A hook projects the posts feed right after the mark, every time.
pub async fn a_delete_and_the_projection_count_it_once(fixture: Fixture) {
    use std::sync::atomic::{AtomicBool, Ordering};

    use blog::projection;
    use futures::FutureExt as _;

    use crate::hooks::Hooked;

    let inner = fixture.store.clone();
    let armed = Arc::new(AtomicBool::new(false));
    let hooked = Hooked::new(inner.clone()).after({
        let (inner, armed) = (inner.clone(), armed.clone());
        move |call| {
            let (inner, armed) = (inner.clone(), armed.clone());
            async move {
                let marked = call.op == "patch" && call.id != call.pk;
                if marked && armed.load(Ordering::SeqCst) {
                    let docs = inner.changes(Container::Posts, None, 1000).await?.items;
                    projection::project(&*inner, Container::Posts, &docs)
                        .await
                        .map_err(|e| blog::store::StoreError::Other(e.to_string()))?;
                }
                Ok(())
            }
            .boxed()
        }
    });
    let store: Arc<dyn blog::store::Store> = Arc::new(hooked);
    let app = TestApp::spawn(
        Fixture {
            store,
            dir: fixture.dir,
        },
        false,
    )
    .await;
    let ana = id(&app.create_user("ana").await);
    let p = id(&app.create_post(&ana, "t", "c").await);
    assert_eq!(app.like(&p, &ana).await.status, 201);
    let c = app.comment(&p, &ana, "c").await.body;
    armed.store(true, Ordering::SeqCst);

    assert_eq!(
        app.delete(&format!("/api/posts/{p}/likes/{ana}"))
            .await
            .status,
        204
    );
    let path = format!("/api/posts/{p}/comments/{}", id(&c));
    assert_eq!(app.delete(&path).await.status, 204);
    let post = post_of(&app, &p).await;
    assert_eq!(
        (post["likeCount"].as_i64(), post["commentCount"].as_i64()),
        (Some(0), Some(0))
    );
}

mod large_delete {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn embedded() {
        super::a_large_delete_does_not_hold_up_other_posts(
            crate::helpers::embedded_fixture().await,
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn cosmos() {
        super::a_large_delete_does_not_hold_up_other_posts(crate::cosmos::cosmos_fixture().await)
            .await;
    }
}

mod large_erasure {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn embedded() {
        super::a_large_erasure_does_not_hold_up_other_posts(
            crate::helpers::embedded_fixture().await,
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn cosmos() {
        super::a_large_erasure_does_not_hold_up_other_posts(crate::cosmos::cosmos_fixture().await)
            .await;
    }
}

mod counted_once {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn embedded() {
        super::a_delete_and_the_projection_count_it_once(crate::helpers::embedded_fixture().await)
            .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn cosmos() {
        super::a_delete_and_the_projection_count_it_once(crate::cosmos::cosmos_fixture().await)
            .await;
    }
}
