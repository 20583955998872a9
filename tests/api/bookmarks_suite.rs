//! Bookmarks (docs/api.md) as a client sees them, written once and instantiated per store with
//! `bookmarks_suite!(path::to::fixture_fn);`.

use std::time::Duration;

use blog::auth::Auth;
use blog::ops::progress::Progress;
use blog::ops::verify_and_repair;
use blog::store::{Container, PatchOp};
use serde_json::{json, Value};

use crate::helpers::{id, next_millisecond, Fixture, Parts, TestApp};

#[macro_export]
macro_rules! bookmarks_suite {
    ($fixture:path) => {
        $crate::bookmarks_suite!(@tests $fixture;
            bookmarks_are_idempotent_newest_first_paged_and_counted,
            bookmark_input_is_checked_and_refusals_write_nothing,
            bookmarked_copies_follow_edits_renames_and_counts,
            bookmarks_go_with_the_post_and_with_erasures,
            verify_finds_and_repair_mends_bookmarks,
            verify_finds_and_repair_removes_copies_of_no_bookmark_or_post);
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn only_the_signed_in_user_bookmarks_for_themselves() {
            $crate::bookmarks_suite::only_the_signed_in_user_bookmarks_for_themselves(
                $fixture().await,
            )
            .await;
        }
    };
    (@tests $fixture:path; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let app = $crate::helpers::TestApp::spawn($fixture().await, false).await;
                $crate::bookmarks_suite::$name(&app).await;
            }
        )*
    };
}

fn owned(ids: &[&String]) -> Vec<String> {
    ids.iter().map(|s| s.to_string()).collect()
}

fn bookmark(user: &str, post: &str) -> String {
    format!("/api/users/{user}/bookmarks/{post}")
}

async fn put(app: &TestApp, user: &str, post: &str) {
    let r = app.put(&bookmark(user, post), Value::Null).await;
    assert_eq!(r.status, 204, "{:?}", r.body);
}

async fn delete(app: &TestApp, user: &str, post: &str) {
    let r = app.delete(&bookmark(user, post)).await;
    assert_eq!(r.status, 204, "{:?}", r.body);
}

/// The first page of `user`'s bookmarks (up to 100).
async fn saved(app: &TestApp, user: &str) -> Vec<Value> {
    let r = app
        .get(&format!("/api/users/{user}/bookmarks?limit=100"))
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    r.items().clone()
}

async fn saved_ids(app: &TestApp, user: &str) -> Vec<String> {
    saved(app, user).await.iter().map(id).collect()
}

async fn bookmark_count(app: &TestApp, post: &str) -> u64 {
    let r = app.get(&format!("/api/posts/{post}")).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    r.body["bookmarkCount"].as_u64().expect("a count")
}

pub async fn bookmarks_are_idempotent_newest_first_paged_and_counted(app: &TestApp) {
    let ana = id(&app.create_user("ana").await);
    let bob = id(&app.create_user("bob").await);
    let long = "x".repeat(300);
    let mut posts = Vec::new();
    for n in 0..3 {
        posts.push(id(&app
            .create_post(&bob, &format!("post {n}"), &long)
            .await));
    }
    let (p0, p1, p2) = (&posts[0], &posts[1], &posts[2]);
    // Bookmarked in the order p0, p2, p1, and again: the repeats change nothing.
    for p in [p0, p2, p1] {
        put(app, &ana, p).await;
        next_millisecond().await;
    }
    put(app, &ana, p0).await;
    put(app, &bob, p0).await;
    app.settle().await;
    assert_eq!(saved_ids(app, &ana).await, owned(&[p1, p2, p0]));
    let shown = &saved(app, &ana).await[0];
    assert_eq!(shown["content"].as_str().unwrap().chars().count(), 200);
    assert!(shown.get("bookmarkCount").is_none(), "in short form");
    assert_eq!(bookmark_count(app, p0).await, 2);
    assert_eq!(bookmark_count(app, p1).await, 1);

    // Paged like the other lists: one query a page, and the counts of each post shown read
    // from the post.
    let r = app
        .get(&format!("/api/users/{ana}/bookmarks?limit=2"))
        .await;
    assert!(r.store_operations() <= 3, "{}", r.store_operations());
    assert_eq!(
        r.items().iter().map(id).collect::<Vec<_>>(),
        owned(&[p1, p2])
    );
    let token = r.body["continuationToken"].as_str().expect("a next page");
    let next = app
        .get(&format!(
            "/api/users/{ana}/bookmarks?limit=2&continuationToken={}",
            crate::api_suite::url_encode(token)
        ))
        .await;
    assert_eq!(
        next.items().iter().map(id).collect::<Vec<_>>(),
        owned(&[p0])
    );
    assert!(next.body["continuationToken"].is_null());

    // Taken back twice; bookmarked again, it is the newest.
    delete(app, &ana, p2).await;
    delete(app, &ana, p2).await;
    app.settle().await;
    assert_eq!(saved_ids(app, &ana).await, owned(&[p1, p0]));
    assert_eq!(bookmark_count(app, p2).await, 0);
    next_millisecond().await;
    put(app, &ana, p0).await;
    put(app, &ana, p2).await;
    app.settle().await;
    assert_eq!(saved_ids(app, &ana).await, owned(&[p2, p1, p0]));
    assert_eq!(bookmark_count(app, p2).await, 1);
    assert_eq!(saved_ids(app, &bob).await, owned(&[p0]));
    assert!(saved_ids(app, "nobody").await.is_empty());
}

