//! How store failures reach the client: a store that refuses the service (Cosmos 401/403) is a
//! misconfiguration (500), not an outage (503 with Retry-After); internals never leak.

use blog::store::StoreError;
use futures::FutureExt as _;

use crate::helpers::{embedded_fixture, TestApp};
use crate::hooks::Hooked;

async fn app_whose_reads_fail(fail: fn() -> StoreError) -> TestApp {
    let fixture = embedded_fixture().await;
    let fixture = fixture.wrapped(Hooked::wrap(move |call| {
        async move {
            if call.op == "read" {
                Err(fail())
            } else {
                Ok(())
            }
        }
        .boxed()
    }));
    TestApp::spawn(fixture, false).await
}

#[tokio::test]
async fn a_store_that_refuses_access_answers_500_without_retry_after() {
    let app = app_whose_reads_fail(|| {
        StoreError::Forbidden(
            "403 Forbidden: principal lacks the data-plane role secret-principal".into(),
        )
    })
    .await;
    for _ in 0..3 {
        let r = app.get("/api/users/someone").await;
        r.assert_problem(500);
        assert_eq!(r.header("retry-after"), None);
        let detail = r.body["detail"].as_str().unwrap();
        assert!(!detail.contains("secret-principal"), "{detail}");
    }
}

#[tokio::test]
async fn an_unexpected_store_error_answers_500_without_internals() {
    let app =
        app_whose_reads_fail(|| StoreError::Other("disk sector 7 is secret-detail".into())).await;
    let r = app.get("/api/posts/p").await;
    r.assert_problem(500);
    assert!(!r.body["detail"].as_str().unwrap().contains("secret-detail"));
}

#[tokio::test]
async fn an_outage_still_answers_503_with_retry_after() {
    let app = app_whose_reads_fail(|| StoreError::Unavailable("connection refused".into())).await;
    let r = app.get("/api/users/someone").await;
    r.assert_problem(503);
    assert_eq!(r.header("retry-after"), Some("1"));
}

/// A failure is logged once, in the request's span (method and path), with its causes; the
/// client sees none of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_is_logged_in_the_requests_span_with_its_cause() {
    let dir = tempfile::tempdir().unwrap();
    let handler = crate::server::Handler::start(dir.path(), &[("BLOG_LOG_FORMAT", "json")]).await;
    let client = reqwest::Client::new();
    let user: serde_json::Value = client
        .post(format!("{}/api/users", handler.base))
        .json(&serde_json::json!({ "username": "ana" }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let uid = user["id"].as_str().unwrap().to_string();
    // Damage the stored item behind the handler's back.
    let db = rusqlite::Connection::open(dir.path().join("blog.db")).unwrap();
    db.busy_timeout(std::time::Duration::from_secs(10)).unwrap();
    let n = db
        .execute(
            "UPDATE items SET body = 'not json' WHERE container = 'users' AND id = ?1",
            [&uid],
        )
        .unwrap();
    assert_eq!(n, 1);
    let path = format!("/api/users/{uid}");
    let r = client
        .get(format!("{}{path}", handler.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 500);
    let body = r.text().await.unwrap();
    assert!(!body.contains("corrupt"), "{body}");

    let out = handler.stdout();
    // The request's failures (the change-feed pump, should it read the damaged item before it
    // projected the user's creation, logs its own failure outside any request).
    let failures: Vec<serde_json::Value> = out
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|l| l["level"] == "ERROR" && l.get("span").is_some())
        .collect();
    assert_eq!(failures.len(), 1, "{out}");
    let f = &failures[0];
    assert_eq!(f["span"]["method"], "GET", "{f}");
    assert_eq!(f["span"]["path"], path.as_str(), "{f}");
    assert!(f["error"].as_str().unwrap().contains("corrupt item"), "{f}");
}

/// A handler that panics (here: in the store call it makes) answers 500 problem+json, says
/// nothing of the panic, and the server goes on answering, on the same connection too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_in_a_request_answers_500_and_the_server_goes_on() {
    let fixture = embedded_fixture().await;
    let fixture = fixture.wrapped(Hooked::wrap(|call| {
        async move {
            if call.op == "read" && call.id == "boom" {
                panic!("secret-panic-detail");
            }
            Ok(())
        }
        .boxed()
    }));
    let app = TestApp::spawn(fixture, false).await;
    let r = app.get("/api/users/boom").await;
    r.assert_problem(500);
    assert!(
        !r.body["detail"].as_str().unwrap().contains("secret"),
        "{:?}",
        r.body
    );
    assert_eq!(app.get("/api/users/other").await.status, 404);
}
