//! The store suite and the API suite on the Cosmos DB store, run on the SDK's in-memory emulator
//! (a dev-dependency: the emulator never ships in the `handler` binary), plus what only the
//! Cosmos store has to get right. Every test path contains `cosmos`: `cargo test cosmos`.
//!
//! Each fixture is a fresh emulated account. The store creates its database and containers
//! itself (`create_containers`), which exercises the bootstrap; the emulator gives each container
//! 4 physical partitions, so cross-partition queries and the full-container change feed really
//! span several partition key ranges.
//!
//! What the emulator lacks, and how these tests deal with it:
//! - `incr` on a missing property answers 400 "missing path" (Cosmos DB creates the property),
//!   so the suite's `patch_sets_and_increments` and `patch_is_atomic_under_contention` (whose
//!   items have no counters yet) run here on items that have them; the service always creates
//!   its counters with the post.
//! - It does not evaluate bracket property access (`c["type"]`) in filters; the store writes
//!   `c.type` (brackets only for reserved words).
//! - It evaluates no full-text function (`FullTextContains` is an unknown function to it), so
//!   its stores write full-text conditions as case-insensitive substring tests
//!   (`CosmosStore::with_emulated_full_text`): the search tests run every other part of the
//!   query here, and what only words can tell (word boundaries, stems, accents) is tested on the
//!   embedded store; the query a real account gets is pinned in `src/store/cosmos/sql.rs`, and
//!   `the_search_query_a_real_account_gets_reaches_the_emulator` sends it through the SDK.
//! - It enforces no indexing policy, so an `ORDER BY` that would need a composite index on a
//!   real account passes here; the store orders by one property only for that reason.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use azure_data_cosmos::options::Region;
use azure_data_cosmos::{
    AccountEndpoint, AccountReference, CosmosClientBuilder, CosmosRuntimeBuilder, RoutingStrategy,
};
use azure_data_cosmos_driver::in_memory_emulator::{
    ConsistencyLevel, InMemoryEmulatorHttpClient, VirtualAccountConfig, VirtualRegion,
};
use blog::settings::{CosmosAuth, CosmosConnection, CosmosSettings};
use blog::store::cosmos::CosmosStore;
use blog::store::{metrics, BatchOp, Container, PatchOp, Query, Store, StoreError};
use serde_json::{json, Value};

use crate::helpers::{id, Fixture, TestApp};

const GATEWAY: &str = "https://eastus.emulator.local";
/// Any base64 string: the emulator checks no signatures.
const KEY: &str = "dGVzdGtleQ==";

/// A Cosmos store on a fresh in-memory emulated account, writing full-text conditions as the
/// emulator can evaluate them (see the module docs).
pub async fn cosmos_store() -> CosmosStore {
    emulated_account().await.with_emulated_full_text()
}

/// A Cosmos store on a fresh in-memory emulated account, as a real account's is configured.
async fn emulated_account() -> CosmosStore {
    let region = VirtualRegion::new("East US", GATEWAY.parse().expect("url"));
    let config = VirtualAccountConfig::new(vec![region])
        .expect("emulator config")
        .with_consistency(ConsistencyLevel::Session);
    let emulator = Arc::new(InMemoryEmulatorHttpClient::new(config));
    let runtime = CosmosRuntimeBuilder::from(emulator.runtime_builder())
        .build()
        .await
        .expect("emulator runtime");
    let account = AccountReference::with_authentication_key(
        GATEWAY.parse::<AccountEndpoint>().expect("endpoint"),
        KEY.to_string(),
    );
    let client = CosmosClientBuilder::new()
        .with_runtime(runtime)
        .build(account, RoutingStrategy::ProximityTo(Region::EAST_US))
        .await
        .expect("client on the in-memory emulator");
    CosmosStore::with_client(client, "blog", true)
}

pub async fn cosmos_fixture() -> Fixture {
    Fixture {
        store: Arc::new(cosmos_store().await),
        dir: None,
    }
}

