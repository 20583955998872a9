//! The copies kept for a post's audience (its bookmarkers' copies, its tags' copies) as a client
//! sees them: they hold what changes rarely, the lists show the counts of the post itself, a
//! like or a comment rewrites none of them, and an edit racing their fan-out reaches every one.
//! Written once and instantiated per store with `audience_suite!(path::to::fixture_fn);`.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use blog::domain::bookmarks::Bookmark;
use blog::ops::progress::Progress;
use blog::ops::verify_and_repair;
use blog::store::{Container, PatchOp, Store, StoreError};
use futures::FutureExt;
use serde_json::{json, Value};

use crate::helpers::{id, Fixture, TestApp};
use crate::hooks::{Call, Hooked};

#[macro_export]
macro_rules! audience_suite {
    ($fixture:path) => {
        $crate::audience_suite!(@tests $fixture;
            a_like_or_comment_rewrites_no_bookmark_or_tag_copy,
            copies_written_with_counts_show_the_posts_counts_and_verify_clean,
            an_edit_racing_a_bookmark_fan_out_reaches_every_copy,
            a_hot_post_liked_and_bookmarked_at_once_fails_no_batch);
    };
    (@tests $fixture:path; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                $crate::audience_suite::$name($fixture().await).await;
            }
        )*
    };
}

/// Whether a store call writes a copy kept for a post's audience: a bookmarker's copy in
/// `users` or a tag's copy in `feed`.
fn writes_a_copy(call: &Call) -> bool {
    let writes = matches!(
        call.op,
        "create" | "upsert" | "replace" | "patch" | "delete" | "batch"
    );
    writes
        && match call.container {
            Container::Users => call.id.starts_with("bookmarked-"),
            Container::Feed => call.pk.starts_with("tag:"),
            _ => false,
        }
}

async fn bookmark(app: &TestApp, user: &str, post: &str) {
    let r = app
        .put(&format!("/api/users/{user}/bookmarks/{post}"), Value::Null)
        .await;
    assert_eq!(r.status, 204, "{:?}", r.body);
}

/// The first page of `user`'s bookmarks.
async fn saved(app: &TestApp, user: &str) -> Vec<Value> {
    let r = app
        .get(&format!("/api/users/{user}/bookmarks?limit=100"))
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    r.items().clone()
}

/// The first page of `tag`'s posts.
async fn tagged(app: &TestApp, tag: &str) -> Vec<Value> {
    let r = app.get(&format!("/api/tags/{tag}/posts?limit=100")).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    r.items().clone()
}

fn counts(shown: &Value) -> (Value, Value) {
    (shown["likeCount"].clone(), shown["commentCount"].clone())
}

