//! The HTTP API as a client sees it (`docs/api.md`, and the change-feed copies
//! docs/ARCHITECTURE.md describes), written once and instantiated per
//! store with `api_suite!(path::to::fixture_fn);` inside a module named after the store.

use std::collections::HashSet;

use blog::store::{BatchOp, Container, PatchOp};
use serde_json::{json, Value};

use crate::helpers::{id, next_millisecond, TestApp};

#[macro_export]
macro_rules! api_suite {
    ($fixture:path) => {
        $crate::api_suite!(@tests $fixture;
            create_and_read_a_user, rename_a_user, user_input_is_validated,
            create_and_read_a_post, edit_a_post, only_the_author_edits_a_post, post_input_is_validated,
            a_users_posts_newest_first_in_short_form, comments_oldest_first, likes_and_repeat_likes,
            writes_naming_unknown_users_or_posts, queries_on_unknown_ids_are_empty_lists,
            paging_with_limit_and_continuation, feed_newest_first_with_limit, feed_keeps_the_newest_hundred,
            every_query_is_one_store_operation, short_form_never_splits_a_character,
            a_username_change_reaches_every_copy,
            counters_heal_after_a_crash_between_writes, errors_are_problem_json,
            system_properties_are_not_returned,
            a_like_is_read_by_its_user);
        // Races of requests with the projections: each runs its requests beside the pump
        // (`TestApp::beside_the_pump`), then settles.
        $crate::api_suite!(@tests $fixture;
            a_rename_racing_new_items_converges,
            concurrent_comments_and_likes_count_exactly, concurrent_repeat_likes_count_once);
    };
    (@tests $fixture:path; $($name:ident),* $(,)?) => {
        $crate::api_suite!(@tests $fixture, false; $($name),*);
    };
    (@tests $fixture:path, $pump:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let app = $crate::helpers::TestApp::spawn($fixture().await, $pump).await;
                $crate::api_suite::$name(&app).await;
            }
        )*
    };
}

async fn post_of(app: &TestApp, post_id: &str) -> Value {
    let r = app.get(&format!("/api/posts/{post_id}")).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    r.body
}

async fn feed_ids(app: &TestApp, limit: u32) -> Vec<String> {
    let r = app.get(&format!("/api/feed?limit={limit}")).await;
    assert_eq!(r.status, 200);
    r.items().iter().map(id).collect()
}

pub async fn create_and_read_a_user(app: &TestApp) {
    let r = app
        .post("/api/users", json!({ "username": "  ana  " }))
        .await;
    assert_eq!(r.status, 201);
    assert_eq!(r.body["username"], "ana", "usernames are trimmed");
    let user_id = id(&r.body);
    assert_eq!(
        r.header("location"),
        Some(format!("/api/users/{user_id}").as_str())
    );
    let got = app.get(&format!("/api/users/{user_id}")).await;
    assert_eq!(got.status, 200);
    assert_eq!(got.body["id"], user_id.as_str());
    assert_eq!(got.body["username"], "ana");
    app.get("/api/users/nobody").await.assert_problem(404);
}

pub async fn rename_a_user(app: &TestApp) {
    let user = app.create_user("ana").await;
    let r = app
        .put(
            &format!("/api/users/{}", id(&user)),
            json!({ "username": "ana2" }),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["username"], "ana2");
    assert_eq!(
        app.get(&format!("/api/users/{}", id(&user))).await.body["username"],
        "ana2"
    );
    app.put("/api/users/nobody", json!({ "username": "x" }))
        .await
        .assert_problem(404);
}

pub async fn user_input_is_validated(app: &TestApp) {
    for body in [
        json!({}),
        json!({ "username": "" }),
        json!({ "username": "   " }),
        json!({ "username": "a\u{0007}b" }),
        json!({ "username": "x".repeat(65) }),
        json!({ "username": 42 }),
    ] {
        app.post("/api/users", body.clone())
            .await
            .assert_problem(400);
    }
    assert_eq!(
        app.create_user(&"ж".repeat(64)).await["username"],
        "ж".repeat(64)
    );
    let user = app.create_user("ana").await;
    app.put(
        &format!("/api/users/{}", id(&user)),
        json!({ "username": "" }),
    )
    .await
    .assert_problem(400);
}

