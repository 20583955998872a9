//! The store suite: what any `Store` implementation must do, written once against the trait.
//! A store runs it with `store_suite!(path::to::fixture_fn);` inside a module named after it.

use std::sync::Arc;

use blog::store::{BatchOp, Container, Order, PatchOp, Query, Store, StoreError, SEARCHABLE};
use serde_json::{json, Value};

/// Instantiate every suite test as a `#[tokio::test]` over stores made by `$fixture`.
#[macro_export]
macro_rules! store_suite {
    ($fixture:path) => {
        $crate::store_suite!(@tests $fixture;
            point_operations, create_conflicts, replace_honours_etags, delete_reports_missing,
            delete_if_match_honours_etags,
            patch_sets_and_increments, patch_is_atomic_under_contention, patch_keeps_identity,
            partition_key_must_match, query_filters_orders_and_stays_in_its_partition,
            query_pages_with_continuation_tokens, bad_continuation_token_is_a_bad_request,
            count_counts_matching_items, cross_partition_query_finds_every_partition,
            batch_succeeds_as_a_whole, batch_fails_as_a_whole, change_feed_latest_version_in_commit_order,
            change_feeds_are_per_container, change_feed_readers_take_turns_without_starving,
            system_properties_are_stamped,
            patch_honours_etags, live_queries_leave_marked_items_out,
            any_of_finds_the_listed_values_across_partitions,
            full_text_finds_live_posts_with_every_word);
    };
    (@tests $fixture:path; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let fixture = $fixture().await;
                $crate::store_suite::$name(fixture.store.clone()).await;
            }
        )*
    };
}

type S = Arc<dyn Store>;

fn user(id: &str, name: &str) -> Value {
    json!({ "id": id, "type": "user", "userId": id, "username": name })
}

fn item(post: &str, id: &str, kind: &str, date: &str) -> Value {
    json!({ "id": id, "type": kind, "postId": post, "userId": "u1", "userUsername": "ana",
            "creationDate": date })
}

fn date(i: u32) -> String {
    format!("2026-01-01T00:00:{:02}.{:03}Z", i / 1000, i % 1000)
}

fn ids(items: &[Value]) -> Vec<&str> {
    items.iter().map(|v| v["id"].as_str().unwrap()).collect()
}

pub async fn point_operations(s: S) {
    assert_eq!(s.read(Container::Users, "u1", "u1").await.unwrap(), None);
    let created = s
        .create(Container::Users, "u1", user("u1", "ana"))
        .await
        .unwrap();
    assert_eq!(created["username"], "ana");
    let read = s.read(Container::Users, "u1", "u1").await.unwrap().unwrap();
    assert_eq!(read["username"], "ana");
    // Same id, other partition: a different item.
    assert_eq!(s.read(Container::Users, "u2", "u1").await.unwrap(), None);
    s.upsert(Container::Users, "u1", user("u1", "bea"))
        .await
        .unwrap();
    s.upsert(Container::Users, "u3", user("u3", "cy"))
        .await
        .unwrap();
    assert_eq!(
        s.read(Container::Users, "u1", "u1").await.unwrap().unwrap()["username"],
        "bea"
    );
    assert_eq!(
        s.read(Container::Users, "u3", "u3").await.unwrap().unwrap()["username"],
        "cy"
    );
    let replaced = s
        .replace(Container::Users, "u1", "u1", user("u1", "dee"), None)
        .await
        .unwrap();
    assert_eq!(replaced["username"], "dee");
    assert!(matches!(
        s.replace(Container::Users, "u9", "u9", user("u9", "x"), None)
            .await,
        Err(StoreError::NotFound)
    ));
}

pub async fn create_conflicts(s: S) {
    s.create(Container::Users, "u1", user("u1", "ana"))
        .await
        .unwrap();
    assert!(matches!(
        s.create(Container::Users, "u1", user("u1", "other")).await,
        Err(StoreError::Conflict)
    ));
    assert_eq!(
        s.read(Container::Users, "u1", "u1").await.unwrap().unwrap()["username"],
        "ana"
    );
}

