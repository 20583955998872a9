//! The store suite and the API suite on the embedded (SQLite) store.

use crate::helpers::embedded_fixture;

mod store {
    use super::*;
    crate::store_suite!(embedded_fixture);
}

mod api {
    use super::*;
    crate::api_suite!(embedded_fixture);
}

mod search {
    use super::*;
    crate::search_suite!(embedded_fixture);
}

mod tags {
    use super::*;
    crate::tags_suite!(embedded_fixture);
}

mod deletes {
    use super::*;
    crate::deletes_suite!(embedded_fixture);
}

mod client {
    use super::*;
    crate::client_suite!(embedded_fixture);
}

mod timeline {
    use super::*;
    crate::timeline_suite!(embedded_fixture);
}

mod lane {
    use super::*;
    crate::lane_suite!(embedded_fixture);
}

mod quarantine {
    use super::*;
    crate::quarantine_suite!(embedded_fixture);
}

mod timeline_read {
    use super::*;
    crate::timeline_read_suite!(embedded_fixture);
}

mod bookmarks {
    use super::*;
    crate::bookmarks_suite!(embedded_fixture);
}

mod mutes {
    use super::*;
    crate::mutes_suite!(embedded_fixture);
}

mod audience {
    use super::*;
    crate::audience_suite!(embedded_fixture);
}

mod live {
    use super::*;
    crate::live_suite!(embedded_fixture);

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn caps_answer_429_per_client_and_503_in_total() {
        crate::live_suite::caps_answer_429_per_client_and_503_in_total().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn bad_input_is_a_400_naming_it() {
        crate::live_suite::bad_input_is_a_400_naming_it().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn streams_end_when_the_server_shuts_down() {
        crate::live_suite::streams_end_when_the_server_shuts_down().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_follower_runs_only_while_streams_are_open() {
        crate::live_suite::the_follower_runs_only_while_streams_are_open().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn under_the_functions_host_streams_end_and_resume() {
        crate::live_suite::under_the_functions_host_streams_end_and_resume().await;
    }
}

mod restart {
    use std::sync::Arc;

    use blog::store::embedded::EmbeddedStore;
    use serde_json::json;

    use crate::helpers::{id, spawn_settling_app, Fixture, TestApp};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_restart_finds_all_data_again() {
        let app = spawn_settling_app().await;
        let user = app.create_user("ana").await;
        let post = app.create_post(&id(&user), "t", "c").await;
        let p = id(&post);
        app.comment(&p, &id(&user), "hi").await;
        app.like(&p, &id(&user)).await;
        app.settled("copies", || async {
            app.get("/api/feed").await.body["items"][0]["likeCount"] == 1
        })
        .await;
        let paths = [
            format!("/api/users/{}", id(&user)),
            format!("/api/posts/{p}"),
            format!("/api/users/{}/posts", id(&user)),
            format!("/api/posts/{p}/comments"),
            format!("/api/posts/{p}/likes"),
            "/api/feed".to_string(),
        ];
        let mut before = Vec::new();
        for path in &paths {
            before.push(app.get(path).await.body);
        }
        let dir = app.stop().await.expect("the store's directory");

        let store = EmbeddedStore::open(&dir.path().join("blog.db")).unwrap();
        let fixture = Fixture {
            store: Arc::new(store),
            dir: Some(dir),
        };
        let app = TestApp::spawn(fixture, true).await;
        for (path, was) in paths.iter().zip(before) {
            assert_eq!(app.get(path).await.body, was, "{path}");
        }
        // And it keeps working where it left off.
        app.comment(&p, &id(&user), "again").await;
        let post = app.get(&format!("/api/posts/{p}")).await.body;
        assert_eq!(post["commentCount"], 2);
        assert_eq!(
            app.post("/api/users", json!({ "username": "bob" }))
                .await
                .status,
            201
        );
    }
}

/// Another connection to the file holding the write lock for a moment (an operations command
/// writing, or SQLite itself: a reader that meets a half-written WAL index takes the write lock
/// to read it again) makes a write wait, never fail.
mod write_lock {
    use std::time::{Duration, Instant};

    use blog::store::embedded::EmbeddedStore;
    use blog::store::{Container, Store};
    use serde_json::json;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_write_waits_for_a_lock_held_for_a_moment_elsewhere() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("blog.db");
        let store = EmbeddedStore::open(&path).unwrap();
        let user = |id: &str| json!({"id": id, "userId": id, "type": "user", "username": id});
        store
            .create(Container::Users, "a", user("a"))
            .await
            .unwrap();

        let other = rusqlite::Connection::open(&path).unwrap();
        other.execute_batch("BEGIN IMMEDIATE").unwrap();
        let held = Instant::now();
        let release = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            other.execute_batch("COMMIT").unwrap();
        });
        let written = store.create(Container::Users, "b", user("b")).await;
        release.join().unwrap();
        assert!(written.is_ok(), "{written:?}");
        assert!(held.elapsed() >= Duration::from_millis(300), "it waited");
        assert!(store
            .read(Container::Users, "b", "b")
            .await
            .unwrap()
            .is_some());
    }
}

mod time_to_live {
    use std::time::{Duration, Instant};

