//! What a client app relies on beyond the plain API: entity tags and conditional requests, and
//! caching headers. Written once and instantiated per store with `client_suite!(fixture_fn);`.

use serde_json::{json, Value};

use crate::helpers::{id, Resp, TestApp};

/// The origins the suite's app allows (`BLOG_CORS_ORIGINS`).
pub const ORIGINS: [&str; 2] = ["https://app.example", "http://localhost:5173"];

#[macro_export]
macro_rules! client_suite {
    ($fixture:path) => {
        $crate::client_suite!(@tests $fixture;
            reads_answer_an_etag_and_304_when_unchanged, updates_honour_if_match,
            malformed_conditions_are_bad_requests, lists_are_revalidated,
            preflights_allow_the_configured_origins, cross_origin_answers_expose_the_api_headers);
    };
    (@tests $fixture:path; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let app = $crate::helpers::TestApp::spawn_with($fixture().await, true, |app| {
                    app.with_cors($crate::client_suite::ORIGINS.map(String::from).to_vec())
                })
                .await;
                $crate::client_suite::$name(&app).await;
            }
        )*
    };
}

async fn get_with(app: &TestApp, path: &str, name: &str, value: &str) -> Resp {
    app.send(app.client.get(app.url(path)).header(name, value))
        .await
}

async fn put_with(app: &TestApp, path: &str, if_match: &str, body: Value) -> Resp {
    app.send(
        app.client
            .put(app.url(path))
            .header("if-match", if_match)
            .json(&body),
    )
    .await
}

fn etag(r: &Resp) -> String {
    r.header("etag")
        .unwrap_or_else(|| panic!("no ETag: {:?}", r.headers))
        .to_string()
}

/// GET `path` answers an ETag; `If-None-Match` with it (alone, weak, in a list, or `*`) answers
/// 304 without a body in one store operation; another tag answers 200 with the item.
async fn check_conditional_get(app: &TestApp, path: &str) -> String {
    let r = app.get(path).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let tag = etag(&r);
    assert!(tag.starts_with('"') && tag.ends_with('"'), "{tag}");
    assert_eq!(r.header("cache-control"), Some("no-cache"));
    for condition in [
        tag.clone(),
        format!("W/{tag}"),
        format!("\"nope\", {tag}"),
        "*".to_string(),
    ] {
        let r = get_with(app, path, "if-none-match", &condition).await;
        assert_eq!(r.status, 304, "{condition}: {:?}", r.body);
        assert_eq!(r.body, Value::Null, "a 304 has no body");
        assert_eq!(r.header("etag"), Some(tag.as_str()), "{condition}");
        assert_eq!(r.store_operations(), 1, "{condition}");
    }
    let r = get_with(app, path, "if-none-match", "\"other\"").await;
    assert_eq!(r.status, 200);
    assert_eq!(etag(&r), tag);
    assert_eq!(r.store_operations(), 1);
    assert!(r.body["id"].is_string());
    tag
}

pub async fn reads_answer_an_etag_and_304_when_unchanged(app: &TestApp) {
    let r = app.post("/api/users", json!({ "username": "ana" })).await;
    assert_eq!(r.status, 201);
    let created = etag(&r);
    let user = id(&r.body);
    let user_path = format!("/api/users/{user}");
    assert_eq!(check_conditional_get(app, &user_path).await, created);

    let r = app
        .post(
            "/api/posts",
            json!({ "userId": user, "title": "t", "content": "c" }),
        )
        .await;
    assert_eq!(r.status, 201);
    let created = etag(&r);
    let post = id(&r.body);
    let post_path = format!("/api/posts/{post}");
    assert_eq!(check_conditional_get(app, &post_path).await, created);

    // A like changes the post (its counter): the old tag no longer matches.
    assert_eq!(app.like(&post, &user).await.status, 201);
    let r = get_with(app, &post_path, "if-none-match", &created).await;
    assert_eq!(r.status, 200);
    assert_ne!(etag(&r), created);
    assert_eq!(r.body["likeCount"], 1);

    // Unknown items are 404 whatever the condition.
    for path in ["/api/users/nobody", "/api/posts/nothing"] {
        get_with(app, path, "if-none-match", "*")
            .await
            .assert_problem(404);
        get_with(app, path, "if-none-match", &created)
            .await
            .assert_problem(404);
    }
}

pub async fn updates_honour_if_match(app: &TestApp) {
    let user = app.create_user("ana").await;
    let user_path = format!("/api/users/{}", id(&user));
    let v1 = etag(&app.get(&user_path).await);
    let r = put_with(app, &user_path, &v1, json!({ "username": "bea" })).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let v2 = etag(&r);
    assert_ne!(v2, v1);
    assert_eq!(r.body["username"], "bea");
    let r = put_with(app, &user_path, &v1, json!({ "username": "cy" })).await;
    r.assert_problem(412);
    assert_eq!(r.store_operations(), 1);
    let weak = format!("W/{}", etag(&app.get(&user_path).await));
    put_with(app, &user_path, &weak, json!({ "username": "cy" }))
        .await
        .assert_problem(412);
    assert_eq!(app.get(&user_path).await.body["username"], "bea");
    let r = put_with(app, &user_path, "*", json!({ "username": "dee" })).await;
    assert_eq!(r.status, 200);
    put_with(app, "/api/users/nobody", "*", json!({ "username": "x" }))
        .await
        .assert_problem(404);

    let post = app.create_post(&id(&user), "t", "c").await;
    let post_path = format!("/api/posts/{}", id(&post));
    let v1 = etag(&app.get(&post_path).await);
    let edit = |title: &str| json!({ "userId": id(&user), "title": title, "content": "c2" });
    let r = put_with(app, &post_path, &v1, edit("second")).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.store_operations(), 2);
    let v2 = etag(&r);
    assert_ne!(v2, v1);
    // Another tab still holds v1: its edit is refused and writes nothing.
    let r = put_with(app, &post_path, &v1, edit("lost update")).await;
    r.assert_problem(412);
    let now = app.get(&post_path).await;
    assert_eq!(now.body["title"], "second");
    assert_eq!(etag(&now), v2);
    // The author check comes first: someone else is refused with 403 whatever the tag.
    let other = app.create_user("eve").await;
    put_with(
        app,
        &post_path,
        &v2,
        json!({ "userId": id(&other), "title": "x", "content": "x" }),
    )
    .await
    .assert_problem(403);
    // Without If-Match an update is unconditional.
    assert_eq!(app.put(&post_path, edit("third")).await.status, 200);
}

