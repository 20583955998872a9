//! Trigger invocations driven exactly as the Functions host drives them: a JSON envelope POSTed
//! to `/<FunctionName>`, in each of the encodings the host uses for the documents.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use blog::domain::pending::pending_count;
use blog::store::{Container, PatchOp, Query, Store, StoreError};
use futures::FutureExt as _;
use reqwest::StatusCode;
use serde_json::{json, Value};

use super::common::{envelope, fixture, spawn_hosted, spawn_hosted_with};
use crate::helpers::{id, TestApp};
use crate::hooks::Hooked;

const POST_FIXTURES: [&str; 3] = [
    "posts-array.json",
    "posts-string.json",
    "posts-string-in-string.json",
];

const LONG_CONTENT_CHARS: usize = 300;

/// The items the fixtures' documents refer to, in their current state: the post's title is newer
/// than in the fixture, its counters lag behind its comment and like (their requests died before
/// their increments, leaving the pending counts that announced them), and the comment carries its
/// author's previous name.
async fn seed_fixture_world(store: &dyn Store) {
    for (id, name) in [("fx-ana", "ana"), ("fx-bo", "bo")] {
        let user = json!({ "id": id, "type": "user", "userId": id, "username": name });
        store.create(Container::Users, id, user).await.unwrap();
    }
    let content: String = "Ωmega ✓ "
        .chars()
        .cycle()
        .take(LONG_CONTENT_CHARS)
        .collect();
    let items = [
        json!({ "id": "fx-post-1", "type": "post", "postId": "fx-post-1", "userId": "fx-ana",
                "userUsername": "ana", "title": "Hello, world", "content": content,
                "commentCount": 0, "likeCount": 0, "creationDate": "2026-11-21T10:00:00.000Z" }),
        json!({ "id": "fx-comment-1", "type": "comment", "postId": "fx-post-1", "userId": "fx-bo",
                "userUsername": "bo-before-rename", "content": "Première réponse — 最初の返信",
                "creationDate": "2026-11-21T10:01:00.000Z" }),
        json!({ "id": "like-fx-bo", "type": "like", "postId": "fx-post-1", "userId": "fx-bo",
                "userUsername": "bo", "creationDate": "2026-11-21T10:02:00.000Z" }),
        pending_count("fx-post-1", "2026-11-21T10:01:00.000Z"),
        pending_count("fx-post-1", "2026-11-21T10:02:00.000Z"),
    ];
    for item in items {
        store
            .create(Container::Posts, "fx-post-1", item)
            .await
            .unwrap();
    }
}

/// What the fixture batch must leave behind once applied.
async fn assert_fixture_world_projected(app: &TestApp) {
    let post = app.get("/api/posts/fx-post-1").await.body;
    assert_eq!(
        (post["commentCount"].clone(), post["likeCount"].clone()),
        (json!(1), json!(1)),
        "{post}"
    );

    let copies = app.items("/api/users/fx-ana/posts").await;
    assert_eq!(copies.len(), 1, "{copies:?}");
    // Written from the current post, not from the older version the batch carried.
    assert_eq!(copies[0]["title"], "Hello, world");
    assert_eq!(copies[0]["likeCount"], 1);
    let short = copies[0]["content"].as_str().unwrap();
    assert!(
        short.ends_with('…') && short.chars().count() <= 201,
        "{short}"
    );

    let feed = app.items("/api/feed").await;
    assert_eq!(feed.len(), 1);
    assert_eq!(feed[0]["id"], "fx-post-1");
    assert_eq!(feed[0]["commentCount"], 1);

    // The comment that raced its author's rename now carries the current name.
    let comments = app.items("/api/posts/fx-post-1/comments").await;
    assert_eq!(comments[0]["userUsername"], "bo");
}

#[test]
fn the_fixtures_decode_to_the_same_documents_in_every_encoding() {
    let batches: Vec<_> = POST_FIXTURES
        .iter()
        .map(|f| blog::functions::decode(&fixture(f), "documents").unwrap())
        .collect();
    assert_eq!(batches[0].documents.len(), 3);
    for b in &batches {
        assert_eq!(b.documents, batches[0].documents);
        assert_eq!(b.retry_count, 1, "the fixtures are redeliveries");
    }
    let users = blog::functions::decode(&fixture("users-string.json"), "documents").unwrap();
    assert_eq!(users.documents[0]["type"], "user");
    assert_eq!(users.retry_count, 3);
}

#[tokio::test]
async fn a_fixture_batch_is_applied_in_every_encoding() {
    for name in POST_FIXTURES {
        let app = spawn_hosted().await;
        seed_fixture_world(&*app.store).await;
        let inv = app.invoke("PostsChangeFeed", fixture(name)).await;
        inv.assert_applied();
        assert!(
            inv.logs().contains("3 changes applied"),
            "{name}: {}",
            inv.logs()
        );
        assert_fixture_world_projected(&app).await;
    }
}

