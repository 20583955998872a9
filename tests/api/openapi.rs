//! The OpenAPI document: its structure, and that its operations are exactly those the router
//! serves and the Functions app forwards, both ways. (That real answers match its schemas is in
//! `client_suite`, on both stores; `.ci/schemathesis.sh` fuzzes the API against it.)

use std::collections::BTreeSet;

use blog::api::openapi_document;
use blog::api::operations;
use serde_json::Value;

use crate::functions::common::repo;
use crate::helpers::spawn_app;

const METHODS: [&str; 7] = ["get", "put", "post", "delete", "patch", "head", "options"];

/// `(path, METHOD)` of every operation in a document.
fn doc_operations(doc: &Value) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for method in item.as_object().unwrap().keys() {
            if METHODS.contains(&method.as_str()) {
                out.insert((path.clone(), method.to_uppercase()));
            }
        }
    }
    out
}

fn each_operation(doc: &Value) -> Vec<(String, String, &Value)> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            if METHODS.contains(&method.as_str()) {
                out.push((path.clone(), method.clone(), op));
            }
        }
    }
    out
}

/// `docs/openapi.json`, the file the handler serves, is the document the code generates.
/// `UPDATE_OPENAPI=1 cargo test --test api openapi::the_kept_document` rewrites it.
#[test]
fn the_kept_document_is_the_generated_one() {
    let path = repo().join("docs/openapi.json");
    let generated = serde_json::to_string_pretty(&openapi_document()).unwrap() + "\n";
    if std::env::var_os("UPDATE_OPENAPI").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let kept = std::fs::read_to_string(&path).unwrap();
    assert!(
        kept == generated,
        "docs/openapi.json is not the generated document; rewrite it with \
         `UPDATE_OPENAPI=1 cargo test --test api openapi::the_kept_document` and commit it"
    );
    assert_eq!(
        blog::api::openapi::generated(),
        kept,
        "rebuild: the handler serves a stale copy"
    );
}

