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

mod client {
    use super::*;
    crate::client_suite!(embedded_fixture);
}

mod restart {
    use std::sync::Arc;

    use blog::store::embedded::EmbeddedStore;
    use serde_json::json;

    use crate::helpers::{eventually, id, spawn_app, Fixture, TestApp};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_restart_finds_all_data_again() {
        let app = spawn_app().await;
        let user = app.create_user("ana").await;
        let post = app.create_post(&id(&user), "t", "c").await;
        let p = id(&post);
        app.comment(&p, &id(&user), "hi").await;
        app.like(&p, &id(&user)).await;
        eventually("copies", || async {
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
