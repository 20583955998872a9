//! Tags: on posts (create and edit), a tag's page (`GET /api/tags/{tag}/posts`), the tag list
//! (`GET /api/tags`) and search by a tag's words, written once against the HTTP API and run on
//! each store (`tags_suite!` in `embedded.rs` and `cosmos.rs`).

use serde_json::{json, Value};

use crate::helpers::{id, next_millisecond, Parts, TestApp};

/// Instantiate every suite test as a `#[tokio::test]` over an app (no pump: the tests settle
/// the change feed where they mean "once it was projected").
#[macro_export]
macro_rules! tags_suite {
    ($fixture:path) => {
        $crate::tags_suite!(@tests $fixture;
            bad_tags_are_a_400_naming_tags_and_write_nothing,
            tags_are_lowercased_kept_once_and_in_every_copy,
            an_edit_sets_or_keeps_the_tags,
            a_tags_page_is_newest_first_paged_one_operation_a_page,
            copies_follow_edits_counts_renames_and_deletes,
            an_erased_accounts_posts_leave_their_tags,
            the_tag_list_counts_each_tags_posts_most_used_first,
            a_tag_left_by_its_last_post_goes_with_its_count,
            verify_judges_tag_changes_in_flight_as_lag,
            verify_finds_and_repairs_broken_tag_copies_and_counts);
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
        json!([" rust"]),
        json!(["c++"]),
        json!(["a/b"]),
        json!(["x".repeat(33)]),
        json!(eleven),
        // Fillers, invisible characters, no letter or digit, and look-alikes mixing scripts.
        json!(["\u{3164}"]),
        json!(["\u{115F}"]),
        json!(["a\u{3164}b"]),
        json!(["a\u{200B}b"]),
        json!(["-"]),
        json!(["---"]),
        json!(["_"]),
        json!(["раst"]),
        json!(["rust", "pаypal"]),
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
    // Letters of one script (Japanese mixing its own scripts), digits, `-` and `_` are tags.
    let fine = create_tagged(
        app,
        &ana,
        "Fine",
        &["snake_case", "東京タワー", "раст", "x-1"],
    )
    .await;
    let read = app.get(&format!("/api/posts/{fine}")).await;
    assert_eq!(
        read.body["tags"],
        json!(["snake_case", "東京タワー", "раст", "x-1"])
    );
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
    assert!(mine.items().len() <= 2 && mine_after.items().len() == 2);
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
    let post = create_tagged(app, &ana, "Tagged", &["Rust", "cosmos-DB", "rust", "Café"]).await;
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

fn ids(items: &[Value]) -> Vec<String> {
    items.iter().map(id).collect()
}

/// The ids on a tag's page, every page of it (two a page).
async fn tagged(app: &TestApp, tag: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let url = reqwest::Url::parse_with_params(
            &app.url(&format!("/api/tags/{tag}/posts")),
            [("limit", "2")]
                .into_iter()
                .chain(token.as_deref().map(|t| ("continuationToken", t))),
        )
        .unwrap();
        let r = app.send(reqwest::Client::new().get(url)).await;
        assert_eq!(r.status, 200, "{tag}: {:?}", r.body);
        // One query a page, and the counts of each post shown read from the post.
        let shown = r.items().len() as u32;
        assert!(
            r.store_operations() <= 1 + shown,
            "{}",
            r.store_operations()
        );
        out.extend(ids(r.items()));
        match r.body["continuationToken"].as_str() {
            Some(t) => token = Some(t.to_string()),
            None => return out,
        }
    }
}

/// The tag list, as (tag, count) pairs.
async fn tag_list(app: &TestApp) -> Vec<(String, u64)> {
    let r = app.get("/api/tags?limit=100").await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.store_operations(), 1);
    r.items()
        .iter()
        .map(|t| {
            (
                t["tag"].as_str().unwrap().to_string(),
                t["postCount"].as_u64().unwrap(),
            )
        })
        .collect()
}

