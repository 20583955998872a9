//! What the Functions tests add to the shared `TestApp`: the app as the host runs it (no pump;
//! only trigger invocations project) and invocations sent exactly as the host sends them.

use std::path::PathBuf;
use std::sync::Arc;

use blog::store::{Container, Store};
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::helpers::{embedded_fixture, TestApp};

/// The repository root (where `host.json` and `functions/` live).
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn fixture(name: &str) -> Vec<u8> {
    let path = repo().join("tests/fixtures/functions").join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// The app over a fresh embedded store as under the host: trigger endpoints, no pump.
pub async fn spawn_hosted() -> TestApp {
    spawn_hosted_with(|s| s).await
}

/// As [`spawn_hosted`], with `wrap` deciding which store the app sees (a failing wrapper, say).
pub async fn spawn_hosted_with(wrap: impl FnOnce(Arc<dyn Store>) -> Arc<dyn Store>) -> TestApp {
    let fixture = embedded_fixture().await.wrapped(wrap);
    TestApp::spawn_with(fixture, false, |app| app.hosted(true)).await
}

impl TestApp {
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
        let r = self.get(path).await;
        assert_eq!(r.status, 200, "{path}: {:?}", r.body);
        r.items().clone()
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