pub async fn create_and_read_a_post(app: &TestApp) {
    let user = app.create_user("ana").await;
    let r = app
        .post(
            "/api/posts",
            json!({ "userId": id(&user), "title": "Hello", "content": "First post" }),
        )
        .await;
    assert_eq!(r.status, 201);
    let post = &r.body;
    let post_id = id(post);
    assert_eq!(
        r.header("location"),
        Some(format!("/api/posts/{post_id}").as_str())
    );
    assert_eq!(post["postId"], post_id.as_str());
    assert_eq!(post["userId"], id(&user).as_str());
    assert_eq!(post["userUsername"], "ana");
    assert_eq!(post["commentCount"], 0);
    assert_eq!(post["likeCount"], 0);
    let date = post["creationDate"].as_str().unwrap();
    assert_eq!(date.len(), 24, "fixed-width RFC 3339: {date}");
    assert!(date.ends_with('Z'));
    let got = post_of(app, &post_id).await;
    for f in [
        "title",
        "content",
        "userUsername",
        "creationDate",
        "commentCount",
        "likeCount",
    ] {
        assert_eq!(got[f], post[f], "{f}");
    }
    app.get("/api/posts/nope").await.assert_problem(404);
}

pub async fn edit_a_post(app: &TestApp) {
    let user = app.create_user("ana").await;
    let post = app.create_post(&id(&user), "t", "c").await;
    app.like(&id(&post), &id(&user)).await;
    let r = app
        .put(
            &format!("/api/posts/{}", id(&post)),
            json!({ "userId": id(&user), "title": "t2", "content": "c2" }),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["title"], "t2");
    assert_eq!(r.body["content"], "c2");
    assert_eq!(r.body["likeCount"], 1, "an edit keeps the counters");
    assert_eq!(r.body["creationDate"], post["creationDate"]);
    // A post never edited has no `updatedAt`; an edit sets it, and it stays on the post.
    assert_eq!(post.get("updatedAt"), None);
    let edited = r.body["updatedAt"]
        .as_str()
        .expect("`updatedAt` after an edit");
    assert!(edited >= post["creationDate"].as_str().unwrap(), "{edited}");
    assert_eq!(post_of(app, &id(&post)).await["updatedAt"], edited);
    app.put(
        "/api/posts/nope",
        json!({ "userId": id(&user), "title": "t", "content": "c" }),
    )
    .await
    .assert_problem(404);
    let user_posts = format!("/api/users/{}/posts", id(&user));
    app.settled(
        "the edit reaches the author's copy and the feed",
        || async {
            app.get(&user_posts).await.body["items"][0]["title"] == "t2"
                && app.get("/api/feed").await.body["items"][0]["title"] == "t2"
        },
    )
    .await;
}

pub async fn only_the_author_edits_a_post(app: &TestApp) {
    let ana = app.create_user("ana").await;
    let bob = app.create_user("bob").await;
    let post = app.create_post(&id(&ana), "t", "c").await;
    app.put(
        &format!("/api/posts/{}", id(&post)),
        json!({ "userId": id(&bob), "title": "mine", "content": "now" }),
    )
    .await
    .assert_problem(403);
    assert_eq!(post_of(app, &id(&post)).await["title"], "t");
}

pub async fn post_input_is_validated(app: &TestApp) {
    let user = app.create_user("ana").await;
    let u = id(&user);
    for body in [
        json!({ "title": "t", "content": "c" }),
        json!({ "userId": u, "content": "c" }),
        json!({ "userId": u, "title": "t" }),
        json!({ "userId": u, "title": "", "content": "c" }),
        json!({ "userId": u, "title": "t".repeat(201), "content": "c" }),
        json!({ "userId": u, "title": "t", "content": "" }),
        json!({ "userId": u, "title": "t", "content": "c".repeat(20_001) }),
        json!({ "userId": "a/b", "title": "t", "content": "c" }),
        json!({ "userId": "x".repeat(129), "title": "t", "content": "c" }),
    ] {
        app.post("/api/posts", body).await.assert_problem(400);
    }
    app.create_post(&u, &"t".repeat(200), &"c".repeat(20_000))
        .await;
    let posts = app.get(&format!("/api/users/{u}/posts")).await;
    assert!(posts.items().len() <= 1, "only the valid post was written");
}

pub async fn a_users_posts_newest_first_in_short_form(app: &TestApp) {
    let user = app.create_user("ana").await;
    let other = app.create_user("bob").await;
    let mut created = Vec::new();
    for i in 0..3 {
        next_millisecond().await;
        created.push(id(&app
            .create_post(&id(&user), &format!("t{i}"), &"x".repeat(250))
            .await));
    }
    app.create_post(&id(&other), "not ana's", "c").await;
    created.reverse();
    let path = format!("/api/users/{}/posts", id(&user));
    app.settled("the author's copies", || async {
        app.get(&path).await.items().len() == 3
    })
    .await;
    let r = app.get(&path).await;
    assert_eq!(r.items().iter().map(id).collect::<Vec<_>>(), created);
    for p in r.items() {
        let content = p["content"].as_str().unwrap();
        assert_eq!(content.chars().count(), 200);
        assert!(content.ends_with('…'));
        assert_eq!(p["userUsername"], "ana");
        assert_eq!(p["commentCount"], 0);
    }
    assert_eq!(r.body["continuationToken"], Value::Null);
}

