//! Follows and the personal timeline (docs/timeline.md) as a client sees them, written once and
//! instantiated per store with `timeline_suite!(path::to::fixture_fn);`.

use std::time::Duration;

use blog::auth::Auth;
use blog::domain::follows;
use blog::ops::progress::Progress;
use blog::ops::verify_and_repair;
use blog::projection;
use blog::store::{Container, PatchOp, Query};
use serde_json::{json, Value};

use crate::api_suite::url_encode;
use crate::helpers::{id, next_millisecond, Fixture, Parts, TestApp};

#[macro_export]
macro_rules! timeline_suite {
    ($fixture:path) => {
        $crate::timeline_suite!(@tests $fixture;
            follow_is_idempotent_and_lists_both_ends, follow_input_is_checked,
            whether_a_user_follows_another_is_one_point_read,
            following_brings_posts_and_unfollowing_takes_them_away,
            timeline_copies_follow_edits_counters_renames_and_deletes,
            timeline_costs_a_query_and_a_read_per_post_and_pages, an_erased_user_leaves_every_list,
            a_timeline_keeps_its_newest_entries);
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn verify_finds_and_repair_mends_follows_and_timelines() {
            let app = $crate::helpers::TestApp::spawn($fixture().await, false).await;
            $crate::timeline_suite::verify_finds_and_repair_mends_follows_and_timelines(&app).await;
        }
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn a_deleted_post_leaves_the_timelines_of_followers_in_every_partition() {
            let app = $crate::helpers::TestApp::spawn($fixture().await, false).await;
            $crate::timeline_suite::a_deleted_post_leaves_the_timelines_of_followers_in_every_partition(&app).await;
        }
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn an_erased_user_is_unfollowed_by_followers_in_every_partition() {
            let app = $crate::helpers::TestApp::spawn($fixture().await, false).await;
            $crate::timeline_suite::an_erased_user_is_unfollowed_by_followers_in_every_partition(&app).await;
        }
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn only_the_signed_in_user_follows_for_themselves() {
            $crate::timeline_suite::only_the_signed_in_user_follows_for_themselves($fixture().await)
                .await;
        }
    };
    (@tests $fixture:path; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let app = $crate::helpers::TestApp::spawn($fixture().await, false).await;
                $crate::timeline_suite::$name(&app).await;
            }
        )*
    };
}

fn following(user: &str, followee: &str) -> String {
    format!("/api/users/{user}/following/{followee}")
}

async fn ids(app: &TestApp, path: &str) -> Vec<String> {
    let r = app.get(path).await;
    assert_eq!(r.status, 200, "{path}: {:?}", r.body);
    r.items().iter().map(id).collect()
}

async fn timeline(app: &TestApp, user: &str) -> Vec<Value> {
    let r = app
        .get(&format!("/api/users/{user}/timeline?limit=100"))
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    r.items().clone()
}

async fn timeline_ids(app: &TestApp, user: &str) -> Vec<String> {
    timeline(app, user).await.iter().map(id).collect()
}

async fn counts(app: &TestApp, user: &str) -> (u64, u64) {
    let u = app.get(&format!("/api/users/{user}")).await.body;
    (
        u["followerCount"].as_u64().unwrap_or(u64::MAX),
        u["followingCount"].as_u64().unwrap_or(u64::MAX),
    )
}

async fn follow(app: &TestApp, user: &str, followee: &str) {
    let r = app.put(&following(user, followee), Value::Null).await;
    assert_eq!(r.status, 204, "{:?}", r.body);
}