pub async fn a_tags_page_is_newest_first_paged_one_operation_a_page(app: &TestApp) {
    let ana = id(&app.create_user("ana").await);
    let mut posts = Vec::new();
    for i in 0..5 {
        posts.push(create_tagged(app, &ana, &format!("Post {i}"), &["paging", "x"]).await);
        next_millisecond().await;
    }
    create_tagged(app, &ana, "Elsewhere", &["other"]).await;
    app.create_post(&ana, "Untagged", "paging").await;
    posts.reverse();
    app.settle().await;
    assert_eq!(tagged(app, "paging").await, posts);
    // In another case, the same tag.
    assert_eq!(tagged(app, "PAGING").await, posts);
    assert!(tagged(app, "nothing-here").await.is_empty());
    // The short form, as the author's list shows it.
    let page = app.get("/api/tags/paging/posts?limit=1").await;
    let listed = app.get(&format!("/api/users/{ana}/posts")).await;
    let mine = listed.items().iter().find(|p| p["id"] == posts[0].as_str());
    assert_eq!(Some(&page.items()[0]), mine);
    // A bad tag, a bad page.
    for path in [
        "/api/tags/c++/posts",
        &format!("/api/tags/{}/posts", "x".repeat(33)),
        // White space is not part of a tag, around it either (as the schema's pattern says).
        "/api/tags/%C2%A0%C3%B9/posts",
        "/api/tags/%20paging/posts",
        "/api/tags/paging/posts?limit=0",
        "/api/tags/paging/posts?continuationToken=",
    ] {
        let r = app.get(path).await;
        r.assert_problem(400);
    }
    let r = app.get("/api/tags/c++/posts").await;
    assert_eq!(r.body["errors"][0]["field"], "tag", "{:?}", r.body);
    assert_eq!(r.body["errors"][0]["in"], "path");
}

pub async fn copies_follow_edits_counts_renames_and_deletes(app: &TestApp) {
    let ana = id(&app.create_user("ana").await);
    let bo = id(&app.create_user("bo").await);
    let post = create_tagged(app, &ana, "Moving", &["old", "kept"]).await;
    let other = create_tagged(app, &ana, "Staying", &["kept"]).await;
    app.settle().await;
    assert_eq!(tagged(app, "old").await, std::slice::from_ref(&post));
    let r = edit(
        app,
        &ana,
        &post,
        json!({ "title": "Moved", "content": "c", "tags": ["new", "kept"] }),
    )
    .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(app.like(&post, &bo).await.status, 201);
    let r = app
        .put(&format!("/api/users/{ana}"), json!({ "username": "ana2" }))
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    app.settle().await;
    assert!(tagged(app, "old").await.is_empty());
    assert_eq!(tagged(app, "new").await, std::slice::from_ref(&post));
    assert_eq!(tagged(app, "kept").await, [other.clone(), post.clone()]);
    let page = app.get("/api/tags/new/posts").await;
    let copy = &page.items()[0];
    assert_eq!(copy["title"], "Moved");
    assert_eq!(copy["tags"], json!(["new", "kept"]));
    assert_eq!(copy["likeCount"], 1);
    assert_eq!(copy["userUsername"], "ana2");
    // A delete: the post leaves every tag at once, the counts follow.
    assert_eq!(app.delete(&format!("/api/posts/{post}")).await.status, 204);
    assert!(tagged(app, "new").await.is_empty());
    assert_eq!(tagged(app, "kept").await, std::slice::from_ref(&other));
    // Its tombstone keeps none of its words, its tags included.
    let tombstone = app
        .store
        .read(blog::store::Container::Posts, &post, &post)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (tombstone["title"].clone(), tombstone["tags"].clone()),
        (json!(""), json!([]))
    );
    app.settle().await;
    assert!(tagged(app, "new").await.is_empty());
    assert_eq!(tagged(app, "kept").await, [other]);
    assert_eq!(tag_list(app).await, [("kept".to_string(), 1)]);
}

pub async fn an_erased_accounts_posts_leave_their_tags(app: &TestApp) {
    let ana = id(&app.create_user("ana-to-erase").await);
    let bo = id(&app.create_user("bo").await);
    for i in 0..3 {
        create_tagged(app, &ana, &format!("Erased {i}"), &["shared", "hers"]).await;
    }
    let his = create_tagged(app, &bo, "Kept", &["shared"]).await;
    app.settle().await;
    assert_eq!(tagged(app, "shared").await.len(), 4);
    assert_eq!(app.delete(&format!("/api/users/{ana}")).await.status, 204);
    app.settle().await;
    assert_eq!(tagged(app, "shared").await, [his]);
    assert!(tagged(app, "hers").await.is_empty());
    assert_eq!(tag_list(app).await, [("shared".to_string(), 1)]);
}