    use blog::store::embedded::EmbeddedStore;
    use blog::store::{BatchOp, Container, Query, Store};
    use serde_json::json;

    use crate::helpers::eventually;

    async fn gone(store: &EmbeddedStore, pk: &str, id: &str) -> bool {
        store
            .read(Container::Posts, pk, id)
            .await
            .unwrap()
            .is_none()
    }

    /// Like Cosmos DB, an item with a positive `ttl` is removed that many seconds after its last
    /// write, in the background (no write needs to come after it); `-1` or no `ttl` never
    /// expires; the removal is not in the change feed.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn expired_items_are_removed_and_others_stay() {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(&dir.path().join("blog.db")).unwrap();
        let item = |id: &str, ttl: Option<i64>| {
            let mut v = json!({"id": id, "postId": "p", "type": "comment", "deleted": true});
            if let Some(t) = ttl {
                v["ttl"] = json!(t);
            }
            v
        };
        for (id, ttl) in [
            ("short", Some(1)),
            ("long", Some(3600)),
            ("never", Some(-1)),
            ("none", None),
        ] {
            store
                .create(Container::Posts, "p", item(id, ttl))
                .await
                .unwrap();
        }
        let feed = store.changes(Container::Posts, None, 100).await.unwrap();
        assert_eq!(feed.items.len(), 4);
        eventually("the expired item removed, with no write after it", || {
            gone(&store, "p", "short")
        })
        .await;
        for id in ["long", "never", "none"] {
            assert!(!gone(&store, "p", id).await, "{id}");
        }
        store
            .create(Container::Posts, "q", json!({"id": "q", "postId": "q"}))
            .await
            .unwrap();
        let after = store
            .changes(Container::Posts, Some(&feed.continuation), 100)
            .await
            .unwrap();
        let ids: Vec<&str> = after
            .items
            .iter()
            .map(|v| v["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, vec!["q"], "the removal is not a change");
        // A rewrite restarts the clock: `long` rewritten with ttl 1 expires in turn.
        let ops = [blog::store::PatchOp::set("/ttl", 1)];
        store
            .patch(Container::Posts, "p", "long", &ops, None)
            .await
            .unwrap();
        eventually("the rewritten item removed", || gone(&store, "p", "long")).await;
    }

    /// A mass delete's marks all expire in the same second: they are removed in the background,
    /// a batch per transaction, so the count goes down in steps rather than at once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn many_expired_items_go_in_the_background_a_batch_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(&dir.path().join("blog.db")).unwrap();
        let n = 3000;
        for chunk in (0..n).collect::<Vec<_>>().chunks(100) {
            let ops: Vec<BatchOp> = chunk
                .iter()
                .map(|i| BatchOp::Create {
                    item: json!({"id": format!("c{i}"), "postId": "p",
                        "type": "comment", "deleted": true, "ttl": 2}),
                })
                .collect();
            store.batch(Container::Posts, "p", ops).await.unwrap();
        }
        let all = Query::partition("p");
        // Every count seen on the way down (no write comes after the marks). The marks may
        // start expiring before the last of them is written (a slow machine takes over the
        // second of their time to live): the first count is what is left then.
        let first = store.count(Container::Posts, &all).await.unwrap();
        assert!(first <= n, "{first}");
        let mut seen = vec![first];
        let deadline = Instant::now() + Duration::from_secs(20);
        while seen.last() != Some(&0) {
            assert!(Instant::now() < deadline, "never removed: {seen:?}");
            let c = store.count(Container::Posts, &all).await.unwrap();
            if seen.last() != Some(&c) {
                seen.push(c);
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert!(
            seen.iter().any(|c| *c > 0 && *c < first),
            "removed in several transactions, seen {seen:?}"
        );
    }
}

mod cors_off {
    use crate::helpers::spawn_app;

    /// Without `BLOG_CORS_ORIGINS` there are no CORS headers: other origins stay out.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn without_origins_there_are_no_cors_headers() {
        let app = spawn_app().await;
        let r = app
            .send(
                app.client
                    .request(reqwest::Method::OPTIONS, app.url("/api/users"))
                    .header("origin", "https://app.example")
                    .header("access-control-request-method", "POST"),
            )
            .await;
        r.assert_problem(405);
        assert!(
            r.headers
                .keys()
                .all(|k| !k.as_str().starts_with("access-control-")),
            "{:?}",
            r.headers
        );
        let r = app
            .send(
                app.client
                    .get(app.url("/api/feed"))
                    .header("origin", "https://app.example"),
            )
            .await;
        assert_eq!(r.status, 200);
        assert_eq!(r.header("access-control-allow-origin"), None);
    }
}

/// The embedded store signals its commits, and the change-feed pump follows that signal rather
/// than its idle poll.
mod push {
    use std::sync::Arc;
    use std::time::Duration;