pub async fn malformed_conditions_are_bad_requests(app: &TestApp) {
    let user = app.create_user("ana").await;
    let user_path = format!("/api/users/{}", id(&user));
    let tag = etag(&app.get(&user_path).await);
    for bad in ["abc", "\"a", "\"a\" junk", ""] {
        get_with(app, &user_path, "if-none-match", bad)
            .await
            .assert_problem(400);
        put_with(app, &user_path, bad, json!({ "username": "x" }))
            .await
            .assert_problem(400);
    }
    // If-Match takes one tag: a list is refused rather than half-checked.
    put_with(
        app,
        &user_path,
        &format!("{tag}, \"b\""),
        json!({ "username": "x" }),
    )
    .await
    .assert_problem(400);
    assert_eq!(app.get(&user_path).await.body["username"], "ana");
}

pub async fn lists_are_revalidated(app: &TestApp) {
    let user = app.create_user("ana").await;
    let post = app.create_post(&id(&user), "t", "c").await;
    for path in [
        format!("/api/users/{}/posts", id(&user)),
        format!("/api/posts/{}/comments", id(&post)),
        format!("/api/posts/{}/likes", id(&post)),
        "/api/feed".to_string(),
    ] {
        let r = app.get(&path).await;
        assert_eq!(r.status, 200);
        assert_eq!(r.header("cache-control"), Some("no-cache"), "{path}");
        assert_eq!(r.header("etag"), None, "{path}");
    }
}

fn header_list(r: &Resp, name: &str) -> Vec<String> {
    r.header(name)
        .unwrap_or_else(|| panic!("no {name}: {:?}", r.headers))
        .split(',')
        .map(|s| s.trim().to_ascii_lowercase())
        .collect()
}

async fn preflight(app: &TestApp, path: &str, origin: &str, method: &str, headers: &str) -> Resp {
    app.send(
        app.client
            .request(reqwest::Method::OPTIONS, app.url(path))
            .header("origin", origin)
            .header("access-control-request-method", method)
            .header("access-control-request-headers", headers),
    )
    .await
}

pub async fn preflights_allow_the_configured_origins(app: &TestApp) {
    for origin in ORIGINS {
        for (path, method) in [
            ("/api/users", "POST"),
            ("/api/users/u1", "PUT"),
            ("/api/posts/p1/likes", "POST"),
            ("/api/posts/p1", "GET"),
        ] {
            let r = preflight(
                app,
                path,
                origin,
                method,
                "authorization,content-type,if-match,if-none-match",
            )
            .await;
            assert!(r.status == 200 || r.status == 204, "{path}: {}", r.status);
            assert_eq!(r.header("access-control-allow-origin"), Some(origin));
            let methods = header_list(&r, "access-control-allow-methods");
            for m in ["get", "post", "put"] {
                assert!(methods.contains(&m.to_string()), "{methods:?}");
            }
            let headers = header_list(&r, "access-control-allow-headers");
            for h in ["authorization", "content-type", "if-match", "if-none-match"] {
                assert!(headers.contains(&h.to_string()), "{headers:?}");
            }
            assert!(r.header("access-control-max-age").is_some());
        }
    }
    // Another origin learns nothing: no allow-origin, so the browser refuses the request.
    let r = preflight(
        app,
        "/api/users",
        "https://evil.example",
        "POST",
        "content-type",
    )
    .await;
    assert_eq!(
        r.header("access-control-allow-origin"),
        None,
        "{:?}",
        r.headers
    );
}

pub async fn cross_origin_answers_expose_the_api_headers(app: &TestApp) {
    let origin = ORIGINS[0];
    let r = app
        .send(
            app.client
                .post(app.url("/api/users"))
                .header("origin", origin)
                .json(&json!({ "username": "ana" })),
        )
        .await;
    assert_eq!(r.status, 201);
    assert_eq!(r.header("access-control-allow-origin"), Some(origin));
    assert!(header_list(&r, "vary").contains(&"origin".to_string()));
    let exposed = header_list(&r, "access-control-expose-headers");
    for h in [
        "etag",
        "location",
        "retry-after",
        "x-store-operations",
        "x-request-charge",
    ] {
        assert!(exposed.contains(&h.to_string()), "{h} not in {exposed:?}");
    }
    // Errors carry the headers too, so a browser app can read the problem.
    let r = app
        .send(
            app.client
                .get(app.url("/api/users/nobody"))
                .header("origin", origin),
        )
        .await;
    r.assert_problem(404);
    assert_eq!(r.header("access-control-allow-origin"), Some(origin));
    let r = app
        .send(
            app.client
                .get(app.url("/api/feed"))
                .header("origin", "https://evil.example"),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("access-control-allow-origin"), None);
}
