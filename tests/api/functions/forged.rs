//! Trigger documents are decoded with the API's rules: a document that does not fit (an id too
//! long or with forbidden characters, a date not in the service's form, a timestamp in the
//! future, a text over its size) is refused and logged, and the rest of its batch is applied.

use blog::store::Container;
use serde_json::{json, Value};

use super::common::spawn_hosted;
use crate::helpers::{id, TestApp};

fn epoch_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// A user with a post, projected as the triggers would: the post in the feed and the user's list.
async fn ana_with_a_post(app: &TestApp) -> (String, String) {
    let ana = id(&app.create_user("ana").await);
    let post = id(&app.create_post(&ana, "Real", "a real post").await);
    let doc = app.current(Container::Posts, &post, &post).await;
    app.deliver("PostsChangeFeed", &[doc])
        .await
        .assert_applied();
    assert_eq!(app.items("/api/feed").await[0]["id"], post.as_str());
    (ana, post)
}

async fn feed_ids(app: &TestApp) -> Vec<String> {
    app.items("/api/feed")
        .await
        .iter()
        .map(|p| p["id"].as_str().unwrap().to_string())
        .collect()
}

/// A user's deletion mark forged with a timestamp an hour ahead would win over the store's own
/// (live) version of the user: it is refused, and the user and their posts stay.
#[tokio::test]
async fn a_forged_user_from_the_future_erases_nobody() {
    let app = spawn_hosted().await;
    let (ana, post) = ana_with_a_post(&app).await;
    let mut forged = app.current(Container::Users, &ana, &ana).await;
    forged["deleted"] = json!(true);
    forged["username"] = json!("");
    forged["ttl"] = json!(604_800);
    forged["_ts"] = json!(epoch_secs() + 3600);
    app.deliver("UsersChangeFeed", &[forged])
        .await
        .assert_applied();

    assert_eq!(app.get(&format!("/api/users/{ana}")).await.status, 200);
    assert_eq!(app.get(&format!("/api/posts/{post}")).await.status, 200);
    let copies = app.items(&format!("/api/users/{ana}/posts")).await;
    assert_eq!(copies.len(), 1, "{copies:?}");
    assert_eq!(feed_ids(&app).await, [post]);
}

/// Posts that no request could have made (a 100,000-character id, a `creationDate` of "zzzz"
/// that would sort above every real one, a title over 200 characters) never reach the feed;
/// a real change in the same batch is applied.
#[tokio::test]
async fn forged_posts_do_not_land_in_the_feed() {
    let app = spawn_hosted().await;
    let (ana, post) = ana_with_a_post(&app).await;
    let forged = |id: &str, date: &str, title: &str| {
        json!({
            "id": id, "postId": id, "type": "post", "userId": ana, "userUsername": "ana",
            "title": title, "content": "forged", "commentCount": 0, "likeCount": 0,
            "creationDate": date, "_ts": epoch_secs(),
        })
    };
    let now = "2026-11-26T06:00:00.000Z";
    let long_id = "x".repeat(100_000);
    let r = app
        .put(
            &format!("/api/posts/{post}"),
            json!({ "userId": ana, "title": "Edited", "content": "still real" }),
        )
        .await;
    assert_eq!(r.status, 200);
    let edited = app.current(Container::Posts, &post, &post).await;
    let batch: Vec<Value> = vec![
        forged(&long_id, now, "long id"),
        forged("p-zzzz", "zzzz", "from the end of time"),
        forged("p-slash/..", now, "bad characters"),
        forged("p-long-title", now, &"t".repeat(201)),
        edited,
    ];
    app.deliver("PostsChangeFeed", &batch)
        .await
        .assert_applied();

    let feed = app.items("/api/feed").await;
    let shown: Vec<String> = feed_ids(&app)
        .await
        .iter()
        .map(|id| id.chars().take(40).collect())
        .collect();
    assert_eq!(feed.len(), 1, "{shown:?}");
    assert_eq!(feed[0]["id"], post.as_str());
    assert_eq!(
        feed[0]["title"], "Edited",
        "the real change in the batch is applied"
    );
    let copies = app.items(&format!("/api/users/{ana}/posts")).await;
    assert_eq!(copies.len(), 1);
}
