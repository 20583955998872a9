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

/// A hosted process configured with a fan-out limit records it before its timeline triggers
/// project anything, and the timeline lane then projects by it: an author over it is merged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_timeline_triggers_record_the_configured_fanout_limit_first() {
    use blog::projection::timeline::{stored_limit, LIMIT_JOB};

    let fixture = crate::helpers::embedded_fixture().await;
    let app = crate::helpers::TestApp::spawn_with(fixture, false, |a| {
        a.hosted(true).fanout_limit(Some(0))
    })
    .await;
    let ana = id(&app.create_user("ana").await);
    let bob = id(&app.create_user("bob").await);
    let doc = app.current(Container::Users, &bob, &bob).await;
    // The main lane does not record it.
    app.deliver("UsersChangeFeed", std::slice::from_ref(&doc))
        .await
        .assert_applied();
    assert_eq!(stored_limit(&*app.store).await.unwrap(), None);

    assert_eq!(
        app.put(&format!("/api/users/{ana}/following/{bob}"), Value::Null)
            .await
            .status,
        204
    );
    let edge = app
        .current(Container::Users, &ana, &format!("following-{bob}"))
        .await;
    app.deliver("UsersChangeFeed", std::slice::from_ref(&edge))
        .await
        .assert_applied();
    let bob_now = app.current(Container::Users, &bob, &bob).await;
    app.deliver("UsersTimeline", &[edge, bob_now])
        .await
        .assert_applied();
    assert_eq!(stored_limit(&*app.store).await.unwrap(), Some(0));
    // One follower is over a limit of 0: bob's side of the limit is "merged" (or crossing to it).
    let job = app
        .store
        .read(Container::Users, &bob, LIMIT_JOB)
        .await
        .unwrap();
    assert!(
        job.is_some(),
        "bob's limit job is written: the lane judged by 0"
    );
}
