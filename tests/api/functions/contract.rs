//! The Functions app definition (`host.json`, `functions/*/function.json`) against the protocol
//! `docs/functions-host.md` describes, against that page's table of functions, and against the
//! router: an HTTP function without a route, a route without a function, a function the table
//! leaves out or states otherwise, or a trigger the handler does not answer fails here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use blog::api::operations;
use blog::functions::{ChangeFeed, TRIGGERS};
use blog::projection::Lane;
use reqwest::StatusCode;
use serde_json::{json, Value};

use super::common::{repo, spawn_hosted};

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

/// Every `functions/<name>/function.json`, by function name.
fn functions() -> BTreeMap<String, Value> {
    let dir = repo().join("functions");
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).expect("functions/ exists") {
        let path = entry.unwrap().path();
        if path.is_dir() {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            out.insert(name, read_json(&path.join("function.json")));
        }
    }
    assert!(!out.is_empty(), "no functions under {}", dir.display());
    out
}

fn trigger_type(f: &Value) -> &str {
    f["bindings"][0]["type"].as_str().unwrap_or("")
}

/// `(route, METHOD)` for every operation of the API, from the route table the router and the
/// OpenAPI document are built from, and the web client's and the API reference's functions
/// beside them.
fn router_requests() -> BTreeSet<(String, String)> {
    operations()
        .into_iter()
        .map(|op| (op.route, op.method))
        .chain(
            [
                blog::web::FUNCTION_ROUTE,
                blog::web::reference::FUNCTION_ROUTE,
                blog::api::events::FUNCTION_ROUTE,
            ]
            .map(|(route, method)| (route.to_string(), method.to_string())),
        )
        .chain(
            blog::api::conduit::FUNCTIONS
                .iter()
                .flat_map(|(_, route, methods)| {
                    methods.iter().map(|m| (route.to_string(), m.to_string()))
                }),
        )
        .collect()
}

