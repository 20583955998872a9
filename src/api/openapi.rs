//! The OpenAPI 3.1 document of the API, generated from the handlers' `#[utoipa::path]`
//! attributes and the types they take and answer, and served at `GET /api/openapi.json`.
//!
//! The generated document is kept in the repository as `docs/openapi.json`, and that file is what
//! the handler serves: generating it takes code (every schema's and operation's builder, about
//! half a megabyte of the binary) that would otherwise ship to answer one request. The binary
//! holds the file gzip-compressed (`build.rs`), decompressed on the first request for it. A test
//! (`tests/api/openapi.rs`) fails when the file is not what the code generates, and rewrites it
//! when run with `UPDATE_OPENAPI=1`.
//!
//! What holds for every operation alike is added here once, by rule, rather than repeated on
//! each handler: the answers any request can get (400, 431, 429, 503, 500 and, for writes, 401, 403,
//! 413, 415), the headers every answer carries, the bearer scheme on writes, and the patterns
//! of ids, usernames, texts and dates by property name; and the examples of every operation's
//! parameters, body and answers (`examples`).

use std::io::Read as _;
use std::sync::OnceLock;

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value};
use utoipa::OpenApi;

use super::conditional::{IF_MATCH_PATTERN, IF_NONE_MATCH_PATTERN};
use super::examples::Examples;
use super::schema::{username_pattern, DATE_PATTERN, ID_PATTERN, TEXT_PATTERN};
use super::AppState;
use crate::settings::AuthMode;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "blog",
        description = "A blog backend on the Azure Cosmos DB data model: users, posts, comments, likes and a feed. \
Every query of the article's model is one store operation on one partition (search, across partitions, is the one exception). Errors are `application/problem+json`. \
Reads are anonymous; writes act as the caller.",
        license(name = "MIT", identifier = "MIT"),
    ),
    tags(
        (name = "users", description = "Users and their posts"),
        (name = "posts", description = "Posts, comments and likes"),
        (name = "feed", description = "The newest posts"),
        (name = "follows", description = "Follows and the personal timeline"),
        (name = "meta", description = "This document"),
    )
)]
struct ApiDoc;

/// The bare document: what `utoipa` derives from the handlers the router is built from.
pub(super) fn base() -> utoipa::openapi::OpenApi {
    ApiDoc::openapi()
}

/// The operation keys of a path item.
const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

const PROBLEM: &str = "application/problem+json";

fn problem(description: &str) -> Value {
    json!({
        "description": description,
        "content": { PROBLEM: { "schema": { "$ref": "#/components/schemas/Problem" } } },
    })
}

/// The answers an operation can get besides its own, by kind of operation.
fn common_responses(write: bool, has_body: bool, has_input: bool) -> Vec<(&'static str, Value)> {
    let mut out = Vec::new();
    if has_input {
        out.push((
            "400",
            problem("Malformed or invalid input (nothing is written): `invalid-input` names each bad id, header, parameter or body property in `errors`; `malformed-body` when the body is not a JSON object"),
        ));
    }
    if write {
        out.push((
            "401",
            json!({
                "description": "No valid identity (writes need one when authentication is on)",
                "headers": { "WWW-Authenticate": {
                    "description": "`Bearer` (with the error when a token was refused)",
                    "schema": { "type": "string" } } },
                "content": { PROBLEM: { "schema": { "$ref": "#/components/schemas/Problem" } } },
            }),
        ));
        out.push((
            "403",
            problem("The caller may not act as the body's `userId`, or has no user yet"),
        ));
    }
    if has_body {
        out.push(("413", problem("The body is over 1 MiB")));
        out.push(("415", problem("The body is not sent as `application/json`")));
    }
    // The server refuses a request line and headers over its limit before routing: any
    // operation may answer it (a very long query string, say).
    // Refused while parsing, sometimes before the server can say more: no body is promised.
    out.push((
        "431",
        json!({ "description": "The request line and headers together are over 32 KiB (the connection closes; the answer may have no body)" }),
    ));
    let retry = json!({ "Retry-After": {
        "description": "Seconds to wait before retrying",
        "schema": { "type": "integer", "minimum": 1 } } });
    for (status, what) in [
        (
            "429",
            "The caller's writes are over `BLOG_WRITES_PER_MINUTE`, a client's searches over `BLOG_SEARCHES_PER_MINUTE` or too many run at once, or the store is throttling; retry after `Retry-After` seconds",
        ),
        (
            "503",
            "The store is unavailable; retry after `Retry-After` seconds",
        ),
    ] {
        let mut r = problem(what);
        r["headers"] = retry.clone();
        out.push((status, r));
    }
    out.push((
        "500",
        problem("An unexpected error (logged; the detail says nothing more)"),
    ));
    out
}