pub async fn comments_oldest_first(app: &TestApp) {
    let user = app.create_user("ana").await;
    let post = app.create_post(&id(&user), "t", "c").await;
    let mut created = Vec::new();
    for i in 0..3 {
        next_millisecond().await;
        let r = app
            .comment(&id(&post), &id(&user), &format!("comment {i}"))
            .await;
        assert_eq!(r.status, 201, "{:?}", r.body);
        assert_eq!(r.body["postId"], id(&post).as_str());
        assert_eq!(r.body["userUsername"], "ana");
        assert!(r.body["creationDate"].is_string());
        created.push(id(&r.body));
    }
    let r = app.get(&format!("/api/posts/{}/comments", id(&post))).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.items().iter().map(id).collect::<Vec<_>>(), created);
    assert_eq!(
        post_of(app, &id(&post)).await["commentCount"],
        3,
        "fresh at once"
    );
    for bad in [
        json!({ "userId": id(&user) }),
        json!({ "userId": id(&user), "content": "" }),
        json!({ "userId": id(&user), "content": "c".repeat(2001) }),
    ] {
        app.post(&format!("/api/posts/{}/comments", id(&post)), bad)
            .await
            .assert_problem(400);
    }
    assert_eq!(post_of(app, &id(&post)).await["commentCount"], 3);
}

pub async fn likes_and_repeat_likes(app: &TestApp) {
    let ana = app.create_user("ana").await;
    let bob = app.create_user("bob").await;
    let post = app.create_post(&id(&ana), "t", "c").await;
    let first = app.like(&id(&post), &id(&bob)).await;
    assert_eq!(first.status, 201);
    assert_eq!(first.body["userId"], id(&bob).as_str());
    assert_eq!(first.body["userUsername"], "bob");
    let again = app.like(&id(&post), &id(&bob)).await;
    assert_eq!(again.status, 200, "a repeat like is not a new like");
    assert_eq!(again.body, first.body, "the same like");
    assert_eq!(app.like(&id(&post), &id(&ana)).await.status, 201);
    let r = app.get(&format!("/api/posts/{}/likes", id(&post))).await;
    assert_eq!(r.items().len(), 2);
    assert_eq!(post_of(app, &id(&post)).await["likeCount"], 2);
    app.settled("likes recounted", || async {
        post_of(app, &id(&post)).await["likeCount"] == 2
            && app.get("/api/feed").await.body["items"][0]["likeCount"] == 2
    })
    .await;
}

/// `GET /api/posts/{postId}/likes/{userId}` answers whether that user likes the post: the like
/// (one point read, its id derived from the user) or 404.
pub async fn a_like_is_read_by_its_user(app: &TestApp) {
    let ana = app.create_user("ana").await;
    let bob = app.create_user("bob").await;
    let post = app.create_post(&id(&ana), "t", "c").await;
    let like_path = |user: &Value| format!("/api/posts/{}/likes/{}", id(&post), id(user));
    let r = app.get(&like_path(&bob)).await;
    r.assert_problem(404);
    assert_eq!(r.store_operations(), 1);
    let liked = app.like(&id(&post), &id(&bob)).await;
    assert_eq!(liked.status, 201);
    let r = app.get(&like_path(&bob)).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body, liked.body, "the like as its create answered");
    assert_eq!(r.store_operations(), 1);
    assert_eq!(r.header("cache-control"), Some("no-cache"));
    // Someone else's like is not ana's.
    app.get(&like_path(&ana)).await.assert_problem(404);
    // Taken back: no like any more (its deletion mark is no like).
    let r = app.delete(&like_path(&bob)).await;
    assert_eq!(r.status, 204);
    app.get(&like_path(&bob)).await.assert_problem(404);
    // Liked again: there again.
    assert_eq!(app.like(&id(&post), &id(&bob)).await.status, 201);
    assert_eq!(app.get(&like_path(&bob)).await.status, 200);
    // An unknown post, or a bad id.
    app.get(&format!("/api/posts/nothing/likes/{}", id(&bob)))
        .await
        .assert_problem(404);
    app.get(&format!("/api/posts/{}/likes/a%5Cb", id(&post)))
        .await
        .assert_problem(400);
    // A deleted post's likes are gone with it.
    assert_eq!(
        app.delete(&format!("/api/posts/{}", id(&post)))
            .await
            .status,
        204
    );
    app.get(&like_path(&bob)).await.assert_problem(404);
}