pub async fn follow_is_idempotent_and_lists_both_ends(app: &TestApp) {
    let ana = id(&app.create_user("ana").await);
    let bob = id(&app.create_user("bob").await);
    let cy = id(&app.create_user("cy").await);
    assert_eq!(counts(app, &ana).await, (0, 0), "a new user has no follows");
    follow(app, &ana, &bob).await;
    follow(app, &ana, &bob).await;
    next_millisecond().await;
    follow(app, &ana, &cy).await;
    follow(app, &cy, &bob).await;

    let r = app.get(&format!("/api/users/{ana}/following")).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.items().len(), 2, "no duplicate: {:?}", r.body);
    assert_eq!(r.items()[0]["id"], cy.as_str(), "newest follow first");
    assert_eq!(r.items()[1]["username"], "bob");
    app.settled("bob's followers are ana and cy", || async {
        let mut f = ids(app, &format!("/api/users/{bob}/followers")).await;
        f.sort();
        let mut want = vec![ana.clone(), cy.clone()];
        want.sort();
        f == want
    })
    .await;
    app.settled("the counters are kept", || async {
        counts(app, &bob).await == (2, 0)
            && counts(app, &ana).await == (0, 2)
            && counts(app, &cy).await == (1, 1)
    })
    .await;

    // Unfollowing twice is fine; the lists and counters follow.
    for _ in 0..2 {
        let r = app.delete(&following(&ana, &bob)).await;
        assert_eq!(r.status, 204, "{:?}", r.body);
    }
    assert_eq!(
        ids(app, &format!("/api/users/{ana}/following")).await,
        vec![cy.clone()]
    );
    app.settled("ana left bob's followers", || async {
        ids(app, &format!("/api/users/{bob}/followers")).await == vec![cy.clone()]
            && counts(app, &bob).await == (1, 0)
            && counts(app, &ana).await == (0, 1)
    })
    .await;
    // Following again after unfollowing.
    follow(app, &ana, &bob).await;
    app.settled("ana follows bob again", || async {
        counts(app, &bob).await == (2, 0)
    })
    .await;
    // Paged like every list.
    let r = app
        .get(&format!("/api/users/{ana}/following?limit=1"))
        .await;
    assert_eq!(r.items().len(), 1);
    let token = r.body["continuationToken"].as_str().expect("a next page");
    let next = app
        .get(&format!(
            "/api/users/{ana}/following?limit=1&continuationToken={}",
            url_encode(token)
        ))
        .await;
    assert_eq!(next.status, 200);
    assert_eq!(next.items().len(), 1);
    assert_ne!(next.items()[0]["id"], r.items()[0]["id"]);
}

/// `GET /api/users/{u}/following/{f}` answers whether u follows f with one point read, whatever
/// the length of u's list: the followee as the list shows them, or 404 (before, after an unfollow,
/// for an unknown user).
pub async fn whether_a_user_follows_another_is_one_point_read(app: &TestApp) {
    let ana = id(&app.create_user("ana").await);
    let bob = id(&app.create_user("bob").await);
    app.get(&following(&ana, &bob)).await.assert_problem(404);
    follow(app, &ana, &bob).await;
    let r = app.get(&following(&ana, &bob)).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.store_operations(), 1);
    assert_eq!(r.header("cache-control"), Some("no-cache"));
    let listed = app.get(&format!("/api/users/{ana}/following")).await;
    assert_eq!(r.body, listed.items()[0], "as the list shows the followee");
    app.get(&following(&bob, &ana)).await.assert_problem(404);
    app.get(&following(&ana, "nobody"))
        .await
        .assert_problem(404);
    let r = app.delete(&following(&ana, &bob)).await;
    assert_eq!(r.status, 204);
    let r = app.get(&following(&ana, &bob)).await;
    r.assert_problem(404);
    assert_eq!(r.store_operations(), 1);
}

pub async fn follow_input_is_checked(app: &TestApp) {
    let ana = id(&app.create_user("ana").await);
    let bob = id(&app.create_user("bob").await);
    app.put(&following(&ana, &ana), Value::Null)
        .await
        .assert_problem(400);
    app.put(&following(&ana, "nobody"), Value::Null)
        .await
        .assert_problem(404);
    app.put(&following("nobody", &bob), Value::Null)
        .await
        .assert_problem(404);
    app.put(&following(&ana, "a%5Cb"), Value::Null)
        .await
        .assert_problem(400);
    // An erased followee is no followee.
    assert_eq!(app.delete(&format!("/api/users/{bob}")).await.status, 204);
    app.put(&following(&ana, &bob), Value::Null)
        .await
        .assert_problem(404);
    // Nothing was written.
    assert!(ids(app, &format!("/api/users/{ana}/following"))
        .await
        .is_empty());
    assert_eq!(counts(app, &ana).await, (0, 0));
    // Unknown users have empty lists.
    assert!(ids(app, "/api/users/nobody/following").await.is_empty());
    assert!(ids(app, "/api/users/nobody/followers").await.is_empty());
    assert!(ids(app, "/api/users/nobody/timeline").await.is_empty());
}

