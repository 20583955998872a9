//! Tags: on posts (create and edit), a tag's page (`GET /api/tags/{tag}/posts`), the tag list
//! (`GET /api/tags`) and search by a tag's words, written once against the HTTP API and run on
//! each store (`tags_suite!` in `embedded.rs` and `cosmos.rs`).

use serde_json::{json, Value};

use crate::helpers::{id, TestApp};

/// Instantiate every suite test as a `#[tokio::test]` over an app (no pump: the tests settle
/// the change feed where they mean "once it was projected").
#[macro_export]
macro_rules! tags_suite {
    ($fixture:path) => {
        $crate::tags_suite!(@tests $fixture;
            bad_tags_are_a_400_naming_tags_and_write_nothing,
            tags_are_lowercased_kept_once_and_in_every_copy,
            an_edit_sets_or_keeps_the_tags);
    };
    (@tests $fixture:path; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let app = $crate::helpers::TestApp::spawn($fixture().await, false).await;
                $crate::tags_suite::$name(&app).await;
            }
        )*
    };
}

async fn create_tagged(app: &TestApp, user: &str, title: &str, tags: &[&str]) -> String {
    let r = app
        .post(
            "/api/posts",
            json!({ "userId": user, "title": title, "content": "some words", "tags": tags }),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    id(&r.body)
}

async fn edit(app: &TestApp, user: &str, post: &str, body: Value) -> crate::helpers::Resp {
    let mut body = body;
    body["userId"] = user.into();
    app.put(&format!("/api/posts/{post}"), body).await
}

pub async fn bad_tags_are_a_400_naming_tags_and_write_nothing(app: &TestApp) {
    let ana = id(&app.create_user("ana").await);
    let post = create_tagged(app, &ana, "Kept", &["rust"]).await;
    let eleven: Vec<String> = (0..11).map(|i| format!("t{i}")).collect();
    for tags in [
        json!([""]),
        json!(["two words"]),
        json!(["c++"]),
        json!(["a/b"]),
        json!(["x".repeat(33)]),
        json!(eleven),
    ] {
        let body = json!({ "userId": ana, "title": "T", "content": "c", "tags": tags });
        let r = app.post("/api/posts", body.clone()).await;
        r.assert_problem(400);
        assert_eq!(r.body["errors"][0]["field"], "tags", "{tags}: {:?}", r.body);
        assert_eq!(r.store_operations(), 0, "{tags}: nothing read or written");
        let r = app.put(&format!("/api/posts/{post}"), body).await;
        r.assert_problem(400);
        assert_eq!(r.body["errors"][0]["field"], "tags", "{tags}: {:?}", r.body);
        assert_eq!(r.store_operations(), 0, "{tags}: nothing read or written");
    }
    // Not a list of strings: a 400 too.
    let r = app
        .post(
            "/api/posts",
            json!({ "userId": ana, "title": "T", "content": "c", "tags": "rust" }),
        )
        .await;
    r.assert_problem(400);
    let mine = app.get(&format!("/api/users/{ana}/posts")).await;
    app.settle().await;
    let mine_after = app.get(&format!("/api/users/{ana}/posts")).await;
    assert!(mine.items().len() <= 1 && mine_after.items().len() == 1);
    let kept = app.get(&format!("/api/posts/{post}")).await;
    assert_eq!(kept.body["tags"], json!(["rust"]));
    assert_eq!(kept.body["title"], "Kept");
}

pub async fn tags_are_lowercased_kept_once_and_in_every_copy(app: &TestApp) {
    let ana = id(&app.create_user("ana").await);
    let bo = id(&app.create_user("bo").await);
    let r = app
        .put(&format!("/api/users/{bo}/following/{ana}"), json!({}))
        .await;
    assert!(r.status < 300, "{:?}", r.body);
    let untagged = id(&app.create_post(&ana, "Plain", "no tags").await);
    let post = create_tagged(
        app,
        &ana,
        "Tagged",
        &["Rust", " cosmos-DB ", "rust", "Café"],
    )
    .await;
    let read = app.get(&format!("/api/posts/{post}")).await;
    assert_eq!(read.body["tags"], json!(["rust", "cosmos-db", "café"]));
    let plain = app.get(&format!("/api/posts/{untagged}")).await;
    assert_eq!(plain.body["tags"], json!([]));
    app.settle().await;
    let tags_in = |items: &Vec<Value>| {
        items
            .iter()
            .find(|p| p["id"] == post.as_str())
            .map(|p| p["tags"].clone())
    };
    let want = Some(json!(["rust", "cosmos-db", "café"]));
    let mine = app.get(&format!("/api/users/{ana}/posts")).await;
    assert_eq!(tags_in(mine.items()), want, "the author's posts");
    let feed = app.get("/api/feed").await;
    assert_eq!(tags_in(feed.items()), want, "the feed");
    let timeline = app.get(&format!("/api/users/{bo}/timeline")).await;
    assert_eq!(tags_in(timeline.items()), want, "a follower's timeline");
}

pub async fn an_edit_sets_or_keeps_the_tags(app: &TestApp) {
    let ana = id(&app.create_user("ana").await);
    let post = create_tagged(app, &ana, "Tagged", &["rust", "web"]).await;
    // No `tags`: they stay as they are.
    let r = edit(
        app,
        &ana,
        &post,
        json!({ "title": "Edited", "content": "c" }),
    )
    .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["tags"], json!(["rust", "web"]));
    let r = edit(
        app,
        &ana,
        &post,
        json!({ "title": "Edited", "content": "c", "tags": ["Go", "rust"] }),
    )
    .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["tags"], json!(["go", "rust"]));
    assert_eq!(
        app.get(&format!("/api/posts/{post}")).await.body["tags"],
        json!(["go", "rust"])
    );
    let r = edit(
        app,
        &ana,
        &post,
        json!({ "title": "E", "content": "c", "tags": [] }),
    )
    .await;
    assert_eq!(r.body["tags"], json!([]));
}