pub async fn the_tag_list_counts_each_tags_posts_most_used_first(app: &TestApp) {
    let ana = id(&app.create_user("ana").await);
    assert!(tag_list(app).await.is_empty());
    for (title, tags) in [
        ("a", &["rust", "web"][..]),
        ("b", &["rust"][..]),
        ("c", &["rust", "cosmos-db", "web"][..]),
        ("d", &["solo"][..]),
    ] {
        create_tagged(app, &ana, title, tags).await;
    }
    let e = create_tagged(app, &ana, "e", &["web"]).await;
    app.settle().await;
    let list = tag_list(app).await;
    let mut top: Vec<_> = list[..2].to_vec();
    top.sort();
    assert_eq!(top, [("rust".to_string(), 3), ("web".to_string(), 3)]);
    let mut rest: Vec<_> = list[2..].to_vec();
    rest.sort();
    assert_eq!(
        rest,
        [("cosmos-db".to_string(), 1), ("solo".to_string(), 1)]
    );
    // Settling again (a replay of nothing new) changes no count.
    app.settle().await;
    assert_eq!(tag_list(app).await, list);
    // An edit moving a post from one tag to another moves one from each count.
    let r = edit(
        app,
        &ana,
        &e,
        json!({ "title": "e", "content": "c", "tags": ["solo"] }),
    )
    .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    app.settle().await;
    let list = tag_list(app).await;
    assert_eq!(list[0], ("rust".to_string(), 3));
    let mut rest: Vec<_> = list[1..].to_vec();
    rest.sort();
    assert_eq!(
        rest,
        [
            ("cosmos-db".to_string(), 1),
            ("solo".to_string(), 2),
            ("web".to_string(), 2)
        ]
    );
    // Paged like the other lists.
    let first = app.get("/api/tags?limit=1").await;
    assert_eq!(first.items().len(), 1);
    assert!(first.body["continuationToken"].is_string());
}

/// A tag whose last post goes leaves the list, and its count item goes too; a new post taking
/// the tag brings it back.
pub async fn a_tag_left_by_its_last_post_goes_with_its_count(app: &TestApp) {
    use blog::store::Container;

    let ana = id(&app.create_user("ana").await);
    let post = create_tagged(app, &ana, "Alone", &["fleeting", "kept"]).await;
    create_tagged(app, &ana, "Other", &["kept"]).await;
    app.settle().await;
    let mut list = tag_list(app).await;
    list.sort();
    assert_eq!(list, [("fleeting".to_string(), 1), ("kept".to_string(), 2)]);
    assert_eq!(app.delete(&format!("/api/posts/{post}")).await.status, 204);
    app.settle().await;
    assert_eq!(tag_list(app).await, [("kept".to_string(), 1)]);
    let count = app
        .store
        .read(Container::Feed, "tagCount", "fleeting")
        .await;
    assert_eq!(
        count.unwrap(),
        None,
        "the count item of a tag no post carries"
    );
    // Settling again leaves it gone; a new post with the tag brings it back.
    app.settle().await;
    let count = app
        .store
        .read(Container::Feed, "tagCount", "fleeting")
        .await;
    assert_eq!(count.unwrap(), None);
    let again = create_tagged(app, &ana, "Again", &["fleeting"]).await;
    app.settle().await;
    let mut list = tag_list(app).await;
    list.sort();
    assert_eq!(list, [("fleeting".to_string(), 1), ("kept".to_string(), 1)]);
    assert_eq!(tagged(app, "fleeting").await, [again]);
}

