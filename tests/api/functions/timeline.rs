//! Follows and timelines under the Functions host: no pump, the projections run only when the
//! `PostsChangeFeed` and `UsersChangeFeed` triggers deliver the changes.

use blog::store::Container;
use serde_json::Value;

use super::common::spawn_hosted;
use crate::helpers::{id, next_millisecond};

fn ids(items: &[Value]) -> Vec<String> {
    items.iter().map(id).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_triggers_keep_followers_and_timelines() {
    let app = spawn_hosted().await;
    let ana = id(&app.create_user("ana").await);
    let bob = id(&app.create_user("bob").await);
    let old = id(&app.create_post(&bob, "old", "c").await);
    let post = app.current(Container::Posts, &old, &old).await;
    app.deliver("PostsChangeFeed", &[post])
        .await
        .assert_applied();

    let edge = format!("following-{bob}");
    assert_eq!(
        app.put(&format!("/api/users/{ana}/following/{bob}"), Value::Null)
            .await
            .status,
        204
    );
    // Nothing moves until the trigger delivers the edge.
    assert!(app
        .items(&format!("/api/users/{bob}/followers"))
        .await
        .is_empty());
    let doc = app.current(Container::Users, &ana, &edge).await;
    app.deliver("UsersChangeFeed", &[doc])
        .await
        .assert_applied();
    assert_eq!(
        ids(&app.items(&format!("/api/users/{bob}/followers")).await),
        vec![ana.clone()]
    );
    assert_eq!(
        ids(&app.items(&format!("/api/users/{ana}/timeline")).await),
        vec![old.clone()],
        "the follow brought bob's post"
    );
    assert_eq!(
        app.get(&format!("/api/users/{bob}")).await.body["followerCount"],
        1
    );

    next_millisecond().await;
    let new = id(&app.create_post(&bob, "new", "c").await);
    let post = app.current(Container::Posts, &new, &new).await;
    app.deliver("PostsChangeFeed", &[post])
        .await
        .assert_applied();
    assert_eq!(
        ids(&app.items(&format!("/api/users/{ana}/timeline")).await),
        vec![new.clone(), old.clone()]
    );

    assert_eq!(
        app.delete(&format!("/api/users/{ana}/following/{bob}"))
            .await
            .status,
        204
    );
    let doc = app.current(Container::Users, &ana, &edge).await;
    // Delivered twice: a redelivery changes nothing.
    for _ in 0..2 {
        app.deliver("UsersChangeFeed", std::slice::from_ref(&doc))
            .await
            .assert_applied();
    }
    assert!(app
        .items(&format!("/api/users/{ana}/timeline"))
        .await
        .is_empty());
    assert!(app
        .items(&format!("/api/users/{bob}/followers"))
        .await
        .is_empty());
}