pub async fn bookmark_input_is_checked_and_refusals_write_nothing(app: &TestApp) {
    let ana = id(&app.create_user("ana").await);
    let bob = id(&app.create_user("bob").await);
    let p = id(&app.create_post(&bob, "t", "c").await);
    app.put(&bookmark(&ana, "nothing"), Value::Null)
        .await
        .assert_problem(404);
    app.put(&bookmark("nobody", &p), Value::Null)
        .await
        .assert_problem(404);
    for bad in [bookmark(&ana, "a%5Cb"), bookmark("a%5Cb", &p)] {
        app.put(&bad, Value::Null).await.assert_problem(400);
        app.delete(&bad).await.assert_problem(400);
    }
    app.get("/api/users/a%5Cb/bookmarks")
        .await
        .assert_problem(400);
    // A deleted post is no post.
    let gone = id(&app.create_post(&bob, "gone", "c").await);
    assert_eq!(app.delete(&format!("/api/posts/{gone}")).await.status, 204);
    app.put(&bookmark(&ana, &gone), Value::Null)
        .await
        .assert_problem(404);
    // Taking back what was never bookmarked is done already.
    delete(app, &ana, &p).await;
    app.settle().await;
    assert!(saved_ids(app, &ana).await.is_empty());
    assert!(saved_ids(app, "nobody").await.is_empty());
    assert_eq!(bookmark_count(app, &p).await, 0);
    let q = blog::store::Query::partition(p.as_str()).eq("type", "bookmark");
    assert_eq!(app.store.count(Container::Posts, &q).await.unwrap(), 0);
}

