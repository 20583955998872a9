//! The timeline lane (docs/timeline.md, "Writes per post"), driven lane by lane and step by step
//! through `projection::project_lane`: what a like costs the timelines, a fan-out over more
//! followers than a page in bounded steps (a crash, a newer edit, other authors in between),
//! and the fan-out limit's hysteresis and its record in the store. Written once and
//! instantiated per store with `lane_suite!(path::to::fixture_fn);`.

use std::collections::BTreeSet;
use std::time::Duration;

use blog::domain::follows;
use blog::ops::progress::Progress;
use blog::ops::verify_and_repair;
use blog::projection::{self, engine, timeline, Lane};
use blog::store::{Container, Query, Store, StoreError};
use futures::FutureExt as _;
use serde_json::{json, Value};

use crate::helpers::{id, Fixture, Parts, TestApp};
use crate::hooks::Hooked;

#[macro_export]
macro_rules! lane_suite {
    ($fixture:path) => {
        $crate::lane_suite!(@tests $fixture;
            likes_and_comments_write_no_timeline_item,
            a_fan_out_over_more_than_a_page_runs_a_page_a_step_and_resumes_after_a_crash,
            a_newer_edit_supersedes_a_fan_out_under_way,
            other_authors_reach_timelines_while_a_big_fan_out_is_under_way,
            the_limit_has_hysteresis_and_is_kept_in_the_store,
            a_follow_shows_in_followers_without_the_timeline_lane,
            the_timeline_lane_starts_where_an_earlier_release_left_off,
            a_fan_out_and_a_rename_put_no_timeline_item_in_the_users_feed,
            timeline_items_an_earlier_release_kept_in_users_move_to_timelines,
            a_removal_racing_the_move_of_its_item_is_not_undone);
    };
    (@tests $fixture:path; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                $crate::lane_suite::$name($fixture().await).await;
            }
        )*
    };
}

/// One lane's follower of one feed, from where it was created.
struct LaneFollower {
    lane: Lane,
    c: Container,
    from: Option<String>,
}

impl LaneFollower {
    async fn at_end(store: &dyn Store, lane: Lane, c: Container) -> Self {
        let mut f = LaneFollower {
            lane,
            c,
            from: None,
        };
        f.from = Some(feed_end(store, c).await);
        f
    }

    fn from_start(lane: Lane, c: Container) -> Self {
        LaneFollower {
            lane,
            c,
            from: None,
        }
    }

    /// The next batch (at most `max` changes), not yet projected.
    async fn peek(&self, store: &dyn Store, max: u32) -> (Vec<Value>, String) {
        let page = store
            .changes(self.c, self.from.as_deref(), max)
            .await
            .unwrap();
        (page.items, page.continuation)
    }

    /// Project the next batch; whether there was one.
    async fn step(&mut self, store: &dyn Store, max: u32) -> bool {
        let (items, continuation) = self.peek(store, max).await;
        if items.is_empty() {
            return false;
        }
        projection::project_lane(store, self.lane, self.c, &items)
            .await
            .expect("projected");
        self.from = Some(continuation);
        true
    }

    async fn drain(&mut self, store: &dyn Store) {
        while self.step(store, 100).await {}
    }
}

async fn feed_end(store: &dyn Store, c: Container) -> String {
    let mut from: Option<String> = None;
    loop {
        let page = store.changes(c, from.as_deref(), 1000).await.unwrap();
        let done = page.items.is_empty();
        from = Some(page.continuation);
        if done {
            return from.unwrap();
        }
    }
}

/// The users feed's changes after `from`.
async fn users_changes_since(store: &dyn Store, from: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut from = from.to_string();
    loop {
        let page = store
            .changes(Container::Users, Some(&from), 1000)
            .await
            .unwrap();
        if page.items.is_empty() {
            return out;
        }
        out.extend(page.items);
        from = page.continuation;
    }
}

async fn follow(app: &TestApp, user: &str, followee: &str, method: &str) {
    let path = format!("/api/users/{user}/following/{followee}");
    let r = match method {
        "PUT" => app.put(&path, Value::Null).await,
        _ => app.delete(&path).await,
    };
    assert_eq!(r.status, 204, "{:?}", r.body);
}