#[test]
fn the_document_is_openapi_3_1_with_every_status_header_and_limit() {
    let doc = openapi_document();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1."));
    assert!(doc["info"]["title"].is_string() && doc["info"]["version"].is_string());
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
    let problem = "#/components/schemas/Problem";
    let mut ids = BTreeSet::new();
    for (path, method, op) in each_operation(&doc) {
        let what = format!("{method} {path}");
        let id = op["operationId"]
            .as_str()
            .unwrap_or_else(|| panic!("{what}: no operationId"));
        assert!(
            ids.insert(id.to_string()),
            "{what}: operationId `{id}` twice"
        );
        assert!(op["summary"].is_string(), "{what}: no summary");
        let responses = op["responses"].as_object().unwrap();
        let write = method == "post" || method == "put";
        let mut expected = vec!["429", "500", "503"];
        if method == "delete" || id == "follow" || id == "bookmark" || id == "mute" {
            // A write without a body.
            expected.extend(["400", "401", "403"]);
            assert_eq!(
                op["security"],
                serde_json::json!([{ "bearer": [] }]),
                "{what}"
            );
            assert!(op.get("requestBody").is_none(), "{what}");
            assert!(responses["204"].is_object(), "{what}: no 204");
        } else if write {
            expected.extend(["400", "401", "403", "413", "415"]);
            assert_eq!(
                op["security"],
                serde_json::json!([{ "bearer": [] }]),
                "{what}"
            );
            assert_eq!(op["requestBody"]["required"], true, "{what}");
            assert!(
                op["requestBody"]["content"]["application/json"].is_object(),
                "{what}"
            );
            let www = &responses["401"]["headers"]["WWW-Authenticate"];
            assert!(www.is_object(), "{what}: 401 without WWW-Authenticate");
        } else if id == "get_me" || id == "list_bookmarks" || id == "list_mutes" {
            // The caller's own, read with a token.
            assert_eq!(
                op["security"],
                serde_json::json!([{ "bearer": [] }]),
                "{what}"
            );
            assert!(
                responses["401"]["headers"]["WWW-Authenticate"].is_object(),
                "{what}"
            );
        } else {
            assert!(op.get("security").is_none(), "{what}: reads are anonymous");
        }
        if path.contains('{') || op["parameters"].as_array().is_some_and(|p| !p.is_empty()) {
            expected.push("400");
        }
        expected.push("431");
        for status in expected {
            assert!(responses.contains_key(status), "{what}: no {status}");
        }
        for (status, r) in responses {
            assert!(r["description"].is_string(), "{what} {status}");
            assert!(
                r["headers"]["x-store-operations"].is_object()
                    && r["headers"]["x-request-charge"].is_object(),
                "{what} {status}: metering headers"
            );
            if status == "431" {
                // Refused while the request is parsed, sometimes by the HTTP library itself:
                // documented without a body.
                assert!(r.get("content").is_none(), "{what} {status}");
            } else if status.starts_with('4') || status.starts_with('5') {
                assert_eq!(
                    r["content"]["application/problem+json"]["schema"]["$ref"], problem,
                    "{what} {status}"
                );
            }
            if status == "429" || status == "503" {
                assert!(r["headers"]["Retry-After"].is_object(), "{what} {status}");
            }
            if status == "201" {
                assert!(
                    r["headers"]["Location"].is_object()
                        || path.contains("/comments")
                        || path.contains("/likes"),
                    "{what}"
                );
            }
        }
        for p in op["parameters"].as_array().into_iter().flatten() {
            if p["in"] == "path" {
                assert!(p["schema"]["pattern"].is_string(), "{what}: {p}");
            }
        }
    }
    // Reads of single items revalidate with ETags; updates are conditional.
    for (path, method) in [
        ("/api/users/{userId}", "get"),
        ("/api/posts/{postId}", "get"),
    ] {
        let r = &doc["paths"][path][method]["responses"];
        assert!(
            r["200"]["headers"]["ETag"].is_object() && r["304"].is_object(),
            "{path}"
        );
    }
    for path in ["/api/users/{userId}", "/api/posts/{postId}"] {
        let op = &doc["paths"][path]["put"];
        assert!(op["responses"]["412"].is_object(), "{path}");
        assert!(
            op["parameters"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["name"] == "If-Match"),
            "{path}"
        );
    }
    // The bodies carry their limits.
    let schemas = &doc["components"]["schemas"];
    let limit =
        |schema: &str, prop: &str| schemas[schema]["properties"][prop]["maxLength"].as_u64();
    assert_eq!(limit("PostBody", "title"), Some(200));
    assert_eq!(limit("PostBody", "content"), Some(20_000));
    assert_eq!(limit("CommentBody", "content"), Some(2_000));
    assert_eq!(limit("PostSummary", "content"), Some(200));
    for (schema, prop) in [
        ("UserBody", "username"),
        ("PostBody", "userId"),
        ("PostBody", "title"),
    ] {
        assert!(
            schemas[schema]["properties"][prop]["pattern"].is_string(),
            "{schema}.{prop}"
        );
    }
    // `userId` is optional: a signed-in caller acts as their own user.
    for (schema, required) in [
        ("UserBody", vec!["username"]),
        ("PostBody", vec!["title", "content"]),
        ("CommentBody", vec!["content"]),
    ] {
        assert_eq!(
            schemas[schema]["required"],
            serde_json::json!(required),
            "{schema}"
        );
    }
    // Links chain create-user → its posts, create-post → comment / like.
    let links = |path: &str| doc["paths"][path]["post"]["responses"]["201"]["links"].clone();
    assert_eq!(
        links("/api/users")["ListUserPosts"]["parameters"]["userId"],
        "$response.body#/id"
    );
    let post_links = links("/api/posts");
    for (name, op) in [
        ("CreateComment", "create_comment"),
        ("CreateLike", "create_like"),
    ] {
        assert_eq!(post_links[name]["operationId"], op);
        assert_eq!(
            post_links[name]["parameters"]["postId"],
            "$response.body#/id"
        );
    }
    let op_ids: BTreeSet<_> = operations().into_iter().map(|o| o.operation_id).collect();
    assert_eq!(ids, op_ids);
}