/// A conditional delete removes the item only at the version named; a write made since wins.
pub async fn delete_if_match_honours_etags(s: S) {
    let v1 = s
        .create(Container::Users, "u1", user("u1", "ana"))
        .await
        .unwrap();
    let old = v1["_etag"].as_str().expect("an _etag").to_string();
    let v2 = s
        .replace(Container::Users, "u1", "u1", user("u1", "bea"), None)
        .await
        .unwrap();
    assert!(matches!(
        s.delete_if_match(Container::Users, "u1", "u1", &old).await,
        Err(StoreError::PreconditionFailed)
    ));
    assert!(s
        .read(Container::Users, "u1", "u1")
        .await
        .unwrap()
        .is_some());
    let now = v2["_etag"].as_str().expect("an _etag");
    s.delete_if_match(Container::Users, "u1", "u1", now)
        .await
        .unwrap();
    assert!(s
        .read(Container::Users, "u1", "u1")
        .await
        .unwrap()
        .is_none());
    assert!(matches!(
        s.delete_if_match(Container::Users, "u1", "u1", now).await,
        Err(StoreError::NotFound)
    ));
}

pub async fn replace_honours_etags(s: S) {
    let v1 = s
        .create(Container::Users, "u1", user("u1", "ana"))
        .await
        .unwrap();
    let etag = v1["_etag"].as_str().expect("an _etag").to_string();
    s.replace(Container::Users, "u1", "u1", user("u1", "bea"), Some(&etag))
        .await
        .unwrap();
    assert!(matches!(
        s.replace(Container::Users, "u1", "u1", user("u1", "cy"), Some(&etag))
            .await,
        Err(StoreError::PreconditionFailed)
    ));
    assert_eq!(
        s.read(Container::Users, "u1", "u1").await.unwrap().unwrap()["username"],
        "bea"
    );
}

pub async fn delete_reports_missing(s: S) {
    s.create(Container::Users, "u1", user("u1", "ana"))
        .await
        .unwrap();
    s.delete(Container::Users, "u1", "u1").await.unwrap();
    assert_eq!(s.read(Container::Users, "u1", "u1").await.unwrap(), None);
    assert!(matches!(
        s.delete(Container::Users, "u1", "u1").await,
        Err(StoreError::NotFound)
    ));
}

pub async fn patch_sets_and_increments(s: S) {
    s.create(Container::Posts, "p1", item("p1", "p1", "post", &date(1)))
        .await
        .unwrap();
    let patched = s
        .patch(
            Container::Posts,
            "p1",
            "p1",
            &[
                PatchOp::set("/title", "hello"),
                PatchOp::incr("/likeCount", 2),
            ],
            None,
        )
        .await
        .unwrap();
    assert_eq!(patched["title"], "hello");
    assert_eq!(patched["likeCount"], 2, "incr creates a missing counter");
    let patched = s
        .patch(
            Container::Posts,
            "p1",
            "p1",
            &[PatchOp::incr("/likeCount", -1)],
            None,
        )
        .await
        .unwrap();
    assert_eq!(patched["likeCount"], 1);
    let read = s.read(Container::Posts, "p1", "p1").await.unwrap().unwrap();
    assert_eq!(read["likeCount"], 1);
    assert_eq!(read["userUsername"], "ana", "untouched fields stay");
    assert!(
        read.as_object()
            .unwrap()
            .keys()
            .all(|k| !k.starts_with("_azsdk")),
        "a server-side patch leaves no client bookkeeping: {read}"
    );
    assert!(matches!(
        s.patch(
            Container::Posts,
            "p9",
            "p9",
            &[PatchOp::incr("/likeCount", 1)],
            None
        )
        .await,
        Err(StoreError::NotFound)
    ));
}

