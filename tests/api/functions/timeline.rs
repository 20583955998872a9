//! Follows and timelines under the Functions host: no pump, the projections run only when the
//! triggers deliver the changes: the main lane's (`PostsChangeFeed`, `UsersChangeFeed`) and the
//! timeline lane's (`PostsTimeline`, `UsersTimeline`), each on its own.

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
    app.deliver("UsersChangeFeed", std::slice::from_ref(&doc))
        .await
        .assert_applied();
    assert_eq!(
        ids(&app.items(&format!("/api/users/{bob}/followers")).await),
        vec![ana.clone()],
        "the follow shows without the timeline lane"
    );
    assert!(
        app.items(&format!("/api/users/{ana}/timeline"))
            .await
            .is_empty(),
        "the timeline is the timeline lane's"
    );
    // The timeline lane, given the mirror the main lane wrote, brings bob's post.
    let mirror = app
        .current(Container::Users, &bob, &format!("follower-{ana}"))
        .await;
    app.deliver("UsersTimeline", &[mirror])
        .await
        .assert_applied();
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
    // The main lane wrote bob's copy of it; its change sets the timeline lane's fan-out off.
    let copy = app.current(Container::Users, &bob, &new).await;
    app.deliver("UsersTimeline", &[copy]).await.assert_applied();
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
    // Delivered twice to each lane: a redelivery changes nothing.
    for _ in 0..2 {
        for function in ["UsersChangeFeed", "UsersTimeline"] {
            app.deliver(function, std::slice::from_ref(&doc))
                .await
                .assert_applied();
        }
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
