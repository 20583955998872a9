//! The Cosmos store against the SDK's in-memory emulator: every trait operation, the status
//! mapping the API relies on, paging, the change feed and the request-charge accounting.
//! Every test has `cosmos` in its name: `cargo test cosmos` runs them all.

mod cosmos_emulator;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use blog::settings::{CosmosAuth, CosmosConnection, CosmosSettings};
use blog::store::cosmos::CosmosStore;
use blog::store::{metrics, BatchOp, Container, Order, PatchOp, Query, Store, StoreError};
use cosmos_emulator::cosmos_store;
use serde_json::{json, Value};

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
    format!("2026-01-01T00:00:{:02}.000Z", i)
}

fn ids(items: &[Value]) -> Vec<String> {
    items
        .iter()
        .map(|v| v["id"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn cosmos_point_operations_round_trip() {
    let store = cosmos_store().await;
    assert_eq!(store.kind(), "cosmos");
    let c = Container::Posts;

    let created = store
        .create(c, "p1", post("p1", "u1", &date(1)))
        .await
        .unwrap();
    assert_eq!(created["title"], "t");
    let etag = created["_etag"]
        .as_str()
        .expect("writes return the stored item")
        .to_string();
    assert!(matches!(
        store.create(c, "p1", post("p1", "u1", &date(1))).await,
        Err(StoreError::Conflict)
    ));
    assert_eq!(
        store.read(c, "p1", "p1").await.unwrap().unwrap()["id"],
        "p1"
    );
    assert_eq!(store.read(c, "p1", "nope").await.unwrap(), None);
    assert_eq!(store.read(c, "other", "p1").await.unwrap(), None);

    // Replace honours If-Match; a stale etag is a precondition failure.
    let mut changed = post("p1", "u1", &date(1));
    changed["title"] = json!("t2");
    let replaced = store
        .replace(c, "p1", "p1", changed.clone(), Some(&etag))
        .await
        .unwrap();
    assert_eq!(replaced["title"], "t2");
    assert!(matches!(
        store
            .replace(c, "p1", "p1", changed.clone(), Some(&etag))
            .await,
        Err(StoreError::PreconditionFailed)
    ));
    assert!(matches!(
        store.replace(c, "p1", "missing", changed, None).await,
        Err(StoreError::BadRequest(_))
    ));
    let mut missing = post("p9", "u1", &date(1));
    missing["title"] = json!("x");
    assert!(matches!(
        store.replace(c, "p9", "p9", missing, None).await,
        Err(StoreError::NotFound)
    ));

    let up = store
        .upsert(c, "p2", post("p2", "u1", &date(2)))
        .await
        .unwrap();
    assert_eq!(up["id"], "p2");
    assert!(store
        .upsert(c, "p2", post("p2", "u1", &date(3)))
        .await
        .is_ok());

    // The item's partition key property must match the key it is written under.
    assert!(matches!(
        store.create(c, "p3", post("p4", "u1", &date(1))).await,
        Err(StoreError::BadRequest(_))
    ));

    store.delete(c, "p2", "p2").await.unwrap();
    assert!(matches!(
        store.delete(c, "p2", "p2").await,
        Err(StoreError::NotFound)
    ));
    assert_eq!(store.read(c, "p2", "p2").await.unwrap(), None);
}

#[tokio::test]
async fn cosmos_patch_is_server_side_without_tracking_marker() {
    let store = cosmos_store().await;
    let c = Container::Posts;
    store
        .create(c, "p1", post("p1", "u1", &date(1)))
        .await
        .unwrap();

    let patched = store
        .patch(
            c,
            "p1",
            "p1",
            &[
                PatchOp::incr("/commentCount", 1),
                PatchOp::set("/title", "new"),
            ],
        )
        .await
        .unwrap();
    assert_eq!(patched["commentCount"], 1);
    assert_eq!(patched["title"], "new");

    // Concurrent increments all land (a client-side read + replace would lose some).
    let like = [PatchOp::incr("/likeCount", 1)];
    let incrs = (0..20).map(|_| store.patch(c, "p1", "p1", &like));
    for r in futures::future::join_all(incrs).await {
        r.unwrap();
    }
    let stored = store.read(c, "p1", "p1").await.unwrap().unwrap();
    assert_eq!(stored["likeCount"], 20);
    assert_eq!(stored["commentCount"], 1);
    assert!(
        stored.get("_azsdkPatchTracking").is_none(),
        "a client-side patch left its marker: {stored}"
    );
    // (Cosmos DB creates a missing counter on `incr`; the in-memory emulator answers 400
    // "missing path" instead, so that case is not tested here. The service's items always
    // carry their counters from creation.)

    assert!(matches!(
        store
            .patch(c, "p1", "nope", &[PatchOp::incr("/likeCount", 1)])
            .await,
        Err(StoreError::NotFound)
    ));
}

#[tokio::test]
async fn cosmos_batch_failures_name_the_failing_operation() {
    let store = cosmos_store().await;
    let c = Container::Posts;
    let add = |item: Value| vec![BatchOp::Read { id: "p1".into() }, BatchOp::Create { item }];

    // The post is missing: operation 0 fails with NotFound, and nothing is written.
    let err = store
        .batch(c, "p1", add(comment("p1", "c1", &date(1))))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::BatchFailed { index: 0, source } if matches!(**source, StoreError::NotFound)),
        "{err:?}"
    );
    assert_eq!(store.read(c, "p1", "c1").await.unwrap(), None);

    store
        .create(c, "p1", post("p1", "u1", &date(1)))
        .await
        .unwrap();
    let results = store
        .batch(c, "p1", add(comment("p1", "c1", &date(2))))
        .await
        .unwrap();
    assert_eq!(results.len(), 2);
    assert_eq!(results[0]["id"], "p1");
    assert_eq!(results[1]["id"], "c1");

    // A repeat (same id) fails at operation 1 with Conflict, as a repeat like does.
    let err = store
        .batch(c, "p1", add(comment("p1", "c1", &date(3))))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::BatchFailed { index: 1, source } if matches!(**source, StoreError::Conflict)),
        "{err:?}"
    );
    assert_eq!(
        store.read(c, "p1", "c1").await.unwrap().unwrap()["creationDate"],
        date(2)
    );

    // Upsert, replace and delete in one batch, all or nothing.
    let mut c1 = comment("p1", "c1", &date(2));
    c1["content"] = json!("edited");
    let results = store
        .batch(
            c,
            "p1",
            vec![
                BatchOp::Upsert {
                    item: comment("p1", "c2", &date(4)),
                },
                BatchOp::Replace {
                    id: "c1".into(),
                    item: c1,
                },
                BatchOp::Delete { id: "c2".into() },
            ],
        )
        .await
        .unwrap();
    assert_eq!(results[1]["content"], "edited");
    assert_eq!(results[2], Value::Null);
    assert_eq!(store.read(c, "p1", "c2").await.unwrap(), None);
    assert!(store.batch(c, "p1", Vec::new()).await.unwrap().is_empty());
}