/// `n` new users following `followee`.
/// Requests (or store reads) the helpers below keep in flight at once: the followers are
/// independent of each other, and a few hundred of them one after another were most of a test's
/// time on the Cosmos DB emulator.
const IN_FLIGHT: usize = 8;

async fn audience(app: &TestApp, followee: &str, n: usize) -> Vec<String> {
    use futures::StreamExt as _;
    futures::stream::iter(0..n)
        .map(|i| async move {
            let f = id(&app.create_user(&format!("fan{i}")).await);
            follow(app, &f, followee, "PUT").await;
            f
        })
        .buffered(IN_FLIGHT)
        .collect()
        .await
}

async fn entry(app: &TestApp, f: &str, post: &str) -> Option<Value> {
    app.store
        .read(Container::Timelines, f, &follows::timeline_id(post))
        .await
        .unwrap()
}

async fn job(app: &TestApp, author: &str, post: &str) -> Value {
    app.store
        .read(Container::Users, author, &timeline::post_job_id(post))
        .await
        .unwrap()
        .expect("the post's job item")
}

/// How many of `fs` hold an entry of `post` whose title is `title`.
async fn holding(app: &TestApp, fs: &[String], post: &str, title: &str) -> usize {
    use futures::StreamExt as _;
    futures::stream::iter(fs)
        .map(|f| entry(app, f, post))
        .buffer_unordered(IN_FLIGHT)
        .filter(|e| std::future::ready(e.as_ref().is_some_and(|e| e["title"] == title)))
        .count()
        .await
}

/// The author's copy of `post`, as the users feed delivers it to the timeline lane.
async fn copy(app: &TestApp, author: &str, post: &str) -> Value {
    app.store
        .read(Container::Users, author, post)
        .await
        .unwrap()
        .expect("the author's copy")
}

/// Project the main lane of both feeds until quiet (the copies written, the mirrors, counts).
async fn main_lane(app: &TestApp, main: &mut [LaneFollower; 2]) {
    for _ in 0..20 {
        let mut moved = false;
        for f in main.iter_mut() {
            while f.step(&*app.store, 100).await {
                moved = true;
            }
        }
        if !moved {
            return;
        }
    }
}

pub async fn likes_and_comments_write_no_timeline_item(fixture: Fixture) {
    let app = TestApp::spawn(fixture, false).await;
    let store = &*app.store;
    let bob = id(&app.create_user("bob").await);
    let fans = audience(&app, &bob, 3).await;
    let p = id(&app.create_post(&bob, "hello", "c").await);
    app.settle().await;
    let mut before = Vec::new();
    for f in &fans {
        let e = entry(&app, f, &p)
            .await
            .expect("the post reached each follower");
        assert!(
            e.get("likeCount").is_none() && e.get("commentCount").is_none(),
            "an entry holds no counts: {e}"
        );
        before.push(e["_etag"].clone());
    }
    let mark = feed_end(store, Container::Users).await;

    for f in &fans {
        assert_eq!(app.like(&p, f).await.status, 201);
    }
    assert_eq!(app.like(&p, &bob).await.status, 201);
    assert_eq!(app.comment(&p, &fans[0], "hi").await.status, 201);
    assert_eq!(app.comment(&p, &fans[1], "yo").await.status, 201);
    app.settle().await;
    // The post and its author's copy carry the counts ...
    assert_eq!(
        app.get(&format!("/api/posts/{p}")).await.body["likeCount"],
        4
    );
    // ... and nothing of the timelines was written.
    let written: Vec<Value> = users_changes_since(store, &mark)
        .await
        .into_iter()
        .filter(|d| d["type"] == follows::TIMELINE || d["type"] == timeline::JOB)
        .collect();
    assert!(written.is_empty(), "timeline items written: {written:?}");
    for (f, etag) in fans.iter().zip(&before) {
        assert_eq!(&entry(&app, f, &p).await.unwrap()["_etag"], etag, "{f}");
    }
}

