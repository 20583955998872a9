//! Errors a program can act on: each kind of problem has its own `type` URI (listed in the
//! OpenAPI document and in docs/api.md), a rejected input names the offending field(s) in
//! `errors`, and no `detail` is a deserializer's own text.

use serde_json::{json, Value};

use crate::helpers::{id, spawn_app, Resp, TestApp};

/// The problem types' common prefix.
const BASE: &str = "tag:blog-api,2026:problems/";

/// The answer is a problem of `kind` with `status`.
fn assert_kind(r: &Resp, status: u16, kind: &str) {
    r.assert_problem(status);
    assert_eq!(r.body["type"], format!("{BASE}{kind}"), "{}", r.body);
}

/// The answer is an invalid-input problem naming exactly `fields` (`(in, name)`), and its
/// details are the service's words, not a parser's.
fn assert_fields(r: &Resp, fields: &[(&str, &str)]) {
    assert_kind(r, 400, "invalid-input");
    let errors = r.body["errors"].as_array().expect("`errors`");
    let named: Vec<(String, String)> = errors
        .iter()
        .map(|e| {
            (
                e["in"].as_str().unwrap().to_string(),
                e["field"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let expected: Vec<(String, String)> = fields
        .iter()
        .map(|(i, f)| (i.to_string(), f.to_string()))
        .collect();
    assert_eq!(named, expected, "{}", r.body);
    for e in errors {
        let detail = e["detail"].as_str().unwrap();
        assert!(
            detail.contains(&format!("`{}`", e["field"].as_str().unwrap())),
            "{detail}"
        );
    }
    no_parser_text(r);
}

fn no_parser_text(r: &Resp) {
    let text = r.body.to_string();
    for raw in [
        "deserialize",
        "Failed to",
        "line 1",
        "column",
        "target type",
        "invalid type",
        "expected",
    ] {
        assert!(!text.contains(raw), "`{raw}` in {text}");
    }
}

async fn post_raw(app: &TestApp, path: &str, body: &str) -> Resp {
    app.send(
        app.client
            .post(app.url(path))
            .header("content-type", "application/json")
            .body(body.to_string()),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_body_names_its_fields() {
    let app = spawn_app().await;
    assert_fields(
        &app.post("/api/users", json!({})).await,
        &[("body", "username")],
    );
    assert_fields(
        &app.post("/api/users", json!({ "username": 5 })).await,
        &[("body", "username")],
    );
    let r = app.post("/api/users", json!({ "username": 5 })).await;
    assert_eq!(r.body["errors"][0]["detail"], "`username` must be a string");
    let r = app.post("/api/users", json!({})).await;
    assert_eq!(r.body["errors"][0]["detail"], "`username` is required");
    assert_fields(
        &app.post("/api/users", json!({ "username": "  " })).await,
        &[("body", "username")],
    );
    let user = app.create_user("ana").await;
    assert_fields(
        &app.post(
            "/api/posts",
            json!({ "userId": id(&user), "title": "", "content": "c" }),
        )
        .await,
        &[("body", "title")],
    );
    assert_fields(
        &app.post(
            "/api/posts",
            json!({ "userId": id(&user), "title": ["t"], "content": "c" }),
        )
        .await,
        &[("body", "title")],
    );
    assert_fields(
        &app.post("/api/posts", json!({ "title": "t", "content": "c" }))
            .await,
        &[("body", "userId")],
    );
    // Not an object at all: the body, not a field, is at fault.
    let r = app.post("/api/users", json!(["ana"])).await;
    assert_kind(&r, 400, "malformed-body");
    assert_eq!(r.body["detail"], "the body must be a JSON object");
    no_parser_text(&r);
    let r = post_raw(&app, "/api/users", r#"{"username": "ana""#).await;
    assert_kind(&r, 400, "malformed-body");
    no_parser_text(&r);
    assert!(r.body.get("errors").is_none());
    // Nothing was written.
    assert_eq!(app.get("/api/feed").await.items().len(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_parameter_or_header_names_itself() {
    let app = spawn_app().await;
    assert_fields(&app.get("/api/feed?limit=0").await, &[("query", "limit")]);
    assert_fields(
        &app.get("/api/feed?continuationToken=").await,
        &[("query", "continuationToken")],
    );
    assert_fields(
        &app.get("/api/posts/p/likes/a%5Cb").await,
        &[("path", "userId")],
    );
    assert_fields(&app.get("/api/users/a%5Cb").await, &[("path", "userId")]);
    let r = app
        .send(
            app.client
                .get(app.url("/api/users/u"))
                .header("if-none-match", "nope"),
        )
        .await;
    assert_fields(&r, &[("header", "If-None-Match")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_kind_of_problem_has_its_type() {
    let app = spawn_app().await;
    assert_kind(&app.get("/api/users/nobody").await, 404, "not-found");
    assert_kind(&app.get("/api/nothing").await, 404, "not-found");
    assert_kind(&app.delete("/api/feed").await, 405, "method-not-allowed");
    let r = app
        .send(app.client.post(app.url("/api/users")).body("{}"))
        .await;
    assert_kind(&r, 415, "unsupported-media-type");
    let r = app
        .post(
            "/api/posts",
            json!({ "userId": "nobody", "title": "t", "content": "c" }),
        )
        .await;
    assert_kind(&r, 422, "unknown-user");
    assert_eq!(r.body["errors"][0]["field"], "userId");
    let user = app.create_user("ana").await;
    let path = format!("/api/users/{}", id(&user));
    let r = app
        .send(
            app.client
                .put(app.url(&path))
                .header("if-match", "\"stale\"")
                .json(&json!({ "username": "bea" })),
        )
        .await;
    assert_kind(&r, 412, "stale-version");
    let post = app.create_post(&id(&user), "t", "c").await;
    let other = app.create_user("eve").await;
    let r = app
        .put(
            &format!("/api/posts/{}", id(&post)),
            json!({ "userId": id(&other), "title": "x", "content": "x" }),
        )
        .await;
    assert_kind(&r, 403, "forbidden");
}

/// Every type the service answers is listed in the OpenAPI document's `Problem` schema and in
/// docs/api.md.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_problem_type_is_documented() {
    let app = spawn_app().await;
    let doc = app.get("/api/openapi.json").await.body;
    let listed: Vec<Value> = doc["components"]["schemas"]["Problem"]["properties"]["type"]
        ["examples"]
        .as_array()
        .expect("the types as examples")
        .clone();
    let page = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/api.md"),
    )
    .unwrap();
    for kind in blog::error::PROBLEM_TYPES {
        let uri = format!("{BASE}{}", kind.slug);
        assert!(listed.contains(&json!(uri)), "{uri} not in the document");
        assert!(
            page.contains(&format!("`{}`", kind.slug)),
            "{uri} not in api.md"
        );
    }
    assert_eq!(listed.len(), blog::error::PROBLEM_TYPES.len());
}
