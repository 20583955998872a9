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
            preflights_allow_the_configured_origins, cross_origin_answers_expose_the_api_headers,
            answers_match_the_document, etags_are_opaque_and_deleted_items_have_none,
            a_renames_etag_outlives_its_fan_out);
    };
    (@tests $fixture:path; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let app = $crate::helpers::TestApp::spawn_with($fixture().await, false, |app| {
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

/// The inner text of an entity tag, quotes dropped.
fn opaque(tag: &str) -> &str {
    tag.trim_matches('"')
}

pub async fn etags_are_opaque_and_deleted_items_have_none(app: &TestApp) {
    // Successive writes, to different items: their tags tell nothing of how many writes came
    // between them (a write counter would share all but its last digits).
    let user = app.create_user("ana").await;
    let mut tags = Vec::new();
    for i in 0..8 {
        let r = app
            .post(
                "/api/posts",
                json!({ "userId": id(&user), "title": format!("t{i}"), "content": "c" }),
            )
            .await;
        assert_eq!(r.status, 201);
        tags.push((id(&r.body), etag(&r)));
    }
    for pair in tags.windows(2) {
        let (a, b) = (opaque(&pair[0].1), opaque(&pair[1].1));
        let common = a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
        assert!(
            common < 8,
            "successive tags {a} and {b} look like a counter"
        );
        assert!(a.len() >= 16, "a tag too short to be unguessable: {a}");
    }

    // A deleted post is 404 whatever the request's conditions, its deletion's own tag included.
    let (post, before) = tags[0].clone();
    let post_path = format!("/api/posts/{post}");
    assert_eq!(app.delete(&post_path).await.status, 204);
    let tombstone = app
        .store
        .read(blog::store::Container::Posts, &post, &post)
        .await
        .unwrap()
        .expect("the deletion's mark");
    let deleted = tombstone["_etag"].as_str().expect("a tag").to_string();
    let user_path = format!("/api/users/{}", id(&user));
    let user_tag = etag(&app.get(&user_path).await);
    assert_eq!(app.delete(&user_path).await.status, 204);
    let erased = app
        .store
        .read(blog::store::Container::Users, &id(&user), &id(&user))
        .await
        .unwrap()
        .map(|u| u["_etag"].as_str().expect("a tag").to_string());
    for (path, tags) in [
        (&post_path, vec![before, deleted]),
        (
            &user_path,
            [Some(user_tag), erased].into_iter().flatten().collect(),
        ),
    ] {
        let mut conditions = vec!["*".to_string(), tags.join(", ")];
        for tag in &tags {
            conditions.extend([tag.clone(), format!("W/{tag}")]);
        }
        for condition in conditions {
            get_with(app, path, "if-none-match", &condition)
                .await
                .assert_problem(404);
        }
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

/// Whether the change feed has carried the user's latest rename to every copy (its bookkeeping
/// written on the user item).
async fn rename_fanned_out(app: &TestApp, user: &str) -> bool {
    let item = app
        .store
        .read(blog::store::Container::Users, user, user)
        .await
        .unwrap()
        .expect("the user");
    item.get("propagatedVersion").is_some()
        && item.get("propagatedVersion") == item.get("renameVersion")
}

/// The tag a rename answers stays the user's tag once the change feed has carried the name to
/// the user's posts: the feed's own bookkeeping is no change a client can see.
pub async fn a_renames_etag_outlives_its_fan_out(app: &TestApp) {
    let user = app.create_user("ana").await;
    let uid = id(&user);
    app.create_post(&uid, "t", "c").await;
    let user_path = format!("/api/users/{uid}");
    let mut tag = etag(&app.get(&user_path).await);
    for name in ["bea", "cy", "dee"] {
        let r = put_with(app, &user_path, &tag, json!({ "username": name })).await;
        assert_eq!(r.status, 200, "{name}: {:?}", r.body);
        tag = etag(&r);
        let posts_path = format!("{user_path}/posts");
        app.settled("the rename's fan-out", || async {
            let posts = app.get(&posts_path).await;
            rename_fanned_out(app, &uid).await
                && posts.items().first().map(|p| &p["userUsername"]) == Some(&json!(name))
        })
        .await;
        let r = get_with(app, &user_path, "if-none-match", &tag).await;
        assert_eq!(r.status, 304, "{name}: the rename's tag is current");
        assert_eq!(r.header("etag"), Some(tag.as_str()));
    }
    // A change a client can see still changes the tag.
    let r = app.put(&user_path, json!({ "username": "eve" })).await;
    assert_eq!(r.status, 200);
    assert_ne!(etag(&r), tag);
    put_with(app, &user_path, &tag, json!({ "username": "lost" }))
        .await
        .assert_problem(412);
    assert_eq!(app.get(&user_path).await.body["username"], "eve");
}

pub async fn malformed_conditions_are_bad_requests(app: &TestApp) {
    let user = app.create_user("ana").await;
    let user_path = format!("/api/users/{}", id(&user));
    let tag = etag(&app.get(&user_path).await);
    for bad in ["abc", "\"a", "\"a\" junk", "\"a\",", "\u{e9}"] {
        get_with(app, &user_path, "if-none-match", bad)
            .await
            .assert_problem(400);
        put_with(app, &user_path, bad, json!({ "username": "x" }))
            .await
            .assert_problem(400);
    }
    // An empty condition is no condition.
    let r = get_with(app, &user_path, "if-none-match", "").await;
    assert_eq!(r.status, 200);
    let r = put_with(app, &user_path, "", json!({ "username": "bea" })).await;
    assert_eq!(r.status, 200);
    // If-Match takes one tag: a list is refused rather than half-checked.
    put_with(
        app,
        &user_path,
        &format!("{tag}, \"b\""),
        json!({ "username": "x" }),
    )
    .await
    .assert_problem(400);
    assert_eq!(app.get(&user_path).await.body["username"], "bea");
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
            ("/api/posts/p1/likes/u1", "DELETE"),
            ("/api/posts/p1", "DELETE"),
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
            // Every method an operation of the API uses, so a browser app can do all it can.
            let methods = header_list(&r, "access-control-allow-methods");
            for op in blog::api::operations() {
                let m = op.method.to_ascii_lowercase();
                assert!(methods.contains(&m), "{} not in {methods:?}", op.method);
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

/// Check an answer against what the document says `method path_template` answers with its
/// status: the status is documented, the body has a documented media type and matches its
/// schema, and the documented `Location` and `ETag` headers are there.
fn check_against_document(doc: &Value, method: &str, template: &str, r: &Resp) {
    let what = format!("{method} {template} → {}", r.status);
    let op = &doc["paths"][template][method];
    assert!(op.is_object(), "{what}: not documented");
    let documented = &op["responses"][r.status.to_string()];
    assert!(documented.is_object(), "{what}: status not documented");
    for header in ["Location", "ETag"] {
        if documented["headers"][header].is_object() {
            assert!(r.header(header).is_some(), "{what}: no {header}");
        }
    }
    let Some(content) = documented["content"].as_object() else {
        assert_eq!(
            r.body,
            Value::Null,
            "{what}: a body where none is documented"
        );
        return;
    };
    let media = r.header("content-type").expect("a content type");
    let schema = &content
        .get(media)
        .unwrap_or_else(|| panic!("{what}: `{media}` not documented"))["schema"];
    let errors = schema_errors(doc, schema, &r.body);
    assert!(errors.is_empty(), "{what}: {errors:?}\n{}", r.body);
}

/// Where `body` breaks `schema` (whose `$ref`s point into the document's components).
fn schema_errors(doc: &Value, schema: &Value, body: &Value) -> Vec<String> {
    let root = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "allOf": [schema],
        "components": doc["components"],
    });
    let validator = jsonschema::validator_for(&root).expect("the schema compiles");
    validator
        .iter_errors(body)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

pub async fn answers_match_the_document(app: &TestApp) {
    let doc = app.get("/api/openapi.json").await.body;
    // The check can fail: a user without a username, or with a bad id, is not a User.
    let user_schema = json!({ "$ref": "#/components/schemas/User" });
    for bad in [
        json!({ "id": "a", "userId": "a" }),
        json!({ "id": "a/b", "userId": "a/b", "username": "x" }),
    ] {
        assert!(!schema_errors(&doc, &user_schema, &bad).is_empty(), "{bad}");
    }
    let check =
        |method: &str, template: &str, r: &Resp| check_against_document(&doc, method, template, r);

    let r = app
        .post("/api/users", json!({ "username": "  ana  " }))
        .await;
    check("post", "/api/users", &r);
    let user = id(&r.body);
    let user_path = format!("/api/users/{user}");
    let r = app.get(&user_path).await;
    check("get", "/api/users/{userId}", &r);
    let tag = etag(&r);
    check(
        "get",
        "/api/users/{userId}",
        &get_with(app, &user_path, "if-none-match", &tag).await,
    );
    check(
        "put",
        "/api/users/{userId}",
        &app.put(&user_path, json!({ "username": "ana k" })).await,
    );
    check(
        "put",
        "/api/users/{userId}",
        &put_with(app, &user_path, &tag, json!({ "username": "x" })).await,
    );
    check(
        "get",
        "/api/users/{userId}",
        &app.get("/api/users/nobody").await,
    );
    check(
        "get",
        "/api/users/{userId}",
        &app.get("/api/users/a%23b").await,
    );

    let r = app
        .post(
            "/api/posts",
            json!({ "userId": user, "title": "t", "content": "é".repeat(300) }),
        )
        .await;
    check("post", "/api/posts", &r);
    let post = id(&r.body);
    check(
        "post",
        "/api/posts",
        &app.post(
            "/api/posts",
            json!({ "userId": "nobody", "title": "t", "content": "c" }),
        )
        .await,
    );
    check(
        "post",
        "/api/posts",
        &app.post(
            "/api/posts",
            json!({ "userId": user, "title": " ", "content": "c" }),
        )
        .await,
    );
    let post_path = format!("/api/posts/{post}");
    check("get", "/api/posts/{postId}", &app.get(&post_path).await);
    let edit = json!({ "userId": user, "title": "t2", "content": "c2" });
    check(
        "put",
        "/api/posts/{postId}",
        &app.put(&post_path, edit.clone()).await,
    );
    check(
        "put",
        "/api/posts/{postId}",
        &put_with(app, &post_path, "\"stale\"", edit).await,
    );
    check(
        "put",
        "/api/posts/{postId}",
        &app.put(
            &post_path,
            json!({ "userId": "eve", "title": "t", "content": "c" }),
        )
        .await,
    );

    let r = app.comment(&post, &user, "hi").await;
    check("post", "/api/posts/{postId}/comments", &r);
    check(
        "post",
        "/api/posts/{postId}/comments",
        &app.comment("nothing", &user, "hi").await,
    );
    check(
        "post",
        "/api/posts/{postId}/likes",
        &app.like(&post, &user).await,
    );
    check(
        "post",
        "/api/posts/{postId}/likes",
        &app.like(&post, &user).await,
    );
    let r = app
        .send(
            app.client
                .post(app.url("/api/users"))
                .header("content-type", "text/plain")
                .body("{}"),
        )
        .await;
    check("post", "/api/users", &r);

    app.settled("the post reaches the feed", || async {
        !app.get("/api/feed").await.items().is_empty()
    })
    .await;
    for (template, path) in [
        (
            "/api/users/{userId}/posts",
            format!("/api/users/{user}/posts?limit=1"),
        ),
        (
            "/api/posts/{postId}/comments",
            format!("/api/posts/{post}/comments"),
        ),
        (
            "/api/posts/{postId}/likes",
            format!("/api/posts/{post}/likes"),
        ),
        ("/api/feed", "/api/feed?limit=5".to_string()),
        ("/api/feed", "/api/feed?limit=0".to_string()),
    ] {
        check("get", template, &app.get(&path).await);
    }
}