async fn create_tagged(app: &TestApp, user: &str, title: &str, tags: &[&str]) -> String {
    let r = app
        .post(
            "/api/posts",
            json!({ "userId": user, "title": title, "content": "words", "tags": tags }),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    id(&r.body)
}

/// A like and a comment on a post bookmarked by three users and carrying two tags write none of
/// its copies; the bookmarks lists and the tags' pages show the new counts, read from the post.
pub async fn a_like_or_comment_rewrites_no_bookmark_or_tag_copy(fixture: Fixture) {
    let copy_writes = Arc::new(AtomicUsize::new(0));
    let counted = copy_writes.clone();
    let fixture = fixture.wrapped(Hooked::wrap(move |call| {
        if writes_a_copy(&call) {
            counted.fetch_add(1, Ordering::SeqCst);
        }
        async { Ok(()) }.boxed()
    }));
    let app = TestApp::spawn(fixture, false).await;
    let author = id(&app.create_user("author").await);
    let readers: Vec<String> = futures::future::join_all(
        ["ana", "bo", "cy"].map(|n| async { id(&app.create_user(n).await) }),
    )
    .await;
    let p = create_tagged(&app, &author, "hot", &["rust", "web"]).await;
    for r in &readers {
        bookmark(&app, r, &p).await;
    }
    app.settle().await;
    assert_eq!(saved(&app, &readers[0]).await.len(), 1);
    copy_writes.store(0, Ordering::SeqCst);

    assert_eq!(app.like(&p, &readers[0]).await.status, 201);
    assert_eq!(app.comment(&p, &readers[1], "hi").await.status, 201);
    app.settle().await;
    assert_eq!(
        copy_writes.load(Ordering::SeqCst),
        0,
        "a like and a comment rewrote bookmark or tag copies"
    );
    let want = (json!(1), json!(1));
    for r in &readers {
        let shown = saved(&app, r).await;
        assert_eq!(counts(&shown[0]), want, "{r}'s bookmarks");
    }
    for tag in ["rust", "web"] {
        let shown = tagged(&app, tag).await;
        assert_eq!(counts(&shown[0]), want, "tag {tag}");
    }
}

/// Copies an earlier release wrote hold the counts of their day: the lists show the post's
/// counts instead, and `verify` finds nothing to mend in them.
pub async fn copies_written_with_counts_show_the_posts_counts_and_verify_clean(fixture: Fixture) {
    let app = TestApp::spawn(fixture, false).await;
    let author = id(&app.create_user("author").await);
    let ana = id(&app.create_user("ana").await);
    let p = create_tagged(&app, &author, "old", &["rust"]).await;
    bookmark(&app, &ana, &p).await;
    assert_eq!(app.like(&p, &ana).await.status, 201);
    app.settle().await;

    // As an earlier release left them: the counts copied (here behind the post's), the tag
    // record too.
    let stale = |at: &str| {
        vec![
            PatchOp::set(&format!("{at}/likeCount"), 7),
            PatchOp::set(&format!("{at}/commentCount"), 3),
        ]
    };
    let copy = format!("bookmarked-{p}");
    app.store
        .patch(Container::Users, &ana, &copy, &stale("/post"), None)
        .await
        .unwrap();
    for place in ["tag:rust", "tagged"] {
        app.store
            .patch(Container::Feed, place, &p, &stale(""), None)
            .await
            .unwrap();
    }
    blog::pump::checkpoint_at_end(&*app.store).await.unwrap();

    let want = (json!(1), json!(0));
    assert_eq!(counts(&saved(&app, &ana).await[0]), want);
    assert_eq!(counts(&tagged(&app, "rust").await[0]), want);
    let found = verify_and_repair(&*app.store, false, Duration::ZERO, &Progress::hidden)
        .await
        .unwrap();
    assert!(found.is_clean(), "{}", found.render());

    // A comment later: shown at once, still without rewriting the copies.
    assert_eq!(app.comment(&p, &ana, "hi").await.status, 201);
    app.settle().await;
    let want = (json!(1), json!(1));
    assert_eq!(counts(&saved(&app, &ana).await[0]), want);
    assert_eq!(counts(&tagged(&app, "rust").await[0]), want);
}

/// The bookmark copies' job item of `post`, as stored.
fn job_id(post: &str) -> String {
    format!("timelineJob-bookmarks-{post}")
}

/// More bookmarkers than a fan-out page; an edit starts a fan-out, and a second edit's start
/// finds the job item moved on by a step of the first (written between its read and its save):
/// the second edit still reaches every bookmarker's copy.
pub async fn an_edit_racing_a_bookmark_fan_out_reaches_every_copy(fixture: Fixture) {
    let inner = fixture.store.clone();
    let armed = Arc::new(AtomicBool::new(false));
    let post = Arc::new(std::sync::Mutex::new(String::new()));
    let author = Arc::new(std::sync::Mutex::new(String::new()));
    let (arm, p_of, a_of) = (armed.clone(), post.clone(), author.clone());
    let fixture = fixture.wrapped(move |s| {
        Arc::new(Hooked::new(s).before(move |call| {
            let p = p_of.lock().unwrap().clone();
            let a = a_of.lock().unwrap().clone();
            let race =
                call.op == "replace" && call.id == job_id(&p) && arm.swap(false, Ordering::SeqCst);
            let inner = inner.clone();
            async move {
                if race {
                    // A step of the fan-out under way lands first: it writes the job item
                    // again, the last page done.
                    let mut job = inner
                        .read(Container::Users, &a, &job_id(&p))
                        .await?
                        .expect("a job item");
                    job["cursor"] = Value::Null;
                    job["done"] = true.into();
                    job["steps"] = 1.into();
                    inner.upsert(Container::Users, &a, job).await?;
                }
                Ok(())
            }
            .boxed()
        })) as Arc<dyn Store>
    });
    let app = TestApp::spawn(fixture, false).await;
    let bob = id(&app.create_user("bob").await);
    let p = id(&app.create_post(&bob, "first", "c").await);
    *post.lock().unwrap() = p.clone();
    *author.lock().unwrap() = bob.clone();
    let readers: Vec<String> = (0..205).map(|i| format!("reader{i:03}")).collect();
    for r in &readers {
        let b = blog::domain::to_value(&Bookmark::new(&p, r));
        app.store.create(Container::Posts, &p, b).await.unwrap();
    }
    app.settle().await;
    let edit = |title: &'static str| {
        let (app, p, bob) = (&app, &p, &bob);
        async move {
            let body = json!({ "userId": bob, "title": title, "content": "c" });
            let r = app.put(&format!("/api/posts/{p}"), body).await;
            assert_eq!(r.status, 200, "{:?}", r.body);
        }
    };
    edit("second").await;
    app.settle().await;
    armed.store(true, Ordering::SeqCst);
    edit("third").await;
    app.settle().await;
    assert!(!armed.load(Ordering::SeqCst), "the race was run");
    let mut behind = Vec::new();
    for r in &readers {
        let shown = saved(&app, r).await;
        if shown.first().map(|s| &s["title"]) != Some(&json!("third")) {
            behind.push(r.clone());
        }
    }
    assert!(
        behind.is_empty(),
        "{} of {} copies missed the edit",
        behind.len(),
        readers.len()
    );
}