#[tokio::test]
async fn the_users_feed_fans_the_current_name_out_whatever_name_the_batch_carries() {
    let app = spawn_hosted().await;
    seed_fixture_world(&*app.store).await;
    app.invoke("PostsChangeFeed", fixture("posts-array.json"))
        .await
        .assert_applied();
    let r = app
        .put("/api/users/fx-ana", json!({ "username": "ana-2" }))
        .await;
    assert_eq!(r.status, 200);

    // The batch carries an older name than the user has now: the current one is fanned out.
    app.invoke("UsersChangeFeed", fixture("users-string.json"))
        .await
        .assert_applied();
    let post = app.get("/api/posts/fx-post-1").await.body;
    assert_eq!(post["userUsername"], "ana-2");
    let copies = app.items("/api/users/fx-ana/posts").await;
    assert_eq!(copies[0]["userUsername"], "ana-2");

    // The feed follows through the posts feed, which delivers the renamed post.
    let renamed = app
        .current(Container::Posts, "fx-post-1", "fx-post-1")
        .await;
    app.deliver("PostsChangeFeed", &[renamed])
        .await
        .assert_applied();
    assert_eq!(app.items("/api/feed").await[0]["userUsername"], "ana-2");
}

/// Everything the projections write for one post, as a client sees it.
async fn projected_state(app: &TestApp, user: &str, post: &str) -> Value {
    json!({
        "post": app.get(&format!("/api/posts/{post}")).await.body,
        "copies": app.items(&format!("/api/users/{user}/posts")).await,
        "feed": app.items("/api/feed").await,
        "comments": app.items(&format!("/api/posts/{post}/comments")).await,
        "likes": app.items(&format!("/api/posts/{post}/likes")).await,
    })
}

#[tokio::test]
async fn a_redelivered_batch_changes_nothing() {
    let app = spawn_hosted().await;
    let ana = id(&app.create_user("ana").await);
    let bo = id(&app.create_user("bo").await);
    let post = id(&app.create_post(&ana, "First", "Hello").await);
    assert_eq!(app.comment(&post, &bo, "hi").await.status, 201);
    let like = app.like(&post, &bo).await;
    assert_eq!(like.status, 201);
    let like = like.body;

    let comment = app
        .store
        .query(
            Container::Posts,
            &Query::partition(post.clone()).eq("type", "comment"),
        )
        .await
        .unwrap()
        .items;
    let batch: Vec<Value> = [
        app.current(Container::Posts, &post, &post).await,
        comment[0].clone(),
        app.current(Container::Posts, &post, like["id"].as_str().unwrap())
            .await,
    ]
    .into();

    app.deliver("PostsChangeFeed", &batch)
        .await
        .assert_applied();
    let first = projected_state(&app, &ana, &post).await;
    assert_eq!(first["post"]["commentCount"], 1);
    assert_eq!(first["post"]["likeCount"], 1);
    assert_eq!(first["copies"].as_array().unwrap().len(), 1);

    // The same batch again, as the host redelivers it after a failed attempt.
    app.invoke("PostsChangeFeed", envelope(json!(batch), 1))
        .await
        .assert_applied();
    assert_eq!(projected_state(&app, &ana, &post).await, first);
}

#[tokio::test]
async fn a_stale_post_after_a_newer_one_leaves_the_copies_current() {
    let app = spawn_hosted().await;
    let ana = id(&app.create_user("ana").await);
    let post = id(&app.create_post(&ana, "Version 1", "first text").await);
    let v1 = app.current(Container::Posts, &post, &post).await;
    let r = app
        .put(
            &format!("/api/posts/{post}"),
            json!({ "userId": ana, "title": "Version 2", "content": "second text" }),
        )
        .await;
    assert_eq!(r.status, 200);
    let v2 = app.current(Container::Posts, &post, &post).await;

    app.deliver("PostsChangeFeed", &[v2]).await.assert_applied();
    let newer = projected_state(&app, &ana, &post).await;
    assert_eq!(newer["copies"][0]["title"], "Version 2");
    assert_eq!(newer["feed"][0]["content"], "second text");

    // The older version arrives late (another lease's batch, or a slow retry).
    app.deliver("PostsChangeFeed", &[v1]).await.assert_applied();
    assert_eq!(projected_state(&app, &ana, &post).await, newer);
}

