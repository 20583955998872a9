//! What one timeline page costs and shows (docs/timeline.md), and the cap on follows, written once
//! and instantiated per store with `timeline_read_suite!(path::to::fixture_fn);`. The app runs
//! without the change feed: the tests write the timeline's items themselves, so what a page
//! shows comes from the read alone.

use std::sync::Arc;
use std::time::{Duration, Instant};

use blog::domain::follows::{self, MergeMarker, MAX_FOLLOWING, REF_USER, TIMELINE};
use blog::domain::{to_value, Kind, Post};
use blog::projection::over_limit;
use blog::store::{Container, Query, Store};
use futures::stream::{self, StreamExt};
use serde_json::{json, Value};

use crate::api_suite::url_encode;
use crate::helpers::{id, TestApp};

#[macro_export]
macro_rules! timeline_read_suite {
    ($fixture:path) => {
        $crate::timeline_read_suite!(@tests $fixture;
            a_reader_of_many_merged_authors_pays_two_queries_and_a_read_per_post,
            counts_are_read_from_the_post_when_shown,
            a_post_deleted_meanwhile_is_left_out,
            a_user_follows_at_most_the_cap);
    };
    (@tests $fixture:path; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let app = $crate::helpers::TestApp::spawn($fixture().await, false).await;
                $crate::timeline_read_suite::$name(&app).await;
            }
        )*
    };
}

fn post(author: &str, n: usize, likes: u64) -> Post {
    Post {
        id: format!("{author}-p{n}"),
        kind: Kind::Post,
        post_id: format!("{author}-p{n}"),
        user_id: author.into(),
        user_username: format!("{author}-name"),
        title: format!("title {n}"),
        description: None,
        content: "c".into(),
        comment_count: likes / 2,
        like_count: likes,
        creation_date: String::new(),
        updated_at: None,
        bookmark_count: 0,
        tags: Vec::new(),
    }
}

fn date(seconds: usize) -> String {
    format!(
        "2026-01-01T{:02}:{:02}:{:02}.000Z",
        seconds / 3600,
        seconds / 60 % 60,
        seconds % 60
    )
}

/// The entry of `p` in `owner`'s timeline as it is written now: what changes rarely, no counts.
fn entry(owner: &str, p: &Post) -> Value {
    json!({
        "id": follows::timeline_id(&p.id),
        "type": TIMELINE,
        "userId": owner,
        REF_USER: p.user_id,
        "postId": p.post_id,
        "userUsername": p.user_username,
        "title": p.title,
        "content": p.content,
        "creationDate": p.creation_date,
    })
}

async fn first_page(app: &TestApp, user: &str) -> crate::helpers::Resp {
    app.get(&format!("/api/users/{user}/timeline?limit=20"))
        .await
}

async fn shown_ids(app: &TestApp, user: &str) -> Vec<String> {
    let r = app.get(&format!("/api/users/{user}/timeline")).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    r.items().iter().map(id).collect()
}

/// Post `id` as stored.
async fn stored_post(app: &TestApp, id: &str) -> Post {
    let stored = app.store.read(Container::Posts, id, id).await.unwrap();
    serde_json::from_value(stored.expect("the post")).unwrap()
}

/// Write `items` (container, partition key, item), sixteen at a time.
async fn write_all(store: &Arc<dyn Store>, items: Vec<(Container, String, Value)>) {
    stream::iter(items)
        .for_each_concurrent(16, |(c, pk, item)| {
            let store = store.clone();
            async move {
                store.upsert(c, &pk, item).await.expect("seeded");
            }
        })
        .await;
}

/// Every page of `user`'s timeline, `limit` at a time: the posts (id, likeCount,
/// commentCount) and each page's store operations.
async fn pages(app: &TestApp, user: &str, limit: u32) -> (Vec<(String, u64, u64)>, Vec<u32>) {
    let (mut posts, mut ops) = (Vec::new(), Vec::new());
    let mut token: Option<String> = None;
    loop {
        let mut path = format!("/api/users/{user}/timeline?limit={limit}");
        if let Some(t) = &token {
            path += &format!("&continuationToken={}", url_encode(t));
        }
        let r = app.get(&path).await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        ops.push(r.store_operations());
        posts.extend(r.items().iter().map(|p| {
            (
                id(p),
                p["likeCount"].as_u64().unwrap(),
                p["commentCount"].as_u64().unwrap(),
            )
        }));
        token = r.body["continuationToken"].as_str().map(String::from);
        if token.is_none() {
            return (posts, ops);
        }
    }
}