/// Every link names an operation of the document and fills it only from runtime expressions
/// written as strings: OpenAPI Generator's validator (swagger-parser) refuses a link whose
/// `requestBody` is anything but a string, and with it the whole document.
#[test]
fn every_link_is_one_client_generators_accept() {
    for anonymous in [false, true] {
        let doc = blog::api::openapi::served_document(anonymous);
        let ids: BTreeSet<String> = each_operation(&doc)
            .into_iter()
            .map(|(_, _, op)| op["operationId"].as_str().unwrap().to_string())
            .collect();
        let mut seen = 0;
        for (path, method, op) in each_operation(&doc) {
            for (status, response) in op["responses"].as_object().unwrap() {
                let Some(links) = response.get("links").and_then(Value::as_object) else {
                    continue;
                };
                for (name, link) in links {
                    let what = format!("{method} {path} {status} link {name}");
                    seen += 1;
                    let target = link["operationId"].as_str().unwrap_or_default();
                    assert!(ids.contains(target), "{what}: no operation `{target}`");
                    for (param, expr) in link["parameters"].as_object().into_iter().flatten() {
                        assert!(
                            expr.as_str().is_some_and(|e| e.starts_with("$response.")),
                            "{what}: parameter {param} is {expr}, not a runtime expression"
                        );
                    }
                    if let Some(body) = link.get("requestBody") {
                        assert!(
                            body.is_string(),
                            "{what}: requestBody {body} is not a string"
                        );
                    }
                }
            }
        }
        assert!(seen > 0, "the document has no links");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_served_document_lists_exactly_the_operations_the_router_and_the_functions_serve() {
    let app = spawn_app().await;
    let r = app.get("/api/openapi.json").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    let served = doc_operations(&r.body);
    assert_eq!(served, doc_operations(&openapi_document()));

    // The route table, and the Functions app's HTTP functions, as (path, METHOD).
    let table: BTreeSet<_> = operations()
        .into_iter()
        .map(|o| (format!("/api/{}", o.route), o.method))
        .collect();
    let mut functions = BTreeSet::new();
    for entry in std::fs::read_dir(repo().join("functions")).unwrap() {
        let f: Value = serde_json::from_str(
            &std::fs::read_to_string(entry.unwrap().path().join("function.json")).unwrap(),
        )
        .unwrap();
        let input = &f["bindings"][0];
        if input["type"] == "httpTrigger" {
            for m in input["methods"].as_array().unwrap() {
                let route = input["route"].as_str().unwrap();
                functions.insert((format!("/api/{route}"), m.as_str().unwrap().to_uppercase()));
            }
        }
    }
    // The web client's and the reference's functions serve pages, and the live updates' a
    // stream, not operations of the API.
    for (route, method) in [
        blog::web::FUNCTION_ROUTE,
        blog::web::reference::FUNCTION_ROUTE,
        blog::api::events::FUNCTION_ROUTE,
    ] {
        assert!(functions.remove(&(format!("/api/{route}"), method.to_string())));
    }
    // The RealWorld API's functions are described by its own document
    // (`/api/conduit/openapi.yml`), checked in `conduit.rs`.
    for (_, route, methods) in blog::api::conduit::FUNCTIONS {
        for method in methods {
            assert!(functions.remove(&(format!("/api/{route}"), method.to_string())));
        }
    }
    assert_eq!(served, table, "document vs route table");
    assert_eq!(
        served.difference(&functions).collect::<Vec<_>>(),
        Vec::<&(String, String)>::new(),
        "documented, but no function forwards it"
    );
    assert_eq!(
        functions.difference(&served).collect::<Vec<_>>(),
        Vec::<&(String, String)>::new(),
        "forwarded by a function, but not documented"
    );

    // The router serves every documented operation, and nothing else on those paths.
    let paths: BTreeSet<_> = served.iter().map(|(p, _)| p.clone()).collect();
    for path in paths {
        let concrete = path
            .replace("{userId}", "nobody")
            .replace("{postId}", "nothing");
        for method in ["GET", "PUT", "POST", "DELETE", "PATCH"] {
            let r = app
                .send(
                    app.client
                        .request(method.parse().unwrap(), app.url(&concrete))
                        .json(&serde_json::json!({})),
                )
                .await;
            if served.contains(&(path.clone(), method.to_string())) {
                assert_ne!(r.status, 405, "{method} {path}");
                assert_ne!(
                    r.body["detail"], "no such resource",
                    "{method} {path}: not routed"
                );
            } else {
                r.assert_problem(405);
            }
        }
    }
}

/// Signed in, the served document asks for a token on writes; with `BLOG_AUTH=none` it does not
/// (a write there acts as its body's `userId`), and says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_served_document_asks_for_a_token_only_where_writes_need_one() {
    use blog::auth::Auth;

    use crate::helpers::{embedded_fixture, TestApp};

    let signed = TestApp::spawn_with_auth(embedded_fixture().await, false, Auth::easy_auth()).await;
    let doc = signed.get("/api/openapi.json").await.body;
    assert_eq!(
        doc["paths"]["/api/posts"]["post"]["security"],
        serde_json::json!([{ "bearer": [] }])
    );
    let open = spawn_app().await;
    let doc = open.get("/api/openapi.json").await.body;
    for (path, method, op) in each_operation(&doc) {
        assert!(op.get("security").is_none(), "{method} {path}");
    }
    assert!(doc["info"]["description"]
        .as_str()
        .unwrap()
        .contains("without authentication"));
    for body in ["PostBody", "CommentBody", "LikeBody"] {
        let required = doc["components"]["schemas"][body]["required"]
            .as_array()
            .unwrap();
        assert!(required.contains(&serde_json::json!("userId")), "{body}");
        let user_id = &doc["components"]["schemas"][body]["properties"]["userId"];
        assert_eq!(user_id["type"], "string", "{body}: never null there");
    }
}

/// `GET /api` is where a client starts: links to the document, its reference and the web client,
/// each served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_root_links_what_a_client_needs() {
    let app = spawn_app().await;
    let r = app.get("/api").await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.header("content-type"), Some("application/json"));
    for (name, path) in [
        ("openapi", "/api/openapi.json"),
        ("reference", "/api/docs"),
        ("web", "/api/web/"),
        ("feed", "/api/feed"),
        ("config", "/api/config"),
    ] {
        assert_eq!(r.body["links"][name]["href"], path, "{name}");
        assert_eq!(app.get(path).await.status, 200, "{path}");
    }
}