pub async fn writes_naming_unknown_users_or_posts(app: &TestApp) {
    let user = app.create_user("ana").await;
    let post = app.create_post(&id(&user), "t", "c").await;
    app.post(
        "/api/posts",
        json!({ "userId": "ghost", "title": "t", "content": "c" }),
    )
    .await
    .assert_problem(422);
    app.comment(&id(&post), "ghost", "hi")
        .await
        .assert_problem(422);
    app.like(&id(&post), "ghost").await.assert_problem(422);
    app.comment("nope", &id(&user), "hi")
        .await
        .assert_problem(404);
    app.like("nope", &id(&user)).await.assert_problem(404);
    // Nothing was written by the rejected requests.
    assert!(app.get("/api/posts/nope/comments").await.items().is_empty());
    assert!(app.get("/api/posts/nope/likes").await.items().is_empty());
    let p = post_of(app, &id(&post)).await;
    assert_eq!(
        (p["commentCount"].as_u64(), p["likeCount"].as_u64()),
        (Some(0), Some(0))
    );
    assert!(app
        .get(&format!("/api/posts/{}/comments", id(&post)))
        .await
        .items()
        .is_empty());
}

pub async fn queries_on_unknown_ids_are_empty_lists(app: &TestApp) {
    for path in [
        "/api/users/nobody/posts",
        "/api/posts/nope/comments",
        "/api/posts/nope/likes",
    ] {
        let r = app.get(path).await;
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.body, json!({ "items": [], "continuationToken": null }));
    }
}

pub async fn paging_with_limit_and_continuation(app: &TestApp) {
    let user = app.create_user("ana").await;
    let post = app.create_post(&id(&user), "t", "c").await;
    let mut created = Vec::new();
    for i in 0..5 {
        next_millisecond().await;
        created.push(id(&app
            .comment(&id(&post), &id(&user), &format!("{i}"))
            .await
            .body));
    }
    let base = format!("/api/posts/{}/comments?limit=2", id(&post));
    let mut seen = Vec::new();
    let mut path = base.clone();
    let mut pages = 0;
    loop {
        let r = app.get(&path).await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        assert!(r.items().len() <= 2);
        seen.extend(r.items().iter().map(id));
        pages += 1;
        match r.body["continuationToken"].as_str() {
            Some(t) => {
                let t: String = url_encode(t);
                path = format!("{base}&continuationToken={t}");
            }
            None => break,
        }
        assert!(pages < 10);
    }
    assert_eq!(seen, created);
    assert!(pages >= 3);
    app.get(&format!("{base}&continuationToken=garbage"))
        .await
        .assert_problem(400);
    for bad in ["0", "101", "ten"] {
        app.get(&format!("/api/posts/{}/comments?limit={bad}", id(&post)))
            .await
            .assert_problem(400);
    }
}

pub fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `n` posts by `user`, one after another, each in a millisecond of its own; their ids newest
/// first.
async fn create_posts(app: &TestApp, user: &str, n: usize) -> Vec<String> {
    let mut created = Vec::new();
    for i in 0..n {
        next_millisecond().await;
        created.push(id(&app.create_post(user, &format!("t{i}"), "c").await));
    }
    created.reverse();
    created
}

pub async fn feed_newest_first_with_limit(app: &TestApp) {
    let user = app.create_user("ana").await;
    let created = create_posts(app, &id(&user), 25).await;
    app.settled("all posts in the feed", || async {
        feed_ids(app, 100).await.len() == 25
    })
    .await;
    assert_eq!(feed_ids(app, 100).await, created);
    assert_eq!(feed_ids(app, 5).await, created[..5]);
    let r = app.get("/api/feed").await;
    assert_eq!(r.items().len(), 20, "the default limit");
    for bad in ["0", "101", "-3", "x"] {
        app.get(&format!("/api/feed?limit={bad}"))
            .await
            .assert_problem(400);
    }
}