#[tokio::test]
async fn cosmos_query_orders_and_pages_with_continuation_tokens() {
    let store = cosmos_store().await;
    let c = Container::Posts;
    store
        .create(c, "p1", post("p1", "u1", &date(0)))
        .await
        .unwrap();
    // Written out of order, so the order comes from the query.
    for i in [5, 1, 7, 3, 2, 6, 4] {
        store
            .create(c, "p1", comment("p1", &format!("c{i}"), &date(i)))
            .await
            .unwrap();
    }
    store
        .create(c, "p2", comment("p2", "other", &date(1)))
        .await
        .unwrap();

    let q = Query::partition("p1")
        .eq("type", "comment")
        .order_by_creation(Order::Asc)
        .limit(3);
    let mut seen = Vec::new();
    let mut q2 = q.clone();
    let mut pages = 0;
    loop {
        let page = store.query(c, &q2).await.unwrap();
        pages += 1;
        assert!(page.items.len() <= 3);
        seen.extend(ids(&page.items));
        match page.continuation {
            Some(t) => q2 = q2.continuation(Some(t)),
            None => break,
        }
        assert!(pages < 10, "paging does not end");
    }
    assert_eq!(seen, ["c1", "c2", "c3", "c4", "c5", "c6", "c7"]);

    let newest = store
        .query(
            c,
            &Query::partition("p1")
                .eq("type", "comment")
                .order_by_creation(Order::Desc)
                .limit(2),
        )
        .await
        .unwrap();
    assert_eq!(ids(&newest.items), ["c7", "c6"]);
    assert!(newest.continuation.is_some());

    // Everything fits in one page: no continuation.
    let all = store
        .query(c, &Query::partition("p1").eq("type", "comment").limit(100))
        .await
        .unwrap();
    assert_eq!(all.items.len(), 7);
    assert_eq!(all.continuation, None);

    // Filters: `!=`, and an unknown partition is just empty.
    let not_c1 = store
        .query(
            c,
            &Query::partition("p1")
                .eq("type", "comment")
                .ne("id", "c1")
                .limit(100),
        )
        .await
        .unwrap();
    assert_eq!(not_c1.items.len(), 6);
    let none = store
        .query(c, &Query::partition("zzz").limit(10))
        .await
        .unwrap();
    assert!(none.items.is_empty() && none.continuation.is_none());

    // An offset skips the newest ones.
    let skipped = store
        .query(
            c,
            &Query::partition("p1")
                .eq("type", "comment")
                .order_by_creation(Order::Desc)
                .offset(5)
                .limit(10),
        )
        .await
        .unwrap();
    assert_eq!(ids(&skipped.items), ["c2", "c1"]);

    // A token that is not one the store handed out is the caller's bad request.
    for bad in ["garbage", "c1.!!!", "c1.e30"] {
        match store
            .query(c, &q.clone().continuation(Some(bad.into())))
            .await
        {
            Err(StoreError::BadRequest(m)) => assert!(m.contains("continuation"), "{m}"),
            other => panic!("{bad}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn cosmos_counts_in_a_partition_and_across_partitions() {
    let store = cosmos_store().await;
    let c = Container::Posts;
    for p in ["p1", "p2", "p3"] {
        store.create(c, p, post(p, "u1", &date(0))).await.unwrap();
    }
    for i in 0..4 {
        store
            .create(c, "p1", comment("p1", &format!("c{i}"), &date(i)))
            .await
            .unwrap();
    }
    store
        .create(c, "p2", comment("p2", "x", &date(1)))
        .await
        .unwrap();
    let q = Query::partition("p1").eq("type", "comment");
    assert_eq!(store.count(c, &q).await.unwrap(), 4);
    assert_eq!(
        store
            .count(c, &Query::partition("p9").eq("type", "comment"))
            .await
            .unwrap(),
        0
    );
    let all = Query::cross_partition().eq("type", "comment");
    assert_eq!(store.count(c, &all).await.unwrap(), 5);
    assert_eq!(
        store
            .count(c, &Query::cross_partition().eq("type", "post"))
            .await
            .unwrap(),
        3
    );
}

#[tokio::test]
async fn cosmos_cross_partition_query_pages_through_every_partition() {
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

/// Read the change feed until it has nothing new (bounded), returning the items and the
/// continuation after them.
async fn drain(
    store: &CosmosStore,
    c: Container,
    mut continuation: Option<String>,
) -> (Vec<Value>, String) {
    let mut items = Vec::new();
    let mut empty_in_a_row = 0;
    for _ in 0..50 {
        let page = store.changes(c, continuation.as_deref(), 3).await.unwrap();
        assert!(
            page.items.len() <= 3 * 4,
            "a page holds at most a page per range"
        );
        continuation = Some(page.continuation);
        if page.items.is_empty() {
            empty_in_a_row += 1;
            if empty_in_a_row == 2 {
                break;
            }
        } else {
            empty_in_a_row = 0;
            items.extend(page.items);
        }
    }
    (items, continuation.unwrap())
}

#[tokio::test]
async fn cosmos_change_feed_delivers_each_change_once_in_its_latest_version() {
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
    // One call sees pending changes even when they sit in another range than the first.
    let one = store
        .changes(c, Some(&first.continuation), 100)
        .await
        .unwrap();
    assert!(!one.items.is_empty());

    let (items, checkpoint) = drain(&store, c, Some(first.continuation.clone())).await;
    let got: BTreeSet<String> = ids(&items).into_iter().collect();
    assert_eq!(got.len(), 10, "{got:?}");
    assert_eq!(items.len(), 10, "each change once");

    // Caught up: resuming from the checkpoint finds nothing new, until something changes.
    let (none, checkpoint) = drain(&store, c, Some(checkpoint)).await;
    assert!(none.is_empty(), "{none:?}");
    store
        .patch(c, "p3", "p3", &[PatchOp::incr("/likeCount", 1)])
        .await
        .unwrap();
    store
        .patch(c, "p3", "p3", &[PatchOp::incr("/likeCount", 1)])
        .await
        .unwrap();
    let (changed, _) = drain(&store, c, Some(checkpoint.clone())).await;
    assert_eq!(ids(&changed), ["p3"]);
    assert_eq!(changed[0]["likeCount"], 2, "the latest version");

    // Resuming from an older checkpoint (a batch that was not applied) delivers it again.
    let (again, _) = drain(&store, c, Some(checkpoint)).await;
    assert_eq!(ids(&again), ["p3"]);

    // From the beginning: every item once, in its latest version.
    let (all, _) = drain(&store, c, None).await;
    assert_eq!(all.len(), 10);

    match store.changes(c, Some("not a token"), 10).await {
        Err(StoreError::BadRequest(m)) => assert!(m.contains("continuation"), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn cosmos_records_each_operation_once_with_its_request_charge() {
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

#[tokio::test]
async fn cosmos_unreachable_account_answers_unavailable_and_fails_fast_after() {
    // Nothing listens on port 1 of this machine: the connection is refused at once.
    let settings = CosmosSettings {
        connection: Some(CosmosConnection {
            endpoint: "https://127.0.0.1:1/".into(),
            auth: CosmosAuth::Key("dGVzdGtleQ==".into()),
        }),
        ..CosmosSettings::default()
    };
    let store = CosmosStore::new(settings);
    let started = Instant::now();
    let err = store.read(Container::Users, "u1", "u1").await.unwrap_err();
    assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
    assert!(err.is_transient());
    assert!(started.elapsed() < Duration::from_secs(15));
    // The next call within the retry pause does not try again.
    let again = Instant::now();
    let err = store
        .count(Container::Posts, &Query::partition("p"))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
    assert!(again.elapsed() < Duration::from_millis(500));
}