#[tokio::test]
async fn a_batch_that_cannot_be_written_fails_naming_its_ids_and_is_applied_when_redelivered() {
    let failing = Arc::new(AtomicBool::new(false));
    let flag = failing.clone();
    // Writes fail as they do on an unreachable Cosmos DB while `failing` is set.
    let app = spawn_hosted_with(Hooked::wrap(move |call| {
        let failing = flag.load(Ordering::SeqCst);
        async move {
            let write = !matches!(call.op, "read" | "query" | "count" | "changes");
            if failing && write {
                Err(StoreError::Unavailable("injected: writes fail".into()))
            } else {
                Ok(())
            }
        }
        .boxed()
    }))
    .await;
    seed_fixture_world(&*app.store).await;

    failing.store(true, Ordering::SeqCst);
    let inv = app
        .invoke("PostsChangeFeed", fixture("posts-string.json"))
        .await;
    assert!(
        inv.status.is_server_error(),
        "{:?} {:#}",
        inv.status,
        inv.body
    );
    inv.assert_shape();
    let logs = inv.logs();
    for id in [
        "posts/fx-post-1/fx-post-1",
        "posts/fx-post-1/fx-comment-1",
        "posts/fx-post-1/like-fx-bo",
    ] {
        assert!(logs.contains(id), "{id} missing from {logs}");
    }
    assert!(
        app.items("/api/users/fx-ana/posts").await.is_empty(),
        "nothing was written"
    );

    // The host's retry policy redelivers the same batch once the store is back.
    failing.store(false, Ordering::SeqCst);
    app.invoke("PostsChangeFeed", fixture("posts-string.json"))
        .await
        .assert_applied();
    assert_fixture_world_projected(&app).await;

    // The users feed fails the same way, naming the user whose name could not be fanned out.
    app.store
        .patch(
            Container::Users,
            "fx-ana",
            "fx-ana",
            &[PatchOp::set("/username", "ana-2")],
            None,
        )
        .await
        .unwrap();
    failing.store(true, Ordering::SeqCst);
    let inv = app
        .invoke("UsersChangeFeed", fixture("users-string.json"))
        .await;
    assert!(inv.status.is_server_error(), "{:?}", inv.status);
    inv.assert_shape();
    assert!(inv.logs().contains("users/fx-ana/fx-ana"), "{}", inv.logs());
}

#[tokio::test]
async fn an_undecodable_invocation_answers_400_in_json() {
    let app = spawn_hosted().await;
    let bodies: [&[u8]; 5] = [
        b"{ not json",
        br#"{"Metadata":{}}"#,
        br#"{"Data":{"wrongBinding":[]},"Metadata":{}}"#,
        br#"{"Data":{"documents":{"id":"p1"}},"Metadata":{}}"#,
        br#"{"Data":{"documents":"[{\"id\": truncated"},"Metadata":{}}"#,
    ];
    for function in ["PostsChangeFeed", "UsersChangeFeed"] {
        for body in bodies {
            let inv = app.invoke(function, body.to_vec()).await;
            assert_eq!(
                inv.status,
                StatusCode::BAD_REQUEST,
                "{}",
                String::from_utf8_lossy(body)
            );
            inv.assert_shape();
            assert!(inv.logs().contains("not decoded"), "{}", inv.logs());
        }
    }
    // The host only ever POSTs; anything else is the API's 405.
    assert_eq!(app.get("/PostsChangeFeed").await.status, 405);
}

#[tokio::test]
async fn an_empty_batch_is_applied() {
    let app = spawn_hosted().await;
    for function in ["PostsChangeFeed", "UsersChangeFeed"] {
        let inv = app.deliver(function, &[]).await;
        inv.assert_applied();
    }
}

#[tokio::test]
async fn a_batch_larger_than_the_api_body_limit_is_accepted() {
    // 100 posts at the content limit, double-encoded as the host may send them: several MiB.
    let content: String = "é\"".chars().cycle().take(20_000).collect();
    let docs: Vec<Value> = (0..100)
        .map(|i| {
            json!({ "id": format!("gone-{i}"), "type": "post", "postId": format!("gone-{i}"),
                         "userId": "u", "title": "t", "content": content })
        })
        .collect();
    let once = serde_json::to_string(&docs).unwrap();
    let body = envelope(Value::String(serde_json::to_string(&once).unwrap()), 0);
    assert!(
        body.len() > 2 * blog::api::BODY_LIMIT,
        "{} bytes",
        body.len()
    );

    let app = spawn_hosted().await;
    let inv = app.invoke("PostsChangeFeed", body).await;
    // The posts no longer exist, so nothing is projected; what matters is that it was read.
    inv.assert_applied();
    assert!(
        inv.logs().contains("100 changes applied with 0 writes"),
        "{}",
        inv.logs()
    );
}

#[tokio::test]
async fn an_invocation_over_the_limit_answers_413_in_json() {
    let app = spawn_hosted().await;
    let body = vec![b' '; blog::functions::INVOCATION_BODY_LIMIT + 1];
    let inv = app.invoke("PostsChangeFeed", body).await;
    assert_eq!(inv.status, StatusCode::PAYLOAD_TOO_LARGE);
    inv.assert_shape();
    assert!(inv.logs().contains("not read"), "{}", inv.logs());
}
