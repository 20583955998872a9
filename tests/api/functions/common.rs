//! Helpers shared by the Functions tests: an app over a fresh embedded store, driven over HTTP
//! exactly as the Functions host drives it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use blog::store::embedded::EmbeddedStore;
use blog::store::{Container, Store};
use blog::AppState;
use reqwest::StatusCode;
use serde_json::{json, Value};

/// The repository root (where `host.json` and `functions/` live).
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn fixture(name: &str) -> Vec<u8> {
    let path = repo().join("tests/fixtures/functions").join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

pub fn open_store(dir: &Path) -> Arc<EmbeddedStore> {
    Arc::new(EmbeddedStore::open(&dir.join("blog.db")).expect("embedded store opens"))
}

/// The application served on an ephemeral loopback port, without the change-feed pump: in these
/// tests only trigger invocations project, as under the Functions host.
pub struct TestApp {
    pub addr: SocketAddr,
    pub client: reqwest::Client,
    /// The store underneath whatever the app was given, for seeding and inspection.
    pub store: Arc<dyn Store>,
    _dir: tempfile::TempDir,
}

impl TestApp {
    pub async fn spawn() -> Self {
        Self::spawn_with(|s| s).await
    }

    /// `wrap` decides which store the app sees (a failing wrapper, say); `store` stays the inner one.
    pub async fn spawn_with(wrap: impl FnOnce(Arc<dyn Store>) -> Arc<dyn Store>) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let store: Arc<dyn Store> = open_store(dir.path());
        let app = blog::app(AppState::new(wrap(store.clone())));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        TestApp {
            addr,
            client: reqwest::Client::new(),
            store,
            _dir: dir,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    pub async fn get(&self, path: &str) -> (StatusCode, Value) {
        let r = self.client.get(self.url(path)).send().await.unwrap();
        let status = r.status();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    pub async fn send_json(&self, method: &str, path: &str, body: Value) -> (StatusCode, Value) {
        let r = self
            .client
            .request(method.parse().unwrap(), self.url(path))
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = r.status();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// POST an invocation to `/<function>` the way the host does: JSON body, invocation id header.
    pub async fn invoke(&self, function: &str, body: Vec<u8>) -> Invocation {
        let r = self
            .client
            .post(self.url(&format!("/{function}")))
            .header("Content-Type", "application/json")
            .header("X-Azure-Functions-InvocationId", uuid_like())
            .body(body)
            .send()
            .await
            .unwrap();
        let status = r.status();
        let content_type = r
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let body: Value = r.json().await.expect("invocation answers are JSON");
        Invocation {
            status,
            content_type,
            body,
        }
    }

    /// Deliver `documents` to a trigger as a first delivery, in the plain array encoding.
    pub async fn deliver(&self, function: &str, documents: &[Value]) -> Invocation {
        self.invoke(function, envelope(json!(documents), 0)).await
    }

    pub async fn create_user(&self, username: &str) -> String {
        let (status, user) = self
            .send_json("POST", "/api/users", json!({ "username": username }))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{user}");
        user["id"].as_str().unwrap().to_string()
    }

    pub async fn create_post(&self, user_id: &str, title: &str, content: &str) -> String {
        let (status, post) = self
            .send_json(
                "POST",
                "/api/posts",
                json!({ "userId": user_id, "title": title, "content": content }),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{post}");
        post["id"].as_str().unwrap().to_string()
    }

    /// The stored item as the change feed would deliver it (system properties included).
    pub async fn current(&self, c: Container, pk: &str, id: &str) -> Value {
        self.store
            .read(c, pk, id)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{}/{pk}/{id} exists", c.name()))
    }

    /// The `items` of a list answer.
    pub async fn items(&self, path: &str) -> Vec<Value> {
        let (status, page) = self.get(path).await;
        assert_eq!(status, StatusCode::OK, "{path}: {page}");
        page["items"].as_array().unwrap().clone()
    }
}

/// What the handler answered to one invocation.
#[derive(Debug)]
pub struct Invocation {
    pub status: StatusCode,
    pub content_type: String,
    pub body: Value,
}

impl Invocation {
    /// Applied: 200 with the custom-handler response shape.
    pub fn assert_applied(&self) {
        assert_eq!(self.status, StatusCode::OK, "{:#}", self.body);
        self.assert_shape();
    }

    /// The shape the host deserializes, on success and failure alike.
    pub fn assert_shape(&self) {
        assert!(
            self.content_type.starts_with("application/json"),
            "content type {:?}",
            self.content_type
        );
        assert_eq!(self.body["Outputs"], json!({}), "{:#}", self.body);
        assert!(self.body["ReturnValue"].is_null(), "{:#}", self.body);
        assert!(self.body["Logs"].is_array(), "{:#}", self.body);
    }

    pub fn logs(&self) -> String {
        self.body["Logs"]
            .as_array()
            .map(|l| {
                l.iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default()
    }
}

/// A host invocation body for a change-feed trigger with binding `documents`.
pub fn envelope(documents: Value, retry_count: u32) -> Vec<u8> {
    let mut metadata = json!({
        "sys": { "MethodName": "test", "UtcNow": "2026-11-21T10:00:00.000Z", "RandGuid": "00000000-0000-0000-0000-000000000000" }
    });
    if retry_count > 0 {
        metadata["RetryContext"] = json!({
            "RetryCount": retry_count,
            "MaxRetryCount": -1,
            "Exception": { "Message": "Response status code does not indicate success: 500 (Internal Server Error)." }
        });
    }
    serde_json::to_vec(&json!({ "Data": { "documents": documents }, "Metadata": metadata }))
        .unwrap()
}

fn uuid_like() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(1);
    format!(
        "00000000-0000-4000-8000-{:012x}",
        N.fetch_add(1, Ordering::Relaxed)
    )
}