/// `PAGE + 10` followers of a new user `bob`, everything projected; then a post by bob, with
/// the main lane projected. Returns bob, the followers, the post, the main lane's followers and
/// the timeline lane's users follower from just before the post.
async fn big_author(
    app: &TestApp,
) -> (String, Vec<String>, String, [LaneFollower; 2], LaneFollower) {
    let store = &*app.store;
    let bob = id(&app.create_user("bob").await);
    let fans = audience(app, &bob, engine::PAGE as usize + 10).await;
    app.settle().await;
    let mut main = [
        LaneFollower::at_end(store, Lane::Main, Container::Posts).await,
        LaneFollower::at_end(store, Lane::Main, Container::Users).await,
    ];
    let timeline = LaneFollower::at_end(store, Lane::Timeline, Container::Users).await;
    let p = id(&app.create_post(&bob, "first", "c").await);
    main_lane(app, &mut main).await;
    (bob, fans, p, main, timeline)
}

pub async fn a_fan_out_over_more_than_a_page_runs_a_page_a_step_and_resumes_after_a_crash(
    fixture: Fixture,
) {
    let app = TestApp::spawn(fixture, false).await;
    let store = app.store.clone();
    let (bob, fans, p, _, _) = big_author(&app).await;
    let page = engine::PAGE as usize;

    // The copy's change: one page of followers, and the job item records where it stopped.
    let report = projection::project_lane(
        &*store,
        Lane::Timeline,
        Container::Users,
        &[copy(&app, &bob, &p).await],
    )
    .await
    .unwrap();
    assert_eq!(holding(&app, &fans, &p, "first").await, page);
    let step = job(&app, &bob, &p).await;
    assert_eq!(step["done"], false, "{step}");
    assert!(step["cursor"].is_string(), "{step}");
    assert!(report.writes <= page + page / 8 + 4, "one page: {report:?}");

    // The next step crashes after a few of its writes.
    let written = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let failing = Hooked::new(store.clone()).before({
        let written = written.clone();
        move |call| {
            let entry = call.op == "upsert" && call.id.starts_with("timeline-");
            let n = if entry {
                written.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
            } else {
                0
            };
            async move {
                if entry && n >= 3 {
                    return Err(StoreError::Other("the process stopped".into()));
                }
                Ok(())
            }
            .boxed()
        }
    });
    let cut = projection::project_lane(
        &failing,
        Lane::Timeline,
        Container::Users,
        std::slice::from_ref(&step),
    )
    .await;
    assert!(cut.is_err(), "{cut:?}");
    assert!(holding(&app, &fans, &p, "first").await < fans.len());
    assert_eq!(
        job(&app, &bob, &p).await["_etag"],
        step["_etag"],
        "not advanced"
    );

    // The batch redelivered: the step is done again, and the fan-out is complete.
    projection::project_lane(&*store, Lane::Timeline, Container::Users, &[step])
        .await
        .unwrap();
    assert_eq!(holding(&app, &fans, &p, "first").await, fans.len());
    assert_eq!(job(&app, &bob, &p).await["done"], true);
    let shown = app
        .get(&format!("/api/users/{}/timeline", fans[page + 5]))
        .await;
    assert_eq!(shown.items().len(), 1, "{:?}", shown.body);
}