/// Headers on every answer.
fn metering_headers() -> Value {
    json!({
        "x-store-operations": {
            "description": "The store operations the request used",
            "schema": { "type": "integer", "minimum": 0 },
        },
        "x-request-charge": {
            "description": "The request units those operations cost, where the store reports them (Cosmos DB)",
            "schema": { "type": "string", "pattern": r"^\d+\.\d{2}$" },
        },
    })
}

/// Patterns of properties by name, in request bodies and answers alike.
fn property_pattern(schema: &str, property: &str) -> Option<String> {
    match (schema, property) {
        (_, "id" | "userId" | "postId") => Some(ID_PATTERN.into()),
        (_, "creationDate" | "updatedAt") => Some(DATE_PATTERN.into()),
        ("UserBody", "username") => Some(username_pattern()),
        ("PostBody" | "CommentBody", "title" | "content") => Some(TEXT_PATTERN.into()),
        _ => None,
    }
}

/// A tag in a path: 1 to 32 characters, none of them white space, a control character or ASCII
/// punctuation but `-` and `_` (letters in any case, digits; a pattern cannot name Unicode's letters, so
/// a symbol outside ASCII passes it and answers 400).
const TAG_PATTERN: &str = r"^[^\s\x00-\x2C\x2E\x2F\x3A-\x40\x5B-\x5E\x60\x7B-\x9F]{1,32}$";

fn parameter_pattern(name: &str) -> Option<&'static str> {
    match name {
        "userId" | "postId" | "commentId" | "followeeId" => Some(ID_PATTERN),
        "tag" => Some(TAG_PATTERN),
        "If-Match" => Some(IF_MATCH_PATTERN),
        "If-None-Match" => Some(IF_NONE_MATCH_PATTERN),
        _ => None,
    }
}