/// A reader following 400 authors over the fan-out limit, and one copied author: each page of
/// 20 costs at most 22 store operations (the reader's partition, the merged authors' partition,
/// a point read per post shown) and shows the newest posts of all of them, with their counts.
pub async fn a_reader_of_many_merged_authors_pays_two_queries_and_a_read_per_post(app: &TestApp) {
    let reader = "reader";
    let mut seeded = Vec::new();
    let mut all = Vec::new();
    for a in 0..400 {
        let author = format!("author{a:03}");
        let mut p = post(&author, 0, a as u64);
        // Spread over time, authors interleaved with the copied one's posts below.
        p.creation_date = date(10 * a + 5);
        seeded.push((
            Container::Timelines,
            reader.into(),
            MergeMarker::new(reader, &author).to_item(),
        ));
        seeded.push((
            Container::Feed,
            over_limit::PARTITION.into(),
            over_limit::item(&p),
        ));
        // The author's own copy of the post, where a timeline read looked before.
        seeded.push((Container::Users, author.clone(), to_value(&p.summary())));
        seeded.push((Container::Posts, p.id.clone(), to_value(&p)));
        all.push(p);
    }
    for n in 0..30 {
        let mut p = post("copied", n, 1000 + n as u64);
        p.creation_date = date(4000 - 130 * n);
        seeded.push((Container::Timelines, reader.into(), entry(reader, &p)));
        seeded.push((Container::Posts, p.id.clone(), to_value(&p)));
        all.push(p);
    }
    write_all(&app.store, seeded).await;
    all.sort_by(|a, b| (&b.creation_date, &b.id).cmp(&(&a.creation_date, &a.id)));
    let newest: Vec<(String, u64, u64)> = all
        .iter()
        .take(follows::TIMELINE_SIZE)
        .map(|p| (p.id.clone(), p.like_count, p.comment_count))
        .collect();
    assert!(
        newest.iter().any(|p| p.0.starts_with("copied"))
            && newest.iter().any(|p| p.0.starts_with("author")),
        "both kinds among the newest"
    );

    let (shown, ops) = pages(app, reader, 20).await;
    assert_eq!(
        shown, newest,
        "the newest posts, newest first, with their counts"
    );
    assert_eq!(ops.len(), 5, "five pages of 20: {ops:?}");
    assert!(ops.iter().all(|&n| n <= 22), "operations per page: {ops:?}");
}

