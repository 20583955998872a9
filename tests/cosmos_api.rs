//! The HTTP API and the in-process change-feed pump on the Cosmos store (SDK in-memory emulator):
//! the flows that depend on Cosmos-specific behaviour (batch status mapping, server-side
//! increments, request charges, the full-container change feed).

mod cosmos_emulator;

use std::sync::Arc;
use std::time::Duration;

use blog::store::Store;
use blog::{pump, AppState};
use serde_json::{json, Value};

struct App {
    base: String,
    http: reqwest::Client,
    _tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for App {
    fn drop(&mut self) {
        for t in &self._tasks {
            t.abort();
        }
    }
}

async fn cosmos_app() -> App {
    let store: Arc<dyn Store> = Arc::new(cosmos_emulator::cosmos_store().await);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/api", listener.local_addr().unwrap());
    let app = blog::app(AppState::new(store.clone()));
    let mut tasks = vec![tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    })];
    tasks.extend(pump::spawn(store));
    App {
        base,
        http: reqwest::Client::new(),
        _tasks: tasks,
    }
}

impl App {
    async fn post(&self, path: &str, body: Value) -> reqwest::Response {
        self.http
            .post(format!("{}{path}", self.base))
            .json(&body)
            .send()
            .await
            .unwrap()
    }

    async fn get(&self, path: &str) -> reqwest::Response {
        self.http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap()
    }
}

fn header(r: &reqwest::Response, name: &str) -> Option<String> {
    r.headers()
        .get(name)
        .map(|v| v.to_str().unwrap().to_string())
}

#[tokio::test]
async fn cosmos_api_flow_with_counters_likes_and_feed() {
    let app = cosmos_app().await;

    let r = app.post("/users", json!({"username": "ann"})).await;
    assert_eq!(r.status(), 201);
    assert_eq!(header(&r, "x-store-operations").as_deref(), Some("1"));
    let charge: f64 = header(&r, "x-request-charge")
        .expect("the request charge is reported")
        .parse()
        .unwrap();
    assert!(charge > 0.0);
    let user: Value = r.json().await.unwrap();
    assert!(
        user.get("_etag").is_none(),
        "system properties are not returned"
    );
    let uid = user["id"].as_str().unwrap().to_string();

    let r = app
        .post(
            "/posts",
            json!({"userId": uid, "title": "Hello", "content": "World"}),
        )
        .await;
    assert_eq!(r.status(), 201);
    let post: Value = r.json().await.unwrap();
    let pid = post["id"].as_str().unwrap().to_string();

    // A comment or like on a missing post: the batch's first operation fails with 404.
    let r = app
        .post(
            "/posts/nope/comments",
            json!({"userId": uid, "content": "hi"}),
        )
        .await;
    assert_eq!(r.status(), 404);
    let r = app.post("/posts/nope/likes", json!({"userId": uid})).await;
    assert_eq!(r.status(), 404);

    let r = app
        .post(
            &format!("/posts/{pid}/comments"),
            json!({"userId": uid, "content": "hi"}),
        )
        .await;
    assert_eq!(r.status(), 201);
    assert_eq!(header(&r, "x-store-operations").as_deref(), Some("3"));

    // A repeat like: the batch's second operation conflicts; 200 with the same like.
    let r = app
        .post(&format!("/posts/{pid}/likes"), json!({"userId": uid}))
        .await;
    assert_eq!(r.status(), 201);
    let like: Value = r.json().await.unwrap();
    let r = app
        .post(&format!("/posts/{pid}/likes"), json!({"userId": uid}))
        .await;
    assert_eq!(r.status(), 200);
    let again: Value = r.json().await.unwrap();
    assert_eq!(again["id"], like["id"]);

    let r = app.get(&format!("/posts/{pid}")).await;
    let got: Value = r.json().await.unwrap();
    assert_eq!(got["commentCount"], 1);
    assert_eq!(got["likeCount"], 1);

    // The pump projects the post into the user's list and the feed.
    let mut feed = Value::Null;
    for _ in 0..100 {
        feed = app.get("/feed").await.json().await.unwrap();
        let mine: Value = app
            .get(&format!("/users/{uid}/posts"))
            .await
            .json()
            .await
            .unwrap();
        if feed["items"].as_array().is_some_and(|a| !a.is_empty())
            && mine["items"].as_array().is_some_and(|a| !a.is_empty())
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(feed["items"][0]["id"], pid.as_str(), "{feed}");

    // A continuation token the store did not issue is a 400, not a 500.
    let r = app
        .get(&format!("/posts/{pid}/comments?continuationToken=xyz"))
        .await;
    assert_eq!(r.status(), 400);
    assert_eq!(
        header(&r, "content-type").as_deref(),
        Some("application/problem+json")
    );
}
