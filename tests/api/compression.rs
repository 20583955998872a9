//! Compressed answers (`src/compression.rs`): gzip where the client takes it, the same JSON once
//! decoded, identity for a client that does not ask, and entity tags that tell the two forms
//! apart while conditional requests accept either.

use std::io::Read as _;

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::helpers::{id, spawn_app, spawn_settling_app, TestApp};

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_end(&mut out)
        .expect("a gzip stream");
    out
}

fn vary(r: &reqwest::Response) -> Vec<String> {
    r.headers()
        .get_all("vary")
        .iter()
        .flat_map(|v| v.to_str().unwrap().split(','))
        .map(|v| v.trim().to_ascii_lowercase())
        .collect()
}

async fn get(app: &TestApp, path: &str, encoding: Option<&str>) -> reqwest::Response {
    let mut req = app.client.get(app.url(path));
    if let Some(e) = encoding {
        req = req.header("accept-encoding", e);
    }
    req.send().await.unwrap()
}

#[tokio::test]
async fn the_feed_goes_gzipped_to_a_client_that_asks_and_plain_to_one_that_does_not() {
    let app = spawn_settling_app().await;
    let ana = app.create_user("ana").await;
    for i in 0..5 {
        app.create_post(&id(&ana), &format!("post {i}"), &"words ".repeat(40))
            .await;
    }
    app.settled("the posts reach the feed", || async {
        app.get("/api/feed").await.items().len() == 5
    })
    .await;

    let plain = get(&app, "/api/feed", None).await;
    assert_eq!(plain.status(), StatusCode::OK);
    assert!(plain.headers().get("content-encoding").is_none());
    assert!(vary(&plain).contains(&"accept-encoding".to_string()));
    let plain: Value = serde_json::from_slice(&plain.bytes().await.unwrap()).unwrap();

    let gz = get(&app, "/api/feed", Some("gzip, br")).await;
    assert_eq!(gz.status(), StatusCode::OK);
    assert_eq!(gz.headers()["content-encoding"], "gzip");
    assert_eq!(gz.headers()["content-type"], "application/json");
    assert!(vary(&gz).contains(&"accept-encoding".to_string()));
    let wire = gz.bytes().await.unwrap();
    let decoded: Value = serde_json::from_slice(&gunzip(&wire)).unwrap();
    assert_eq!(decoded, plain);
    assert!(
        wire.len() * 3 < serde_json::to_vec(&plain).unwrap().len(),
        "{} bytes on the wire",
        wire.len()
    );

    // Asked for nothing it takes, or gzip refused: identity.
    for encoding in ["identity", "br", "gzip;q=0"] {
        let r = get(&app, "/api/feed", Some(encoding)).await;
        assert!(r.headers().get("content-encoding").is_none(), "{encoding}");
    }
}

#[tokio::test]
async fn a_small_answer_stays_plain_and_the_web_client_goes_gzipped() {
    let app = spawn_app().await;
    let ana = app.create_user("ana").await;
    let r = get(&app, &format!("/api/users/{}", id(&ana)), Some("gzip")).await;
    assert!(r.headers().get("content-encoding").is_none());
    let r = get(&app, "/api/web/app.js", Some("gzip")).await;
    assert_eq!(r.headers()["content-encoding"], "gzip");
    let body = gunzip(&r.bytes().await.unwrap());
    assert_eq!(body, blog::web::asset("app.js").unwrap().body);
}

#[tokio::test]
async fn the_compressed_forms_tag_differs_and_either_tag_serves_a_condition() {
    let app = spawn_app().await;
    let ana = app.create_user("ana").await;
    let post = app
        .create_post(&id(&ana), "long", &"a long text ".repeat(100))
        .await;
    let path = format!("/api/posts/{}", id(&post));

    let plain = get(&app, &path, None).await;
    let plain_tag = plain.headers()["etag"].to_str().unwrap().to_string();
    let gz = get(&app, &path, Some("gzip")).await;
    assert_eq!(gz.headers()["content-encoding"], "gzip");
    let gz_tag = gz.headers()["etag"].to_str().unwrap().to_string();
    assert_ne!(
        gz_tag, plain_tag,
        "a strong tag differs between representations"
    );
    assert_eq!(
        gz_tag,
        format!("{}-gzip\"", plain_tag.trim_end_matches('"'))
    );

    // Revalidation with the tag of the form held: 304 with that tag.
    for (tag, encoding) in [(&gz_tag, Some("gzip")), (&plain_tag, None)] {
        let mut req = app.client.get(app.url(&path)).header("if-none-match", tag);
        if let Some(e) = encoding {
            req = req.header("accept-encoding", e);
        }
        let r = req.send().await.unwrap();
        assert_eq!(r.status(), StatusCode::NOT_MODIFIED, "{tag}");
        assert_eq!(r.headers()["etag"], tag.as_str());
        assert!(vary(&r).contains(&"accept-encoding".to_string()));
    }
    let other = app
        .client
        .get(app.url(&path))
        .header("if-none-match", "\"0000-gzip\"")
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), StatusCode::OK);

    // An update based on the compressed answer's tag is based on the same state.
    let edit = app
        .send(
            app.client
                .put(app.url(&path))
                .header("if-match", &gz_tag)
                .header("accept-encoding", "gzip")
                .json(&json!({ "userId": id(&ana), "title": "edited", "content": "short" })),
        )
        .await;
    assert_eq!(edit.status, 200, "{:?}", edit.body);
    let stale = app
        .send(
            app.client
                .put(app.url(&path))
                .header("if-match", &gz_tag)
                .json(&json!({ "userId": id(&ana), "title": "again", "content": "x" })),
        )
        .await;
    assert_eq!(stale.status, 412);
}

/// The feed's snapshot is compressed once and sent as it is to every reader taking gzip, and a
/// new snapshot gets a new compressed form: a gzip'd read never shows an older feed than a
/// plain one.
#[tokio::test]
async fn the_feed_snapshot_is_compressed_once_and_never_stale() {
    let app = spawn_settling_app().await;
    let ana = app.create_user("ana").await;
    for i in 0..3 {
        app.create_post(&id(&ana), &format!("post {i}"), &"words ".repeat(40))
            .await;
    }
    app.settled("the posts reach the feed", || async {
        app.get("/api/feed").await.items().len() == 3
    })
    .await;
    let first = get(&app, "/api/feed", Some("gzip")).await;
    assert_eq!(first.headers()["content-encoding"], "gzip");
    let first = first.bytes().await.unwrap();
    let again = get(&app, "/api/feed", Some("gzip")).await;
    assert_eq!(
        again.headers()["x-store-operations"],
        "0",
        "from the snapshot"
    );
    assert!(vary(&again).contains(&"accept-encoding".to_string()));
    assert_eq!(
        again.bytes().await.unwrap(),
        first,
        "the same compressed bytes"
    );

    app.create_post(&id(&ana), "post 3", &"words ".repeat(40))
        .await;
    app.settled("the new post in the gzip'd feed", || async {
        let r = get(&app, "/api/feed", Some("gzip")).await;
        let page: Value = serde_json::from_slice(&gunzip(&r.bytes().await.unwrap())).unwrap();
        page["items"].as_array().unwrap().len() == 4
    })
    .await;
    let plain: Value =
        serde_json::from_slice(&get(&app, "/api/feed", None).await.bytes().await.unwrap()).unwrap();
    let gz = get(&app, "/api/feed", Some("gzip"))
        .await
        .bytes()
        .await
        .unwrap();
    assert_eq!(
        serde_json::from_slice::<Value>(&gunzip(&gz)).unwrap(),
        plain
    );
}