/// The document as client generators read it: properties in the order the types declare them
/// (a generated constructor takes them in that order), a relative server, counts that are left
/// out but never `null`, and a `username` pattern that admits no name the server refuses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generators_read_the_document_as_the_server_behaves() {
    let app = spawn_app().await;
    let served = app.get("/api/openapi.json").await.body;
    for doc in [&openapi_document(), &served] {
        let props = |schema: &str| -> Vec<String> {
            doc["components"]["schemas"][schema]["properties"]
                .as_object()
                .unwrap()
                .keys()
                .cloned()
                .collect()
        };
        assert_eq!(
            props("Post"),
            [
                "id",
                "postId",
                "userId",
                "userUsername",
                "title",
                "description",
                "content",
                "commentCount",
                "likeCount",
                "creationDate",
                "updatedAt",
                "bookmarkCount",
                "tags"
            ]
        );
        assert_eq!(
            props("PostBody"),
            ["userId", "title", "description", "content", "tags"]
        );
        assert_eq!(
            props("User")[..3],
            ["id".to_string(), "userId".into(), "username".into()]
        );
        assert_eq!(doc["servers"][0]["url"], "/", "{}", doc["servers"]);
        for count in ["followerCount", "followingCount"] {
            assert_eq!(
                doc["components"]["schemas"]["User"]["properties"][count]["type"],
                "integer"
            );
        }
    }
    // The pattern refuses every name the server refuses that a portable pattern can describe
    // (the Basic Multilingual Plane's), and admits every name the server keeps.
    let pattern = openapi_document()["components"]["schemas"]["UserBody"]["properties"]["username"]
        ["pattern"]
        .as_str()
        .unwrap()
        .to_string();
    let schema = serde_json::json!({ "type": "string", "pattern": pattern });
    let validator = jsonschema::validator_for(&schema).unwrap();
    let admitted: Vec<&str> = crate::validation::BAD_USERNAMES
        .iter()
        .filter(|(name, _)| name.chars().all(|c| (c as u32) < 0x10000))
        // The pattern names U+E000–U+F8FF among the invisible, and ECMAScript and Python
        // refuse a private-use name by it; this validator's regex engine admits it regardless.
        .filter(|(name, _)| !name.chars().any(|c| ('\u{E000}'..='\u{F8FF}').contains(&c)))
        .filter(|(name, _)| validator.is_valid(&serde_json::json!(name)))
        .map(|(_, why)| *why)
        .collect();
    assert!(admitted.is_empty(), "the pattern admits {admitted:?}");
    for name in crate::validation::GOOD_USERNAMES {
        assert!(validator.is_valid(&serde_json::json!(name)), "{name:?}");
    }
    for (name, why) in [
        ("a\u{2028}b", "a line separator inside"),
        ("a\u{2029}b", "a paragraph separator inside"),
    ] {
        assert!(!validator.is_valid(&serde_json::json!(name)), "{why}");
        app.post("/api/users", serde_json::json!({ "username": name }))
            .await
            .assert_problem(400);
    }
}