/// 32 users each like and bookmark one post at once, the change feed projecting meanwhile, and
/// a write to the post landing between each bookmark recount's read and its write: no batch
/// fails, and the counts come out right.
pub async fn a_hot_post_liked_and_bookmarked_at_once_fails_no_batch(fixture: Fixture) {
    let inner = fixture.store.clone();
    let post = Arc::new(std::sync::Mutex::new(String::new()));
    let p_of = post.clone();
    let fixture = fixture.wrapped(move |s| {
        Arc::new(Hooked::new(s).after(move |call| {
            let p = p_of.lock().unwrap().clone();
            // After the recount's `COUNT` of the post's bookmarks, before its write.
            let bump = call.op == "count" && call.container == Container::Posts && call.pk == p;
            let inner = inner.clone();
            async move {
                if bump {
                    // A write of the post (as a like's increment is) that changes no count.
                    let same = [PatchOp::incr("/likeCount", 0)];
                    match inner.patch(Container::Posts, &p, &p, &same, None).await {
                        Ok(_) | Err(StoreError::NotFound) => {}
                        Err(e) => return Err(e),
                    }
                }
                Ok(())
            }
            .boxed()
        })) as Arc<dyn Store>
    });
    let app = TestApp::spawn(fixture, false).await;
    let author = id(&app.create_user("author").await);
    let p = create_tagged(&app, &author, "hot", &["rust"]).await;
    *post.lock().unwrap() = p.clone();
    let a = &app;
    let users: Vec<String> = futures::future::join_all(
        (0..32).map(|i| async move { id(&a.create_user(&format!("u{i}")).await) }),
    )
    .await;
    app.settle().await;
    let clients = futures::future::join_all(users.iter().map(|u| {
        let (app, p) = (&app, &p);
        async move {
            assert_eq!(app.like(p, u).await.status, 201);
            bookmark(app, u, p).await;
        }
    }));
    let projecting = async {
        for _ in 0..8 {
            blog::pump::drain(&*app.store)
                .await
                .unwrap_or_else(|e| panic!("a batch failed: {e:#}"));
        }
    };
    futures::join!(clients, projecting);
    app.settle().await;
    let shown = app.get(&format!("/api/posts/{p}")).await.body;
    assert_eq!(
        (&shown["likeCount"], &shown["bookmarkCount"]),
        (&json!(32), &json!(32))
    );
    for u in &users {
        let saved = saved(&app, u).await;
        assert_eq!(counts(&saved[0]), (json!(32), json!(0)), "{u}");
    }
}