pub async fn a_newer_edit_supersedes_a_fan_out_under_way(fixture: Fixture) {
    let app = TestApp::spawn(fixture, false).await;
    let store = app.store.clone();
    let (bob, fans, p, mut main, _) = big_author(&app).await;
    let users = Container::Users;
    projection::project_lane(
        &*store,
        Lane::Timeline,
        users,
        &[copy(&app, &bob, &p).await],
    )
    .await
    .unwrap();
    let old_step = job(&app, &bob, &p).await;
    assert_eq!(old_step["done"], false);

    // An edit: the copy's change starts the fan-out over with the new content.
    let r = app
        .put(
            &format!("/api/posts/{p}"),
            json!({ "userId": bob, "title": "second", "content": "c" }),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    main_lane(&app, &mut main).await;
    projection::project_lane(
        &*store,
        Lane::Timeline,
        users,
        &[copy(&app, &bob, &p).await],
    )
    .await
    .unwrap();
    let page = engine::PAGE as usize;
    assert_eq!(holding(&app, &fans, &p, "second").await, page);

    // The old fan-out's step, delivered late, does nothing.
    let stale = projection::project_lane(&*store, Lane::Timeline, users, &[old_step])
        .await
        .unwrap();
    assert_eq!(stale.writes, 0, "{stale:?}");
    assert_eq!(
        holding(&app, &fans, &p, "first").await,
        0,
        "old content written"
    );

    // The new one's step completes it.
    let new_step = job(&app, &bob, &p).await;
    projection::project_lane(&*store, Lane::Timeline, users, &[new_step])
        .await
        .unwrap();
    assert_eq!(holding(&app, &fans, &p, "second").await, fans.len());
    assert_eq!(job(&app, &bob, &p).await["done"], true);
}

pub async fn other_authors_reach_timelines_while_a_big_fan_out_is_under_way(fixture: Fixture) {
    let app = TestApp::spawn(fixture, false).await;
    let store = &*app.store;
    let cy = id(&app.create_user("cy").await);
    let ana = id(&app.create_user("ana").await);
    follow(&app, &ana, &cy, "PUT").await;
    app.settle().await;
    let (bob, fans, p, mut main, mut lane) = big_author(&app).await;
    // cy posts after bob.
    let q = id(&app.create_post(&cy, "by cy", "c").await);
    main_lane(&app, &mut main).await;
    // The timeline lane's users feed, a batch at a time, from before bob's post: cy's post
    // reaches ana while bob's fan-out still has followers to go.
    let mut seen_before_done = false;
    for _ in 0..1000 {
        if !lane.step(store, 100).await {
            break;
        }
        let reached = entry(&app, &ana, &q).await.is_some();
        // Not started (a store may deliver cy's partition first) or under way: not done.
        let done = app
            .store
            .read(Container::Users, &bob, &timeline::post_job_id(&p))
            .await
            .unwrap()
            .is_some_and(|j| j["done"] == true);
        if reached && !done {
            seen_before_done = true;
        }
        if reached {
            break;
        }
    }
    assert!(
        seen_before_done,
        "cy's post waited for the whole of bob's fan-out"
    );
    lane.drain(store).await;
    assert_eq!(holding(&app, &fans, &p, "first").await, fans.len());
}

pub async fn the_limit_has_hysteresis_and_is_kept_in_the_store(fixture: Fixture) {
    let app = TestApp::spawn(fixture, false).await;
    let store = &*app.store;
    // The limit recorded by another instance: 3 followers.
    store
        .upsert(
            Container::Leases,
            timeline::LIMIT_ID,
            json!({ "id": timeline::LIMIT_ID, "fanoutLimit": 3 }),
        )
        .await
        .unwrap();
    let bob = id(&app.create_user("bob").await);
    let p = id(&app.create_post(&bob, "by bob", "c").await);
    let fans = audience(&app, &bob, 4).await;
    app.settle().await;
    let marker = follows::marker_id(&bob);
    let marker_etags = |fans: Vec<String>| {
        let app = &app;
        let marker = marker.clone();
        async move {
            let mut out = Vec::new();
            for f in fans {
                let m = app
                    .store
                    .read(Container::Timelines, &f, &marker)
                    .await
                    .unwrap();
                out.push(m.map(|m| m["_etag"].clone()));
            }
            out
        }
    };
    let merged = marker_etags(fans.clone()).await;
    assert!(merged.iter().all(Option::is_some), "4 > 3: merged");
    let shared = |post: String| {
        let app = &app;
        async move {
            app.store
                .read(Container::Feed, projection::over_limit::PARTITION, &post)
                .await
                .unwrap()
        }
    };
    assert!(
        shared(p.clone()).await.is_some(),
        "bob's post in the shared partition"
    );

    // A post by a merged author: one item in the shared partition, no timeline entry; a like
    // of it writes nothing there.
    let p2 = id(&app.create_post(&bob, "while merged", "c").await);
    app.settle().await;
    let item = shared(p2.clone())
        .await
        .expect("the new post in the shared partition");
    assert!(item.get("likeCount").is_none(), "{item}");
    for f in &fans {
        assert!(entry(&app, f, &p2).await.is_none(), "{f}: copied");
    }
    assert_eq!(app.like(&p2, &fans[0]).await.status, 201);
    app.settle().await;
    assert_eq!(shared(p2.clone()).await.unwrap()["_etag"], item["_etag"]);

    // A shared item lost is drift that repair mends.
    store
        .delete(Container::Feed, projection::over_limit::PARTITION, &p2)
        .await
        .unwrap();
    let mended = verify_and_repair(store, true, Duration::ZERO, &Progress::hidden)
        .await
        .unwrap();
    assert_eq!(
        mended.timelines().before.drift.get("merged copy missing"),
        Some(&1),
        "{}",
        mended.render()
    );
    assert!(mended.timelines().last().is_clean(), "{}", mended.render());
    assert!(shared(p2.clone()).await.is_some());
    // A deleted post's item goes.
    let p3 = id(&app.create_post(&bob, "short-lived", "c").await);
    app.settle().await;
    assert!(shared(p3.clone()).await.is_some());
    assert_eq!(app.delete(&format!("/api/posts/{p3}")).await.status, 204);
    app.settle().await;
    assert!(
        shared(p3.clone()).await.is_none(),
        "a deleted post stays shared"
    );

    // Verify and repair, without this process setting a limit, judge by the recorded one.
    let checked = verify_and_repair(store, true, Duration::ZERO, &Progress::hidden)
        .await
        .unwrap();
    assert!(
        checked.timelines().before.is_clean(),
        "{}",
        checked.render()
    );
    assert_eq!(marker_etags(fans.clone()).await, merged, "markers kept");

    // At the limit and back over it: no marker moves, no post is copied.
    let mark = feed_end(store, Container::Users).await;
    follow(&app, &fans[3], &bob, "DELETE").await;
    app.settle().await;
    follow(&app, &fans[3], &bob, "PUT").await;
    app.settle().await;
    follow(&app, &fans[3], &bob, "DELETE").await;
    app.settle().await;
    assert_eq!(
        marker_etags(fans[..3].to_vec()).await,
        merged[..3].to_vec(),
        "no marker of a staying follower was touched"
    );
    let copied: Vec<Value> = users_changes_since(store, &mark)
        .await
        .into_iter()
        .filter(|d| d["type"] == follows::TIMELINE && d["postId"] == p.as_str())
        .collect();
    assert!(copied.is_empty(), "posts copied back: {copied:?}");

    // Below 80% of the limit (2 < 2.4): copied again, and the shared items go.
    follow(&app, &fans[2], &bob, "DELETE").await;
    app.settle().await;
    for f in &fans[..2] {
        let m = store.read(Container::Timelines, f, &marker).await.unwrap();
        assert!(m.is_none(), "{f}: marker left");
        assert!(entry(&app, f, &p).await.is_some(), "{f}: post not copied");
        assert!(entry(&app, f, &p2).await.is_some(), "{f}: post not copied");
    }
    assert!(shared(p.clone()).await.is_none() && shared(p2.clone()).await.is_none());
    let checked = verify_and_repair(store, false, Duration::ZERO, &Progress::hidden)
        .await
        .unwrap();
    assert!(
        checked.timelines().before.is_clean(),
        "{}",
        checked.render()
    );
}

pub async fn a_follow_shows_in_followers_without_the_timeline_lane(fixture: Fixture) {
    let app = TestApp::spawn(fixture, false).await;
    let store = &*app.store;
    let bob = id(&app.create_user("bob").await);
    let ana = id(&app.create_user("ana").await);
    id(&app.create_post(&bob, "by bob", "c").await);
    let mut main = [
        LaneFollower::from_start(Lane::Main, Container::Posts),
        LaneFollower::from_start(Lane::Main, Container::Users),
    ];
    main_lane(&app, &mut main).await;
    follow(&app, &ana, &bob, "PUT").await;
    main_lane(&app, &mut main).await;
    let r = app.get(&format!("/api/users/{bob}/followers")).await;
    assert_eq!(r.items().len(), 1, "{:?}", r.body);
    assert_eq!(
        app.get(&format!("/api/users/{bob}")).await.body["followerCount"],
        1
    );
    let held = Query::partition(ana.as_str()).eq("type", follows::TIMELINE);
    assert_eq!(
        store.count(Container::Timelines, &held).await.unwrap(),
        0,
        "the main lane wrote a timeline entry"
    );
}

/// A store whose pump ran before the lanes were apart (its checkpoints name no lane; its main
/// lane wrote the timelines too): the timeline lane's followers start where it left off, and do
/// not replay every post's fan-out.
pub async fn the_timeline_lane_starts_where_an_earlier_release_left_off(fixture: Fixture) {
    let app = TestApp::spawn(fixture, false).await;
    let store = app.store.clone();
    let bob = id(&app.create_user("bob").await);
    let fans = audience(&app, &bob, 2).await;
    let p = id(&app.create_post(&bob, "before", "c").await);
    app.settle().await;
    // What an earlier release left: every change projected, its checkpoints at the feeds' ends;
    // none of this release's job items.
    for c in [Container::Posts, Container::Users] {
        let id = format!("pump.{}", c.name());
        let end = feed_end(&*store, c).await;
        store
            .upsert(
                Container::Leases,
                &id,
                json!({ "id": id, "container": c.name(), "continuation": end, "deferred": [] }),
            )
            .await
            .unwrap();
    }
    store
        .delete(Container::Users, &bob, &timeline::post_job_id(&p))
        .await
        .unwrap();
    // Nor this release's timeline checkpoints (settling the feed wrote them).
    for c in [Container::Posts, Container::Users] {
        let id = format!("pump.timeline.{}", c.name());
        store.delete(Container::Leases, &id, &id).await.unwrap();
    }
    let mark = feed_end(&*store, Container::Users).await;

    // Settling starts the followers from their checkpoints, as the pump starts them.
    let q = id(&app.create_post(&bob, "after", "c").await);
    app.settled("the new post reaches the followers", || async {
        holding(&app, &fans, &q, "after").await == fans.len()
    })
    .await;
    let replayed: Vec<Value> = users_changes_since(&*store, &mark)
        .await
        .into_iter()
        .filter(|d| d["type"] == follows::TIMELINE && d["postId"] == p.as_str())
        .collect();
    assert!(
        replayed.is_empty(),
        "the old post fanned out again: {replayed:?}"
    );
}

/// A post and a rename of an author with followers put no timeline item into the users feed,
/// the one the main lane follows (and so a follow waits behind): it carries the author, their
/// post's copy, the edges naming them and the timeline lane's job items, whatever the
/// audience; the entries go to `timelines`, which nothing follows.
pub async fn a_fan_out_and_a_rename_put_no_timeline_item_in_the_users_feed(fixture: Fixture) {
    let app = TestApp::spawn(fixture, false).await;
    let store = &*app.store;
    let bob = id(&app.create_user("bob").await);
    let fans = audience(&app, &bob, 6).await;
    app.settle().await;
    let mark = feed_end(store, Container::Users).await;

    let p = id(&app.create_post(&bob, "hello", "c").await);
    app.settle().await;
    assert_eq!(holding(&app, &fans, &p, "hello").await, fans.len());
    let r = app
        .put(
            &format!("/api/users/{bob}"),
            json!({ "username": "robert" }),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    app.settle().await;
    for f in &fans {
        let e = entry(&app, f, &p).await.expect("the entry");
        assert_eq!(
            e["userUsername"], "robert",
            "{f}: the rename reached the entry"
        );
    }

    let carried = users_changes_since(store, &mark).await;
    let entries: Vec<&Value> = carried
        .iter()
        .filter(|d| d["type"] == follows::TIMELINE)
        .collect();
    assert!(
        entries.is_empty(),
        "timeline items in the users feed: {entries:?}"
    );
    let kinds: BTreeSet<&str> = carried.iter().filter_map(|d| d["type"].as_str()).collect();
    let expected = BTreeSet::from(["user", "post", follows::FOLLOWING, timeline::JOB]);
    assert!(
        kinds.is_subset(&expected),
        "the users feed carried {kinds:?}"
    );
    // The author (created, renamed, recounted), the copy, an edge per follower, a few job items.
    assert!(
        carried.len() <= 2 * fans.len() + 8,
        "{} changes in the users feed for {} followers",
        carried.len(),
        fans.len()
    );
}

/// The timeline items in `user`'s partition of `c` (entries and markers), by id.
async fn timeline_items(store: &dyn Store, c: Container, user: &str) -> BTreeSet<String> {
    let q = Query::partition(user)
        .eq("type", follows::TIMELINE)
        .limit(1000);
    let page = store.query(c, &q).await.unwrap();
    page.items
        .iter()
        .map(|i| i["id"].as_str().unwrap().to_string())
        .collect()
}

/// What an earlier release left: the timeline items in the followers' partitions of `users`
/// (copied there, removed from `timelines`), and no record of the move.
async fn as_an_earlier_release_left_it(store: &dyn Store) {
    let mut q = Query::cross_partition()
        .eq("type", follows::TIMELINE)
        .limit(1000);
    let mut items = Vec::new();
    loop {
        // Across partitions a page may hold one partition key range (Cosmos DB).
        let page = store.query(Container::Timelines, &q).await.unwrap();
        items.extend(page.items);
        match page.continuation {
            Some(t) => q.continuation = Some(t),
            None => break,
        }
    }
    assert!(!items.is_empty());
    for item in items {
        let (owner, id) = (
            item["userId"].as_str().unwrap(),
            item["id"].as_str().unwrap(),
        );
        let old = blog::projection::write::content(&item);
        store.upsert(Container::Users, owner, old).await.unwrap();
        store.delete(Container::Timelines, owner, id).await.unwrap();
    }
    let layout = blog::store::LAYOUT_ID;
    store
        .delete(Container::Leases, layout, layout)
        .await
        .unwrap();
}

/// An upgrade from a release that kept timeline items in `users`: every timeline reads in full
/// throughout; the timeline lane moves the items to `timelines` in steps and then records the
/// move; an unfollow and a post's deletion made meanwhile reach the items wherever they are,
/// and no move brings them back; an item left in both places by a step cut short is moved
/// once; nothing of the timelines is left in `users`.
pub async fn timeline_items_an_earlier_release_kept_in_users_move_to_timelines(fixture: Fixture) {
    let app = TestApp::spawn(fixture, false).await;
    let store = &*app.store;
    let bob = id(&app.create_user("bob").await);
    let fans = audience(&app, &bob, 3).await;
    let (ana, cy, dan) = (&fans[0], &fans[1], &fans[2]);
    let p1 = id(&app.create_post(&bob, "one", "c").await);
    let p2 = id(&app.create_post(&bob, "two", "c").await);
    app.settle().await;
    as_an_earlier_release_left_it(store).await;
    let moving = ", timeline items still moving from `users`";
    let before = verify_and_repair(store, false, Duration::ZERO, &Progress::hidden)
        .await
        .unwrap()
        .render();
    assert!(before.contains(moving), "{before}");
    // A step cut short between its two writes: ana's entry of p1 in both places.
    let cut = store
        .read(Container::Users, ana, &follows::timeline_id(&p1))
        .await
        .unwrap()
        .expect("the entry an earlier release wrote");
    let cut = blog::projection::write::content(&cut);
    store.upsert(Container::Timelines, ana, cut).await.unwrap();

    let shown = |user: String| {
        let app = &app;
        async move {
            let r = app.get(&format!("/api/users/{user}/timeline")).await;
            assert_eq!(r.status, 200, "{:?}", r.body);
            r.items().iter().map(id).collect::<Vec<_>>()
        }
    };
    for f in &fans {
        assert_eq!(
            shown(f.clone()).await,
            [p2.clone(), p1.clone()],
            "{f} before the move"
        );
    }

    // Meanwhile: cy unfollows bob, bob deletes p2.
    follow(&app, cy, &bob, "DELETE").await;
    assert_eq!(app.delete(&format!("/api/posts/{p2}")).await.status, 204);
    app.settle().await;

    for f in [ana, dan] {
        assert_eq!(
            shown(f.clone()).await,
            vec![p1.clone()],
            "{f} after the move"
        );
        assert_eq!(
            timeline_items(store, Container::Timelines, f).await,
            BTreeSet::from([follows::timeline_id(&p1)]),
            "{f}"
        );
    }
    assert!(shown(cy.clone()).await.is_empty());
    for f in &fans {
        assert!(
            timeline_items(store, Container::Users, f).await.is_empty(),
            "{f}: timeline items left in users"
        );
    }
    assert!(timeline_items(store, Container::Timelines, cy)
        .await
        .is_empty());
    let layout = blog::store::LAYOUT_ID;
    let recorded = store.read(Container::Leases, layout, layout).await.unwrap();
    assert!(
        blog::projection::upgrade::timelines::moved(recorded.as_ref()),
        "the move is not recorded: {recorded:?}"
    );
    let job = store
        .read(
            Container::Users,
            projection::upgrade::timelines::JOB_PARTITION,
            projection::upgrade::timelines::JOB_ID,
        )
        .await
        .unwrap();
    assert!(job.is_none(), "the move's job item stays: {job:?}");
    let outcome = verify_and_repair(store, false, Duration::ZERO, &Progress::hidden)
        .await
        .unwrap();
    assert!(
        outcome.timelines().last().is_clean(),
        "{}",
        outcome.render()
    );
    assert!(!outcome.render().contains(moving), "{}", outcome.render());
}

/// A removal that takes an item out of `users` between the move's read of it and the move's
/// delete (the move's delete then finds nothing): the copy the move made stays only if the item
/// is still wanted. cy unfollowed: their copy goes; ana still follows: hers stays.
pub async fn a_removal_racing_the_move_of_its_item_is_not_undone(fixture: Fixture) {
    let app = TestApp::spawn(fixture, false).await;
    let store = app.store.clone();
    let bob = id(&app.create_user("bob").await);
    let fans = audience(&app, &bob, 2).await;
    let (ana, cy) = (fans[0].clone(), fans[1].clone());
    let p = id(&app.create_post(&bob, "one", "c").await);
    app.settle().await;
    as_an_earlier_release_left_it(&*store).await;
    follow(&app, &cy, &bob, "DELETE").await;

    // Whatever the move is about to delete from `users` is deleted just before it.
    let racing = Hooked::new(store.clone()).before({
        let inner = store.clone();
        move |call| {
            let inner = inner.clone();
            async move {
                if call.op == "delete"
                    && call.container == Container::Users
                    && call.id.starts_with("timeline-")
                {
                    let _ = inner.delete(Container::Users, &call.pk, &call.id).await;
                }
                Ok(())
            }
            .boxed()
        }
    });
    assert_eq!(
        projection::upgrade::timelines::start(&*store)
            .await
            .unwrap(),
        1
    );
    // Its steps, each as the job item's change delivers it, until the job item goes (across
    // partitions a page may hold one partition key range, so this may take more than one).
    for step in 0.. {
        assert!(step < 10, "the move does not end");
        let job = store
            .read(
                Container::Users,
                projection::upgrade::timelines::JOB_PARTITION,
                projection::upgrade::timelines::JOB_ID,
            )
            .await
            .unwrap();
        let Some(job) = job else { break };
        projection::project_lane(&racing, Lane::Timeline, Container::Users, &[job])
            .await
            .expect("a step of the move");
    }

    let entry = follows::timeline_id(&p);
    for f in [&ana, &cy] {
        let old = store.read(Container::Users, f, &entry).await.unwrap();
        assert!(old.is_none(), "{f}: left in users");
    }
    assert!(
        store
            .read(Container::Timelines, &ana, &entry)
            .await
            .unwrap()
            .is_some(),
        "ana still follows bob: her entry is moved"
    );
    assert!(
        store
            .read(Container::Timelines, &cy, &entry)
            .await
            .unwrap()
            .is_none(),
        "cy unfollowed bob: the move brought his entry back"
    );
}