pub async fn feed_keeps_the_newest_hundred(app: &TestApp) {
    let user = app.create_user("ana").await;
    let created = create_posts(app, &id(&user), blog::domain::FEED_KEEP + 5).await;
    let newest: Vec<String> = created[..100].to_vec();
    // It shows the newest 100 and keeps 20 more, for deletions.
    app.settled("the feed shows exactly the newest 100", || async {
        feed_ids(app, 100).await == newest
            && blog_feed_size(app).await == blog::domain::FEED_KEEP as u64
    })
    .await;
    // Paging shows the same 100, and no edit of a token reaches the 20 kept beyond them: an
    // edited token is refused (400) or pages within the newest 100.
    let mut seen = Vec::new();
    let mut tokens = Vec::new();
    let mut path = "/api/feed?limit=20".to_string();
    loop {
        let r = app.get(&path).await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        seen.extend(r.items().iter().map(id));
        match r.body["continuationToken"].as_str() {
            Some(t) => {
                tokens.push(t.to_string());
                path = format!("/api/feed?limit=20&continuationToken={}", url_encode(t));
            }
            None => break,
        }
        assert!(tokens.len() < 10);
    }
    assert_eq!(seen, newest);
    let shown: HashSet<&String> = newest.iter().collect();
    for token in &tokens {
        let mut edits = vec![format!("{token}x"), token[..token.len() - 1].to_string()];
        // Whatever comes before a separator set to zero, or to a count from elsewhere.
        for sep in ['.', ':', '_', '-'] {
            if let Some((_, rest)) = token.split_once(sep) {
                edits.extend(["0", "1", "20"].map(|n| format!("{n}{sep}{rest}")));
            }
        }
        // Each character changed in turn.
        for (i, c) in token.char_indices() {
            let other = if c == 'A' { 'B' } else { 'A' };
            edits.push(format!(
                "{}{other}{}",
                &token[..i],
                &token[i + c.len_utf8()..]
            ));
        }
        for edit in edits {
            let mut next = Some(edit.clone());
            let mut pages = 0;
            while let Some(t) = next {
                let r = app
                    .get(&format!(
                        "/api/feed?limit=20&continuationToken={}",
                        url_encode(&t)
                    ))
                    .await;
                if r.status == 400 {
                    r.assert_problem(400);
                    break;
                }
                assert_eq!(r.status, 200, "{edit}: {:?}", r.body);
                for item in r.items() {
                    assert!(shown.contains(&id(item)), "{edit} reached {}", id(item));
                }
                next = r.body["continuationToken"].as_str().map(str::to_string);
                pages += 1;
                assert!(pages <= 6, "{edit}: the pages go on");
            }
        }
    }
}

/// The feed's size as stored, beyond what one request shows.
async fn blog_feed_size(app: &TestApp) -> u64 {
    let q = blog::store::Query::partition("post").eq("type", "post");
    app.store.count(Container::Feed, &q).await.unwrap()
}

pub async fn every_query_is_one_store_operation(app: &TestApp) {
    let user = app.create_user("ana").await;
    let u = id(&user);
    let r = app.post("/api/users", json!({ "username": "bob" })).await;
    assert_eq!(r.store_operations(), 1, "C1 create");
    let r = app
        .put(&format!("/api/users/{u}"), json!({ "username": "ana" }))
        .await;
    assert_eq!(r.store_operations(), 1, "C1 rename");
    let r = app
        .post(
            "/api/posts",
            json!({ "userId": u, "title": "t", "content": "c" }),
        )
        .await;
    assert_eq!(r.store_operations(), 2, "C2");
    let p = id(&r.body);
    let r = app
        .put(
            &format!("/api/posts/{p}"),
            json!({ "userId": u, "title": "t", "content": "c" }),
        )
        .await;
    assert_eq!(r.store_operations(), 2, "C2 edit");
    // Read the author; a batch (the item and a pending count); the increment; the pending count
    // deleted.
    assert_eq!(app.comment(&p, &u, "hi").await.store_operations(), 4, "C3");
    // The same four for a like, and the liker's favorite edge in their own partition.
    assert_eq!(app.like(&p, &u).await.store_operations(), 5, "C4");
    // Read the author; the batch, which finds the like; read it; the edge written again.
    assert_eq!(app.like(&p, &u).await.store_operations(), 4, "C4 repeat");
    for path in [
        format!("/api/users/{u}"),
        format!("/api/posts/{p}"),
        format!("/api/users/{u}/posts"),
        format!("/api/posts/{p}/comments"),
        format!("/api/posts/{p}/likes"),
        "/api/feed".to_string(),
        "/api/users/nobody/posts".to_string(),
    ] {
        let r = app.get(&path).await;
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.store_operations(), 1, "{path}");
    }
    let r = app.post("/api/users", json!({ "username": "" })).await;
    assert_eq!(
        r.store_operations(),
        0,
        "rejected input never reaches the store"
    );
}

