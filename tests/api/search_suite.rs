//! `GET /api/search`, written once against the HTTP API and run on each store (`search_suite!`
//! in `embedded.rs` and `cosmos.rs`). On the in-memory emulator the Cosmos store matches words
//! as substrings (`CosmosStore::with_emulated_full_text`), so these tests use words that are
//! found the same way either way; how words are read is tested on the embedded store
//! (`embedded::words`).

use serde_json::Value;

use crate::helpers::{id, next_millisecond, TestApp};

/// Instantiate every suite test as a `#[tokio::test]` over an app (no pump: the tests settle
/// the change feed where they mean "once it was projected").
#[macro_export]
macro_rules! search_suite {
    ($fixture:path) => {
        $crate::search_suite!(@tests $fixture;
            finds_every_word_newest_first_in_short_form, pages_with_continuation_tokens,
            a_bad_q_is_a_400_naming_q, follows_edits_and_deletes,
            an_erased_accounts_posts_are_never_found, finds_a_post_by_its_tags);
    };
    (@tests $fixture:path; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let app = $crate::helpers::TestApp::spawn($fixture().await, false).await;
                $crate::search_suite::$name(&app).await;
            }
        )*
    };
}

fn ids(items: &[Value]) -> Vec<String> {
    items.iter().map(id).collect()
}

/// The ids a search finds, all pages of it.
async fn found(app: &TestApp, q: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let url = reqwest::Url::parse_with_params(
            &app.url("/api/search"),
            [("q", q), ("limit", "2")]
                .into_iter()
                .chain(token.as_deref().map(|t| ("continuationToken", t))),
        )
        .unwrap();
        let r = app.send(reqwest::Client::new().get(url)).await;
        assert_eq!(r.status, 200, "{q}: {:?}", r.body);
        out.extend(ids(r.items()));
        match r.body["continuationToken"].as_str() {
            Some(t) => token = Some(t.to_string()),
            None => return out,
        }
    }
}

async fn search(app: &TestApp, query: &str) -> crate::helpers::Resp {
    app.get(&format!("/api/search?{query}")).await
}

pub async fn finds_every_word_newest_first_in_short_form(app: &TestApp) {
    let ana = id(&app.create_user("ana").await);
    let bo = id(&app.create_user("bo").await);
    let long = format!("Partition keys for a blog. {}", "More words. ".repeat(40));
    let p1 = id(&app.create_post(&ana, "Modelling on Cosmos", &long).await);
    next_millisecond().await;
    let p2 = id(&app
        .create_post(&bo, "Gardening", "cosmos flowers and partition walls")
        .await);
    next_millisecond().await;
    let p3 = id(&app.create_post(&ana, "Cosmos only", "nothing else").await);
    next_millisecond().await;
    app.create_post(&bo, "Unrelated", "tomatoes").await;
    // A comment holding the words is not a post.
    app.comment(&p3, &bo, "cosmos partition").await;

    let r = search(app, "q=cosmos%20partition").await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.header("cache-control"), Some("no-cache"));
    assert_eq!(ids(r.items()), [p2.clone(), p1.clone()]);
    // Three store operations: the search, and a read of each of its two authors.
    assert_eq!(r.store_operations(), 3);
    // Words in any case, one in the title and the other in the content.
    assert_eq!(
        found(app, "COSMOS Modelling").await,
        std::slice::from_ref(&p1)
    );
    assert_eq!(found(app, "Cosmos").await, [p3.clone(), p2, p1.clone()]);
    assert!(found(app, "cosmos tomatoes").await.is_empty());

    // The same short form as the author's list of posts.
    app.settle().await;
    let mine = app.get(&format!("/api/users/{ana}/posts")).await;
    let listed = mine
        .items()
        .iter()
        .find(|p| p["id"] == p1.as_str())
        .unwrap();
    let shown = &r.items()[1];
    assert_eq!(shown, listed);
    assert!(shown["content"].as_str().unwrap().chars().count() <= 200);
    assert!(long.starts_with(shown["content"].as_str().unwrap().trim_end_matches('…')));
    // Nothing found: an empty page, one operation.
    let none = search(app, "q=nowhere").await;
    assert!(none.items().is_empty(), "{:?}", none.body);
    assert_eq!(none.body["continuationToken"], Value::Null);
    assert_eq!(none.store_operations(), 1);
}

pub async fn pages_with_continuation_tokens(app: &TestApp) {
    let ana = id(&app.create_user("ana").await);
    let mut posts = Vec::new();
    for i in 0..5 {
        posts.push(id(&app
            .create_post(&ana, &format!("Post {i}"), "paging words")
            .await));
        next_millisecond().await;
    }
    posts.reverse();
    assert_eq!(found(app, "paging").await, posts);
    let first = search(app, "q=paging&limit=3").await;
    assert_eq!(ids(first.items()), posts[..3]);
    let token = first.body["continuationToken"].as_str().unwrap();
    let url = reqwest::Url::parse_with_params(
        &app.url("/api/search"),
        [
            ("q", "paging"),
            ("limit", "3"),
            ("continuationToken", token),
        ],
    )
    .unwrap();
    let rest = app.send(reqwest::Client::new().get(url)).await;
    assert_eq!(ids(rest.items()), posts[3..]);
    search(app, "q=paging&continuationToken=not-a-token")
        .await
        .assert_problem(400);
    search(app, "q=paging&limit=0").await.assert_problem(400);
}

