//! Database files written by earlier versions of the handler open with today's code: the
//! embedded store migrates them forward and every view answers as before.

use std::path::Path;
use std::sync::Arc;

use blog::domain::Kind;
use blog::store::embedded::{schema, EmbeddedStore};
use blog::store::{Container, Query, Store, SEARCHABLE};
use serde_json::json;

use crate::helpers::{Fixture, TestApp};

const ANA: &str = "da1c77d3-b408-4d73-9ce3-b862115eb2f7";
const BO: &str = "2d52d312-a32b-4163-81d9-77d10ed8010b";
const POST: &str = "7c7f951d-1d40-4e5d-83f6-8eb847381087";

/// A copy of a checked-in file in a temporary directory (the original is never written).
fn copy_of(name: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/embedded")
        .join(name);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("blog.db");
    std::fs::copy(&src, &db).unwrap_or_else(|e| panic!("{}: {e}", src.display()));
    (dir, db)
}

fn user_version(db: &Path) -> u32 {
    rusqlite::Connection::open(db)
        .unwrap()
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap()
}

async fn opens_serves_and_keeps_working(file: &str) {
    let (dir, db) = copy_of(file);
    let store = EmbeddedStore::open(&db).unwrap_or_else(|e| panic!("{file}: {e:#}"));
    assert_eq!(user_version(&db), schema::CURRENT, "{file}");
    // The posts written before search existed are found by their words.
    let search = Query::cross_partition()
        .of_kind(Kind::Post)
        .live()
        .containing_words(&SEARCHABLE, vec!["HELLO".into()]);
    let found = store.query(Container::Posts, &search).await.unwrap();
    assert_eq!(found.items.len(), 1, "{file}: {found:?}");
    assert_eq!(found.items[0]["id"], POST, "{file}");
    let app = TestApp::spawn(
        Fixture {
            store: Arc::new(store),
            dir: Some(dir),
        },
        false,
    )
    .await;

    // Everything the file holds answers as it did.
    assert_eq!(
        app.get(&format!("/api/users/{ANA}")).await.body["username"],
        "ana"
    );
    let post = app.get(&format!("/api/posts/{POST}")).await.body;
    assert_eq!(
        (
            post["title"].clone(),
            post["commentCount"].clone(),
            post["likeCount"].clone()
        ),
        (json!("Hello"), json!(1), json!(1)),
        "{post}"
    );
    let feed = app.get("/api/feed").await;
    assert_eq!(feed.items()[0]["id"], POST);
    let mine = app.get(&format!("/api/users/{ANA}/posts")).await;
    assert_eq!(mine.items().len(), 1);
    let comments = app.get(&format!("/api/posts/{POST}/comments")).await;
    assert_eq!(comments.items()[0]["userId"], BO);

    // And it keeps working: a rename fans out over the old items (the query by author).
    let r = app
        .put(&format!("/api/users/{BO}"), json!({ "username": "bo3" }))
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    app.settled("the rename reaches the old comment and like", || async {
        let c = app.get(&format!("/api/posts/{POST}/comments")).await;
        let l = app.get(&format!("/api/posts/{POST}/likes")).await;
        c.items()[0]["userUsername"] == "bo3" && l.items()[0]["userUsername"] == "bo3"
    })
    .await;
    // Deletes work on the rows written before deletes existed: the like goes, and the post.
    let r = app.delete(&format!("/api/posts/{POST}/likes/{BO}")).await;
    assert_eq!(r.status, 204, "{:?}", r.body);
    assert!(app
        .get(&format!("/api/posts/{POST}/likes"))
        .await
        .items()
        .is_empty());
    assert_eq!(
        app.get(&format!("/api/posts/{POST}")).await.body["likeCount"],
        0
    );
    assert_eq!(app.delete(&format!("/api/posts/{POST}")).await.status, 204);
    app.settled(
        "the deleted post leaves the feed and its author's list",
        || async {
            app.get("/api/feed").await.items().is_empty()
                && app
                    .get(&format!("/api/users/{ANA}/posts"))
                    .await
                    .items()
                    .is_empty()
        },
    )
    .await;
    let dir = app.stop().await.unwrap();

    // Opened again, it is at the current version and nothing more happens to it.
    let db = dir.path().join("blog.db");
    EmbeddedStore::open(&db).unwrap();
    assert_eq!(user_version(&db), schema::CURRENT);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_from_commit_a38adcc_opens() {
    opens_serves_and_keeps_working("a38adcc-user-id.db").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_from_schema_2_gains_deletes() {
    opens_serves_and_keeps_working("00a4957-schema-2.db").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_from_schema_3_gains_search() {
    opens_serves_and_keeps_working("00936de-schema-3.db").await;
}

/// A file at schema 4 (`7fd45ce-schema-4.db`: the schema 3 file, opened by the handler at
/// commit 7fd45ce, with a post tagged `kubernetes` and `cosmos-db` added): its posts are found by
/// their tags' words once it is migrated, and its tag pages and counts answer as they did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_from_schema_4_gains_tags_in_search() {
    let (dir, db) = copy_of("7fd45ce-schema-4.db");
    assert_eq!(user_version(&db), 4);
    let store = EmbeddedStore::open(&db).unwrap();
    assert_eq!(user_version(&db), schema::CURRENT);
    let app = TestApp::spawn(
        Fixture {
            store: Arc::new(store),
            dir: Some(dir),
        },
        false,
    )
    .await;
    let found = app.get("/api/search?q=kubernetes").await;
    assert_eq!(found.status, 200, "{:?}", found.body);
    assert_eq!(found.items().len(), 1, "{:?}", found.body);
    let tagged = found.items()[0]["id"].as_str().unwrap().to_string();
    assert_eq!(found.items()[0]["tags"], json!(["kubernetes", "cosmos-db"]));
    // Words of the title and of a tag together; the older post by its title still.
    let both = app.get("/api/search?q=tagged%20cosmos").await;
    assert_eq!(both.items().len(), 1, "{:?}", both.body);
    let old = app.get("/api/search?q=hello").await;
    assert_eq!(old.items()[0]["id"], POST);
    let page = app.get("/api/tags/cosmos-db/posts").await;
    assert_eq!(page.items()[0]["id"], tagged.as_str());
    let tags = app.get("/api/tags").await;
    assert_eq!(tags.items().len(), 2, "{:?}", tags.body);
    app.settle().await;
    // An edit re-indexes the tags: the old one is no longer found, the new one is.
    let r = app
        .put(
            &format!("/api/posts/{tagged}"),
            json!({ "userId": ANA, "title": "Tagged", "content": "c", "tags": ["nomad"] }),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert!(app.get("/api/search?q=kubernetes").await.items().is_empty());
    assert_eq!(app.get("/api/search?q=nomad").await.items().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_from_before_the_user_id_column_opens() {
    opens_serves_and_keeps_working("c514c3a-parent-no-user-id.db").await;
}

#[tokio::test]
async fn a_file_from_a_newer_handler_is_refused_with_a_clear_error() {
    let (_dir, db) = copy_of("a38adcc-user-id.db");
    EmbeddedStore::open(&db).unwrap();
    rusqlite::Connection::open(&db)
        .unwrap()
        .pragma_update(None, "user_version", schema::CURRENT + 1)
        .unwrap();
    let e = format!("{:#}", EmbeddedStore::open(&db).err().expect("refused"));
    assert!(e.contains("newer"), "{e}");
}
