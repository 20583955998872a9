//! The operations commands: `verify [--repair]` on both stores (the library function), the real
//! binary's exit codes and report on the embedded store, and `backup` under write load.
//!
//! The data is written through the API with the pump running, which then stops; the copies are
//! corrupted directly through the store, as a projection bug or a lost write would leave them.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use blog::ops::expected::DriftKind;
use blog::ops::progress::Progress;
use blog::ops::{verify_and_repair, Outcome};
use blog::store::{Container, PatchOp, Store};
use futures::FutureExt as _;
use serde_json::{json, Value};
use tempfile::TempDir;

use crate::helpers::{id, Fixture, Parts, TestApp};
use crate::hooks::Hooked;

/// Instantiate the suite over stores made by `$fixture`.
#[macro_export]
macro_rules! ops_suite {
    ($fixture:path) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn verify_finds_exactly_the_corrupted_copies_and_repair_mends_them() {
            $crate::ops_suite::verify_finds_and_repair_mends($fixture().await).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn repair_is_safe_while_the_service_runs() {
            $crate::ops_suite::repair_beside_the_service($fixture().await).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn verify_judges_only_what_the_change_feed_had_time_for() {
            $crate::ops_suite::verify_while_writing($fixture().await).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn a_change_in_flight_is_lag_and_every_part_is_summed() {
            $crate::ops_suite::lag_is_not_drift($fixture().await).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn a_name_left_stale_everywhere_is_found_and_mended() {
            $crate::ops_suite::stale_name_everywhere($fixture().await).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn items_written_by_earlier_releases_read_everywhere_and_are_not_drift() {
            $crate::ops_suite::earlier_items_read($fixture().await).await;
        }
    };
}

mod embedded {
    crate::ops_suite!(crate::helpers::embedded_fixture);
}

mod cosmos {
    crate::ops_suite!(crate::cosmos::cosmos_fixture);
}

/// The ids of the data set.
pub struct Data {
    pub store: Arc<dyn Store>,
    pub dir: Option<TempDir>,
    pub ana: String,
    pub bob: String,
    /// ana's posts p1, p2 and bob's p3, oldest first.
    pub posts: [String; 3],
    /// bob's comment on p1.
    pub comment: String,
}

/// Two users, three posts, a comment and likes, projected (the change feed settled), the
/// service then stopped.
pub async fn data(fixture: Fixture) -> Data {
    let app = TestApp::spawn(fixture, false).await;
    let mut d = write_data(&app).await;
    app.settle().await;
    d.dir = app.stop().await;
    d
}

/// The same data set, projected, the service still running (without a pump: a test runs one
/// beside its requests, `TestApp::beside_the_pump`, and settles).
pub async fn live(fixture: Fixture) -> (TestApp, Data) {
    let app = TestApp::spawn(fixture, false).await;
    let d = write_data(&app).await;
    app.settled("the data set reaches the feed", || async {
        app.get("/api/feed").await.items().len() == 3
    })
    .await;
    (app, d)
}

async fn write_data(app: &TestApp) -> Data {
    let ana = id(&app.create_user("ana").await);
    let bob = id(&app.create_user("bob").await);
    let p1 = id(&app.create_post(&ana, "first", &"long ".repeat(100)).await);
    let p2 = id(&app.create_post(&ana, "second", "c").await);
    let p3 = id(&app.create_post(&bob, "third", "c").await);
    let comment = app.comment(&p1, &bob, "hi").await;
    assert_eq!(comment.status, 201);
    assert_eq!(app.like(&p1, &ana).await.status, 201);
    assert_eq!(app.like(&p2, &bob).await.status, 201);
    Data {
        store: app.store.clone(),
        dir: None,
        ana,
        bob,
        posts: [p1, p2, p3],
        comment: id(&comment.body),
    }
}

async fn set(store: &dyn Store, c: Container, pk: &str, id: &str, field: &str, v: Value) {
    let ops = [PatchOp::set(&format!("/{field}"), v)];
    store.patch(c, pk, id, &ops, None).await.unwrap();
}

/// The change feed goes past what a test wrote into the store, as past a write it lost: what
/// that left wrong is drift, not a change still on its way.
async fn past_the_change_feed(store: &dyn Store) {
    blog::pump::checkpoint_at_end(store).await.unwrap();
}

/// A stale name on a comment, a wrong counter, a missing and an extra feed entry, a stale post
/// copy, and a copy whose post does not exist; returns what verify must find: (kind, `container/pk/id`).
pub async fn corrupt(d: &Data) -> BTreeSet<(DriftKind, String)> {
    let s = &*d.store;
    let [p1, p2, p3] = &d.posts;
    set(
        s,
        Container::Posts,
        p1,
        &d.comment,
        "userUsername",
        json!("bobby"),
    )
    .await;
    set(s, Container::Posts, p2, p2, "likeCount", json!(7)).await;
    s.delete(Container::Feed, "post", p3).await.unwrap();
    let ghost = json!({"id": "ghost", "type": "post", "postId": "ghost", "userId": d.ana,
        "userUsername": "ana", "title": "gone", "content": "c", "commentCount": 0,
        "likeCount": 0, "creationDate": "2999-01-01T00:00:00.000Z"});
    s.upsert(Container::Feed, "post", ghost).await.unwrap();
    set(s, Container::Users, &d.ana, p1, "title", json!("old title")).await;
    let mut orphan = s.read(Container::Users, &d.ana, p2).await.unwrap().unwrap();
    orphan["id"] = json!("orphan");
    orphan["postId"] = json!("orphan");
    s.upsert(Container::Users, &d.ana, orphan).await.unwrap();
    past_the_change_feed(s).await;
    BTreeSet::from([
        (
            DriftKind::CommentUsername,
            format!("posts/{p1}/{}", d.comment),
        ),
        (DriftKind::LikeCount, format!("posts/{p2}/{p2}")),
        (DriftKind::FeedMissing, format!("feed/post/{p3}")),
        (DriftKind::FeedExtra, "feed/post/ghost".to_string()),
        (DriftKind::CopyStale, format!("users/{}/{p1}", d.ana)),
        (DriftKind::CopyExtra, format!("users/{}/orphan", d.ana)),
    ])
}

fn found(r: &blog::ops::report::Report) -> BTreeSet<(DriftKind, String)> {
    r.findings().map(|d| (d.kind, d.target())).collect()
}

async fn run(store: &dyn Store, repair: bool) -> Outcome {
    // A short second look: the store is quiet, so it must confirm every finding.
    verify_and_repair(store, repair, Duration::from_millis(20), &Progress::hidden)
        .await
        .expect("verify runs")
}

pub async fn verify_finds_and_repair_mends(fixture: Fixture) {
    let d = data(fixture).await;
    let store = &*d.store;

    let clean = run(store, false).await;
    assert!(clean.posts().before.is_clean(), "{}", clean.render());
    // 3 posts, 1 comment, 2 likes, 3 post copies, 3 feed entries; and 2 users' follows.
    assert_eq!(
        clean.posts().before.total_checked(),
        12,
        "{}",
        clean.render()
    );
    assert!(clean
        .render()
        .ends_with("verify: 14 items checked, 0 drifted, 0 lagging, 0 quarantined\n"));

    let expected = corrupt(&d).await;
    let drifted = run(store, false).await;
    assert_eq!(
        found(&drifted.posts().before),
        expected,
        "{}",
        drifted.render()
    );
    assert_eq!(drifted.posts().before.drifted_items, 6);
    let text = drifted.render();
    assert!(text.contains("likeCount: 7, expected 1"), "{text}");
    // Request units are reported where the store charges them.
    let charged = drifted.usage.request_charge > 0.0;
    assert_eq!(charged, store.kind() == "cosmos", "{text}");
    assert_eq!(text.contains("\nrequest units: "), charged, "{text}");
    assert!(
        text.ends_with("verify: 16 items checked, 6 drifted, 0 lagging, 0 quarantined\n"),
        "{text}"
    );

    let repaired = run(store, true).await;
    assert_eq!(found(&repaired.posts().before), expected);
    let (done, after) = repaired.posts().repair.as_ref().expect("a repair ran");
    assert!(done.failed.is_empty(), "{:?}", done.failed);
    assert!(after.is_clean(), "{}", repaired.render());
    assert!(repaired
        .render()
        .ends_with("verify: 14 items checked, 0 drifted, 0 lagging, 0 quarantined\n"));

    let again = run(store, false).await;
    assert!(again.posts().before.is_clean(), "{}", again.render());
    // What a client sees is right again.
    let p2 = store
        .read(Container::Posts, &d.posts[1], &d.posts[1])
        .await
        .unwrap()
        .unwrap();
    assert_eq!(p2["likeCount"], 1);
    let c = store
        .read(Container::Posts, &d.posts[0], &d.comment)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(c["userUsername"], "bob");
}

/// A comment on a post keeps being rewritten while verify runs, and the change feed has not
/// caught up with it (the pump is stopped): the post's counter, copy and feed entry lag at every
/// look. That is lag, not drift; a wrong counter on a quiet post is drift all the same.
pub async fn verify_while_writing(fixture: Fixture) {
    let d = data(fixture).await;
    let store = d.store.clone();
    let [p1, p2, _] = d.posts.clone();
    set(&*store, Container::Posts, &p2, &p2, "likeCount", json!(7)).await;
    past_the_change_feed(&*store).await;
    let mut template = store
        .read(Container::Posts, &p1, &d.comment)
        .await
        .unwrap()
        .unwrap();
    template
        .as_object_mut()
        .unwrap()
        .retain(|k, _| !k.starts_with('_'));
    let writing = Arc::new(AtomicBool::new(true));
    let written = Arc::new(AtomicUsize::new(0));
    let writer = tokio::spawn({
        let (store, writing, written) = (store.clone(), writing.clone(), written.clone());
        let p1 = p1.clone();
        async move {
            while writing.load(Ordering::Relaxed) {
                // One comment rewritten, not a new one each time: p1 keeps changing (its count
                // is behind while it does) and what verify reads stays the same size, however
                // long it takes on a loaded machine.
                let mut comment = template.clone();
                let n = written.load(Ordering::Relaxed);
                comment["id"] = json!("flowing");
                comment["content"] = json!(format!("flowing {n}"));
                store.upsert(Container::Posts, &p1, comment).await.unwrap();
                written.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    });
    // The writes are flowing before verify starts, and go on until it ends.
    while written.load(Ordering::Relaxed) < 2 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let outcome = verify_and_repair(
        &*store,
        false,
        Duration::from_millis(150),
        &Progress::hidden,
    )
    .await
    .expect("verify runs");
    writing.store(false, Ordering::Relaxed);
    writer.await.unwrap();
    let report = &outcome.posts().before;
    assert_eq!(
        found(report),
        BTreeSet::from([(DriftKind::LikeCount, format!("posts/{p2}/{p2}"))]),
        "{}",
        outcome.render()
    );
    assert_eq!(report.lagging, 1, "{}", outcome.render());
    assert!(outcome.render().contains("lagging: 1 posts"));
}

/// `handler <args>` on the embedded store at `db`.
pub fn handler(db: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_handler"))
        .env_clear()
        .env("BLOG_DB_PATH", db)
        .env("RUST_LOG", "warn")
        .args(args)
        .output()
        .expect("handler runs")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn last_line(o: &Output) -> String {
    stdout(o).lines().last().unwrap_or_default().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_exits_1_on_drift_repairs_it_and_then_exits_0() {
    let d = data(crate::helpers::embedded_fixture().await).await;
    let db = d.dir.as_ref().unwrap().path().join("blog.db");

    // With the settings of the Functions app, whose authentication mode the service refuses
    // outside the host: verify serves no requests, so it runs.
    let clean = Command::new(env!("CARGO_BIN_EXE_handler"))
        .env_clear()
        .env("BLOG_DB_PATH", &db)
        .env("BLOG_AUTH", "easyauth")
        .args(["verify", "--settle", "1"])
        .output()
        .unwrap();
    assert_eq!(
        clean.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&clean.stderr)
    );
    assert_eq!(
        last_line(&clean),
        "verify: 14 items checked, 0 drifted, 0 lagging, 0 quarantined"
    );

    corrupt(&d).await;
    let drift = handler(&db, &["verify", "--settle", "1"]);
    assert_eq!(drift.status.code(), Some(1), "{}", stdout(&drift));
    assert_eq!(
        last_line(&drift),
        "verify: 16 items checked, 6 drifted, 0 lagging, 0 quarantined"
    );
    let text = stdout(&drift);
    for kind in [
        "comment username",
        "like count",
        "feed entry missing",
        "feed entry extra",
    ] {
        assert!(text.contains(&format!("drift: {kind}: 1")), "{text}");
    }
    assert!(text.contains("feed/post/ghost"), "{text}");
    assert!(text.contains("drift: post copy extra: 1"), "{text}");

    let repair = handler(&db, &["verify", "--repair", "--settle", "1"]);
    assert_eq!(repair.status.code(), Some(0), "{}", stdout(&repair));
    assert!(stdout(&repair).contains("before repair: 14 items checked, 6 drifted"));
    assert_eq!(
        last_line(&repair),
        "verify: 14 items checked, 0 drifted, 0 lagging, 0 quarantined"
    );

    let after = handler(&db, &["verify", "--settle", "1"]);
    assert_eq!(after.status.code(), Some(0), "{}", stdout(&after));

    // A comment whose change the change feed has not applied (the service is stopped): its
    // post's count is behind, which is lag, not drift: exit 0.
    let store = &*d.store;
    let [p1, ..] = &d.posts;
    let mut comment = store
        .read(Container::Posts, p1, &d.comment)
        .await
        .unwrap()
        .unwrap();
    comment
        .as_object_mut()
        .unwrap()
        .retain(|k, _| !k.starts_with('_'));
    comment["id"] = json!("in-flight");
    store.create(Container::Posts, p1, comment).await.unwrap();
    let lag = handler(&db, &["verify", "--settle", "0"]);
    assert_eq!(lag.status.code(), Some(0), "{}", stdout(&lag));
    assert_eq!(
        last_line(&lag),
        "verify: 15 items checked, 0 drifted, 1 lagging, 0 quarantined"
    );
}

/// Verify is a table of parts (`blog::ops::PARTS`), and the report, its summary and the exit
/// code are made from every row alike. With something wrong for each part to find (a post's
/// counter, a bookmark's copy, an edge's name, a tag's count, a quarantined change), every part
/// of the table finds it, shows each finding in its lines of the report, and counts in the
/// summary; `--repair` mends what each one found. A new row is held to the same without more
/// ado, once this data set gives it something to find.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_part_of_the_table_finds_reports_sums_and_mends_its_findings() {
    let app = TestApp::spawn(crate::helpers::embedded_fixture().await, false).await;
    let d = write_data(&app).await;
    let [_, p2, p3] = d.posts.clone();
    let (ana, bob) = (d.ana.clone(), d.bob.clone());
    for path in [
        format!("/api/users/{bob}/following/{ana}"),
        format!("/api/users/{ana}/bookmarks/{p3}"),
    ] {
        let r = app.put(&path, Value::Null).await;
        assert_eq!(r.status, 204, "{path}: {:?}", r.body);
    }
    let tagged = json!({ "userId": ana, "title": "tagged", "content": "c", "tags": ["rust"] });
    assert_eq!(app.post("/api/posts", tagged).await.status, 201);
    app.settle().await;
    let _dir = app.stop().await;
    let s = &*d.store;
    set(s, Container::Posts, &p2, &p2, "likeCount", json!(7)).await;
    let copy = format!("bookmarked-{p3}");
    set(s, Container::Users, &ana, &copy, "post/title", json!("x")).await;
    let edge = format!("following-{ana}");
    set(s, Container::Users, &bob, &edge, "userUsername", json!("x")).await;
    set(
        s,
        Container::Feed,
        "tagCount",
        "rust",
        "postCount",
        json!(5),
    )
    .await;
    let entry = "quarantine.main.posts.gone.gone";
    let kept = json!({ "id": entry, "type": "quarantine", "lane": "main", "container": "posts",
                       "pk": "gone", "itemId": "gone", "error": "it always fails",
                       "firstFailure": "2026-01-01T00:00:00.000Z",
                       "lastFailure": "2026-01-01T00:00:01.000Z", "attempts": 5 });
    s.upsert(Container::Leases, entry, kept).await.unwrap();
    past_the_change_feed(s).await;

    let outcome = verify_and_repair(s, false, Duration::ZERO, &Progress::hidden)
        .await
        .unwrap();
    let text = outcome.render();
    let names: Vec<&str> = outcome.parts.iter().map(|(n, _)| *n).collect();
    let table: Vec<&str> = blog::ops::PARTS.iter().map(|p| p.name).collect();
    assert_eq!(names, table, "every row runs, in order");
    for (name, part) in &outcome.parts {
        assert!(!part.tally().is_clean(), "{name} found nothing: {text}");
        let shown = part.render();
        assert!(
            text.contains(&shown),
            "{name}'s lines are in the report: {text}"
        );
        let findings = part.findings();
        assert!(!findings.is_empty(), "{name}: {text}");
        for f in findings {
            assert!(
                shown.contains(&f.target),
                "{name}: {f:?} not shown: {shown}"
            );
            assert!(
                shown.contains(&f.detail),
                "{name}: {f:?} not shown: {shown}"
            );
        }
    }
    let s_ = outcome.summary();
    let summed: blog::ops::Summary = outcome.parts.iter().map(|(_, p)| p.tally()).sum();
    assert_eq!(s_, summed, "{text}");
    assert_eq!((s_.drifted, s_.quarantined), (4, 1), "{text}");
    assert!(
        text.ends_with(&format!(
            "verify: {} items checked, 4 drifted, 0 lagging, 1 quarantined\n",
            s_.checked
        )),
        "{text}"
    );
    assert!(!outcome.is_clean());

    let mended = verify_and_repair(s, true, Duration::ZERO, &Progress::hidden)
        .await
        .unwrap();
    let text = mended.render();
    for (name, part) in &mended.parts {
        assert_eq!(part.tally().drifted, 0, "{name}: {text}");
    }
    assert_eq!(
        mended.summary().quarantined,
        1,
        "kept until replayed or dropped: {text}"
    );
}

#[test]
fn the_binary_exits_2_when_verify_cannot_run() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("none.db");
    let out = handler(&missing, &["verify"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no embedded store"));
    assert!(!missing.exists(), "verify created a database");
    let out = Command::new(env!("CARGO_BIN_EXE_handler"))
        .env_clear()
        .env("BLOG_STORE", "cosmos")
        .args(["verify"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_under_write_load_holds_every_write_acknowledged_before_it() {
    let fixture = crate::helpers::embedded_fixture().await;
    let dir = fixture.dir.as_ref().unwrap().path().to_path_buf();
    let store = fixture.store.clone();
    let acked = Arc::new(Mutex::new(Vec::<String>::new()));
    let stop = Arc::new(AtomicBool::new(false));
    // A permit per acknowledged write: the backup starts once 300 are in.
    let written = Arc::new(tokio::sync::Semaphore::new(0));
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let (store, acked, stop) = (store.clone(), acked.clone(), stop.clone());
            let written = written.clone();
            tokio::spawn(async move {
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) {
                    let id = format!("u{w}-{i}");
                    let user = json!({"id": id, "type": "user", "userId": id, "username": "x"});
                    store.create(Container::Users, &id, user).await.unwrap();
                    acked.lock().unwrap().push(id);
                    written.add_permits(1);
                    i += 1;
                }
            })
        })
        .collect();
    tokio::time::timeout(Duration::from_secs(20), written.acquire_many(300))
        .await
        .expect("300 writes within 20 s")
        .unwrap()
        .forget();

    let before: Vec<String> = acked.lock().unwrap().clone();
    let target = dir.join("backup.db");
    let (db, out_path) = (dir.join("blog.db"), target.clone());
    let out =
        tokio::task::spawn_blocking(move || handler(&db, &["backup", out_path.to_str().unwrap()]))
            .await
            .unwrap();
    let during = acked.lock().unwrap().len();
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.await.unwrap();
    }
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout(&out).starts_with("backup: "), "{}", stdout(&out));
    assert!(
        during > before.len(),
        "the writes went on during the backup"
    );

    let copy = blog::store::embedded::EmbeddedStore::open(&target).expect("the backup opens");
    for id in &before {
        assert!(
            copy.read(Container::Users, id, id).await.unwrap().is_some(),
            "{id} acknowledged before the backup is missing from it"
        );
    }
    // A second backup to the same path is refused and leaves the first alone.
    let again = handler(&dir.join("blog.db"), &["backup", target.to_str().unwrap()]);
    assert_eq!(again.status.code(), Some(2));
}

/// What a rename fan-out that never ran leaves (the A→B→A defect): the old name on a post, its
/// copies, and a like.
pub async fn stale_name_everywhere(fixture: Fixture) {
    let d = data(fixture).await;
    let s = &*d.store;
    let [_, p2, p3] = &d.posts;
    let old = json!("bobby");
    set(s, Container::Posts, p3, p3, "userUsername", old.clone()).await;
    set(s, Container::Users, &d.bob, p3, "userUsername", old.clone()).await;
    set(s, Container::Feed, "post", p3, "userUsername", old.clone()).await;
    let like = format!("like-{}", d.bob);
    set(s, Container::Posts, p2, &like, "userUsername", old).await;
    past_the_change_feed(s).await;
    let expected = BTreeSet::from([
        (DriftKind::PostUsername, format!("posts/{p3}/{p3}")),
        (DriftKind::LikeUsername, format!("posts/{p2}/{like}")),
        (DriftKind::CopyStale, format!("users/{}/{p3}", d.bob)),
        (DriftKind::FeedStale, format!("feed/post/{p3}")),
    ]);
    let repaired = run(s, true).await;
    assert_eq!(
        found(&repaired.posts().before),
        expected,
        "{}",
        repaired.render()
    );
    assert!(repaired.posts().last().is_clean(), "{}", repaired.render());
    let copy = s.read(Container::Feed, "post", p3).await.unwrap().unwrap();
    assert_eq!(copy["userUsername"], "bob");
}

/// A store that, right after the first read of the feed (the end of verify's first look), writes
/// the item in `pending`: a change the change feed delivers while verify runs.
type Pending = Arc<Mutex<Option<(Container, String, Value)>>>;

fn changes_during_verify(inner: Arc<dyn Store>) -> (Hooked, Pending) {
    let pending: Pending = Arc::default();
    let (p, writer) = (pending.clone(), inner.clone());
    let store = Hooked::new(inner).after(move |call| {
        let (p, writer) = (p.clone(), writer.clone());
        async move {
            let write = p
                .lock()
                .unwrap()
                .take_if(|_| call.op == "query" && call.container == Container::Feed);
            if let Some((container, pk, item)) = write {
                writer.upsert(container, &pk, item).await?;
            }
            Ok(())
        }
        .boxed()
    });
    (store, pending)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drift_mended_before_the_second_look_is_not_reported() {
    let d = data(crate::helpers::embedded_fixture().await).await;
    let [p1, ..] = &d.posts;
    let good = d
        .store
        .read(Container::Users, &d.ana, p1)
        .await
        .unwrap()
        .unwrap();
    set(
        &*d.store,
        Container::Users,
        &d.ana,
        p1,
        "title",
        json!("old title"),
    )
    .await;
    let (store, pending) = changes_during_verify(d.store.clone());
    let arm = || *pending.lock().unwrap() = Some((Container::Users, d.ana.clone(), good.clone()));

    // Without a second look, the copy the change feed is about to rewrite counts as drift.
    arm();
    let first = verify_and_repair(&store, false, Duration::ZERO, &Progress::hidden)
        .await
        .unwrap();
    assert_eq!(first.posts().before.drifted_items, 1, "{}", first.render());
    set(
        &*d.store,
        Container::Users,
        &d.ana,
        p1,
        "title",
        json!("old title"),
    )
    .await;
    // With one, it is seen mended and not reported.
    arm();
    let second = run(&store, false).await;
    assert!(second.posts().before.is_clean(), "{}", second.render());
    assert!(pending.lock().unwrap().is_none(), "the change was written");
}

/// A repair while comments keep arriving: nothing acknowledged is lost or counted twice, and the
/// views end up right.
pub async fn repair_beside_the_service(fixture: Fixture) {
    let (app, d) = live(fixture).await;
    let s = &*d.store;
    let [p1, p2, p3] = &d.posts;
    set(s, Container::Users, &d.ana, p1, "title", json!("old title")).await;
    s.delete(Container::Feed, "post", p3).await.unwrap();
    set(s, Container::Posts, p2, p2, "likeCount", json!(7)).await;
    // The change feed goes past the corruption (drift, not lag), then comments flow beside the
    // pump and the repair.
    app.settle().await;

    let comments = async {
        let mut acked = 0;
        for i in 0..20 {
            let user = if i % 2 == 0 { &d.ana } else { &d.bob };
            if app.comment(p1, user, &format!("c{i}")).await.status == 201 {
                acked += 1;
            }
        }
        acked
    };
    let (acked, repaired) = app
        .beside_the_pump(async { tokio::join!(comments, run(s, true)) })
        .await;
    assert_eq!(acked, 20);
    assert!(!repaired.posts().before.is_clean(), "{}", repaired.render());
    if let Some((done, _)) = &repaired.posts().repair {
        assert!(done.failed.is_empty(), "{:?}", done.failed);
    }

    app.settled("the feed holds the three posts", || async {
        app.get("/api/feed").await.items().len() == 3
    })
    .await;
    let after = run(s, false).await;
    assert!(after.posts().before.is_clean(), "{}", after.render());
    let post = app.get(&format!("/api/posts/{p1}")).await.body;
    assert_eq!(post["commentCount"], 21, "{post}");
    assert_eq!(post["title"], "first");
    let feed = app.get("/api/feed").await;
    assert_eq!(feed.items().len(), 3);
}

/// Changes the change feed has not applied yet (the pump is stopped with them in flight: a
/// comment on a post, a rename whose fan-out has not run) are lag in every part of verify, and a
/// repair leaves them to the change feed; a wrong counter and a stale edge name the change feed
/// went past are drift. The summary covers every part.
pub async fn lag_is_not_drift(fixture: Fixture) {
    let (app, mut d) = live(fixture).await;
    let cy = id(&app.create_user("cy").await);
    for (user, followee) in [(&d.bob, &d.ana), (&cy, &d.ana)] {
        let r = app
            .put(
                &format!("/api/users/{user}/following/{followee}"),
                Value::Null,
            )
            .await;
        assert_eq!(r.status, 204, "{:?}", r.body);
    }
    app.settled("the follows are applied", || async {
        app.get(&format!("/api/users/{}", d.ana)).await.body["followerCount"] == 2
    })
    .await;
    d.dir = app.stop().await;
    let s = &*d.store;
    let [p1, p2, p3] = d.posts.clone();

    // Drift: a counter, and an edge's name, that the change feed went past.
    set(s, Container::Posts, &p2, &p2, "likeCount", json!(7)).await;
    let edge = format!("following-{}", d.ana);
    set(
        s,
        Container::Users,
        &d.bob,
        &edge,
        "userUsername",
        json!("x"),
    )
    .await;
    past_the_change_feed(s).await;
    // In flight: a comment on p3, and cy renamed (cy's mirror in ana's partition has the old
    // name until the change feed applies the rename).
    let mut comment = s
        .read(Container::Posts, &p1, &d.comment)
        .await
        .unwrap()
        .unwrap();
    comment
        .as_object_mut()
        .unwrap()
        .retain(|k, _| !k.starts_with('_'));
    comment["id"] = json!("in-flight");
    comment["postId"] = json!(p3);
    s.create(Container::Posts, &p3, comment).await.unwrap();
    set(s, Container::Users, &cy, &cy, "username", json!("cyril")).await;

    for settle in [Duration::ZERO, Duration::from_millis(20)] {
        let outcome = verify_and_repair(s, false, settle, &Progress::hidden)
            .await
            .unwrap();
        let text = outcome.render();
        assert_eq!(
            found(&outcome.posts().before),
            BTreeSet::from([(DriftKind::LikeCount, format!("posts/{p2}/{p2}"))]),
            "{text}"
        );
        assert_eq!(outcome.posts().before.lagging, 1, "p3: {text}");
        assert!(text.contains("lagging: 1 posts"), "{text}");
        let timelines = &outcome.timelines().before;
        assert_eq!(timelines.drift.get("edge name"), Some(&1), "{text}");
        assert_eq!(timelines.drifted(), 1, "{text}");
        assert_eq!(timelines.lagging, 1, "cy's mirror: {text}");
        let summary = outcome.summary();
        assert_eq!(
            (summary.drifted, summary.lagging, summary.quarantined),
            (2, 2, 0),
            "{text}"
        );
        assert_eq!(
            summary.checked,
            outcome.posts().before.total_checked() + timelines.checked,
            "{text}"
        );
        assert!(
            text.ends_with(&format!(
                "verify: {} items checked, 2 drifted, 2 lagging, 0 quarantined\n",
                summary.checked
            )),
            "{text}"
        );
        assert!(!outcome.is_clean(), "{text}");
    }

    // The repair mends the drift and writes nothing for what is lagging; lag alone is clean.
    let p3_before = s.read(Container::Posts, &p3, &p3).await.unwrap().unwrap();
    let repaired = run(s, true).await;
    let text = repaired.render();
    assert!(repaired.is_clean(), "{text}");
    assert_eq!(repaired.summary().drifted, 0, "{text}");
    assert!(repaired.summary().lagging >= 2, "{text}");
    let p3_after = s.read(Container::Posts, &p3, &p3).await.unwrap().unwrap();
    assert_eq!(
        p3_after["_etag"], p3_before["_etag"],
        "left to the change feed: {text}"
    );
    let p2_after = s.read(Container::Posts, &p2, &p2).await.unwrap().unwrap();
    assert_eq!(p2_after["likeCount"], 1, "{text}");
    let mirror = format!("follower-{cy}");
    let mirror = s
        .read(Container::Users, &d.ana, &mirror)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        mirror["userUsername"], "cy",
        "left to the change feed: {text}"
    );
}

/// A blog stored by earlier releases, without the properties added to its items since
/// (`tests/fixtures/items`): posts without `updatedAt`, users without their rename versions, a
/// timeline entry still holding counts. Every read answers it, and `verify` finds no drift in
/// it: a field added to a stored type must read from the items already stored.
pub async fn earlier_items_read(fixture: Fixture) {
    const ANA: &str = "da1c77d3-b408-4d73-9ce3-b862115eb2f7";
    const BO: &str = "2d52d312-a32b-4163-81d9-77d10ed8010b";
    const POST: &str = "7c7f951d-1d40-4e5d-83f6-8eb847381087";
    let app = TestApp::spawn(fixture, false).await;
    let stored: Value =
        serde_json::from_str(include_str!("../fixtures/items/earlier-releases.json")).unwrap();
    for (place, c, pk) in [
        ("users", Container::Users, "userId"),
        ("posts", Container::Posts, "postId"),
        ("feed", Container::Feed, "type"),
        ("timelines", Container::Timelines, "userId"),
    ] {
        for item in stored[place].as_array().unwrap() {
            let pk = item[pk].as_str().unwrap();
            app.store.create(c, pk, item.clone()).await.unwrap();
        }
    }
    past_the_change_feed(&*app.store).await;

    let post = app.get(&format!("/api/posts/{POST}")).await;
    assert_eq!(post.status, 200, "{:?}", post.body);
    assert_eq!(
        (
            &post.body["title"],
            &post.body["commentCount"],
            &post.body["likeCount"]
        ),
        (&json!("Hello"), &json!(1), &json!(1))
    );
    assert!(post.body.get("updatedAt").is_none(), "never edited");
    let user = app.get(&format!("/api/users/{ANA}")).await;
    assert_eq!((user.status, &user.body["username"]), (200, &json!("ana")));
    let mine = app.get(&format!("/api/users/{ANA}/posts")).await;
    assert_eq!(mine.status, 200, "{:?}", mine.body);
    assert_eq!(mine.items()[0]["id"], POST);
    let feed = app.get("/api/feed").await;
    assert_eq!(feed.status, 200, "{:?}", feed.body);
    assert_eq!(feed.items()[0]["id"], POST);
    let timeline = app.get(&format!("/api/users/{BO}/timeline")).await;
    assert_eq!(timeline.status, 200, "{:?}", timeline.body);
    let shown = &timeline.items()[0];
    assert_eq!(
        (&shown["id"], &shown["userId"], &shown["userUsername"]),
        (&json!(POST), &json!(ANA), &json!("ana"))
    );
    assert_eq!(
        (&shown["commentCount"], &shown["likeCount"]),
        (&json!(1), &json!(1)),
        "the counts are the post's, not those the entry held"
    );
    let following = app.get(&format!("/api/users/{BO}/following")).await;
    assert_eq!(following.items()[0]["username"], "ana");
    let followers = app.get(&format!("/api/users/{ANA}/followers")).await;
    assert_eq!(followers.items()[0]["username"], "bo2");

    let outcome = run(&*app.store, false).await;
    assert!(outcome.posts().before.is_clean(), "{}", outcome.render());
    assert!(
        outcome.timelines().last().is_clean(),
        "{}",
        outcome.render()
    );
    // The post, its comment and like, its copy and its feed entry.
    assert_eq!(
        outcome.posts().before.total_checked(),
        5,
        "{}",
        outcome.render()
    );
}