    use blog::store::Container;
    use serde_json::json;

    use crate::helpers::{embedded_fixture, eventually, id, Fixture, TestApp};
    use crate::hooks::Hooked;

    #[tokio::test]
    async fn a_commit_signals_its_own_container_only() {
        let fixture = embedded_fixture().await;
        let store = &fixture.store;
        let mut users = store.change_notifier(Container::Users).expect("a notifier");
        let mut posts = store.change_notifier(Container::Posts).expect("a notifier");
        users.borrow_and_update();
        posts.borrow_and_update();

        let user = json!({ "id": "u1", "type": "user", "userId": "u1", "username": "ana" });
        store
            .create(Container::Users, "u1", user.clone())
            .await
            .unwrap();
        assert!(
            users.has_changed().unwrap(),
            "a commit to users signals users"
        );
        assert!(!posts.has_changed().unwrap(), "and not posts");

        users.borrow_and_update();
        assert!(store.create(Container::Users, "u1", user).await.is_err());
        assert!(
            !users.has_changed().unwrap(),
            "a write that fails commits nothing and signals nothing"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_pump_projects_on_the_commit_signal_without_polling() {
        let fixture = embedded_fixture().await;
        // An idle poll that never comes round in the test's lifetime.
        let fixture = fixture
            .wrapped(|store| Arc::new(Hooked::new(store).polling_every(Duration::from_secs(3600))));
        let app = TestApp::spawn(fixture, true).await;
        // Let both followers reach their first idle wait.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let user = app.create_user("ana").await;
        let post = app.create_post(&id(&user), "pushed", "c").await;
        eventually("the post reaches the feed without a poll", || async {
            app.get("/api/feed").await.body["items"][0]["id"] == post["id"]
        })
        .await;
    }
    /// The pump waits for the server's first answer before it starts, but not for long: on a
    /// server nobody asks anything it starts on its own.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_pump_starts_without_waiting_for_a_request() {
        let fixture = embedded_fixture().await;
        let store = fixture.store.clone();
        let writes = TestApp::spawn(fixture, false).await;
        let user = writes.create_user("ana").await;
        let post = writes.create_post(&id(&user), "waiting", "c").await;
        // A second server over the same store, with the pump; it is never sent a request.
        let pumping = TestApp::spawn(Fixture { store, dir: None }, true).await;
        eventually("the post reaches the feed", || async {
            writes.get("/api/feed").await.body["items"][0]["id"] == post["id"]
        })
        .await;
        pumping.stop().await;
    }
}

/// The feed's first pages are answered from a snapshot that holds until the projection writes
/// to `feed` again.
mod feed_snapshot {
    use std::time::Duration;

    use blog::store::Container;

    use crate::helpers::{embedded_fixture, id, next_millisecond, spawn_settling_app, TestApp};
    use crate::hooks::Hooked;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_repeated_feed_read_costs_no_store_call_until_the_feed_changes() {
        let app = spawn_settling_app().await;
        let user = app.create_user("ana").await;
        let first = app.create_post(&id(&user), "first", "c").await;
        next_millisecond().await;
        let second = app.create_post(&id(&user), "second", "c").await;
        app.settled("both posts in the feed", || async {
            app.get("/api/feed").await.items().len() == 2
        })
        .await;

        let a = app.get("/api/feed").await;
        let b = app.get("/api/feed").await;
        assert_eq!(b.status, 200);
        assert_eq!(
            b.store_operations(),
            0,
            "the same page again: from the snapshot"
        );
        assert_eq!(b.body, a.body);
        assert_eq!(b.header("content-type"), Some("application/json"));

        // Another page size is another snapshot; a continuation page is cut from the snapshot of
        // the first hundred, so it asks the store once, then not until the feed changes.
        let r = app.get("/api/feed?limit=1").await;
        assert_eq!(r.store_operations(), 1);
        assert_eq!(r.items()[0]["id"], second["id"]);
        assert_eq!(app.get("/api/feed?limit=1").await.store_operations(), 0);
        let token = r.body["continuationToken"].as_str().expect("a second page");
        let next = format!("/api/feed?limit=1&continuationToken={token}");
        for operations in [1, 0] {
            let r = app.get(&next).await;
            assert_eq!(r.store_operations(), operations);
            assert_eq!(r.items()[0]["id"], first["id"]);
        }

        // A new post reaches the feed through the projection, which drops the snapshot.
        let third = app.create_post(&id(&user), "third", "c").await;
        app.settled("the new post heads the feed", || async {
            app.get("/api/feed").await.items()[0]["id"] == third["id"]
        })
        .await;
        let r = app.get("/api/feed").await;
        assert_eq!(r.items().len(), 3);
        assert_eq!(r.store_operations(), 0);
    }

