//! The quarantine (`docs/operations.md`, "Quarantined changes"): a change whose projection always
//! fails is kept after `quarantine::ATTEMPTS` failed attempts of its batch, the lane applies the
//! changes after it, `verify` reports it, a replay once the cause is gone applies it, a drop
//! removes it. Both drivers: the pump and the Functions triggers. Written once and instantiated
//! per store with `quarantine_suite!(path::to::fixture_fn);`.

use std::sync::{Arc, Mutex};

use blog::domain::{is_deleted, FEED_PK};
use blog::ops::progress::Progress;
use blog::ops::verify_and_repair;
use blog::quarantine;
use blog::store::{Container, Store, StoreError};
use serde_json::Value;

use crate::helpers::{eventually, id, Fixture, Parts, TestApp};
use crate::hooks::Hooked;

#[macro_export]
macro_rules! quarantine_suite {
    ($fixture:path) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn the_pump_quarantines_a_change_that_always_fails_and_moves_on() {
            $crate::quarantine_suite::pump($fixture().await).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn the_pump_replays_a_quarantined_change_on_its_own() {
            $crate::quarantine_suite::pump_replays($fixture().await).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn a_trigger_quarantines_a_change_that_always_fails_and_moves_on() {
            $crate::quarantine_suite::trigger($fixture().await).await;
        }
    };
}

/// Every write of the feed entry of the post named in `poison` fails (not a transient error: the
/// store retry gives up at once), as a projection bug or a bad item would.
fn poisoned(fixture: Fixture) -> (Fixture, Arc<Mutex<Option<String>>>) {
    let poison: Arc<Mutex<Option<String>>> = Arc::default();
    let p = poison.clone();
    let fixture = fixture.wrapped(move |inner| {
        Arc::new(Hooked::new(inner).before(move |call| {
            let hit = call.container == Container::Feed
                && call.op != "read"
                && call.op != "query"
                && p.lock().unwrap().as_deref() == Some(call.id.as_str());
            Box::pin(async move {
                if hit {
                    Err(StoreError::Other(
                        "injected: this entry cannot be written".into(),
                    ))
                } else {
                    Ok(())
                }
            })
        }))
    });
    (fixture, poison)
}

async fn feed_ids(app: &TestApp) -> Vec<String> {
    app.get("/api/feed").await.items().iter().map(id).collect()
}

async fn entries(store: &dyn Store) -> Vec<quarantine::Entry> {
    quarantine::list(store, None).await.unwrap()
}

/// A user, a post that cannot be projected and one after it.
async fn two_posts(app: &TestApp) -> (String, String, String) {
    let ana = id(&app.create_user("ana").await);
    let bad = id(&app.create_post(&ana, "bad", "c").await);
    let good = id(&app.create_post(&ana, "good", "c").await);
    (ana, bad, good)
}

/// After the change is quarantined: `verify` shows it, a replay once the cause is gone applies
/// it and empties the quarantine; a second poison change is dropped.
async fn replay_then_drop(app: &TestApp, poison: &Mutex<Option<String>>, bad: &str) {
    let store = &*app.store;
    let checked = verify_and_repair(store, false, std::time::Duration::ZERO, &Progress::hidden)
        .await
        .unwrap();
    assert!(!checked.is_clean(), "{}", checked.render());
    assert_eq!(checked.quarantined().len(), 1, "{}", checked.render());
    assert!(
        checked
            .render()
            .contains(&format!("quarantined: quarantine.main.posts.{bad}.{bad}")),
        "{}",
        checked.render()
    );

    // Still failing: the replay keeps it, one more attempt counted.
    let before = entries(store).await;
    let again = quarantine::replay(store, &before).await.unwrap();
    assert_eq!(again.failed.len(), 1, "{again:?}");
    let after = entries(store).await;
    assert_eq!(after[0].attempts, before[0].attempts + 1);
    assert_eq!(after[0].first_failure, before[0].first_failure);

    // The cause fixed, the replay applies the item as it is now and empties the quarantine.
    *poison.lock().unwrap() = None;
    let done = quarantine::replay(store, &after).await.unwrap();
    assert_eq!(done.applied, vec![after[0].id.clone()], "{done:?}");
    assert!(entries(store).await.is_empty());
    // The replay wrote the post's entry in the feed (read from the store: on Cosmos DB the
    // feed's snapshot may serve the feed as it was for a moment; and settling would project the
    // post itself where no pump went past it, as under the host).
    let entry = store.read(Container::Feed, FEED_PK, bad).await.unwrap();
    assert!(
        entry.is_some_and(|e| !is_deleted(&e)),
        "the replayed post reaches the feed"
    );

    // Drop: the entry goes, the item stays unapplied.
    let entry = quarantine::entry_id(blog::projection::Lane::Main, Container::Posts, "x", "x");
    assert!(!quarantine::drop_entry(store, &entry).await.unwrap());
    let ops = blog::ops::quarantine::act(store, blog::ops::quarantine::Action::List)
        .await
        .unwrap();
    assert_eq!(ops, ("quarantine: 0 changes\n".to_string(), true));
}

/// The pump: the poison change is quarantined, the change after it applied.
pub async fn pump(fixture: Fixture) {
    let (fixture, poison) = poisoned(fixture);
    let app = TestApp::spawn(fixture, false).await;
    let (ana, bad, good) = two_posts(&app).await;
    *poison.lock().unwrap() = Some(bad.clone());
    let pump = blog::pump::spawn(app.store.clone());
    // Every follower checkpoints past the failing change: no lane is held up by it.
    eventually("the pump moves past the failing change", || async {
        blog::pump::caught_up(&*app.store).await.unwrap()
    })
    .await;
    assert!(feed_ids(&app).await.contains(&good));
    let kept = entries(&*app.store).await;
    assert_eq!(kept.len(), 1, "{kept:?}");
    let e = &kept[0];
    assert_eq!(
        (
            e.lane.as_str(),
            e.container.as_str(),
            e.pk.as_str(),
            e.item_id.as_str()
        ),
        ("main", "posts", bad.as_str(), bad.as_str())
    );
    assert!(e.attempts >= u64::from(quarantine::ATTEMPTS), "{e:?}");
    assert!(e.error.contains("injected"), "{e:?}");
    assert_eq!(e.unit, "posts", "the unit that failed: {e:?}");
    assert!(!feed_ids(&app).await.contains(&bad));

    // The lane is not blocked: a post written afterwards is applied too.
    let later = id(&app.create_post(&ana, "later", "c").await);
    eventually("a post after the quarantine reaches the feed", || async {
        feed_ids(&app).await.contains(&later)
    })
    .await;
    pump.stop().await;
    replay_then_drop(&app, &poison, &bad).await;

    // A second poison change, dropped by the operator.
    let worse = id(&app.create_post(&ana, "worse", "c").await);
    *poison.lock().unwrap() = Some(worse.clone());
    let pump = blog::pump::spawn(app.store.clone());
    eventually("the second failing change is quarantined", || async {
        entries(&*app.store).await.len() == 1
    })
    .await;
    pump.stop().await;
    let (text, ok) = blog::ops::quarantine::act(
        &*app.store,
        blog::ops::quarantine::Action::Drop {
            id: Some(entries(&*app.store).await[0].id.clone()),
            all: false,
        },
    )
    .await
    .unwrap();
    assert!(ok, "{text}");
    assert!(text.contains(&worse), "{text}");
    assert!(entries(&*app.store).await.is_empty());
    assert!(!feed_ids(&app).await.contains(&worse));
    app.stop().await;
}

/// The pump replays its lane's quarantine on its own: once the cause is gone, the change is
/// applied and its entry removed, without an operator.
pub async fn pump_replays(fixture: Fixture) {
    let (fixture, poison) = poisoned(fixture);
    let app = TestApp::spawn(fixture, false).await;
    let (_, bad, _) = two_posts(&app).await;
    *poison.lock().unwrap() = Some(bad.clone());
    let every = std::time::Duration::from_millis(200);
    let pump = blog::pump::spawn_replaying_every(app.store.clone(), std::future::ready(()), every);
    eventually("the failing change is quarantined", || async {
        entries(&*app.store).await.len() == 1
    })
    .await;
    // Replays that fail again count their attempts.
    let first = entries(&*app.store).await[0].attempts;
    eventually("a replay fails again", || async {
        entries(&*app.store).await[0].attempts > first
    })
    .await;
    *poison.lock().unwrap() = None;
    eventually("the pump replays it once the cause is gone", || async {
        entries(&*app.store).await.is_empty()
    })
    .await;
    pump.stop().await;
    app.settled("the replayed post reaches the feed", || async {
        feed_ids(&app).await.contains(&bad)
    })
    .await;
    app.stop().await;
}

/// The Functions triggers: the host redelivers the failing batch; the attempt that exhausts
/// the bound answers 200 with the poison change quarantined and the rest applied.
pub async fn trigger(fixture: Fixture) {
    let (fixture, poison) = poisoned(fixture);
    let app = TestApp::spawn_with(fixture, false, |a| a.hosted(true)).await;
    let (_, bad, good) = two_posts(&app).await;
    *poison.lock().unwrap() = Some(bad.clone());
    let docs: Vec<Value> = vec![
        app.current(Container::Posts, &bad, &bad).await,
        app.current(Container::Posts, &good, &good).await,
    ];
    for attempt in 1..quarantine::ATTEMPTS {
        let r = app.deliver("PostsChangeFeed", &docs).await;
        assert_eq!(r.status, 500, "attempt {attempt}: {:#}", r.body);
        assert!(entries(&*app.store).await.is_empty());
    }
    let done = app.deliver("PostsChangeFeed", &docs).await;
    done.assert_applied();
    // The line the host writes to the function's log, which an alert counts.
    assert!(
        done.logs().contains(&format!(
            "PostsChangeFeed: quarantined=main.posts/{bad}/{bad} attempts=5 unit=posts"
        )),
        "{}",
        done.logs()
    );
    let kept = entries(&*app.store).await;
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(kept[0].item_id, bad);
    assert_eq!(kept[0].unit, "posts");
    assert_eq!(kept[0].attempts, u64::from(quarantine::ATTEMPTS));
    let feed = feed_ids(&app).await;
    assert!(feed.contains(&good) && !feed.contains(&bad), "{feed:?}");
    replay_then_drop(&app, &poison, &bad).await;
    app.stop().await;
}

/// The binary: `verify` exits 1 while a change is quarantined; `quarantine list`, `replay` and
/// `drop` as an operator runs them (embedded store).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_lists_replays_and_drops_quarantined_changes() {
    use crate::ops_suite::{data, handler, stdout};
    let d = data(crate::helpers::embedded_fixture().await).await;
    let db = d.dir.as_ref().unwrap().path().join("blog.db");
    // Every feed query fails in this process, so the post's projection cannot run here.
    let failing: Arc<dyn Store> = Arc::new(Hooked::new(d.store.clone()).before(|call| {
        Box::pin(async move {
            if call.container == Container::Feed && call.op == "query" {
                return Err(StoreError::Other("injected".into()));
            }
            Ok(())
        })
    }));
    let post = &d.posts[0];
    let doc = d
        .store
        .read(Container::Posts, post, post)
        .await
        .unwrap()
        .unwrap();
    let attempts = quarantine::Attempts::default();
    let key = quarantine::batch_key(
        blog::projection::Lane::Main,
        Container::Posts,
        std::slice::from_ref(&doc),
    );
    for _ in 1..quarantine::ATTEMPTS {
        assert!(quarantine::project(
            &*failing,
            blog::projection::Lane::Main,
            Container::Posts,
            std::slice::from_ref(&doc),
            (key, &attempts),
            0,
        )
        .await
        .is_err());
    }
    quarantine::project(
        &*failing,
        blog::projection::Lane::Main,
        Container::Posts,
        std::slice::from_ref(&doc),
        (key, &attempts),
        0,
    )
    .await
    .expect("quarantined, so answered as applied");
    let entry = format!("quarantine.main.posts.{post}.{post}");

    let verify = handler(&db, &["verify", "--settle", "0"]);
    assert_eq!(verify.status.code(), Some(1), "{}", stdout(&verify));
    assert!(
        stdout(&verify).contains("quarantine: 1 changes not applied"),
        "{}",
        stdout(&verify)
    );
    let list = handler(&db, &["quarantine", "list"]);
    assert_eq!(list.status.code(), Some(0), "{}", stdout(&list));
    assert!(stdout(&list).contains(&entry), "{}", stdout(&list));
    assert!(stdout(&list).ends_with("quarantine: 1 changes\n"));

    let nothing = handler(&db, &["quarantine", "drop"]);
    assert_eq!(nothing.status.code(), Some(2), "drop needs an id or --all");
    let unknown = handler(&db, &["quarantine", "replay", "quarantine.main.posts.x.x"]);
    assert_eq!(unknown.status.code(), Some(1), "{}", stdout(&unknown));

    // The binary's store is not failing: the replay applies the post.
    let replay = handler(&db, &["quarantine", "replay", &entry]);
    assert_eq!(replay.status.code(), Some(0), "{}", stdout(&replay));
    assert!(stdout(&replay).contains(&format!("applied: {entry}")));
    let list = handler(&db, &["quarantine", "list"]);
    assert_eq!(stdout(&list), "quarantine: 0 changes\n");
    let verify = handler(&db, &["verify", "--settle", "0"]);
    assert_eq!(verify.status.code(), Some(0), "{}", stdout(&verify));
}
