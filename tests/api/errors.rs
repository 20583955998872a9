//! How store failures reach the client: a store that refuses the service (Cosmos 401/403) is a
//! misconfiguration (500), not an outage (503 with Retry-After); internals never leak.

use std::sync::Arc;

use blog::store::StoreError;
use futures::FutureExt as _;

use crate::helpers::{embedded_fixture, Fixture, TestApp};
use crate::hooks::Hooked;

async fn app_whose_reads_fail(fail: fn() -> StoreError) -> TestApp {
    let fixture = embedded_fixture().await;
    let store = Hooked::wrap(move |call| {
        async move {
            if call.op == "read" {
                Err(fail())
            } else {
                Ok(())
            }
        }
        .boxed()
    })(fixture.store);
    TestApp::spawn(
        Fixture {
            store: Arc::clone(&store),
            dir: fixture.dir,
        },
        false,
    )
    .await
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