    /// Readers that miss the snapshot at the same moment wait for one query and share its
    /// answer, instead of each asking the store.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reads_that_miss_the_snapshot_together_make_one_query() {
        let slow_feed = Hooked::wrap(|call| {
            Box::pin(async move {
                if call.op == "query" && call.container == Container::Feed {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Ok(())
            })
        });
        let app = TestApp::spawn(embedded_fixture().await.wrapped(slow_feed), false).await;
        let user = app.create_user("ana").await;
        let post = app.create_post(&id(&user), "first", "c").await;
        app.settled("the post in the feed", || async {
            app.get("/api/feed?limit=2").await.items().len() == 1
        })
        .await;

        // A page size not read yet: no snapshot of it.
        let reads = futures::future::join_all((0..8).map(|_| app.get("/api/feed?limit=7"))).await;
        let queries: u32 = reads.iter().map(|r| r.store_operations()).sum();
        assert_eq!(queries, 1, "eight reads at once, one feed query");
        for r in &reads {
            assert_eq!(r.status, 200);
            assert_eq!(r.items()[0]["id"], post["id"]);
        }
        // Another page size is another snapshot, filled by a query of its own.
        assert_eq!(app.get("/api/feed?limit=1").await.store_operations(), 1);
    }

    #[tokio::test]
    async fn a_maximum_age_of_zero_turns_the_snapshot_off() {
        let app = TestApp::spawn_with_feed_cache(embedded_fixture().await, Duration::ZERO).await;
        for _ in 0..2 {
            assert_eq!(app.get("/api/feed").await.store_operations(), 1);
        }
    }
}

/// How the embedded store reads words in a full-text query (docs/api.md, search): what the
/// in-memory emulator's substring stand-in cannot show, so it is tested on this store alone.
mod words {
    use blog::domain::Kind;
    use blog::store::{Container, Order, Query, SEARCHABLE};
    use serde_json::json;

    use crate::helpers::embedded_fixture;

    #[tokio::test]
    async fn words_match_whole_words_folding_case_accents_and_english_endings() {
        let fixture = embedded_fixture().await;
        let s = fixture.store.clone();
        let posts = [
            ("p1", "Category theory", "for cats"),
            ("p2", "Un café à Paris", "CRÈME brûlée"),
            ("p3", "Running notes", "she runs; they ran"),
            ("p4", "co-operation", "e-mail: ana@example.org"),
        ];
        for (i, (id, title, content)) in posts.into_iter().enumerate() {
            let item = json!({ "id": id, "postId": id, "type": "post", "userId": "u1",
                "title": title, "content": content,
                "creationDate": format!("2026-01-01T00:00:0{i}.000Z") });
            s.create(Container::Posts, id, item).await.unwrap();
        }
        let found = |words: &[&str]| {
            let s = s.clone();
            let q = Query::cross_partition()
                .of_kind(Kind::Post)
                .live()
                .containing_words(&SEARCHABLE, words.iter().map(|w| w.to_string()).collect())
                .order_by_creation(Order::Asc);
            async move {
                let page = s.query(Container::Posts, &q).await.unwrap();
                page.items
                    .iter()
                    .map(|v| v["id"].as_str().unwrap().to_string())
                    .collect::<Vec<_>>()
            }
        };
        // Whole words: `cat` is a word of p1 ("cats"), not a part of "Category" only.
        assert_eq!(found(&["cat"]).await, ["p1"]);
        assert_eq!(found(&["categ"]).await, Vec::<String>::new());
        // Case and accents fold, both ways.
        assert_eq!(found(&["CAFE", "creme"]).await, ["p2"]);
        assert_eq!(found(&["brûlée"]).await, ["p2"]);
        assert_eq!(found(&["Brulee", "paris"]).await, ["p2"]);
        // English endings: run, runs, running are one word; "ran" is another.
        assert_eq!(found(&["run"]).await, ["p3"]);
        assert_eq!(found(&["running", "note"]).await, ["p3"]);
        // Punctuation splits words: "co-operation" holds "co" and "operation".
        assert_eq!(found(&["operation"]).await, ["p4"]);
        assert_eq!(found(&["example"]).await, ["p4"]);
        // A quote in a word is a character, never query syntax.
        assert_eq!(found(&["\"cat"]).await, ["p1"]);
        assert_eq!(found(&["cat OR café"]).await, Vec::<String>::new());
    }
}