pub async fn a_bad_q_is_a_400_naming_q(app: &TestApp) {
    let ana = id(&app.create_user("ana").await);
    app.create_post(&ana, "Words", "a b c d e f g h i").await;
    let nine = "a%20b%20c%20d%20e%20f%20g%20h%20i";
    let long = "x".repeat(201);
    for query in [
        "".to_string(),
        "q=".to_string(),
        "q=%20%2C%3B!".to_string(),
        format!("q={nine}"),
        format!("q={long}"),
    ] {
        let r = search(app, &query).await;
        r.assert_problem(400);
        assert_eq!(r.body["errors"][0]["field"], "q", "{query}: {:?}", r.body);
        assert_eq!(r.body["errors"][0]["in"], "query", "{query}");
        assert_eq!(r.store_operations(), 0, "{query}: nothing read or written");
    }
    // Eight different words (a repeat is one word) and 200 characters are fine.
    let eight = search(app, "q=a%20b%20c%20d%20e%20f%20g%20h%20A").await;
    assert_eq!(eight.status, 200, "{:?}", eight.body);
    assert_eq!(
        search(app, &format!("q={}", "x".repeat(200))).await.status,
        200
    );
}

pub async fn follows_edits_and_deletes(app: &TestApp) {
    let ana = id(&app.create_user("ana").await);
    let post = id(&app.create_post(&ana, "Before", "the edit").await);
    let gone = id(&app.create_post(&ana, "Before", "the delete").await);
    let r = app
        .put(
            &format!("/api/posts/{post}"),
            serde_json::json!({ "userId": ana, "title": "After", "content": "the edit" }),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(app.delete(&format!("/api/posts/{gone}")).await.status, 204);
    // At once, before the change feed has run.
    assert!(found(app, "before").await.is_empty());
    assert_eq!(found(app, "after edit").await, std::slice::from_ref(&post));
    assert!(found(app, "delete").await.is_empty());
    app.settle().await;
    assert!(found(app, "before").await.is_empty());
    assert_eq!(found(app, "after").await, [post]);
}

/// An erasure marks the account at once and its posts a step at a time (about 200 writes in the
/// request, three a post; the change feed takes the rest): none is ever found, before the
/// change feed has marked the rest or after.
pub async fn an_erased_accounts_posts_are_never_found(app: &TestApp) {
    use blog::projection::cascade::POSTS_PER_STEP;
    use blog::projection::engine::PAGE;
    let ana = id(&app.create_user("ana-to-erase").await);
    let bo = id(&app.create_user("bo").await);
    // More than the request marks.
    let many = PAGE as usize / 3 + 2 * POSTS_PER_STEP as usize;
    for i in 0..many {
        app.create_post(&ana, &format!("Erased {i}"), "secret words")
            .await;
    }
    let his = id(&app.create_post(&bo, "Kept", "secret words").await);
    assert_eq!(
        search(app, "q=secret&limit=100").await.items().len(),
        many + 1
    );
    assert_eq!(app.delete(&format!("/api/users/{ana}")).await.status, 204);
    assert_eq!(found(app, "secret words").await, std::slice::from_ref(&his));
    app.settle().await;
    assert_eq!(found(app, "secret words").await, [his]);
}

/// A word may be in a post's tags: with the title's and content's words, each word anywhere.
/// (Tags as whole words: the emulator's stand-in for Cosmos DB matches a tag only whole.)
pub async fn finds_a_post_by_its_tags(app: &TestApp) {
    let ana = id(&app.create_user("ana").await);
    let tagged = app
        .post(
            "/api/posts",
            serde_json::json!({ "userId": ana, "title": "Notes", "content": "plain words",
                                "tags": ["Kubernetes", "helm"] }),
        )
        .await;
    assert_eq!(tagged.status, 201, "{:?}", tagged.body);
    let tagged = id(&tagged.body);
    app.create_post(&ana, "Other", "plain words").await;
    assert_eq!(
        found(app, "kubernetes").await,
        std::slice::from_ref(&tagged)
    );
    assert_eq!(
        found(app, "helm notes").await,
        std::slice::from_ref(&tagged)
    );
    assert_eq!(
        found(app, "kubernetes plain").await,
        std::slice::from_ref(&tagged)
    );
    // An edit's new tags at once; the old ones are no longer found.
    let r = app
        .put(
            &format!("/api/posts/{tagged}"),
            serde_json::json!({ "userId": ana, "title": "Notes", "content": "plain words",
                                "tags": ["nomad"] }),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert!(found(app, "kubernetes").await.is_empty());
    assert_eq!(found(app, "nomad").await, [tagged]);
}

/// `BLOG_SEARCHES_PER_MINUTE=3`: a client's fourth search within the minute is 429
/// `too-many-searches` with `Retry-After`, and reads nothing; other reads are unaffected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clients_searches_are_limited_per_minute() {
    let fixture = crate::helpers::embedded_fixture().await;
    let app = TestApp::spawn_with(fixture, false, |a| a.with_search_limit(3, 2)).await;
    for _ in 0..3 {
        let r = search(&app, "q=hello").await;
        assert_eq!(r.status, 200, "{:?}", r.body);
    }
    let over = search(&app, "q=hello").await;
    over.assert_problem(429);
    assert_eq!(
        over.body["type"],
        "tag:blog-api,2026:problems/too-many-searches"
    );
    let retry: u64 = over
        .header("retry-after")
        .expect("Retry-After")
        .parse()
        .unwrap();
    assert!((1..=20).contains(&retry), "Retry-After: {retry}");
    assert_eq!(over.store_operations(), 0, "nothing read");
    assert_eq!(app.get("/api/feed").await.status, 200);
}