/// Changes the change feed has not applied yet (a new tagged post, an edit of a tagged post)
/// are lag to the tags part of verify, as to the others, whether it looks again or not; once
/// the change feed has applied them, nothing is lagging and nothing drifted.
pub async fn verify_judges_tag_changes_in_flight_as_lag(app: &TestApp) {
    use blog::ops::progress::Progress;
    use blog::ops::verify_and_repair;
    use std::time::Duration;

    let ana = id(&app.create_user("ana").await);
    let p1 = create_tagged(app, &ana, "First", &["rust"]).await;
    app.settle().await;
    // In flight: a new post with a tag, and an edit of a tagged post.
    create_tagged(app, &ana, "Second", &["rust", "new"]).await;
    let r = edit(
        app,
        &ana,
        &p1,
        json!({ "title": "First, edited", "content": "c", "tags": ["rust"] }),
    )
    .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    for settle in [Duration::ZERO, Duration::from_millis(20)] {
        let found = verify_and_repair(&*app.store, false, settle, &Progress::hidden)
            .await
            .unwrap();
        let text = found.render();
        assert!(found.tags().before.is_clean(), "{settle:?}: {text}");
        assert!(found.is_clean(), "{settle:?}: {text}");
    }
    app.settle().await;
    let found = verify_and_repair(&*app.store, false, Duration::ZERO, &Progress::hidden)
        .await
        .unwrap();
    let text = found.render();
    assert!(found.is_clean(), "{text}");
    assert!(text.contains("0 drifted, 0 lagging"), "{text}");
}

pub async fn verify_finds_and_repairs_broken_tag_copies_and_counts(app: &TestApp) {
    use blog::ops::progress::Progress;
    use blog::ops::verify_and_repair;
    use blog::store::Container;
    use std::time::Duration;

    let ana = id(&app.create_user("ana").await);
    let p1 = create_tagged(app, &ana, "First", &["rust", "web"]).await;
    next_millisecond().await;
    let p2 = create_tagged(app, &ana, "Second", &["rust"]).await;
    app.settle().await;
    let store = &*app.store;
    // A copy gone stale, one gone, one that does not belong, and a wrong count.
    let mut stale = store
        .read(Container::Feed, "tag:rust", &p1)
        .await
        .unwrap()
        .unwrap();
    stale["title"] = "Wrong".into();
    store
        .upsert(Container::Feed, "tag:rust", stale)
        .await
        .unwrap();
    store.delete(Container::Feed, "tag:web", &p1).await.unwrap();
    let mut extra = store
        .read(Container::Feed, "tag:rust", &p2)
        .await
        .unwrap()
        .unwrap();
    extra["type"] = "tag:go".into();
    store
        .upsert(Container::Feed, "tag:go", extra)
        .await
        .unwrap();
    let go_count = json!({ "id": "go", "type": "tagCount", "tag": "go", "postCount": 1,
                           "creationDate": format!("{:020}", 1) });
    store
        .upsert(Container::Feed, "tagCount", go_count)
        .await
        .unwrap();
    let mut count = store
        .read(Container::Feed, "tagCount", "rust")
        .await
        .unwrap()
        .unwrap();
    count["postCount"] = 5.into();
    store
        .upsert(Container::Feed, "tagCount", count)
        .await
        .unwrap();
    blog::pump::checkpoint_at_end(store).await.unwrap();

    let found = verify_and_repair(store, false, Duration::ZERO, &Progress::hidden)
        .await
        .unwrap();
    assert!(!found.is_clean());
    let targets: Vec<&String> = found.tags().before.findings.keys().collect();
    for t in [
        format!("feed/tag:rust/{p1}"),
        format!("feed/tag:web/{p1}"),
        format!("feed/tag:go/{p2}"),
        "feed/tagCount/rust".to_string(),
    ] {
        assert!(targets.contains(&&t), "{t} not among {targets:?}");
    }
    // Verify alone writes nothing.
    assert!(tagged(app, "web").await.is_empty());

    let mended = verify_and_repair(store, true, Duration::ZERO, &Progress::hidden)
        .await
        .unwrap();
    assert!(mended.tags().repair.is_some());
    assert!(mended.is_clean(), "{}", mended.render());
    assert_eq!(tagged(app, "web").await, std::slice::from_ref(&p1));
    assert_eq!(tagged(app, "rust").await, [p2, p1]);
    assert!(tagged(app, "go").await.is_empty());
    assert_eq!(
        app.get("/api/tags/rust/posts").await.items()[1]["title"],
        "First"
    );
    let mut list = tag_list(app).await;
    list.sort();
    assert_eq!(list, [("rust".to_string(), 2), ("web".to_string(), 1)]);
}