mod store {
    use super::*;
    // The whole suite but the two `incr`-on-a-missing-counter tests (see the module docs).
    crate::store_suite!(@tests cosmos_fixture;
        point_operations, create_conflicts, replace_honours_etags, delete_reports_missing,
        delete_if_match_honours_etags, patch_keeps_identity,
        partition_key_must_match, query_filters_orders_and_stays_in_its_partition,
        query_pages_with_continuation_tokens, bad_continuation_token_is_a_bad_request,
        count_counts_matching_items, cross_partition_query_finds_every_partition,
        batch_succeeds_as_a_whole, batch_fails_as_a_whole, change_feed_latest_version_in_commit_order,
        change_feeds_are_per_container, change_feed_readers_take_turns_without_starving,
        system_properties_are_stamped, patch_honours_etags, live_queries_leave_marked_items_out,
        any_of_finds_the_listed_values_across_partitions, full_text_finds_live_posts_with_every_word);
}

mod api {
    use super::*;
    crate::api_suite!(cosmos_fixture);
}

mod live {
    use super::*;
    crate::live_suite!(cosmos_fixture);
}

mod search {
    use super::*;
    crate::search_suite!(cosmos_fixture);
}

mod tags {
    use super::*;
    crate::tags_suite!(cosmos_fixture);
}

mod deletes {
    use super::*;
    crate::deletes_suite!(cosmos_fixture);
}

mod client {
    use super::*;
    crate::client_suite!(cosmos_fixture);
}

mod timeline {
    use super::*;
    crate::timeline_suite!(cosmos_fixture);
}

mod lane {
    use super::*;
    crate::lane_suite!(cosmos_fixture);
}

mod quarantine {
    use super::*;
    crate::quarantine_suite!(cosmos_fixture);
}

mod timeline_read {
    use super::*;
    crate::timeline_read_suite!(cosmos_fixture);
}

mod bookmarks {
    use super::*;
    crate::bookmarks_suite!(cosmos_fixture);
}

mod mutes {
    use super::*;
    crate::mutes_suite!(cosmos_fixture);
}

mod audience {
    use super::*;
    crate::audience_suite!(cosmos_fixture);
}

fn post(id: &str, user: &str, date: &str) -> Value {
    json!({
        "id": id, "type": "post", "postId": id, "userId": user, "userUsername": "ann",
        "title": "t", "content": "c", "commentCount": 0, "likeCount": 0, "creationDate": date,
    })
}

fn comment(post: &str, id: &str, date: &str) -> Value {
    json!({
        "id": id, "type": "comment", "postId": post, "userId": "u1", "userUsername": "ann",
        "content": "hi", "creationDate": date,
    })
}

fn date(i: usize) -> String {
    format!("2026-01-01T00:00:{i:02}.000Z")
}