pub async fn following_brings_posts_and_unfollowing_takes_them_away(app: &TestApp) {
    let ana = id(&app.create_user("ana").await);
    let bob = id(&app.create_user("bob").await);
    let cy = id(&app.create_user("cy").await);
    let old = id(&app.create_post(&bob, "old", "before the follow").await);
    next_millisecond().await;
    app.create_post(&cy, "unfollowed", "not for ana").await;
    // The post's copy exists before the follow is made, so the follow brings it.
    app.settled("bob's post is copied", || async {
        ids(app, &format!("/api/users/{bob}/posts")).await == vec![old.clone()]
    })
    .await;
    follow(app, &ana, &bob).await;
    app.settled("the follow brings bob's post", || async {
        timeline_ids(app, &ana).await == vec![old.clone()]
    })
    .await;
    next_millisecond().await;
    let new = id(&app.create_post(&bob, "new", "after the follow").await);
    app.settled("a new post reaches the follower, newest first", || async {
        timeline_ids(app, &ana).await == vec![new.clone(), old.clone()]
    })
    .await;
    let shown = &timeline(app, &ana).await[0];
    assert_eq!(
        shown["userId"],
        bob.as_str(),
        "the post's author, not the reader"
    );
    assert_eq!(shown["userUsername"], "bob");
    assert_eq!(shown["postId"], new.as_str());
    assert_eq!(shown["title"], "new");
    assert!(shown.get("type").is_none() && shown.get("refUserId").is_none());
    assert!(
        timeline_ids(app, &bob).await.is_empty(),
        "bob follows nobody"
    );

    assert_eq!(app.delete(&following(&ana, &bob)).await.status, 204);
    app.settled("unfollowing takes bob's posts away", || async {
        timeline_ids(app, &ana).await.is_empty()
    })
    .await;
    // Posts made after the unfollow stay away, once both lanes have done all they will.
    app.create_post(&bob, "later", "after the unfollow").await;
    app.settle().await;
    assert_eq!(
        ids(app, &format!("/api/users/{bob}/posts")).await.len(),
        3,
        "the later post is projected"
    );
    assert!(
        timeline_ids(app, &ana).await.is_empty(),
        "a post after the unfollow reached the timeline"
    );
}