pub async fn patch_is_atomic_under_contention(s: S) {
    s.create(Container::Posts, "p1", item("p1", "p1", "post", &date(1)))
        .await
        .unwrap();
    let tasks: Vec<_> = (0..50)
        .map(|_| {
            let s = s.clone();
            tokio::spawn(async move {
                s.patch(
                    Container::Posts,
                    "p1",
                    "p1",
                    &[PatchOp::incr("/commentCount", 1)],
                    None,
                )
                .await
                .map(drop)
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    let read = s.read(Container::Posts, "p1", "p1").await.unwrap().unwrap();
    assert_eq!(read["commentCount"], 50);
}

pub async fn patch_keeps_identity(s: S) {
    s.create(Container::Users, "u1", user("u1", "ana"))
        .await
        .unwrap();
    assert!(s
        .patch(
            Container::Users,
            "u1",
            "u1",
            &[PatchOp::set("/userId", "u2")],
            None
        )
        .await
        .is_err());
    assert!(s
        .patch(
            Container::Users,
            "u1",
            "u1",
            &[PatchOp::set("/id", "u2")],
            None
        )
        .await
        .is_err());
}

pub async fn partition_key_must_match(s: S) {
    assert!(s
        .create(Container::Users, "u2", user("u1", "ana"))
        .await
        .is_err());
    assert_eq!(s.read(Container::Users, "u1", "u1").await.unwrap(), None);
    assert_eq!(s.read(Container::Users, "u2", "u1").await.unwrap(), None);
}

async fn seed_post(s: &S, post: &str, comments: u32) {
    s.create(Container::Posts, post, item(post, post, "post", &date(0)))
        .await
        .unwrap();
    for i in 0..comments {
        // Created out of date order, so ordering is the store's work.
        let n = (i * 11) % comments;
        s.create(
            Container::Posts,
            post,
            item(post, &format!("c{n:02}"), "comment", &date(n + 1)),
        )
        .await
        .unwrap();
    }
}

pub async fn query_filters_orders_and_stays_in_its_partition(s: S) {
    seed_post(&s, "p1", 5).await;
    seed_post(&s, "p2", 3).await;
    s.create(
        Container::Posts,
        "p1",
        item("p1", "like-u1", "like", &date(9)),
    )
    .await
    .unwrap();
    let q = Query::partition("p1")
        .eq("type", "comment")
        .order_by_creation(Order::Asc)
        .limit(100);
    let page = s.query(Container::Posts, &q).await.unwrap();
    assert_eq!(ids(&page.items), ["c00", "c01", "c02", "c03", "c04"]);
    assert_eq!(page.continuation, None);
    let q = Query::partition("p1")
        .eq("type", "comment")
        .order_by_creation(Order::Desc);
    let page = s.query(Container::Posts, &q).await.unwrap();
    assert_eq!(ids(&page.items), ["c04", "c03", "c02", "c01", "c00"]);
    let q = Query::partition("p1").ne("type", "comment");
    let mut got = ids(&s.query(Container::Posts, &q).await.unwrap().items)
        .into_iter()
        .map(String::from)
        .collect::<Vec<_>>();
    got.sort();
    assert_eq!(got, ["like-u1", "p1"]);
    let empty = s
        .query(
            Container::Posts,
            &Query::partition("nope").eq("type", "comment"),
        )
        .await
        .unwrap();
    assert!(empty.items.is_empty() && empty.continuation.is_none());
}

pub async fn query_pages_with_continuation_tokens(s: S) {
    seed_post(&s, "p1", 7).await;
    let mut q = Query::partition("p1")
        .eq("type", "comment")
        .order_by_creation(Order::Desc)
        .limit(3);
    let mut seen = Vec::new();
    let mut pages = 0;
    loop {
        let page = s.query(Container::Posts, &q).await.unwrap();
        assert!(page.items.len() <= 3);
        seen.extend(ids(&page.items).into_iter().map(String::from));
        pages += 1;
        match page.continuation {
            Some(t) => q.continuation = Some(t),
            None => break,
        }
        assert!(pages < 10, "paging does not end");
    }
    assert_eq!(seen, ["c06", "c05", "c04", "c03", "c02", "c01", "c00"]);
    assert!(pages >= 3);
}

pub async fn bad_continuation_token_is_a_bad_request(s: S) {
    seed_post(&s, "p1", 2).await;
    let q = Query::partition("p1")
        .eq("type", "comment")
        .order_by_creation(Order::Desc)
        .continuation(Some("not a token".into()));
    assert!(matches!(
        s.query(Container::Posts, &q).await,
        Err(StoreError::BadContinuation(_))
    ));
}

pub async fn count_counts_matching_items(s: S) {
    seed_post(&s, "p1", 4).await;
    seed_post(&s, "p2", 2).await;
    let comments = Query::partition("p1").eq("type", "comment");
    assert_eq!(s.count(Container::Posts, &comments).await.unwrap(), 4);
    let likes = Query::partition("p1").eq("type", "like");
    assert_eq!(s.count(Container::Posts, &likes).await.unwrap(), 0);
}

/// `Query::live` keeps items without `deleted` or with anything but `true` there, in queries and
/// counts, in a partition and across partitions.
pub async fn live_queries_leave_marked_items_out(s: S) {
    seed_post(&s, "p1", 4).await;
    let q = Query::partition("p1")
        .eq("type", "comment")
        .order_by_creation(Order::Asc);
    let all = s.query(Container::Posts, &q).await.unwrap().items;
    let (first, second) = (ids(&all)[0].to_string(), ids(&all)[1].to_string());
    let mark = [PatchOp::set("/deleted", true)];
    s.patch(Container::Posts, "p1", &first, &mark, None)
        .await
        .unwrap();
    let unmarked = [PatchOp::set("/deleted", false)];
    s.patch(Container::Posts, "p1", &second, &unmarked, None)
        .await
        .unwrap();

    let live = q.clone().live();
    let found = s.query(Container::Posts, &live).await.unwrap().items;
    assert_eq!(ids(&found), ids(&all)[1..].to_vec());
    assert_eq!(s.count(Container::Posts, &live).await.unwrap(), 3);
    let across = Query::cross_partition().eq("type", "comment").live();
    assert_eq!(s.count(Container::Posts, &across).await.unwrap(), 3);
    // Without `live`, the marked item is still there (until its time to live).
    assert_eq!(s.count(Container::Posts, &q).await.unwrap(), 4);
}

/// The authors of a change-feed batch are read by one query: `any_of` on `userId`, across
/// partitions, finds exactly the listed users, whatever else the container holds.
pub async fn any_of_finds_the_listed_values_across_partitions(s: S) {
    for (id, name) in [("u1", "ana"), ("u2", "bo"), ("u3", "cy")] {
        s.create(Container::Users, id, user(id, name))
            .await
            .unwrap();
    }
    // A post copy of u1's in its partition: not a user, so `of_kind` leaves it out.
    let mut copy = item("p1", "p1", "post", &date(1));
    copy["userId"] = json!("u1");
    s.create(Container::Users, "u1", copy).await.unwrap();
    let mut q = Query::cross_partition()
        .of_kind(blog::domain::Kind::User)
        .any_of(
            "userId",
            ["u1".to_string(), "u3".to_string(), "u9".to_string()],
        )
        .limit(10);
    // Across partitions a store may answer in several pages (Cosmos DB: one per key range).
    let mut found = Vec::new();
    loop {
        let page = s.query(Container::Users, &q).await.unwrap();
        found.extend(ids(&page.items).into_iter().map(String::from));
        match page.continuation {
            Some(t) => q.continuation = Some(t),
            None => break,
        }
    }
    found.sort();
    assert_eq!(found, ["u1", "u3"]);
}

pub async fn cross_partition_query_finds_every_partition(s: S) {
    for (post, who, name) in [
        ("p1", "u1", "old"),
        ("p2", "u1", "new"),
        ("p3", "u2", "old"),
    ] {
        let mut v = item(post, post, "post", &date(1));
        v["userId"] = json!(who);
        v["userUsername"] = json!(name);
        s.create(Container::Posts, post, v).await.unwrap();
    }
    let q = Query::cross_partition()
        .eq("userId", "u1")
        .ne("userUsername", "new")
        .limit(1);
    let mut found = Vec::new();
    let mut q = q;
    loop {
        let page = s.query(Container::Posts, &q).await.unwrap();
        found.extend(ids(&page.items).into_iter().map(String::from));
        match page.continuation {
            Some(t) => q.continuation = Some(t),
            None => break,
        }
    }
    assert_eq!(found, ["p1"]);
}

pub async fn batch_succeeds_as_a_whole(s: S) {
    s.create(Container::Posts, "p1", item("p1", "p1", "post", &date(0)))
        .await
        .unwrap();
    let results = s
        .batch(
            Container::Posts,
            "p1",
            vec![
                BatchOp::Read { id: "p1".into() },
                BatchOp::Create {
                    item: item("p1", "c1", "comment", &date(1)),
                },
                BatchOp::Create {
                    item: item("p1", "c2", "comment", &date(2)),
                },
            ],
        )
        .await
        .unwrap();
    assert_eq!(results.len(), 3);
    assert_eq!(results[0]["id"], "p1");
    assert_eq!(results[1]["id"], "c1");
    assert!(s
        .read(Container::Posts, "p1", "c2")
        .await
        .unwrap()
        .is_some());
}

pub async fn batch_fails_as_a_whole(s: S) {
    // Reading a missing item fails the batch: nothing after it is written.
    let err = s
        .batch(
            Container::Posts,
            "p1",
            vec![
                BatchOp::Read { id: "p1".into() },
                BatchOp::Create {
                    item: item("p1", "c1", "comment", &date(1)),
                },
            ],
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::BatchFailed { index: 0, source } if matches!(**source, StoreError::NotFound)),
        "{err:?}"
    );
    assert_eq!(s.read(Container::Posts, "p1", "c1").await.unwrap(), None);

    // A conflict late in the batch undoes what came before it.
    s.create(
        Container::Posts,
        "p1",
        item("p1", "c1", "comment", &date(1)),
    )
    .await
    .unwrap();
    let err = s
        .batch(
            Container::Posts,
            "p1",
            vec![
                BatchOp::Create {
                    item: item("p1", "c2", "comment", &date(2)),
                },
                BatchOp::Create {
                    item: item("p1", "c1", "comment", &date(3)),
                },
            ],
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::BatchFailed { index: 1, source } if matches!(**source, StoreError::Conflict)),
        "{err:?}"
    );
    assert_eq!(s.read(Container::Posts, "p1", "c2").await.unwrap(), None);
}

/// Read the whole feed from `from`, as a pump would: until a page comes back empty twice.
async fn drain(s: &S, c: Container, from: Option<String>) -> (Vec<Value>, String) {
    let mut cont = from;
    let mut items = Vec::new();
    let mut empty = 0;
    loop {
        let page = s.changes(c, cont.as_deref(), 2).await.unwrap();
        cont = Some(page.continuation.clone());
        if page.items.is_empty() {
            empty += 1;
            if empty == 3 {
                break;
            }
            continue;
        }
        items.extend(page.items);
    }
    (items, cont.unwrap())
}

pub async fn change_feed_latest_version_in_commit_order(s: S) {
    for i in 0..3 {
        s.create(
            Container::Posts,
            "p1",
            item("p1", &format!("c{i}"), "comment", &date(i)),
        )
        .await
        .unwrap();
    }
    s.patch(
        Container::Posts,
        "p1",
        "c0",
        &[PatchOp::set("/content", "v2")],
        None,
    )
    .await
    .unwrap();
    let (items, cont) = drain(&s, Container::Posts, None).await;
    // c0 once, in its latest state, after c1 and c2 which changed before its last change.
    assert_eq!(ids(&items), ["c1", "c2", "c0"]);
    assert_eq!(items[2]["content"], "v2");

    s.patch(
        Container::Posts,
        "p1",
        "c1",
        &[PatchOp::set("/content", "v2")],
        None,
    )
    .await
    .unwrap();
    let (items, _) = drain(&s, Container::Posts, Some(cont)).await;
    assert_eq!(
        ids(&items),
        ["c1"],
        "resuming from a continuation sees only what is new"
    );
}

/// Two readers of one container's change feed, each from its own continuation (the pump's two
/// lanes), taking turns while every partition keeps changing: each reader still sees every
/// partition's changes within a few pages, not only those of the partitions it happens to read
/// first (on Cosmos DB, the feed of a container is read a partition key range at a time).
pub async fn change_feed_readers_take_turns_without_starving(s: S) {
    const PARTITIONS: usize = 12;
    const ROUNDS: usize = 40;
    let write_round = |round: usize| {
        let s = s.clone();
        async move {
            for p in 0..PARTITIONS {
                let pk = format!("turns-{p}");
                s.create(
                    Container::Posts,
                    &pk,
                    item(&pk, &format!("r{round}"), "comment", &date(round as u32)),
                )
                .await
                .unwrap();
            }
        }
    };
    write_round(0).await;
    let mut tokens: [Option<String>; 2] = [None, None];
    let mut seen: [std::collections::BTreeSet<String>; 2] = Default::default();
    for round in 1..=ROUNDS {
        for reader in 0..2 {
            let page = s
                .changes(Container::Posts, tokens[reader].as_deref(), 5)
                .await
                .unwrap();
            seen[reader].extend(
                page.items
                    .iter()
                    .filter_map(|i| i["postId"].as_str().map(String::from)),
            );
            tokens[reader] = Some(page.continuation);
        }
        if seen.iter().all(|s| s.len() == PARTITIONS) {
            return;
        }
        // Every partition changes again before the next turn.
        write_round(round).await;
    }
    panic!(
        "after {ROUNDS} turns the readers had seen changes of only {} and {} of {PARTITIONS} partitions",
        seen[0].len(),
        seen[1].len()
    );
}

pub async fn change_feeds_are_per_container(s: S) {
    s.create(Container::Users, "u1", user("u1", "ana"))
        .await
        .unwrap();
    s.create(Container::Posts, "p1", item("p1", "p1", "post", &date(0)))
        .await
        .unwrap();
    let (users, _) = drain(&s, Container::Users, None).await;
    let (posts, _) = drain(&s, Container::Posts, None).await;
    assert_eq!(ids(&users), ["u1"]);
    assert_eq!(ids(&posts), ["p1"]);
    // Every container's change feed can be read, whether anything projects from it or not,
    // and none carries the others' items.
    for c in Container::ALL {
        let (items, _) = drain(&s, c, None).await;
        let found = ids(&items);
        let elsewhere = |id| !found.contains(&id);
        assert!(
            c == Container::Users || elsewhere("u1"),
            "{}: {found:?}",
            c.name()
        );
        assert!(
            c == Container::Posts || elsewhere("p1"),
            "{}: {found:?}",
            c.name()
        );
    }
}

pub async fn system_properties_are_stamped(s: S) {
    let a = s
        .create(Container::Users, "u1", user("u1", "ana"))
        .await
        .unwrap();
    let b = s
        .patch(
            Container::Users,
            "u1",
            "u1",
            &[PatchOp::set("/username", "bea")],
            None,
        )
        .await
        .unwrap();
    assert!(a["_etag"].is_string() && b["_etag"].is_string());
    assert_ne!(a["_etag"], b["_etag"], "every write changes the etag");
    assert!(b["_ts"].is_number());
}

/// A patch with `if_match` applies only while the item still has that `_etag`.
pub async fn patch_honours_etags(s: S) {
    let (c, u) = (Container::Users, "u1");
    let created = s.create(c, u, user(u, "ana")).await.unwrap();
    let etag = created["_etag"].as_str().unwrap().to_string();
    assert!(
        etag.starts_with('"') && etag.ends_with('"'),
        "{etag}: an HTTP entity tag"
    );
    let renamed = s
        .patch(c, u, u, &[PatchOp::set("/username", "bea")], Some(&etag))
        .await
        .unwrap();
    assert_eq!(renamed["username"], "bea");
    let stale = s
        .patch(c, u, u, &[PatchOp::set("/username", "cy")], Some(&etag))
        .await;
    assert!(
        matches!(stale, Err(StoreError::PreconditionFailed)),
        "{stale:?}"
    );
    let weak = format!("W/{}", renamed["_etag"].as_str().unwrap());
    let weak = s
        .patch(c, u, u, &[PatchOp::set("/username", "cy")], Some(&weak))
        .await;
    assert!(
        matches!(weak, Err(StoreError::PreconditionFailed)),
        "{weak:?}"
    );
    assert_eq!(
        s.read(c, u, u).await.unwrap().unwrap()["username"],
        "bea",
        "a refused patch writes nothing"
    );
    let missing = s
        .patch(
            c,
            "u9",
            "u9",
            &[PatchOp::set("/username", "x")],
            Some(&etag),
        )
        .await;
    assert!(matches!(missing, Err(StoreError::NotFound)), "{missing:?}");
}

/// A post as the service stores it in `posts`, with its title and content.
fn post_with_text(post: &str, i: u32, title: &str, content: &str) -> Value {
    let mut v = item(post, post, "post", &date(i));
    v["title"] = json!(title);
    v["content"] = json!(content);
    v
}

/// Every page of `q`'s results, in order.
async fn all_pages(s: &S, c: Container, mut q: Query) -> Vec<String> {
    let mut found = Vec::new();
    loop {
        let page = s.query(c, &q).await.unwrap();
        found.extend(ids(&page.items).into_iter().map(String::from));
        match page.continuation {
            Some(t) => q.continuation = Some(t),
            None => return found,
        }
    }
}

/// A full-text query across partitions finds the live posts holding every word, in the title
/// or the content (one word in each counts), whatever their case, newest first, page by page;
/// it follows edits, deletion marks and removals, and finds nothing that is not a post.
pub async fn full_text_finds_live_posts_with_every_word(s: S) {
    let posts = [
        ("p1", 1, "Rust on Cosmos", "a first look"),
        ("p2", 2, "Notes", "rust and COSMOS, together"),
        ("p3", 3, "Rust only", "nothing else"),
        ("p4", 4, "Cosmos rust", "the newest"),
        ("p5", 5, "Gardening", "tomatoes"),
    ];
    for (id, i, title, content) in posts {
        s.create(Container::Posts, id, post_with_text(id, i, title, content))
            .await
            .unwrap();
    }
    // A comment that holds the words is not a post.
    let mut comment = item("p5", "c1", "comment", &date(6));
    comment["content"] = json!("rust cosmos");
    s.create(Container::Posts, "p5", comment).await.unwrap();
    let search = |words: &[&str]| {
        Query::cross_partition()
            .of_kind(blog::domain::Kind::Post)
            .live()
            .containing_words(&SEARCHABLE, words.iter().map(|w| w.to_string()).collect())
            .order_by_creation(Order::Desc)
            .limit(1)
    };
    assert_eq!(
        all_pages(&s, Container::Posts, search(&["rust", "cosmos"])).await,
        ["p4", "p2", "p1"]
    );
    assert_eq!(
        all_pages(&s, Container::Posts, search(&["RUST"])).await,
        ["p4", "p3", "p2", "p1"]
    );
    assert_eq!(
        s.count(Container::Posts, &search(&["cosmos"]))
            .await
            .unwrap(),
        3
    );
    assert!(
        all_pages(&s, Container::Posts, search(&["tomatoes", "rust"]))
            .await
            .is_empty()
    );

    // An edit that takes a word out, a counter's change, a deletion mark, a removal.
    let edited = post_with_text("p4", 4, "Gardening", "the newest");
    s.replace(Container::Posts, "p4", "p4", edited, None)
        .await
        .unwrap();
    s.patch(
        Container::Posts,
        "p2",
        "p2",
        &[PatchOp::set("/likeCount", 3)],
        None,
    )
    .await
    .unwrap();
    s.patch(
        Container::Posts,
        "p1",
        "p1",
        &[PatchOp::set("/deleted", true)],
        None,
    )
    .await
    .unwrap();
    s.delete(Container::Posts, "p3", "p3").await.unwrap();
    assert_eq!(
        all_pages(&s, Container::Posts, search(&["rust"])).await,
        ["p2"]
    );
    // Newest first: by creation date on Cosmos DB; on the embedded store in its index's order,
    // the most recently written first, so the edited p4 comes before p5.
    let gardening = if s.kind() == "embedded" {
        ["p4", "p5"]
    } else {
        ["p5", "p4"]
    };
    assert_eq!(
        all_pages(&s, Container::Posts, search(&["gardening"])).await,
        gardening
    );
    // Only the indexed fields may be searched.
    let bad = Query::cross_partition().containing_words(&["userUsername"], vec!["ana".into()]);
    assert!(matches!(
        s.query(Container::Posts, &bad).await,
        Err(StoreError::BadRequest(_))
    ));
}