pub async fn short_form_never_splits_a_character(app: &TestApp) {
    let user = app.create_user("ana").await;
    // Several scripts, combining marks and multi-code-point emoji across the cut.
    let unit = "Zażółć gęślą jaźń. 漢字かな交じり文。Привет, мир! مرحبا بالعالم नमस्ते दुनिया 👩‍👩‍👧🇵🇱 é ";
    let content = unit.repeat(5);
    let post = app.create_post(&id(&user), "Scripts", &content).await;
    assert_eq!(
        post["content"],
        content.as_str(),
        "the post keeps its whole content"
    );
    app.settled("the copy in the feed", || async {
        !feed_ids(app, 1).await.is_empty()
    })
    .await;
    let short = app.get("/api/feed?limit=1").await.items()[0]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(short.chars().count() <= 200);
    let kept = short.strip_suffix('…').expect("an ellipsis when cut");
    assert!(
        content.starts_with(kept),
        "a prefix of the original, whole characters only"
    );
    let q3 = app.get(&format!("/api/users/{}/posts", id(&user))).await;
    assert_eq!(q3.items()[0]["content"], short.as_str());
    assert_eq!(post_of(app, &id(&post)).await["content"], content.as_str());
}

pub async fn a_username_change_reaches_every_copy(app: &TestApp) {
    let ana = app.create_user("ana").await;
    let bob = app.create_user("bob").await;
    let post = app.create_post(&id(&ana), "t", "c").await;
    let other = app.create_post(&id(&bob), "bob's", "c").await;
    app.comment(&id(&other), &id(&ana), "hi").await;
    app.like(&id(&other), &id(&ana)).await;
    app.comment(&id(&post), &id(&bob), "bob here").await;
    app.put(
        &format!("/api/users/{}", id(&ana)),
        json!({ "username": "anna" }),
    )
    .await;
    let (p, o, a) = (id(&post), id(&other), id(&ana));
    app.settled(
        "the new name on the post, comment, like, Q3 copy and feed copy",
        || async {
            let post_ok = post_of(app, &p).await["userUsername"] == "anna";
            let comments = app.get(&format!("/api/posts/{o}/comments")).await;
            let likes = app.get(&format!("/api/posts/{o}/likes")).await;
            let copies = app.get(&format!("/api/users/{a}/posts")).await;
            let feed = app.get("/api/feed").await;
            post_ok
                && comments.items().iter().all(|c| c["userUsername"] == "anna")
                && likes.items().iter().all(|l| l["userUsername"] == "anna")
                && copies.items().iter().all(|c| c["userUsername"] == "anna")
                && feed
                    .items()
                    .iter()
                    .filter(|f| f["userId"] == a.as_str())
                    .all(|f| f["userUsername"] == "anna")
        },
    )
    .await;
    // Other users' items keep their names.
    let comments = app.get(&format!("/api/posts/{p}/comments")).await;
    assert_eq!(comments.items()[0]["userUsername"], "bob");
    assert_eq!(post_of(app, &o).await["userUsername"], "bob");
}

pub async fn a_rename_racing_new_items_converges(app: &TestApp) {
    let ana = app.create_user("ana").await;
    let post = app.create_post(&id(&ana), "t", "c").await;
    let a = id(&ana);
    let p = id(&post);
    // Renames interleaved with new posts, comments and likes by the same user.
    app.beside_the_pump(async {
        let mut tasks = Vec::new();
        for i in 0..10 {
            let (app_url, author, on) = (app.origin.clone(), a.clone(), p.clone());
            let client = app.client.clone();
            tasks.push(tokio::spawn(async move {
                let send = |path: String, body: Value| {
                    client.post(format!("{app_url}{path}")).json(&body).send()
                };
                send(
                    "/api/posts".into(),
                    json!({ "userId": author, "title": format!("t{i}"), "content": "c" }),
                )
                .await
                .unwrap();
                send(
                    format!("/api/posts/{on}/comments"),
                    json!({ "userId": author, "content": "c" }),
                )
                .await
                .unwrap();
            }));
            app.put(
                &format!("/api/users/{a}"),
                json!({ "username": format!("name{i}") }),
            )
            .await;
        }
        for t in tasks {
            t.await.unwrap();
        }
        app.like(&p, &a).await;
    })
    .await;
    app.settled("every item carries the last name", || async {
        let copies = app.get(&format!("/api/users/{a}/posts?limit=100")).await;
        let comments = app.get(&format!("/api/posts/{p}/comments?limit=100")).await;
        let likes = app.get(&format!("/api/posts/{p}/likes")).await;
        let feed = app.get("/api/feed?limit=100").await;
        copies.items().len() == 11
            && comments.items().len() == 10
            && [&copies, &comments, &likes, &feed]
                .iter()
                .all(|r| r.items().iter().all(|i| i["userUsername"] == "name9"))
            && post_of(app, &p).await["userUsername"] == "name9"
    })
    .await;
}