pub async fn timeline_copies_follow_edits_counters_renames_and_deletes(app: &TestApp) {
    let ana = id(&app.create_user("ana").await);
    let bob = id(&app.create_user("bob").await);
    follow(app, &ana, &bob).await;
    let p = id(&app.create_post(&bob, "first", &"x".repeat(300)).await);
    next_millisecond().await;
    let q = id(&app.create_post(&bob, "second", "two").await);
    app.settled("both posts reach ana", || async {
        timeline_ids(app, &ana).await == vec![q.clone(), p.clone()]
    })
    .await;
    let shown = &timeline(app, &ana).await[1];
    assert_eq!(
        shown["content"].as_str().unwrap().chars().count(),
        200,
        "in short form"
    );

    let r = app
        .put(
            &format!("/api/posts/{p}"),
            json!({ "userId": bob, "title": "edited", "content": "short now" }),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(app.like(&p, &ana).await.status, 201);
    assert_eq!(app.comment(&p, &ana, "hi").await.status, 201);
    let r = app
        .put(
            &format!("/api/users/{bob}"),
            json!({ "username": "robert" }),
        )
        .await;
    assert_eq!(r.status, 200);
    app.settled(
        "the edit, the counters and the rename reach the copy",
        || async {
            let t = timeline(app, &ana).await;
            t.len() == 2
                && t[1]["title"] == "edited"
                && t[1]["content"] == "short now"
                && t.iter().all(|e| e["userUsername"] == "robert")
        },
    )
    .await;
    app.settled("the rename reaches the follow lists", || async {
        let r = app.get(&format!("/api/users/{ana}/following")).await;
        r.items().first().is_some_and(|u| u["username"] == "robert")
    })
    .await;
    let r = app
        .put(&format!("/api/users/{ana}"), json!({ "username": "anna" }))
        .await;
    assert_eq!(r.status, 200);
    app.settled(
        "the follower's rename reaches the followers list",
        || async {
            let r = app.get(&format!("/api/users/{bob}/followers")).await;
            r.items().first().is_some_and(|u| u["username"] == "anna")
        },
    )
    .await;

    assert_eq!(app.delete(&format!("/api/posts/{p}")).await.status, 204);
    app.settled("a deleted post leaves the timeline", || async {
        timeline_ids(app, &ana).await == vec![q.clone()]
    })
    .await;
}

pub async fn timeline_costs_a_query_and_a_read_per_post_and_pages(app: &TestApp) {
    let ana = id(&app.create_user("ana").await);
    let bob = id(&app.create_user("bob").await);
    let cy = id(&app.create_user("cy").await);
    follow(app, &ana, &bob).await;
    follow(app, &ana, &cy).await;
    let mut made = Vec::new();
    for i in 0..5 {
        let author = if i % 2 == 0 { &bob } else { &cy };
        made.push(id(&app.create_post(author, &format!("t{i}"), "c").await));
        next_millisecond().await;
    }
    made.reverse();
    app.settled("five posts in the timeline", || async {
        timeline_ids(app, &ana).await == made
    })
    .await;

    let r = app.get(&format!("/api/users/{ana}/timeline?limit=2")).await;
    assert_eq!(r.status, 200);
    assert!(
        r.store_operations() <= 1 + r.items().len() as u32,
        "a timeline read is one query and at most a read per post shown: {}",
        r.store_operations()
    );
    let mut seen: Vec<String> = r.items().iter().map(id).collect();
    let mut token = r.body["continuationToken"].as_str().map(String::from);
    while let Some(t) = token {
        let r = app
            .get(&format!(
                "/api/users/{ana}/timeline?limit=2&continuationToken={}",
                url_encode(&t)
            ))
            .await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        assert!(r.store_operations() <= 1 + r.items().len() as u32);
        seen.extend(r.items().iter().map(id));
        token = r.body["continuationToken"].as_str().map(String::from);
    }
    assert_eq!(seen, made, "pages in order, each post once");
    for bad in ["x", "100.abc", "5."] {
        let r = app
            .get(&format!(
                "/api/users/{ana}/timeline?continuationToken={}",
                url_encode(bad)
            ))
            .await;
        r.assert_problem(400);
    }
    for path in ["following", "followers"] {
        let r = app.get(&format!("/api/users/{ana}/{path}")).await;
        assert_eq!(r.store_operations(), 1, "{path} is one store operation");
    }
}

pub async fn an_erased_user_leaves_every_list(app: &TestApp) {
    let ana = id(&app.create_user("ana").await);
    let bob = id(&app.create_user("bob").await);
    follow(app, &ana, &bob).await;
    follow(app, &bob, &ana).await;
    app.create_post(&bob, "by bob", "c").await;
    app.settled("bob's post reaches ana", || async {
        timeline_ids(app, &ana).await.len() == 1
    })
    .await;
    assert_eq!(app.delete(&format!("/api/users/{bob}")).await.status, 204);
    app.settled(
        "bob is gone from ana's lists, timeline and counters",
        || async {
            timeline_ids(app, &ana).await.is_empty()
                && ids(app, &format!("/api/users/{ana}/following"))
                    .await
                    .is_empty()
                && ids(app, &format!("/api/users/{ana}/followers"))
                    .await
                    .is_empty()
                && counts(app, &ana).await == (0, 0)
        },
    )
    .await;
}

pub async fn only_the_signed_in_user_follows_for_themselves(fixture: Fixture) {
    let app = TestApp::spawn_with_auth(fixture, false, Auth::easy_auth()).await;
    let (ana, bob) = (("aad", "ana-object"), ("aad", "bob-object"));
    let made = |who| {
        let app = &app;
        async move {
            let r = app
                .as_principal("POST", "/api/users", who, json!({ "username": who.1 }))
                .await;
            assert_eq!(r.status, 201, "{:?}", r.body);
            id(&r.body)
        }
    };
    let ana_id = made(ana).await;
    let bob_id = made(bob).await;
    // Bob may not follow, or unfollow, in ana's name.
    app.as_principal("PUT", &following(&ana_id, &bob_id), bob, Value::Null)
        .await
        .assert_problem(403);
    app.as_principal("DELETE", &following(&ana_id, &bob_id), bob, Value::Null)
        .await
        .assert_problem(403);
    assert!(ids(&app, &format!("/api/users/{ana_id}/following"))
        .await
        .is_empty());
    // Nor can nobody.
    app.put(&following(&ana_id, &bob_id), Value::Null)
        .await
        .assert_problem(401);
    let r = app
        .as_principal("PUT", &following(&ana_id, &bob_id), ana, Value::Null)
        .await;
    assert_eq!(r.status, 204, "{:?}", r.body);
    assert_eq!(
        ids(&app, &format!("/api/users/{ana_id}/following")).await,
        vec![bob_id.clone()]
    );
}

pub async fn verify_finds_and_repair_mends_follows_and_timelines(app: &TestApp) {
    let ana = id(&app.create_user("ana").await);
    let bob = id(&app.create_user("bob").await);
    let cy = id(&app.create_user("cy").await);
    follow(app, &ana, &bob).await;
    let p = id(&app.create_post(&bob, "by bob", "c").await);
    let q = id(&app.create_post(&cy, "by cy", "c").await);
    app.settle().await;
    let clean = verify_and_repair(&*app.store, false, Duration::ZERO, &Progress::hidden)
        .await
        .unwrap();
    assert!(clean.timelines().last().is_clean(), "{}", clean.render());
    assert_eq!(timeline_ids(app, &ana).await, vec![p.clone()]);

    // Drift nothing in the change feed would bring back: a mirror and an entry lost, an entry
    // of someone ana does not follow, an edge with a stale name.
    let users = Container::Users;
    app.store
        .delete(users, &bob, &format!("follower-{ana}"))
        .await
        .unwrap();
    app.store
        .delete(Container::Timelines, &ana, &format!("timeline-{p}"))
        .await
        .unwrap();
    let cys = app.get(&format!("/api/posts/{q}")).await.body;
    let cys: blog::domain::Post = serde_json::from_value(json!({
        "type": "post", "id": q, "postId": q, "userId": cy, "userUsername": "cy",
        "title": cys["title"], "content": cys["content"], "commentCount": 0, "likeCount": 0,
        "creationDate": cys["creationDate"],
    }))
    .unwrap();
    app.store
        .upsert(
            Container::Timelines,
            &ana,
            follows::TimelineEntry::new(&ana, &cys).to_item(),
        )
        .await
        .unwrap();
    app.store
        .patch(
            users,
            &ana,
            &format!("following-{bob}"),
            &[PatchOp::set("/userUsername", "someone else")],
            None,
        )
        .await
        .unwrap();
    // The change feed goes past these writes, as past writes it lost: drift, not lag.
    blog::pump::checkpoint_at_end(&*app.store).await.unwrap();

    let found = verify_and_repair(&*app.store, false, Duration::ZERO, &Progress::hidden)
        .await
        .unwrap();
    let drift = &found.timelines().before.drift;
    for kind in [
        "mirror missing or stale",
        "timeline entry missing",
        "timeline entry extra",
        "edge name",
    ] {
        assert_eq!(drift.get(kind), Some(&1), "{kind}: {}", found.render());
    }
    assert!(found.render().contains("timeline entry extra: 1"));

    let mended = verify_and_repair(&*app.store, true, Duration::ZERO, &Progress::hidden)
        .await
        .unwrap();
    let (_, after) = mended.timelines().repair.as_ref().expect("a repair ran");
    assert!(after.is_clean(), "{}", mended.render());
    assert_eq!(timeline_ids(app, &ana).await, vec![p.clone()]);
    assert_eq!(
        ids(app, &format!("/api/users/{bob}/followers")).await,
        vec![ana.clone()]
    );
    let r = app.get(&format!("/api/users/{ana}/following")).await;
    assert_eq!(r.items()[0]["username"], "bob");
}

/// Timeline entries stored in `user`'s partition (merge markers aside).
async fn stored_entries(app: &TestApp, user: &str) -> u64 {
    let q = Query::partition(user).eq("type", follows::TIMELINE);
    let page = app
        .store
        .query(Container::Timelines, &q.limit(1000))
        .await
        .unwrap();
    page.items.iter().filter(|i| !follows::is_marker(i)).count() as u64
}

pub async fn a_timeline_keeps_its_newest_entries(app: &TestApp) {
    let ana = id(&app.create_user("ana").await);
    let bob = id(&app.create_user("bob").await);
    let cy = id(&app.create_user("cy").await);
    follow(app, &ana, &bob).await;
    follow(app, &ana, &cy).await;
    app.settle().await;
    // Two authors, so that each one's hundred newest posts are more than the timeline keeps.
    let keep = follows::TIMELINE_KEEP;
    let mut made = Vec::new();
    for i in 0..keep + 20 {
        let author = if i % 2 == 0 { &bob } else { &cy };
        made.push(id(&app.create_post(author, &format!("t{i}"), "c").await));
    }
    app.settle().await;
    // Then one post at a time, each applied before the next, until one whose copy trims: after
    // it, nothing is left beyond the newest.
    for i in 0.. {
        assert!(i < 400, "no copy into ana's timeline ever trimmed it");
        next_millisecond().await;
        let p = id(&app.create_post(&bob, &format!("u{i}"), "c").await);
        made.push(p.clone());
        app.settle().await;
        if follows::trims(&ana, &p) {
            break;
        }
    }
    assert_eq!(
        stored_entries(app, &ana).await,
        keep as u64,
        "{} posts made, the timeline keeps the newest",
        made.len()
    );
    let shown = timeline_ids(app, &ana).await;
    assert_eq!(shown.len(), follows::TIMELINE_SIZE);
    assert_eq!(shown[0], *made.last().unwrap(), "newest first");
    let kept = &made[made.len() - keep..];
    assert!(
        shown.iter().all(|p| kept.contains(p)),
        "only the newest posts are shown"
    );
    // A trimmed timeline is no drift.
    let checked = verify_and_repair(&*app.store, false, Duration::ZERO, &Progress::hidden)
        .await
        .unwrap();
    assert!(
        checked.timelines().last().is_clean(),
        "{}",
        checked.render()
    );
}

/// Followers enough that their partitions are almost surely not all in one partition key range:
/// a Cosmos DB query across partitions answers one range per page, and the sweeps must go on
/// from one range to the next.
const SPREAD_FOLLOWERS: usize = 12;

/// `SPREAD_FOLLOWERS` users following `followee`, projected.
async fn spread_followers(app: &TestApp, followee: &str) -> Vec<String> {
    let mut followers = Vec::new();
    for i in 0..SPREAD_FOLLOWERS {
        let f = id(&app.create_user(&format!("fan{i}")).await);
        follow(app, &f, followee).await;
        followers.push(f);
    }
    app.settle().await;
    followers
}

/// A post's entries share one id (`timeline-<post>`), one in each follower's partition: the
/// projection deletes them all, whichever partitions the query's pages come from, in one pass.
pub async fn a_deleted_post_leaves_the_timelines_of_followers_in_every_partition(app: &TestApp) {
    let bob = id(&app.create_user("bob").await);
    let followers = spread_followers(app, &bob).await;
    let p = id(&app.create_post(&bob, "to go", "c").await);
    app.settle().await;
    for f in &followers {
        assert_eq!(timeline_ids(app, f).await, vec![p.clone()], "{f}");
    }
    assert_eq!(app.delete(&format!("/api/posts/{p}")).await.status, 204);
    app.settle().await;
    for f in &followers {
        assert_eq!(
            stored_entries(app, f).await,
            0,
            "{f}'s entry of the post stays"
        );
        assert!(timeline_ids(app, f).await.is_empty(), "{f}");
    }
}

/// The edges held to a user share one id (`following-<user>`), one in each follower's
/// partition: erasing the user unfollows them all, in one pass of the projections.
pub async fn an_erased_user_is_unfollowed_by_followers_in_every_partition(app: &TestApp) {
    let bob = id(&app.create_user("bob").await);
    let followers = spread_followers(app, &bob).await;
    assert_eq!(counts(app, &bob).await.0, SPREAD_FOLLOWERS as u64);
    assert_eq!(app.delete(&format!("/api/users/{bob}")).await.status, 204);
    // The step that unfollows, taken at once: in the feed's own order, an edge's projection
    // that runs first marks that edge itself (its followee is gone), doing part of the step.
    let marked = projection::follows::erase_edges(&*app.store, &bob).await;
    assert!(marked.is_ok(), "{marked:?}");
    app.settle().await;
    let held = Query::cross_partition()
        .eq("type", follows::FOLLOWING)
        .eq(follows::REF_USER, bob.as_str())
        .live();
    assert_eq!(
        app.store.count(Container::Users, &held).await.unwrap(),
        0,
        "edges to the erased user stay live"
    );
    for f in &followers {
        assert!(
            ids(app, &format!("/api/users/{f}/following"))
                .await
                .is_empty(),
            "{f} still follows the erased user"
        );
        assert_eq!(counts(app, f).await, (0, 0), "{f}");
    }
}

/// A repair writes nothing from what its check read if that has changed since: a post deleted
/// between the check and the repair does not come back into a follower's timeline, and a
/// mirror whose edge was made meanwhile is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repair_never_writes_from_a_stale_read() {
    let app = TestApp::spawn(crate::helpers::embedded_fixture().await, false).await;
    let ana = id(&app.create_user("ana").await);
    let bob = id(&app.create_user("bob").await);
    let cy = id(&app.create_user("cy").await);
    follow(&app, &ana, &bob).await;
    let p = id(&app.create_post(&bob, "by bob", "c").await);
    app.settle().await;
    assert_eq!(timeline_ids(&app, &ana).await, vec![p.clone()]);

    // Drift: ana's entry for the post lost; a mirror in bob's partition for cy, who does not
    // follow bob.
    let users = Container::Users;
    app.store
        .delete(Container::Timelines, &ana, &format!("timeline-{p}"))
        .await
        .unwrap();
    let mirror = follows::Edge::new(
        follows::FollowKind::Follower,
        &bob,
        &cy,
        "cy",
        &blog::domain::now(),
    )
    .to_item();
    app.store.upsert(users, &bob, mirror).await.unwrap();
    // The change feed goes past these writes, as past writes it lost: drift, not lag.
    blog::pump::checkpoint_at_end(&*app.store).await.unwrap();
    let check = blog::ops::timeline::verify(&*app.store, Duration::ZERO)
        .await
        .unwrap();
    for kind in ["timeline entry missing", "mirror without its edge"] {
        assert_eq!(
            check.drift.get(kind),
            Some(&1),
            "{kind}: {}",
            check.render()
        );
    }

    // Between the check and the repair: bob deletes the post, cy follows bob.
    let r = app.delete(&format!("/api/posts/{p}")).await;
    assert_eq!(r.status, 204, "{:?}", r.body);
    follow(&app, &cy, &bob).await;
    app.settle().await;
    assert_eq!(app.get(&format!("/api/posts/{p}")).await.status, 404);

    let done = blog::ops::timeline::repair(&*app.store, &check).await;
    assert!(done.failed.is_empty(), "{done:?}");
    assert_eq!(timeline_ids(&app, &ana).await, Vec::<String>::new());
    let mut followers = ids(&app, &format!("/api/users/{bob}/followers")).await;
    followers.sort();
    assert_eq!(followers, {
        let mut both = vec![ana.clone(), cy.clone()];
        both.sort();
        both
    });
    let after = blog::ops::timeline::verify(&*app.store, Duration::ZERO)
        .await
        .unwrap();
    assert!(after.is_clean(), "{}", after.render());
}