/// Where `example` breaks `schema` (whose `$ref`s point into `doc`'s components).
fn example_errors(doc: &Value, schema: &Value, example: &Value) -> Vec<String> {
    let root = serde_json::json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "allOf": [schema],
        "components": doc["components"],
    });
    let validator = jsonschema::validator_for(&root).expect("the schema compiles");
    validator
        .iter_errors(example)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect()
}

/// Every operation shows a request and an answer: an example on each parameter (the paging
/// token aside: it only comes from an answer), on its body and on each successful answer with a
/// body, each valid against its schema, in the document as generated and as served without
/// authentication (where a body's `userId` is required).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_operation_has_examples_that_its_schemas_accept() {
    let app = spawn_app().await;
    let served = app.get("/api/openapi.json").await.body;
    for doc in [&openapi_document(), &served] {
        let mut bodies = 0;
        for (path, method, op) in each_operation(doc) {
            let what = format!("{method} {path}");
            for param in op["parameters"].as_array().into_iter().flatten() {
                let name = param["name"].as_str().unwrap();
                if name == "continuationToken" {
                    continue;
                }
                let example = param
                    .get("example")
                    .unwrap_or_else(|| panic!("{what}: no example of `{name}`"));
                let errors = example_errors(doc, &param["schema"], example);
                assert!(errors.is_empty(), "{what} `{name}`: {errors:?}");
            }
            if let Some(content) = op["requestBody"]["content"].as_object() {
                for (media, body) in content {
                    let example = body
                        .pointer("/examples/example/value")
                        .unwrap_or_else(|| panic!("{what}: no example of its {media} body"));
                    let errors = example_errors(doc, &body["schema"], example);
                    assert!(errors.is_empty(), "{what} body: {errors:?}\n{example}");
                    bodies += 1;
                }
            }
            let mut answered = 0;
            for (status, response) in op["responses"].as_object().unwrap() {
                if !status.starts_with('2') {
                    continue;
                }
                for (media, answer) in response["content"].as_object().into_iter().flatten() {
                    let example = answer
                        .pointer("/examples/example/value")
                        .unwrap_or_else(|| panic!("{what} {status}: no example of {media}"));
                    let errors = example_errors(doc, &answer["schema"], example);
                    assert!(errors.is_empty(), "{what} {status}: {errors:?}\n{example}");
                    answered += 1;
                }
            }
            let no_content = op["responses"].as_object().unwrap().contains_key("204");
            assert!(
                answered > 0 || no_content,
                "{what}: no answer with an example"
            );
        }
        assert!(bodies >= 6, "the writes' bodies have examples");
    }
    // The check can fail: an example that breaks its schema is reported.
    let doc = openapi_document();
    let post = serde_json::json!({ "$ref": "#/components/schemas/Post" });
    assert!(!example_errors(&doc, &post, &serde_json::json!({ "id": "x" })).is_empty());
}

/// The examples are what the server does: the conditional headers' examples are the `ETag`s the
/// example answers would carry, and the example bodies are accepted by the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_examples_are_what_the_server_accepts_and_tags() {
    let doc = openapi_document();
    let op = &doc["paths"]["/api/posts/{postId}"]["get"];
    let answer =
        &op["responses"]["200"]["content"]["application/json"]["examples"]["example"]["value"];
    let tag = op["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "If-None-Match")
        .unwrap()["example"]
        .clone();
    let body = serde_json::to_vec(answer).unwrap();
    let digest = blog_tag(&body);
    assert_eq!(tag, serde_json::json!(digest));

    let app = spawn_app().await;
    let user_body = &doc["paths"]["/api/users"]["post"]["requestBody"]["content"]
        ["application/json"]["examples"]["example"]["value"];
    let r = app.post("/api/users", user_body.clone()).await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let mut post_body = doc["paths"]["/api/posts"]["post"]["requestBody"]["content"]
        ["application/json"]["examples"]["example"]["value"]
        .clone();
    post_body["userId"] = r.body["id"].clone();
    let r = app.post("/api/posts", post_body.clone()).await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    assert_eq!(r.body["title"], post_body["title"]);
}

/// The `ETag` the server gives a body (`conditional::tag_of`: 128 bits of SHA-256, in hex).
fn blog_tag(body: &[u8]) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(body);
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("\"{hex}\"")
}