pub async fn concurrent_comments_and_likes_count_exactly(app: &TestApp) {
    const N: usize = 200;
    let author = app.create_user("author").await;
    let post = app.create_post(&id(&author), "popular", "c").await;
    let mut users = Vec::new();
    for i in 0..N {
        users.push(id(&app.create_user(&format!("fan{i}")).await));
    }
    let p = id(&post);
    app.beside_the_pump(async {
        let mut tasks = Vec::new();
        for u in &users {
            for kind in ["comments", "likes"] {
                let url = app.url(&format!("/api/posts/{p}/{kind}"));
                let body = json!({ "userId": u, "content": "me too" });
                let client = app.client.clone();
                tasks.push(tokio::spawn(async move {
                    client
                        .post(url)
                        .json(&body)
                        .send()
                        .await
                        .unwrap()
                        .status()
                        .as_u16()
                }));
            }
        }
        for t in tasks {
            assert_eq!(t.await.unwrap(), 201);
        }
        let now = post_of(app, &p).await;
        assert_eq!(now["commentCount"], N, "fresh at once");
        assert_eq!(now["likeCount"], N);
    })
    .await;
    app.settled("exact counters on the post and its copies", || async {
        let post = post_of(app, &p).await;
        let feed = app.get("/api/feed?limit=1").await;
        post["commentCount"] == N
            && post["likeCount"] == N
            && feed.body["items"][0]["commentCount"] == N
            && feed.body["items"][0]["likeCount"] == N
    })
    .await;
    let likes = all_pages(app, &format!("/api/posts/{p}/likes")).await;
    let likers: HashSet<&str> = likes
        .iter()
        .map(|l| l["userId"].as_str().unwrap())
        .collect();
    assert_eq!((likes.len(), likers.len()), (N, N), "one like per user");
    assert_eq!(
        all_pages(app, &format!("/api/posts/{p}/comments"))
            .await
            .len(),
        N
    );
}

/// Every item of a list, following its continuation tokens.
async fn all_pages(app: &TestApp, path: &str) -> Vec<Value> {
    let mut items = Vec::new();
    let mut next = format!("{path}?limit=100");
    loop {
        let r = app.get(&next).await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        items.extend(r.items().iter().cloned());
        match r.body["continuationToken"].as_str() {
            Some(t) => next = format!("{path}?limit=100&continuationToken={}", url_encode(t)),
            None => return items,
        }
    }
}

pub async fn concurrent_repeat_likes_count_once(app: &TestApp) {
    let user = app.create_user("ana").await;
    let post = app.create_post(&id(&user), "t", "c").await;
    app.beside_the_pump(async {
        let tasks: Vec<_> = (0..20)
            .map(|_| {
                let url = app.url(&format!("/api/posts/{}/likes", id(&post)));
                let body = json!({ "userId": id(&user) });
                let client = app.client.clone();
                tokio::spawn(async move {
                    client
                        .post(url)
                        .json(&body)
                        .send()
                        .await
                        .unwrap()
                        .status()
                        .as_u16()
                })
            })
            .collect();
        let mut statuses = Vec::new();
        for t in tasks {
            statuses.push(t.await.unwrap());
        }
        assert_eq!(
            statuses.iter().filter(|s| **s == 201).count(),
            1,
            "{statuses:?}"
        );
        assert!(
            statuses.iter().all(|s| *s == 201 || *s == 200),
            "{statuses:?}"
        );
    })
    .await;
    app.settled("one like", || async {
        post_of(app, &id(&post)).await["likeCount"] == 1
    })
    .await;
}

pub async fn counters_heal_after_a_crash_between_writes(app: &TestApp) {
    let user = app.create_user("ana").await;
    let post = app.create_post(&id(&user), "t", "c").await;
    let p = id(&post);
    // A comment stored without its increment (the process died in between: its batch wrote the
    // comment and the pending count announcing the increment) ...
    let comment = json!({ "id": "orphan", "type": "comment", "postId": p, "userId": id(&user),
                          "userUsername": "ana", "content": "hi", "creationDate": "2026-01-01T00:00:00.000Z" });
    let announced = || blog::domain::pending::pending_count(&p, &blog::domain::now());
    app.store
        .batch(
            Container::Posts,
            &p,
            vec![
                BatchOp::Create { item: comment },
                BatchOp::Create { item: announced() },
            ],
        )
        .await
        .unwrap();
    // ... and a like taken back whose decrement never came (a double count): the like and its
    // increment landed; the unlike announced its decrement and marked the like, then died.
    let like = json!({ "id": "like-x", "type": "like", "postId": p, "userId": "x",
                       "userUsername": "x", "creationDate": "2026-01-01T00:00:00.000Z" });
    app.store.create(Container::Posts, &p, like).await.unwrap();
    app.store
        .patch(
            Container::Posts,
            &p,
            &p,
            &[PatchOp::incr("/likeCount", 1)],
            None,
        )
        .await
        .unwrap();
    app.store
        .create(Container::Posts, &p, announced())
        .await
        .unwrap();
    app.store
        .patch(
            Container::Posts,
            &p,
            "like-x",
            &blog::domain::tombstone_ops(blog::domain::Kind::Like),
            None,
        )
        .await
        .unwrap();
    app.settled("the recount corrects both counters", || async {
        let post = post_of(app, &p).await;
        post["commentCount"] == 1 && post["likeCount"] == 0
    })
    .await;
}

