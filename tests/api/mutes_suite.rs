//! Mutes (docs/api.md#mutes) as a client sees them, written once and instantiated per store with
//! `mutes_suite!(path::to::fixture_fn);`: what the muter reads, what everyone else reads, and
//! who may read or change a mute list.

use std::time::Duration;

use blog::auth::Auth;
use blog::ops::progress::Progress;
use blog::ops::verify_and_repair;
use blog::store::Container;
use serde_json::{json, Value};

use crate::helpers::{id, Fixture, TestApp};

#[macro_export]
macro_rules! mutes_suite {
    ($fixture:path) => {
        $crate::mutes_suite!(@tests $fixture;
            a_mute_hides_posts_and_comments_from_the_muter_alone,
            mute_input_is_checked_and_refusals_write_nothing,
            a_user_mutes_at_most_100_users,
            mute_lists_go_with_erasures);
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn only_the_signed_in_user_reads_and_changes_their_mutes() {
            $crate::mutes_suite::only_the_signed_in_user_reads_and_changes_their_mutes(
                $fixture().await,
            )
            .await;
        }
    };
    (@tests $fixture:path; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let app = $crate::helpers::TestApp::spawn($fixture().await, false).await;
                $crate::mutes_suite::$name(&app).await;
            }
        )*
    };
}

fn mute_path(user: &str, muted: &str) -> String {
    format!("/api/users/{user}/mutes/{muted}")
}

async fn mute(app: &TestApp, user: &str, muted: &str) {
    let r = app.put(&mute_path(user, muted), Value::Null).await;
    assert_eq!(r.status, 204, "{:?}", r.body);
}

async fn unmute(app: &TestApp, user: &str, muted: &str) {
    let r = app.delete(&mute_path(user, muted)).await;
    assert_eq!(r.status, 204, "{:?}", r.body);
}

async fn follow(app: &TestApp, user: &str, followee: &str) {
    let path = format!("/api/users/{user}/following/{followee}");
    let r = app.put(&path, Value::Null).await;
    assert_eq!(r.status, 204, "{:?}", r.body);
}

/// The ids of a page's items.
fn ids(r: &crate::helpers::Resp) -> Vec<String> {
    assert_eq!(r.status, 200, "{:?}", r.body);
    r.items().iter().map(id).collect()
}

/// The user ids of the users `user` has muted, as their list shows them.
async fn muted(app: &TestApp, user: &str) -> Vec<String> {
    ids(&app.get(&format!("/api/users/{user}/mutes")).await)
}

/// `user`'s timeline as `reader` reads it (`None`: anonymously).
async fn timeline(app: &TestApp, user: &str, reader: Option<&str>) -> Vec<String> {
    let viewer = reader.map_or(String::new(), |r| format!("&viewerId={r}"));
    let path = format!("/api/users/{user}/timeline?limit=100{viewer}");
    ids(&app.get(&path).await)
}

/// The contents of post `post`'s comments as `reader` reads them (`None`: anonymously).
async fn comments(app: &TestApp, post: &str, reader: Option<&str>) -> Vec<String> {
    let viewer = reader.map_or(String::new(), |r| format!("&viewerId={r}"));
    let r = app
        .get(&format!("/api/posts/{post}/comments?limit=100{viewer}"))
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let content = |c: &Value| c["content"].as_str().unwrap().to_string();
    r.items().iter().map(content).collect()
}