fn ids(items: &[Value]) -> Vec<String> {
    items
        .iter()
        .map(|v| v["id"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn patch_sets_and_increments_existing_counters() {
    let store = cosmos_store().await;
    let c = Container::Posts;
    store
        .create(c, "p1", post("p1", "u1", &date(1)))
        .await
        .unwrap();
    let ops = [
        PatchOp::incr("/likeCount", 2),
        PatchOp::set("/title", "new"),
    ];
    let patched = store.patch(c, "p1", "p1", &ops, None).await.unwrap();
    assert_eq!(patched["likeCount"], 2);
    assert_eq!(patched["title"], "new");
    let etag = patched["_etag"].as_str().unwrap().to_string();
    let down = [PatchOp::incr("/likeCount", -1)];
    let patched = store
        .patch(c, "p1", "p1", &down, Some(&etag))
        .await
        .unwrap();
    assert_eq!(patched["likeCount"], 1);
    // The etag changed with that write: a patch conditioned on the old one fails.
    assert!(matches!(
        store.patch(c, "p1", "p1", &down, Some(&etag)).await,
        Err(StoreError::PreconditionFailed)
    ));
    let stored = store.read(c, "p1", "p1").await.unwrap().unwrap();
    assert_eq!(stored["likeCount"], 1);
    assert!(
        stored
            .as_object()
            .unwrap()
            .keys()
            .all(|k| !k.starts_with("_azsdk")),
        "a client-side patch left its marker: {stored}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_is_atomic_under_contention_on_an_existing_counter() {
    let store: Arc<dyn Store> = Arc::new(cosmos_store().await);
    let c = Container::Posts;
    store
        .create(c, "p1", post("p1", "u1", &date(1)))
        .await
        .unwrap();
    let tasks: Vec<_> = (0..50)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move {
                let incr = [PatchOp::incr("/commentCount", 1)];
                store.patch(c, "p1", "p1", &incr, None).await.map(drop)
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    let stored = store.read(c, "p1", "p1").await.unwrap().unwrap();
    assert_eq!(stored["commentCount"], 50);
}

#[tokio::test]
async fn a_failed_batch_names_its_operation() {
    let store = cosmos_store().await;
    let c = Container::Posts;
    store
        .create(c, "p1", post("p1", "u1", &date(0)))
        .await
        .unwrap();
    store
        .create(c, "p1", comment("p1", "c1", &date(1)))
        .await
        .unwrap();
    // Creating an item that exists names the operation.
    let err = store
        .batch(
            c,
            "p1",
            vec![
                BatchOp::Read { id: "p1".into() },
                BatchOp::Create {
                    item: comment("p1", "c1", &date(9)),
                },
            ],
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::BatchFailed { index: 1, source } if matches!(**source, StoreError::Conflict)),
        "{err:?}"
    );
    assert!(store.batch(c, "p1", Vec::new()).await.unwrap().is_empty());
}

#[tokio::test]
async fn continuation_tokens_of_any_foreign_shape_are_bad_requests() {
    let store = cosmos_store().await;
    let c = Container::Posts;
    store
        .create(c, "p1", comment("p1", "c1", &date(1)))
        .await
        .unwrap();
    let q = Query::partition("p1").eq("type", "comment").limit(1);
    // The SDK's own tokens ("c1." + base64 JSON) broken in each way, and a raw one.
    for bad in ["garbage", "c1.!!!", "c1.e30", "c9.abc"] {
        match store
            .query(c, &q.clone().continuation(Some(bad.into())))
            .await
        {
            Err(StoreError::BadContinuation(_)) => {}
            other => panic!("{bad}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn counts_across_partitions() {
    let store = cosmos_store().await;
    let c = Container::Posts;
    for p in ["p1", "p2", "p3"] {
        store.create(c, p, post(p, "u1", &date(0))).await.unwrap();
    }
    for i in 0..4 {
        let id = format!("c{i}");
        store
            .create(c, "p1", comment("p1", &id, &date(i)))
            .await
            .unwrap();
    }
    store
        .create(c, "p2", comment("p2", "x", &date(1)))
        .await
        .unwrap();
    let comments = Query::cross_partition().eq("type", "comment");
    assert_eq!(store.count(c, &comments).await.unwrap(), 5);
    let posts = Query::cross_partition().eq("type", "post");
    assert_eq!(store.count(c, &posts).await.unwrap(), 3);
}

#[tokio::test]
async fn cross_partition_query_pages_through_four_partitions() {
    let store = cosmos_store().await;
    let c = Container::Posts;
    let mut expected = BTreeSet::new();
    for i in 0..12 {
        let id = format!("p{i}");
        let mut p = post(&id, if i % 3 == 0 { "u2" } else { "u1" }, &date(i));
        if i % 4 == 0 {
            p["userUsername"] = json!("bob");
        }
        if i % 3 != 0 && i % 4 != 0 {
            expected.insert(id.clone());
        }
        store.create(c, &id, p).await.unwrap();
    }
    let mut q = Query::cross_partition()
        .eq("userId", "u1")
        .ne("userUsername", "bob")
        .limit(2);
    let mut seen = BTreeSet::new();
    for _ in 0..50 {
        let page = store.query(c, &q).await.unwrap();
        for id in ids(&page.items) {
            assert!(seen.insert(id), "an item came twice");
        }
        match page.continuation {
            Some(t) => q.continuation = Some(t),
            None => break,
        }
    }
    assert_eq!(seen, expected);
}

/// Read the change feed until it has nothing new (bounded): the items and where to resume.
async fn drain(store: &CosmosStore, c: Container, from: Option<String>) -> (Vec<Value>, String) {
    let mut continuation = from;
    let mut items = Vec::new();
    for _ in 0..50 {
        let page = store.changes(c, continuation.as_deref(), 3).await.unwrap();
        assert!(page.items.len() <= 3);
        continuation = Some(page.continuation);
        if page.items.is_empty() {
            break;
        }
        items.extend(page.items);
    }
    (items, continuation.unwrap())
}

#[tokio::test]
async fn change_feed_spans_every_range_and_redelivers_from_older_checkpoints() {
    let store = cosmos_store().await;
    let c = Container::Posts;

    // Nothing yet: still a continuation to resume from.
    let first = store.changes(c, None, 10).await.unwrap();
    assert!(first.items.is_empty());
    assert!(!first.continuation.is_empty());

    for i in 0..10 {
        let id = format!("p{i}");
        store
            .create(c, &id, post(&id, "u1", &date(i)))
            .await
            .unwrap();
    }
    // One empty page means nothing new anywhere: every range was polled before answering.
    let (items, checkpoint) = drain(&store, c, Some(first.continuation.clone())).await;
    assert_eq!(items.len(), 10, "each change once: {:?}", ids(&items));
    assert_eq!(ids(&items).into_iter().collect::<BTreeSet<_>>().len(), 10);

    let (none, checkpoint) = drain(&store, c, Some(checkpoint)).await;
    assert!(none.is_empty(), "{none:?}");
    let incr = [PatchOp::incr("/likeCount", 1)];
    store.patch(c, "p3", "p3", &incr, None).await.unwrap();
    store.patch(c, "p3", "p3", &incr, None).await.unwrap();
    let (changed, _) = drain(&store, c, Some(checkpoint.clone())).await;
    assert_eq!(ids(&changed), ["p3"]);
    assert_eq!(changed[0]["likeCount"], 2, "the latest version");

    // Resuming from an older checkpoint (a batch that was not applied) delivers it again.
    let (again, _) = drain(&store, c, Some(checkpoint)).await;
    assert_eq!(ids(&again), ["p3"]);

    match store.changes(c, Some("not a token"), 10).await {
        Err(StoreError::BadContinuation(m)) => assert!(m.contains("change feed"), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn each_operation_is_recorded_once_with_its_request_charge() {
    let store = cosmos_store().await;
    let c = Container::Users;
    let user = json!({"id": "u1", "type": "user", "userId": "u1", "username": "ann"});
    let ((), usage) = metrics::scope(async {
        store.create(c, "u1", user.clone()).await.unwrap();
        assert!(store.read(c, "u1", "u1").await.unwrap().is_some());
        assert!(store.read(c, "u1", "missing").await.unwrap().is_none());
        assert!(store.create(c, "u1", user.clone()).await.is_err());
        store
            .query(c, &Query::partition("u1").limit(5))
            .await
            .unwrap();
    })
    .await;
    assert_eq!(usage.operations, 5);
    assert!(usage.request_charge > 0.0, "{usage:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_carry_the_request_charge() {
    let app = TestApp::spawn(cosmos_fixture().await, false).await;
    let user = app.create_user("ann").await;
    let post = app.create_post(&id(&user), "t", "c").await;
    let r = app.like(&id(&post), &id(&user)).await;
    assert_eq!(r.status, 201);
    // The like's four, and the liker's favorite edge.
    assert_eq!(r.store_operations(), 5);
    let charge: f64 = r
        .header("x-request-charge")
        .expect("x-request-charge")
        .parse()
        .unwrap();
    assert!(charge > 0.0);
    let p = id(&post);
    app.settled("the post in the feed", || async {
        app.get("/api/feed")
            .await
            .items()
            .iter()
            .any(|i| i["id"] == p.as_str())
    })
    .await;
}

#[tokio::test]
async fn an_unreachable_account_answers_unavailable_and_fails_fast_after() {
    // Nothing listens on port 1 of this machine: the connection is refused at once.
    let settings = CosmosSettings {
        connection: Some(CosmosConnection {
            endpoint: "https://127.0.0.1:1/".parse().unwrap(),
            auth: CosmosAuth::Key(KEY.into()),
        }),
        ..CosmosSettings::default()
    };
    let store = CosmosStore::new(settings);
    let started = Instant::now();
    let err = store.read(Container::Users, "u1", "u1").await.unwrap_err();
    assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
    assert!(err.is_transient());
    assert!(started.elapsed() < Duration::from_secs(15));
    // Within the retry pause, the next call does not try again.
    let again = Instant::now();
    let err = store
        .count(Container::Posts, &Query::partition("p"))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
    assert!(again.elapsed() < Duration::from_millis(500));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_account_is_a_503_with_retry_after() {
    let settings = CosmosSettings {
        connection: Some(CosmosConnection {
            endpoint: "https://127.0.0.1:1/".parse().unwrap(),
            auth: CosmosAuth::Key(KEY.into()),
        }),
        ..CosmosSettings::default()
    };
    let fixture = Fixture {
        store: Arc::new(CosmosStore::new(settings)),
        dir: None,
    };
    let app = TestApp::spawn(fixture, false).await;
    let r = app.get("/api/users/u1").await;
    r.assert_problem(503);
    assert!(r.header("retry-after").is_some());
    // The listener itself answers at once, whatever the store does.
    assert_eq!(app.get("/").await.status, 200);
}

/// Cosmos DB signals no commits to this process: a feed snapshot holds for its maximum age.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_feed_snapshot_holds_for_its_maximum_age() {
    let app =
        TestApp::spawn_with_feed_cache(cosmos_fixture().await, Duration::from_secs(3600)).await;
    let user = app.create_user("ann").await;
    let projected = |post: &Value| {
        let id = post["id"].as_str().unwrap().to_string();
        let store = app.store.clone();
        async move {
            let feed = store.read(Container::Feed, "post", &id).await.unwrap();
            feed.is_some()
        }
    };
    // Read the store, not the API: the first answer is kept for the hour.
    let post = app.create_post(&id(&user), "t", "c").await;
    blog::pump::drain(&*app.store).await.unwrap();
    assert!(projected(&post).await);
    let r = app.get("/api/feed").await;
    assert_eq!(r.store_operations(), 1);
    assert_eq!(r.items()[0]["id"], post["id"]);
    let r = app.get("/api/feed").await;
    assert_eq!(r.store_operations(), 0, "from the snapshot");
    assert_eq!(r.items()[0]["id"], post["id"]);

    // Within the hour, a later post does not show: the snapshot still holds.
    let later = app.create_post(&id(&user), "later", "c").await;
    blog::pump::drain(&*app.store).await.unwrap();
    assert!(projected(&later).await);
    let r = app.get("/api/feed").await;
    assert_eq!((r.store_operations(), r.items().len()), (0, 1));

    // A deletion in this process is seen at once all the same: the snapshot is dropped.
    assert_eq!(
        app.delete(&format!("/api/posts/{}", id(&post)))
            .await
            .status,
        204
    );
    let r = app.get("/api/feed").await;
    assert_eq!(r.store_operations(), 1, "the snapshot was dropped");
    assert!(
        r.items().iter().all(|p| p["id"] != post["id"]),
        "{:?}",
        r.body
    );

    // With a maximum age of 0 there is no snapshot: every read asks the store.
    let app = TestApp::spawn_with_feed_cache(cosmos_fixture().await, Duration::ZERO).await;
    for _ in 0..2 {
        assert_eq!(app.get("/api/feed").await.store_operations(), 1);
    }
}

/// The search query a real account gets goes through the SDK as it is (planned across the
/// partitions with its order, and sent); the emulator then names the one function it cannot
/// evaluate. What the store suite runs instead differs from it only there
/// (`cosmos_search_query_is_pinned` in `src/store/cosmos/sql.rs`).
#[tokio::test]
async fn the_search_query_a_real_account_gets_reaches_the_emulator() {
    let store = emulated_account().await;
    store
        .create(
            Container::Posts,
            "p1",
            post("p1", "u1", "2026-01-01T00:00:00.000Z"),
        )
        .await
        .unwrap();
    let q = Query::cross_partition()
        .of_kind(blog::domain::Kind::Post)
        .live()
        .containing_words(&blog::store::SEARCHABLE, vec!["t".into()])
        .order_by_creation(blog::store::Order::Desc);
    match store.query(Container::Posts, &q).await {
        Err(StoreError::BadRequest(m)) if m.contains("unknown function: FullTextContains") => {}
        other => panic!("{other:?}"),
    }
}