pub async fn errors_are_problem_json(app: &TestApp) {
    let r = app.get("/api/users/%3Cscript%3E").await;
    r.assert_problem(404);
    assert_eq!(
        r.header("x-content-type-options"),
        Some("nosniff"),
        "an error echoing its request is never sniffed as HTML"
    );
    app.get("/api/nothing-here").await.assert_problem(404);
    let r = app.send(app.client.delete(app.url("/api/feed"))).await;
    r.assert_problem(405);
    assert!(
        r.header("allow").is_some_and(|a| a.contains("GET")),
        "{:?}",
        r.headers
    );
    app.send(app.client.patch(app.url("/api/users")))
        .await
        .assert_problem(405);
    let r = app
        .send(
            app.client
                .post(app.url("/api/users"))
                .header("content-type", "text/plain")
                .body(r#"{"username":"ana"}"#),
        )
        .await;
    r.assert_problem(415);
    let r = app
        .send(
            app.client
                .post(app.url("/api/users"))
                .header("content-type", "application/json")
                .body("{\"username\":"),
        )
        .await;
    r.assert_problem(400);
    let big = json!({ "username": "x".repeat(1024 * 1024 + 1) });
    app.post("/api/users", big).await.assert_problem(413);
    let long_id = "x".repeat(129);
    app.get(&format!("/api/users/{long_id}"))
        .await
        .assert_problem(400);
    app.get("/api/posts/a%23b").await.assert_problem(400);
}

pub async fn system_properties_are_not_returned(app: &TestApp) {
    let user = app.create_user("ana").await;
    let post = app.create_post(&id(&user), "t", "c").await;
    app.comment(&id(&post), &id(&user), "hi").await;
    app.like(&id(&post), &id(&user)).await;
    app.settled("copies exist", || async {
        !feed_ids(app, 1).await.is_empty()
    })
    .await;
    // A rename bumps the user's internal versions; a follow gives a follow list and a
    // timeline entry, whose stored forms name the other user in a property of their own.
    let renamed = app
        .put(
            &format!("/api/users/{}", id(&user)),
            json!({ "username": "ana k" }),
        )
        .await;
    assert_eq!(renamed.status, 200, "{:?}", renamed.body);
    let fan = app.create_user("fan").await;
    let r = app
        .put(
            &format!("/api/users/{}/following/{}", id(&fan), id(&user)),
            json!({}),
        )
        .await;
    assert_eq!(r.status, 204, "{:?}", r.body);
    let timeline = format!("/api/users/{}/timeline", id(&fan));
    app.settled("the timeline has the post", || async {
        !app.get(&timeline).await.items().is_empty()
    })
    .await;
    let mut bodies = vec![
        user.clone(),
        renamed.body,
        app.get(&format!("/api/users/{}", id(&user))).await.body,
        post.clone(),
        post_of(app, &id(&post)).await,
    ];
    for path in [
        format!("/api/users/{}/posts", id(&user)),
        format!("/api/posts/{}/comments", id(&post)),
        format!("/api/posts/{}/likes", id(&post)),
        "/api/feed".to_string(),
        format!("/api/users/{}/following", id(&fan)),
        timeline,
    ] {
        bodies.extend(app.get(&path).await.items().iter().cloned());
    }
    let internal = [
        "type",
        "renameVersion",
        "propagatedVersion",
        "propagatedUsername",
        "timelineMerged",
        "refUserId",
        "deleted",
        "ttl",
    ];
    for b in bodies {
        let keys: Vec<&String> = b.as_object().unwrap().keys().collect();
        assert!(
            keys.iter()
                .all(|k| !k.starts_with('_') && !internal.contains(&k.as_str())),
            "{keys:?}"
        );
    }
}