/// `create_comment` → `CreateComment`: the function that forwards an operation is named after
/// its handler.
fn function_name(operation_id: &str) -> String {
    operation_id
        .split('_')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

#[test]
fn every_http_function_is_named_after_the_operation_it_forwards() {
    let functions = functions();
    for op in operations() {
        let name = function_name(&op.operation_id);
        let f = functions
            .get(&name)
            .unwrap_or_else(|| panic!("no function `{name}` for {} /api/{}", op.method, op.route));
        let input = &f["bindings"][0];
        assert_eq!(input["route"], op.route.as_str(), "{name}");
        let methods: Vec<String> = input["methods"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m.as_str().unwrap().to_uppercase())
            .collect();
        assert_eq!(
            methods,
            std::slice::from_ref(&op.method),
            "{name}: one operation per function"
        );
    }
}

#[test]
fn host_json_runs_the_handler_with_proxied_or_forwarded_http_under_api() {
    let host = read_json(&repo().join("host.json"));
    assert_eq!(host["version"], "2.0");
    assert_eq!(
        host["customHandler"]["description"]["defaultExecutablePath"],
        "handler"
    );
    // Both ways the host can hand an HTTP function's request to the handler at its own path
    // (docs/functions-host.md): a host that knows `enableProxyingHttpRequest` proxies the request
    // as it came (its reverse proxy, which also streams); one that does not (Core Tools may ship
    // such a host) forwards it rebuilt at the same path with `enableForwardingHttpRequest`. With
    // neither, the host would POST the invocation envelope to `/<FunctionName>` and every HTTP
    // function would answer 404. Non-HTTP functions (the change-feed triggers) are invoked with
    // the envelope either way.
    assert_eq!(host["customHandler"]["enableProxyingHttpRequest"], true);
    assert_eq!(host["customHandler"]["enableForwardingHttpRequest"], true);
    assert_eq!(host["extensions"]["http"]["routePrefix"], "api");
    assert_eq!(
        host["extensionBundle"]["id"],
        "Microsoft.Azure.Functions.ExtensionBundle"
    );
    assert_eq!(host["extensionBundle"]["version"], "[4.*, 5.0.0)");
    assert!(host["logging"]["logLevel"]["default"].is_string());
}

#[test]
fn function_names_are_valid_for_the_host() {
    // The host's rule for function (folder) names.
    for name in functions().keys() {
        let mut chars = name.chars();
        let ok = name.len() <= 128
            && chars.next().is_some_and(|c| c.is_ascii_alphabetic())
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        assert!(ok, "`{name}` is not a valid function name");
    }
}

#[test]
fn every_http_function_matches_a_route_and_every_route_has_a_function() {
    let mut declared: Vec<(String, String)> = Vec::new();
    for (name, f) in functions() {
        if trigger_type(&f) != "httpTrigger" {
            continue;
        }
        let bindings = f["bindings"].as_array().unwrap();
        assert_eq!(bindings.len(), 2, "{name}: httpTrigger + http output only");
        let (input, output) = (&bindings[0], &bindings[1]);
        assert_eq!(input["direction"], "in", "{name}");
        assert_eq!(input["authLevel"], "anonymous", "{name}");
        assert_eq!(output["type"], "http", "{name}");
        assert_eq!(output["direction"], "out", "{name}");
        let route = input["route"]
            .as_str()
            .unwrap_or_else(|| panic!("{name}: no route"));
        assert!(
            !route.starts_with('/') && !route.starts_with("api/"),
            "{name}: `{route}` must be relative to the `api` prefix"
        );
        let methods = input["methods"]
            .as_array()
            .unwrap_or_else(|| panic!("{name}: no methods (all methods would be routed)"));
        assert!(!methods.is_empty(), "{name}");
        for m in methods {
            declared.push((route.to_string(), m.as_str().unwrap().to_uppercase()));
        }
    }
    let unique: BTreeSet<_> = declared.iter().cloned().collect();
    assert_eq!(
        unique.len(),
        declared.len(),
        "a request is declared by two functions: {declared:?}"
    );

    let served = router_requests();
    let no_route: Vec<_> = unique.difference(&served).collect();
    let no_function: Vec<_> = served.difference(&unique).collect();
    assert!(
        no_route.is_empty(),
        "HTTP functions the router does not serve: {no_route:?}"
    );
    assert!(
        no_function.is_empty(),
        "routes no function forwards: {no_function:?}"
    );
}

/// The one route under `/api` that no function forwards: `GET /api`, the index of links. A
/// function's route is relative to the host's `api` prefix, and without one the host routes the
/// function at its own name, so no function can be the prefix itself; `docs/functions-host.md`
/// says so. Every other route under `/api` is one of [`router_requests`].
const NOT_FORWARDED: (&str, &str) = ("", "GET");

/// A row of the table of functions in `docs/functions-host.md`: the functions it names, its
/// trigger, its route or container column and its methods column.
struct DocRow {
    names: Vec<String>,
    trigger: String,
    route: String,
    methods: String,
}

/// The backticked spans of `cell`, in order.
fn quoted(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

fn doc_table() -> Vec<DocRow> {
    let page = std::fs::read_to_string(repo().join("docs/functions-host.md")).unwrap();
    let rows: Vec<DocRow> = page
        .lines()
        .skip_while(|l| !l.starts_with("| function | trigger |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split(" | ").map(str::trim).collect();
            assert_eq!(cells.len(), 4, "a row of four cells: {l}");
            DocRow {
                names: quoted(cells[0]),
                trigger: cells[1].to_string(),
                route: cells[2].to_string(),
                methods: cells[3].to_string(),
            }
        })
        .collect();
    assert!(
        !rows.is_empty(),
        "no table of functions in docs/functions-host.md"
    );
    rows
}

/// The upper-cased methods of an HTTP function.
fn methods_of(f: &Value) -> Vec<String> {
    f["bindings"][0]["methods"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| m.as_str().unwrap_or_default().to_uppercase())
        .collect()
}

#[test]
fn the_docs_table_lists_every_function_as_declared() {
    let functions = functions();
    let rows = doc_table();
    let listed: BTreeSet<String> = rows.iter().flat_map(|r| r.names.clone()).collect();
    let declared: BTreeSet<String> = functions.keys().cloned().collect();
    assert_eq!(
        declared.difference(&listed).collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "functions docs/functions-host.md does not list"
    );
    assert_eq!(
        listed.difference(&declared).collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "functions docs/functions-host.md lists but functions/ does not declare"
    );
    for row in &rows {
        let first = quoted(&row.route);
        for (i, name) in row.names.iter().enumerate() {
            let f = &functions[name];
            let input = &f["bindings"][0];
            if row.trigger == "HTTP" {
                assert_eq!(trigger_type(f), "httpTrigger", "{name}");
                // The Conduit row sums up its functions (`conduit/api/...`, "as the RealWorld
                // API"); `api::conduit::FUNCTIONS` lists them one by one, checked above.
                let route = &first[0];
                if !route.ends_with("...") {
                    assert_eq!(input["route"], route.as_str(), "{name}: the docs' route");
                }
                let methods: Vec<&str> = row.methods.split(", ").collect();
                if methods.len() == row.names.len() {
                    assert_eq!(methods_of(f), [methods[i]], "{name}: the docs' methods");
                } else if row.names.len() == 1 {
                    assert_eq!(methods_of(f), methods, "{name}: the docs' methods");
                } else {
                    assert!(row.methods.starts_with("as "), "{name}: {}", row.methods);
                }
            } else {
                assert_eq!(trigger_type(f), "cosmosDBTrigger", "{name}");
                assert_eq!(input["containerName"], first[0].as_str(), "{name}");
                assert_eq!(input["leaseContainerPrefix"], first[1].as_str(), "{name}");
                assert_eq!(row.methods, format!("host POSTs `/{name}`"), "{name}");
            }
        }
    }
}

#[tokio::test]
async fn the_api_index_is_served_but_no_function_forwards_it() {
    let (route, method) = NOT_FORWARDED;
    for (name, f) in functions() {
        if trigger_type(&f) == "httpTrigger" {
            assert_ne!(f["bindings"][0]["route"], route, "{name}");
        }
    }
    assert!(!router_requests().contains(&(route.to_string(), method.to_string())));
    let page = std::fs::read_to_string(repo().join("docs/functions-host.md")).unwrap();
    assert!(
        page.contains("No function forwards `GET /api`"),
        "docs/functions-host.md says which route under /api has no function"
    );
    let app = spawn_hosted().await;
    let r = app.client.get(app.url("/api")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK, "{method} /api/{route}");
}

#[test]
fn the_change_feed_triggers_are_declared_as_the_contract_requires() {
    let all = functions();
    let triggers: BTreeMap<_, _> = all
        .iter()
        .filter(|(_, f)| trigger_type(f) != "httpTrigger")
        .collect();
    let expected: BTreeSet<&str> = TRIGGERS.iter().map(|t| t.function).collect();
    assert_eq!(
        triggers.keys().map(|k| k.as_str()).collect::<BTreeSet<_>>(),
        expected,
        "every non-HTTP function is a trigger the handler answers, and the other way round"
    );

    let mut prefixes = BTreeSet::new();
    for t in TRIGGERS {
        let f = triggers[&t.function.to_string()];
        let bindings = f["bindings"].as_array().unwrap();
        assert_eq!(bindings.len(), 1, "{}: the trigger only", t.function);
        let b = &bindings[0];
        let container = match t.feed {
            ChangeFeed::Posts => "posts",
            ChangeFeed::Users => "users",
        };
        assert_eq!(b["type"], "cosmosDBTrigger", "{}", t.function);
        assert_eq!(b["direction"], "in", "{}", t.function);
        assert_eq!(
            b["name"], t.binding,
            "{}: the handler reads Data.{}",
            t.function, t.binding
        );
        assert_eq!(b["connection"], "COSMOS", "{}", t.function);
        assert_eq!(b["databaseName"], "%COSMOS_DATABASE%", "{}", t.function);
        assert_eq!(b["containerName"], container, "{}", t.function);
        assert_eq!(b["leaseContainerName"], "leases", "{}", t.function);
        assert_eq!(
            b["createLeaseContainerIfNotExists"], false,
            "{}",
            t.function
        );
        let prefix = b["leaseContainerPrefix"].as_str().unwrap_or("");
        assert!(
            !prefix.is_empty() && prefixes.insert(prefix.to_string()),
            "{}: a distinct leaseContainerPrefix",
            t.function
        );
        let max = b["maxItemsPerInvocation"].as_u64().unwrap_or(0);
        assert!(
            (1..=blog::functions::MAX_DOCUMENTS as u64).contains(&max),
            "{}: maxItemsPerInvocation {max}",
            t.function
        );

        // Without a retry policy, or with a limit, the trigger checkpoints past a failed batch
        // and it is lost; the handler bounds the attempts itself and quarantines what fails.
        let retry = &f["retry"];
        assert_eq!(
            retry["strategy"], "exponentialBackoff",
            "{}: {retry}",
            t.function
        );
        let count = retry["maxRetryCount"].as_i64().unwrap();
        assert!(count == -1, "{}: maxRetryCount {count}", t.function);
        let min = seconds(retry["minimumInterval"].as_str().unwrap());
        let max = seconds(retry["maximumInterval"].as_str().unwrap());
        assert!(0 < min && min < max, "{}: {retry}", t.function);
    }

    // Each lane follows each feed with a trigger of its own, so the host checkpoints and scales
    // the timeline lane apart from the main one.
    let lanes: BTreeSet<String> = TRIGGERS
        .iter()
        .map(|t| format!("{:?}/{:?}", t.feed, t.lane))
        .collect();
    let wanted: BTreeSet<String> = [ChangeFeed::Posts, ChangeFeed::Users]
        .iter()
        .flat_map(|f| Lane::ALL.iter().map(move |l| format!("{f:?}/{l:?}")))
        .collect();
    assert_eq!(lanes, wanted, "one trigger per feed and lane");
    assert_eq!(TRIGGERS.len(), wanted.len());
    // A lease manager finds its leases by their prefix: no prefix may start another.
    for a in &prefixes {
        for b in &prefixes {
            assert!(a == b || !b.starts_with(a.as_str()), "{a} starts {b}");
        }
    }
}

/// `hh:mm:ss` to seconds.
fn seconds(s: &str) -> u64 {
    let parts: Vec<u64> = s.split(':').map(|p| p.parse().unwrap()).collect();
    assert_eq!(parts.len(), 3, "`{s}` is hh:mm:ss");
    parts[0] * 3600 + parts[1] * 60 + parts[2]
}

#[tokio::test]
async fn the_router_serves_every_listed_route_and_answers_every_trigger() {
    let app = spawn_hosted().await;
    for op in operations() {
        let path = format!(
            "/api/{}",
            op.route
                .replace("{userId}", "nobody")
                .replace("{postId}", "nothing")
        );
        let method = &op.method;
        {
            let r = app
                .client
                .request(method.parse().unwrap(), app.url(&path))
                .json(&json!({}))
                .send()
                .await
                .unwrap();
            let status = r.status();
            let body: Value = r.json().await.unwrap_or(Value::Null);
            assert_ne!(status, StatusCode::METHOD_NOT_ALLOWED, "{method} {path}");
            // The fallback's 404 means no route; a handler's 404 names the missing resource.
            assert_ne!(
                body["detail"], "no such resource",
                "{method} {path}: not routed"
            );
        }
    }
    // The Conduit API's functions: each route and method is routed (a handler's answer, not the
    // fallback's problem+json).
    for (name, route, methods) in blog::api::conduit::FUNCTIONS {
        let path = format!(
            "/api/{}",
            route
                .replace("{username}", "nobody")
                .replace("{slug}", "nothing")
                .replace("{id}", "1")
        );
        for method in methods {
            let r = app
                .client
                .request(method.parse().unwrap(), app.url(&path))
                .json(&json!({}))
                .send()
                .await
                .unwrap();
            let status = r.status();
            let body: Value = r.json().await.unwrap_or(Value::Null);
            assert_ne!(
                status,
                StatusCode::METHOD_NOT_ALLOWED,
                "{name}: {method} {path}"
            );
            assert!(
                body.get("errors").is_some() || status.is_success(),
                "{name}: {method} {path}: not routed: {body}"
            );
        }
    }
    for t in TRIGGERS {
        app.deliver(t.function, &[]).await.assert_applied();
    }
}