fn complete(doc: &mut Value) {
    // Relative: the API is under `/api` of whichever host serves this document.
    doc["servers"] = json!([{ "url": "/", "description": "The host serving this document" }]);
    doc["components"]["securitySchemes"] = json!({
        "bearer": {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "JWT",
            "description": "A token from the deployment's OpenID Connect issuer (`BLOG_AUTH=jwt`), one App Service authentication accepts (`BLOG_AUTH=easyauth`), or a local account's token from `POST /api/conduit/api/users/login` (`BLOG_AUTH=local`)",
        }
    });
    // Every problem type, so a client can list the kinds it handles.
    let problem_type = &mut doc["components"]["schemas"]["Problem"]["properties"]["type"];
    if problem_type.is_object() {
        problem_type["examples"] = json!(crate::error::PROBLEM_TYPES
            .iter()
            .map(|k| k.uri())
            .collect::<Vec<_>>());
    }
    if let Some(schemas) = doc["components"]["schemas"].as_object_mut() {
        for (name, schema) in schemas.iter_mut() {
            let Some(props) = schema.get_mut("properties").and_then(Value::as_object_mut) else {
                continue;
            };
            for (prop, def) in props.iter_mut() {
                if let Some(p) = property_pattern(name, prop) {
                    def["pattern"] = json!(p);
                }
            }
        }
    }
    let examples = Examples::new();
    // The document's own example: its opening (the whole would repeat it inside itself).
    let opening = json!({ "openapi": doc["openapi"], "info": doc["info"] });
    let Some(paths) = doc["paths"].as_object_mut() else {
        return;
    };
    for (path, item) in paths.iter_mut() {
        let Some(item) = item.as_object_mut() else {
            continue;
        };
        for (method, op) in item.iter_mut() {
            if !METHODS.contains(&method.as_str()) {
                continue;
            }
            // A `PUT` that states no body (a follow) is a write without one, like a delete.
            let has_body =
                matches!(method.as_str(), "post" | "put") && op.get("requestBody").is_some();
            let write = has_body || matches!(method.as_str(), "put" | "delete");
            if let Some(params) = op.get_mut("parameters").and_then(Value::as_array_mut) {
                for param in params {
                    let name = param["name"].as_str().unwrap_or_default().to_string();
                    // An optional parameter is left out, never sent as `null`.
                    if let Some(kind) = param["schema"]["type"]
                        .as_array()
                        .and_then(|t| t.iter().find(|t| *t != "null"))
                    {
                        param["schema"]["type"] = kind.clone();
                    }
                    if let Some(p) = parameter_pattern(&name) {
                        param["schema"]["pattern"] = json!(p);
                    }
                }
            }
            add_examples(op, path, &examples, &opening);
            let has_input = write || op["parameters"].as_array().is_some_and(|p| !p.is_empty());
            let responses = op["responses"]
                .as_object_mut()
                .expect("every operation has responses");
            for (status, response) in common_responses(write, has_body, has_input) {
                responses.entry(status).or_insert(response);
            }
            for response in responses.values_mut() {
                // utoipa 5 writes a link's fields in snake case; OpenAPI spells them in camel case.
                if let Some(links) = response.get_mut("links").and_then(Value::as_object_mut) {
                    for link in links.values_mut().filter_map(Value::as_object_mut) {
                        for (from, to) in [
                            ("operation_id", "operationId"),
                            ("operation_ref", "operationRef"),
                            ("request_body", "requestBody"),
                        ] {
                            if let Some(v) = link.remove(from) {
                                link.insert(to.into(), v);
                            }
                        }
                    }
                }
                let headers = response
                    .as_object_mut()
                    .expect("a response object")
                    .entry("headers")
                    .or_insert_with(|| Value::Object(Map::new()));
                for (name, header) in metering_headers().as_object().unwrap() {
                    headers[name] = header.clone();
                }
            }
            if write {
                op["security"] = json!([{ "bearer": [] }]);
            }
        }
    }
}

/// The schema a `$ref` names (`#/components/schemas/<name>`).
fn ref_name(schema: &Value) -> Option<&str> {
    schema["$ref"]
        .as_str()?
        .strip_prefix("#/components/schemas/")
}

/// A body's example, as a media type's `examples` (a map of named examples: the form reference
/// renderers read for answers as well as requests).
fn named(example: Value) -> Value {
    json!({ "example": { "value": example } })
}

/// An example on each of `op`'s parameters, its request body and each answer with a body
/// (`examples`); an answer that is any object (the document itself) gets `opening`.
fn add_examples(op: &mut Value, path: &str, examples: &Examples, opening: &Value) {
    let mut answered = None;
    if let Some(responses) = op["responses"].as_object_mut() {
        for (status, response) in responses.iter_mut() {
            let Some(content) = response.get_mut("content").and_then(Value::as_object_mut) else {
                continue;
            };
            for media in content.values_mut() {
                let example = match ref_name(&media["schema"]) {
                    Some(name) => examples.of_schema(name),
                    None if media["schema"]["type"] == "object" => Some(opening.clone()),
                    None => None,
                };
                if let Some(example) = example {
                    if status.starts_with('2') {
                        answered.get_or_insert_with(|| example.clone());
                    }
                    media["examples"] = named(example);
                }
            }
        }
    }
    if let Some(media) = op
        .get_mut("requestBody")
        .and_then(|b| b.get_mut("content"))
        .and_then(Value::as_object_mut)
    {
        for media in media.values_mut() {
            if let Some(example) = ref_name(&media["schema"]).and_then(|n| examples.of_schema(n)) {
                media["examples"] = named(example);
            }
        }
    }
    if let Some(params) = op.get_mut("parameters").and_then(Value::as_array_mut) {
        for param in params {
            let name = param["name"].as_str().unwrap_or_default().to_string();
            if let Some(example) = examples.of_parameter(&name, path, answered.as_ref()) {
                param["example"] = example;
            }
        }
    }
}