/// A like shows on a follower's timeline page, within the snapshot's bound, though no timeline
/// item was written after it: the counts are read from the post when it is shown. Counts an
/// entry still holds from before are not shown.
pub async fn counts_are_read_from_the_post_when_shown(app: &TestApp) {
    let ana = id(&app.create_user("ana").await);
    let bob = id(&app.create_user("bob").await);
    let p = stored_post(app, &id(&app.create_post(&bob, "hello", "world").await)).await;
    let mut old = entry(&ana, &p);
    old["likeCount"] = 99.into();
    old["commentCount"] = 98.into();
    app.store
        .upsert(Container::Timelines, &ana, old)
        .await
        .unwrap();
    let r = first_page(app, &ana).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.items().len(), 1);
    assert_eq!(r.items()[0]["id"], p.id.as_str());
    assert_eq!(r.items()[0]["title"], "hello");
    assert_eq!(
        (
            r.items()[0]["likeCount"].as_u64(),
            r.items()[0]["commentCount"].as_u64()
        ),
        (Some(0), Some(0))
    );
    assert!(r.store_operations() <= 2, "{}", r.store_operations());
    let entry_before = app
        .store
        .read(Container::Timelines, &ana, &follows::timeline_id(&p.id))
        .await
        .unwrap();

    let liked = Instant::now();
    app.like(&p.id, &ana).await;
    app.comment(&p.id, &bob, "thanks").await;
    // The snapshot's bound: the default BLOG_FEED_CACHE_MS where the store does not signal
    // its commits, none where it does; the slack is the test's own pace.
    let bound = blog::api::feed_cache::DEFAULT_MAX_AGE + Duration::from_secs(2);
    loop {
        let r = first_page(app, &ana).await;
        assert!(r.store_operations() <= 2, "{}", r.store_operations());
        let item = &r.items()[0];
        if (item["likeCount"].as_u64(), item["commentCount"].as_u64()) == (Some(1), Some(1)) {
            break;
        }
        assert!(
            liked.elapsed() < bound,
            "the like is not shown after {:?}: {item}",
            liked.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let entry_after = app
        .store
        .read(Container::Timelines, &ana, &follows::timeline_id(&p.id))
        .await
        .unwrap();
    assert_eq!(entry_before, entry_after, "no timeline item was written");
}

/// A post deleted after its entry was written is not shown, though the entry is still there.
pub async fn a_post_deleted_meanwhile_is_left_out(app: &TestApp) {
    let ana = id(&app.create_user("ana").await);
    let bob = id(&app.create_user("bob").await);
    let mut made = Vec::new();
    for n in 0..3 {
        let p = stored_post(
            app,
            &id(&app.create_post(&bob, &format!("t{n}"), "c").await),
        )
        .await;
        app.store
            .upsert(Container::Timelines, &ana, entry(&ana, &p))
            .await
            .unwrap();
        made.push(p.id);
        crate::helpers::next_millisecond().await;
    }
    let newest_first: Vec<String> = made.iter().rev().cloned().collect();
    assert_eq!(shown_ids(app, &ana).await, newest_first);
    assert_eq!(
        app.delete(&format!("/api/posts/{}", made[1])).await.status,
        204
    );
    assert!(app
        .store
        .read(Container::Timelines, &ana, &follows::timeline_id(&made[1]))
        .await
        .unwrap()
        .is_some());
    assert_eq!(
        shown_ids(app, &ana).await,
        vec![made[2].clone(), made[0].clone()]
    );
}

/// A user following the most users one may follow is refused a new follow (409, nothing
/// written); repeating a follow made is still fine, and an unfollow makes room.
pub async fn a_user_follows_at_most_the_cap(app: &TestApp) {
    let ana = id(&app.create_user("ana").await);
    let bob = id(&app.create_user("bob").await);
    let cy = id(&app.create_user("cy").await);
    let edges = (0..MAX_FOLLOWING - 1)
        .map(|i| {
            let other = format!("someone{i:04}");
            let e = follows::Edge::new(
                follows::FollowKind::Following,
                &ana,
                &other,
                "someone",
                &date(i),
            )
            .to_item();
            (Container::Users, ana.clone(), e)
        })
        .collect();
    write_all(&app.store, edges).await;
    let follows_of = || {
        Query::partition(ana.as_str())
            .eq("type", follows::FOLLOWING)
            .live()
    };
    let path = |x: &str| format!("/api/users/{ana}/following/{x}");
    // The last one allowed.
    assert_eq!(app.put(&path(&cy), Value::Null).await.status, 204);
    let r = app.put(&path(&bob), Value::Null).await;
    r.assert_problem(409);
    assert!(
        r.body["detail"].as_str().unwrap().contains("1000"),
        "{:?}",
        r.body
    );
    assert!(app
        .store
        .read(Container::Users, &ana, &follows::following_id(&bob))
        .await
        .unwrap()
        .is_none());
    assert_eq!(
        app.store
            .count(Container::Users, &follows_of())
            .await
            .unwrap(),
        MAX_FOLLOWING as u64
    );
    // A follow made may be repeated.
    assert_eq!(app.put(&path(&cy), Value::Null).await.status, 204);
    // An unfollow makes room.
    assert_eq!(app.delete(&path(&cy)).await.status, 204);
    assert_eq!(app.put(&path(&bob), Value::Null).await.status, 204);
    // And the room is taken again.
    app.put(&path(&cy), Value::Null).await.assert_problem(409);
}