pub async fn bookmarked_copies_follow_edits_renames_and_counts(app: &TestApp) {
    let ana = id(&app.create_user("ana").await);
    let bob = id(&app.create_user("bob").await);
    let cy = id(&app.create_user("cy").await);
    let p = id(&app.create_post(&bob, "first", "c").await);
    put(app, &ana, &p).await;
    put(app, &cy, &p).await;
    app.settle().await;
    let r = app
        .put(
            &format!("/api/posts/{p}"),
            json!({ "userId": bob, "title": "edited", "content": "short now" }),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(app.like(&p, &ana).await.status, 201);
    assert_eq!(app.comment(&p, &cy, "hi").await.status, 201);
    let r = app
        .put(
            &format!("/api/users/{bob}"),
            json!({ "username": "robert" }),
        )
        .await;
    assert_eq!(r.status, 200);
    app.settle().await;
    for user in [&ana, &cy] {
        let shown = &saved(app, user).await[0];
        assert_eq!(
            (
                &shown["title"],
                &shown["content"],
                &shown["userUsername"],
                &shown["likeCount"],
                &shown["commentCount"]
            ),
            (
                &json!("edited"),
                &json!("short now"),
                &json!("robert"),
                &json!(1),
                &json!(1)
            ),
            "{user}"
        );
    }
    assert_eq!(bookmark_count(app, &p).await, 2);
}

pub async fn bookmarks_go_with_the_post_and_with_erasures(app: &TestApp) {
    let ana = id(&app.create_user("ana").await);
    let bob = id(&app.create_user("bob").await);
    let cy = id(&app.create_user("cy").await);
    let p = id(&app.create_post(&bob, "deleted soon", "c").await);
    let q = id(&app.create_post(&bob, "bob's", "c").await);
    let r = id(&app.create_post(&cy, "cy's", "c").await);
    for (user, post) in [(&ana, &p), (&ana, &q), (&ana, &r), (&cy, &q)] {
        put(app, user, post).await;
    }
    app.settle().await;
    assert_eq!(saved(app, &ana).await.len(), 3);

    // The post deleted: out of every list.
    assert_eq!(app.delete(&format!("/api/posts/{p}")).await.status, 204);
    app.settle().await;
    let mut left = saved_ids(app, &ana).await;
    left.sort();
    let mut expected = vec![q.clone(), r.clone()];
    expected.sort();
    assert_eq!(left, expected);

    // A post whose bookmarks were all taken back, deleted: its copies' job item goes with it.
    let s = id(&app.create_post(&bob, "taken back", "c").await);
    put(app, &ana, &s).await;
    app.settle().await;
    let job = format!("timelineJob-bookmarks-{s}");
    let read_job = || app.store.read(Container::Users, &bob, &job);
    assert!(read_job().await.unwrap().is_some(), "a fan-out's job item");
    delete(app, &ana, &s).await;
    app.settle().await;
    assert_eq!(app.delete(&format!("/api/posts/{s}")).await.status, 204);
    app.settle().await;
    assert_eq!(read_job().await.unwrap(), None);

    // The bookmarking user erased: their bookmarks no longer count.
    assert_eq!(app.delete(&format!("/api/users/{cy}")).await.status, 204);
    app.settle().await;
    assert_eq!(bookmark_count(app, &q).await, 1);
    assert!(saved_ids(app, &cy).await.is_empty());
    // ... and the author erased (cy wrote r): r leaves ana's list.
    assert_eq!(saved_ids(app, &ana).await, owned(&[&q]));
    assert_eq!(app.delete(&format!("/api/users/{bob}")).await.status, 204);
    app.settle().await;
    assert!(saved_ids(app, &ana).await.is_empty());
    let copies = blog::store::Query::cross_partition().eq("type", "bookmarked");
    assert_eq!(app.store.count(Container::Users, &copies).await.unwrap(), 0);
}

pub async fn only_the_signed_in_user_bookmarks_for_themselves(fixture: Fixture) {
    let app = TestApp::spawn_with_auth(fixture, false, Auth::easy_auth()).await;
    let (ana, bob) = (("aad", "ana-object"), ("aad", "bob-object"));
    let made = |who| {
        let app = &app;
        async move {
            let r = app
                .as_principal("POST", "/api/users", who, json!({ "username": who.1 }))
                .await;
            assert_eq!(r.status, 201, "{:?}", r.body);
            id(&r.body)
        }
    };
    let ana_id = made(ana).await;
    let bob_id = made(bob).await;
    let r = app
        .as_principal(
            "POST",
            "/api/posts",
            bob,
            json!({ "title": "t", "content": "c" }),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let p = id(&r.body);
    // Bob may not bookmark, or take a bookmark back, in ana's name.
    for method in ["PUT", "DELETE"] {
        app.as_principal(method, &bookmark(&ana_id, &p), bob, Value::Null)
            .await
            .assert_problem(403);
    }
    // Nor can nobody.
    app.put(&bookmark(&ana_id, &p), Value::Null)
        .await
        .assert_problem(401);
    // Each list is read by its owner (it is theirs alone).
    let saved_by = |user: String, who: (&'static str, &'static str)| {
        let app = &app;
        async move {
            let list = format!("/api/users/{user}/bookmarks?limit=100");
            let r = app.as_principal("GET", &list, who, Value::Null).await;
            assert_eq!(r.status, 200, "{:?}", r.body);
            r.items().iter().map(id).collect::<Vec<_>>()
        }
    };
    app.settle().await;
    assert!(saved_by(ana_id.clone(), ana).await.is_empty());
    assert_eq!(bookmark_count(&app, &p).await, 0);
    let r = app
        .as_principal("PUT", &bookmark(&ana_id, &p), ana, Value::Null)
        .await;
    assert_eq!(r.status, 204, "{:?}", r.body);
    app.settle().await;
    assert_eq!(saved_by(ana_id.clone(), ana).await, owned(&[&p]));
    assert!(saved_by(bob_id.clone(), bob).await.is_empty());
}

pub async fn verify_finds_and_repair_mends_bookmarks(app: &TestApp) {
    let ana = id(&app.create_user("ana").await);
    let bob = id(&app.create_user("bob").await);
    let cy = id(&app.create_user("cy").await);
    let p = id(&app.create_post(&bob, "kept", "c").await);
    let q = id(&app.create_post(&bob, "unbookmarked", "c").await);
    put(app, &ana, &p).await;
    put(app, &cy, &p).await;
    app.settle().await;
    let clean = verify_and_repair(&*app.store, false, Duration::ZERO, &Progress::hidden)
        .await
        .unwrap();
    assert!(clean.is_clean(), "{}", clean.render());

    // Drift the change feed would not bring back: ana's copy stale, cy's lost, a copy of a post
    // nobody bookmarked, and p's count off.
    let copy = format!("bookmarked-{p}");
    let users = Container::Users;
    let stale = [PatchOp::set("/post/title", "tampered")];
    app.store
        .patch(users, &ana, &copy, &stale, None)
        .await
        .unwrap();
    app.store.delete(users, &cy, &copy).await.unwrap();
    let mut extra = app.store.read(users, &ana, &copy).await.unwrap().unwrap();
    extra["id"] = json!(format!("bookmarked-{q}"));
    extra["postId"] = json!(q);
    app.store.upsert(users, &ana, extra).await.unwrap();
    let count = [PatchOp::set("/bookmarkCount", 5)];
    app.store
        .patch(Container::Posts, &p, &p, &count, None)
        .await
        .unwrap();
    // q, with no bookmark, counted one.
    let one = [PatchOp::set("/bookmarkCount", 1)];
    app.store
        .patch(Container::Posts, &q, &q, &one, None)
        .await
        .unwrap();
    blog::pump::checkpoint_at_end(&*app.store).await.unwrap();

    let found = verify_and_repair(&*app.store, false, Duration::ZERO, &Progress::hidden)
        .await
        .unwrap();
    let rendered = found.render();
    for kind in ["bookmark copy: 3", "bookmark count: 2"] {
        assert!(rendered.contains(kind), "{kind}: {rendered}");
    }

    let mended = verify_and_repair(&*app.store, true, Duration::ZERO, &Progress::hidden)
        .await
        .unwrap();
    let (_, after) = mended.bookmarks().repair.as_ref().expect("a repair ran");
    assert!(after.is_clean(), "{}", mended.render());
    let shown = &saved(app, &ana).await;
    assert_eq!(shown.iter().map(id).collect::<Vec<_>>(), owned(&[&p]));
    assert_eq!(shown[0]["title"], "kept");
    assert_eq!(saved_ids(app, &cy).await, owned(&[&p]));
    assert_eq!(bookmark_count(app, &p).await, 2);
    assert_eq!(bookmark_count(app, &q).await, 0);
}

/// Copies in a user's partition that no bookmark of a live post accounts for: found whatever
/// their post's count, and removed by the repair.
pub async fn verify_finds_and_repair_removes_copies_of_no_bookmark_or_post(app: &TestApp) {
    let ana = id(&app.create_user("ana").await);
    let bob = id(&app.create_user("bob").await);
    let p = id(&app.create_post(&bob, "kept", "c").await);
    let q = id(&app.create_post(&bob, "never bookmarked", "c").await);
    let d = id(&app.create_post(&bob, "deleted", "c").await);
    put(app, &ana, &p).await;
    put(app, &ana, &d).await;
    app.settle().await;
    let users = Container::Users;
    let kept = app
        .store
        .read(users, &ana, &format!("bookmarked-{d}"))
        .await
        .unwrap()
        .expect("a copy");
    assert_eq!(app.delete(&format!("/api/posts/{d}")).await.status, 204);
    app.settle().await;
    assert_eq!(saved_ids(app, &ana).await, owned(&[&p]));

    // Copies of a deleted post, of a post that never was (a copy is of the post its id names,
    // whatever it holds: this one holds p), and of a live post nobody bookmarked (no bookmark
    // and a count of 0).
    for post in [&d, &"nothing".to_string(), &q] {
        let mut copy = kept.clone();
        copy["id"] = json!(format!("bookmarked-{post}"));
        copy["postId"] = json!(if post == "nothing" { &p } else { post });
        app.store.upsert(users, &ana, copy).await.unwrap();
    }
    blog::pump::checkpoint_at_end(&*app.store).await.unwrap();
    // In flight: ana's bookmark of p taken back (its copy goes when the change feed applies it).
    let mark = blog::domain::follows::edge_tombstone_ops();
    let ana_mark = format!("bookmark-{ana}");
    app.store
        .patch(Container::Posts, &p, &ana_mark, &mark, None)
        .await
        .unwrap();
    let found = verify_and_repair(&*app.store, false, Duration::ZERO, &Progress::hidden)
        .await
        .unwrap();
    let bookmarks = &found.bookmarks().before;
    assert_eq!(bookmarks.findings.len(), 3, "{}", found.render());
    assert_eq!(bookmarks.lagging, 1, "p: {}", found.render());
    assert!(
        found.render().contains("bookmark copy: 3"),
        "{}",
        found.render()
    );

    // Looked at again after a settle, they are still drift (and p lagging); the repair removes
    // them and leaves p's copy to the change feed.
    let settle = Duration::from_millis(1);
    let mended = verify_and_repair(&*app.store, true, settle, &Progress::hidden)
        .await
        .unwrap();
    let bookmarks = &mended.bookmarks().before;
    assert_eq!(bookmarks.findings.len(), 3, "{}", mended.render());
    assert_eq!(bookmarks.lagging, 1, "p: {}", mended.render());
    let (_, after) = mended.bookmarks().repair.as_ref().expect("a repair ran");
    assert!(after.is_clean(), "{}", mended.render());
    let copies = blog::store::Query::partition(ana.as_str()).eq("type", "bookmarked");
    assert_eq!(app.store.count(users, &copies).await.unwrap(), 1);
    assert_eq!(saved_ids(app, &ana).await, owned(&[&p]));
    assert_eq!(bookmark_count(app, &q).await, 0);
}