/// The document the route table describes (`doc`), completed by the rules above: the whole
/// document as generated, where writes need a bearer token ([`crate::api::openapi_document`]).
pub(super) fn completed(doc: utoipa::openapi::OpenApi) -> Value {
    let mut doc = serde_json::to_value(doc).expect("the document serializes");
    complete(&mut doc);
    doc
}

/// The generated document, as kept in `docs/openapi.json`, gzip-compressed by `build.rs`.
const GENERATED_GZIP: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/openapi.json.gz"));

/// The generated document, as kept in `docs/openapi.json`.
pub fn generated() -> String {
    let mut text = String::new();
    flate2::read::GzDecoder::new(GENERATED_GZIP)
        .read_to_string(&mut text)
        .expect("the embedded document is a gzip stream of UTF-8");
    text
}

/// The document a deployment serves: as generated, but where writes need no identity
/// (`BLOG_AUTH=none`, for local development) it says so instead of asking for a token, so that
/// a client (or a fuzzer) is not told to send one, and requires the `userId` that names the
/// acting user.
pub fn served_document(anonymous_writes: bool) -> Value {
    let mut doc: Value = serde_json::from_str(&generated()).expect("docs/openapi.json is JSON");
    if anonymous_writes {
        if let Some(paths) = doc["paths"].as_object_mut() {
            for item in paths.values_mut().filter_map(Value::as_object_mut) {
                for op in item.values_mut().filter_map(Value::as_object_mut) {
                    op.remove("security");
                }
            }
        }
        // There `userId` says who acts, so every body that has one must carry it.
        if let Some(schemas) = doc["components"]["schemas"].as_object_mut() {
            for body in ["PostBody", "CommentBody", "LikeBody"] {
                if let Some(schema) = schemas.get_mut(body).and_then(Value::as_object_mut) {
                    if let Some(user_id) = schema
                        .get_mut("properties")
                        .and_then(|p| p.get_mut("userId"))
                    {
                        user_id["type"] = json!("string");
                    }
                    let required = schema.entry("required").or_insert_with(|| json!([]));
                    if let Some(list) = required.as_array_mut() {
                        list.insert(0, json!("userId"));
                    }
                }
            }
        }
        let note = "\n\nThis deployment runs without authentication: a write acts as the user its body's `userId` names, so `userId` is required.";
        let description = doc["info"]["description"].as_str().unwrap_or_default();
        doc["info"]["description"] = json!(format!("{description}{note}"));
    }
    doc
}

/// `GET /api/openapi.json`: this document.
#[utoipa::path(
    get,
    path = "/api/openapi.json",
    tag = "meta",
    summary = "This OpenAPI document",
    responses((status = 200, description = "The OpenAPI 3.1 document of this API", content_type = "application/json",
        body = Object)),
)]
pub async fn get_api_description(State(s): State<AppState>) -> Response {
    static OPEN: OnceLock<String> = OnceLock::new();
    static SIGNED: OnceLock<String> = OnceLock::new();
    let text = if s.auth.mode() == AuthMode::None {
        OPEN.get_or_init(|| served_document(true).to_string())
    } else {
        SIGNED.get_or_init(|| served_document(false).to_string())
    };
    (
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        text.clone(),
    )
        .into_response()
}