fn owned(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

pub async fn a_mute_hides_posts_and_comments_from_the_muter_alone(app: &TestApp) {
    let ana = id(&app.create_user("ana").await);
    let bob = id(&app.create_user("bob").await);
    let cy = id(&app.create_user("cy").await);
    let dan = id(&app.create_user("dan").await);
    for (user, followee) in [(&ana, &bob), (&ana, &dan), (&cy, &bob), (&cy, &dan)] {
        follow(app, user, followee).await;
    }
    let by_bob = id(&app.create_post(&bob, "by bob", "c").await);
    let by_dan = id(&app.create_post(&dan, "by dan", "c").await);
    for (who, what) in [(&bob, "bob was here"), (&cy, "cy was here")] {
        assert_eq!(app.comment(&by_dan, who, what).await.status, 201);
    }
    app.settle().await;
    let both = owned(&[&by_dan, &by_bob]);
    let all_comments = owned(&["bob was here", "cy was here"]);
    assert_eq!(timeline(app, &ana, Some(&ana)).await, both);
    assert_eq!(comments(app, &by_dan, Some(&ana)).await, all_comments);

    // Muted, twice: the second changes nothing.
    mute(app, &ana, &bob).await;
    mute(app, &ana, &bob).await;
    assert_eq!(muted(app, &ana).await, owned(&[&bob]));
    // At once, with nothing for the change feed to do: ana no longer reads bob.
    assert_eq!(timeline(app, &ana, Some(&ana)).await, owned(&[&by_dan]));
    assert_eq!(
        comments(app, &by_dan, Some(&ana)).await,
        owned(&["cy was here"])
    );
    // Everyone else still does: cy, and an anonymous reader, of ana's timeline too.
    assert_eq!(timeline(app, &cy, Some(&cy)).await, both);
    assert_eq!(timeline(app, &ana, None).await, both);
    assert_eq!(comments(app, &by_dan, Some(&cy)).await, all_comments);
    assert_eq!(comments(app, &by_dan, None).await, all_comments);
    // Reading as someone costs one point read of their list, alongside the query.
    let list = format!("/api/posts/{by_dan}/comments");
    assert_eq!(app.get(&list).await.store_operations(), 1);
    let as_ana = app.get(&format!("{list}?viewerId={ana}")).await;
    assert_eq!(as_ana.store_operations(), 2);
    // Bob's own reads are untouched, and a new comment of his is left out for ana as well.
    assert_eq!(app.comment(&by_bob, &bob, "more bob").await.status, 201);
    assert!(comments(app, &by_bob, Some(&ana)).await.is_empty());
    assert_eq!(
        comments(app, &by_bob, Some(&bob)).await,
        owned(&["more bob"])
    );

    // Unmuted, twice: bob is back for ana.
    unmute(app, &ana, &bob).await;
    unmute(app, &ana, &bob).await;
    assert!(muted(app, &ana).await.is_empty());
    assert_eq!(timeline(app, &ana, Some(&ana)).await, both);
    assert_eq!(comments(app, &by_dan, Some(&ana)).await, all_comments);

    // The list is a private item of ana's the change feed passes over: nothing to project,
    // nothing `verify` calls drift.
    mute(app, &ana, &dan).await;
    app.settle().await;
    let report = verify_and_repair(&*app.store, false, Duration::ZERO, &Progress::hidden)
        .await
        .unwrap();
    assert!(report.is_clean(), "{}", report.render());
    assert_eq!(timeline(app, &ana, Some(&ana)).await, owned(&[&by_bob]));
}

pub async fn mute_input_is_checked_and_refusals_write_nothing(app: &TestApp) {
    let ana = id(&app.create_user("ana").await);
    let bob = id(&app.create_user("bob").await);
    let p = id(&app.create_post(&bob, "t", "c").await);
    let list_id = format!("mutes-{ana}");
    let nothing = || async {
        let stored = app.store.read(Container::Users, &ana, &list_id);
        assert!(stored.await.unwrap().is_none(), "a refused mute wrote");
    };
    // Themselves: 400; a user who does not exist, either side: 404.
    let r = app.put(&mute_path(&ana, &ana), Value::Null).await;
    r.assert_problem(400);
    assert!(r.body["detail"].as_str().unwrap().contains("themselves"));
    app.put(&mute_path(&ana, "nobody"), Value::Null)
        .await
        .assert_problem(404);
    app.put(&mute_path("nobody", &ana), Value::Null)
        .await
        .assert_problem(404);
    for bad in [mute_path(&ana, "a%5Cb"), mute_path("a%5Cb", &bob)] {
        app.put(&bad, Value::Null).await.assert_problem(400);
        app.delete(&bad).await.assert_problem(400);
    }
    app.get("/api/users/a%5Cb/mutes").await.assert_problem(400);
    nothing().await;
    let bad_reader = format!("/api/users/{ana}/timeline?viewerId=a%5Cb");
    app.get(&bad_reader).await.assert_problem(400);
    let bad_reader = format!("/api/posts/{p}/comments?viewerId=a%5Cb");
    app.get(&bad_reader).await.assert_problem(400);
    // Unmuting whom one never muted is done already, and writes nothing either.
    unmute(app, &ana, &bob).await;
    nothing().await;
    assert!(muted(app, &ana).await.is_empty());
    assert!(muted(app, "nobody").await.is_empty());
}

pub async fn a_user_mutes_at_most_100_users(app: &TestApp) {
    let ana = id(&app.create_user("ana").await);
    let mut others = Vec::new();
    for n in 0..101 {
        others.push(id(&app.create_user(&format!("u{n}")).await));
    }
    for other in &others[..100] {
        mute(app, &ana, other).await;
    }
    let over = app.put(&mute_path(&ana, &others[100]), Value::Null).await;
    over.assert_problem(409);
    assert!(over.body["detail"].as_str().unwrap().contains("100"));
    // A mute already made may be repeated; the list is whole in one page, newest first.
    mute(app, &ana, &others[0]).await;
    let mut newest_first = others[..100].to_vec();
    newest_first.reverse();
    assert_eq!(muted(app, &ana).await, newest_first);
    // Making room lets the next one in.
    unmute(app, &ana, &others[0]).await;
    mute(app, &ana, &others[100]).await;
    assert_eq!(muted(app, &ana).await[0], others[100]);
}

pub async fn mute_lists_go_with_erasures(app: &TestApp) {
    let ana = id(&app.create_user("ana").await);
    let bob = id(&app.create_user("bob").await);
    let cy = id(&app.create_user("cy").await);
    mute(app, &bob, &ana).await;
    mute(app, &bob, &cy).await;
    mute(app, &ana, &bob).await;
    // A muted user erased leaves bob's list; ana, erased, leaves no list behind.
    assert_eq!(app.delete(&format!("/api/users/{cy}")).await.status, 204);
    assert_eq!(muted(app, &bob).await, owned(&[&ana]));
    assert_eq!(app.delete(&format!("/api/users/{ana}")).await.status, 204);
    app.settle().await;
    let list = app
        .store
        .read(Container::Users, &ana, &format!("mutes-{ana}"))
        .await
        .unwrap();
    assert!(list.is_none(), "{list:?}");
    assert!(muted(app, &bob).await.is_empty());
}

pub async fn only_the_signed_in_user_reads_and_changes_their_mutes(fixture: Fixture) {
    let app = TestApp::spawn_with_auth(fixture, false, Auth::easy_auth()).await;
    let (ana, bob, cy) = (("aad", "ana-o"), ("aad", "bob-o"), ("aad", "cy-o"));
    let as_ = |method: &'static str, path: String, who: (&'static str, &'static str)| {
        let app = &app;
        async move { app.as_principal(method, &path, who, Value::Null).await }
    };
    let mut made = Vec::new();
    for who in [ana, bob, cy] {
        let body = json!({ "username": who.1 });
        let r = app.as_principal("POST", "/api/users", who, body).await;
        assert_eq!(r.status, 201, "{:?}", r.body);
        made.push(id(&r.body));
    }
    let (ana_id, bob_id, cy_id) = (&made[0], &made[1], &made[2]);
    let r = as_(
        "PUT",
        format!("/api/users/{ana_id}/following/{bob_id}"),
        ana,
    )
    .await;
    assert_eq!(r.status, 204, "{:?}", r.body);
    let post = json!({ "title": "by bob", "content": "c" });
    let r = app.as_principal("POST", "/api/posts", bob, post).await;
    let by_bob = id(&r.body);
    let comment = json!({ "content": "bob was here" });
    let path = format!("/api/posts/{by_bob}/comments");
    let r = app.as_principal("POST", &path, bob, comment).await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    app.settle().await;

    // Nobody but ana changes or reads ana's list: another user 403, nobody 401.
    let ana_mutes = format!("/api/users/{ana_id}/mutes");
    for method in ["PUT", "DELETE"] {
        as_(method, mute_path(ana_id, cy_id), bob)
            .await
            .assert_problem(403);
    }
    as_("GET", ana_mutes.clone(), bob).await.assert_problem(403);
    app.put(&mute_path(ana_id, cy_id), Value::Null)
        .await
        .assert_problem(401);
    app.get(&ana_mutes).await.assert_problem(401);
    let list = as_("GET", ana_mutes.clone(), ana).await;
    assert_eq!(list.status, 200, "{:?}", list.body);
    assert!(list.items().is_empty(), "refusals wrote: {:?}", list.body);

    let r = as_("PUT", mute_path(ana_id, bob_id), ana).await;
    assert_eq!(r.status, 204, "{:?}", r.body);
    let list = as_("GET", ana_mutes.clone(), ana).await;
    assert_eq!(list.items()[0]["username"], "bob-o");
    // Signed in, ana reads without bob; nobody reads as ana, nor bob as ana.
    let ana_timeline = format!("/api/users/{ana_id}/timeline");
    assert!(ids(&as_("GET", ana_timeline.clone(), ana).await).is_empty());
    assert!(ids(&as_("GET", path.clone(), ana).await).is_empty());
    let as_ana = format!("{path}?viewerId={ana_id}");
    assert!(ids(&as_("GET", as_ana.clone(), ana).await).is_empty());
    as_("GET", as_ana.clone(), bob).await.assert_problem(403);
    app.get(&as_ana).await.assert_problem(401);
    // Others read as themselves, or anonymously, and see bob: ana's list is hers alone.
    assert_eq!(ids(&app.get(&ana_timeline).await), owned(&[&by_bob]));
    assert_eq!(ids(&as_("GET", path.clone(), cy).await).len(), 1);
    assert_eq!(ids(&app.get(&path).await).len(), 1);
}

/// `mutedId` is held to the same pattern as every other id in a path.
#[test]
fn the_muted_id_has_the_id_pattern() {
    let doc = blog::api::openapi_document();
    let op = &doc["paths"]["/api/users/{userId}/mutes/{mutedId}"]["put"];
    let pattern = |name: &str| {
        let params = op["parameters"].as_array().unwrap();
        let p = params.iter().find(|p| p["name"] == name).unwrap();
        p["schema"]["pattern"].clone()
    };
    assert!(pattern("userId").is_string());
    assert_eq!(pattern("mutedId"), pattern("userId"));
}
