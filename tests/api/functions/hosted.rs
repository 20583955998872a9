//! Hosted mode as the Functions host starts it: `FUNCTIONS_CUSTOMHANDLER_PORT` set, the host
//! probing `/`, HTTP forwarded to `/api/...`, the change feed arriving only through the triggers.

use std::collections::HashMap;
use std::io::Read as _;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use blog::settings::Settings;
use blog::store::Container;
use reqwest::StatusCode;
use serde_json::{json, Value};

use super::common::spawn_hosted;
use crate::helpers::free_port;

fn hosted_settings(port: u16, dir: &std::path::Path) -> Settings {
    let vars: HashMap<&str, String> = HashMap::from([
        ("FUNCTIONS_CUSTOMHANDLER_PORT", port.to_string()),
        // Ignored under the host: the host's port wins.
        ("PORT", "1".to_string()),
        ("BLOG_DB_PATH", dir.join("blog.db").display().to_string()),
        ("BLOG_STORE", "embedded".to_string()),
        // These tests are about the host's protocol; identity under the host has its own tests.
        ("BLOG_AUTH", "none".to_string()),
    ]);
    Settings::from_lookup(|k| vars.get(k).cloned()).unwrap()
}

#[tokio::test]
async fn hosted_mode_listens_on_the_hosts_port_answers_the_probe_and_serves_the_api() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let settings = hosted_settings(port, dir.path());
    assert!(settings.hosted && !settings.pump);
    let expected: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    assert_eq!(settings.addr, expected);

    // As `handler` does: bind the settings' address, serve while the store opens.
    let listener = tokio::net::TcpListener::bind(settings.addr).await.unwrap();
    assert_eq!(listener.local_addr().unwrap(), expected);
    let store = blog::startup::open_store(&settings).await.unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let opened = store.clone();
    let server = tokio::spawn(async move {
        blog::startup::serve(listener, &settings, async { Ok(opened) }, async move {
            let _ = stopped.await;
        })
        .await
    });

    let client = reqwest::Client::new();
    let base = format!("http://{expected}");
    // The host's readiness probe: any answer will do; this one is 200 at once.
    let probe = client.get(format!("{base}/")).send().await.unwrap();
    assert_eq!(probe.status(), StatusCode::OK);

    // Forwarded HTTP functions arrive at their original path.
    let user: Value = client
        .post(format!("{base}/api/users"))
        .json(&json!({ "username": "ana" }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let post = client
        .post(format!("{base}/api/posts"))
        .json(&json!({ "userId": user["id"], "title": "Hosted", "content": "hello" }))
        .send()
        .await
        .unwrap();
    assert_eq!(post.status(), StatusCode::CREATED);
    let post: Value = post.json().await.unwrap();
    let post_id = post["id"].as_str().unwrap();

    // No pump under the host: nothing reaches the feed until the trigger delivers the change.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let feed = get_json(&client, &format!("{base}/api/feed")).await;
    assert_eq!(
        feed["items"],
        json!([]),
        "the pump must be off under the host"
    );

    let doc = store
        .read(Container::Posts, post_id, post_id)
        .await
        .unwrap()
        .unwrap();
    let r = client
        .post(format!("{base}/PostsChangeFeed"))
        .header(
            "X-Azure-Functions-InvocationId",
            "3c1d6c1e-0000-4000-8000-000000000001",
        )
        .json(&json!({ "Data": { "documents": [doc] }, "Metadata": {} }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let feed = get_json(&client, &format!("{base}/api/feed")).await;
    assert_eq!(feed["items"][0]["id"], post_id);

    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
}

#[tokio::test]
async fn the_hosted_app_answers_the_probe_and_takes_invocations() {
    let app = spawn_hosted().await;
    assert_eq!(app.get("/").await.status, 200);
    app.deliver("UsersChangeFeed", &[]).await.assert_applied();
}

/// `enableProxyingHttpRequest`: the host passes an HTTP function's request through its reverse
/// proxy as the client sent it (method, `/api/...` path, query, headers, body) to
/// `127.0.0.1:<port>`, adding its own `X-Azure-Functions-*` headers and `X-Forwarded-*`; the
/// handler's answer goes back unchanged, so it must be the API's answer, not an invocation reply.
#[tokio::test]
async fn a_proxied_http_request_is_served_as_the_client_sent_it() {
    let app = spawn_hosted().await;
    let proxied = |req: reqwest::RequestBuilder, n: u32| {
        req.header("X-Azure-Functions-HostVersion", "4.1041.200.0")
            .header(
                "X-Azure-Functions-InvocationId",
                format!("5b7c2d2e-0000-4000-8000-{n:012}"),
            )
            .header("X-Forwarded-For", "203.0.113.7")
            .header("X-Forwarded-Proto", "https")
            .header("X-Forwarded-Host", "func-blog-x.azurewebsites.net")
    };

    let user = app
        .send(proxied(
            app.client
                .post(app.url("/api/users"))
                .json(&json!({ "username": "ana" })),
            1,
        ))
        .await;
    assert_eq!(user.status, 201, "{:?}", user.body);
    let user_id = user.body["id"].as_str().unwrap().to_string();
    assert_eq!(
        user.header("location"),
        Some(format!("/api/users/{user_id}").as_str()),
        "a relative Location, whatever host the proxy called"
    );

    for title in ["first", "second"] {
        let post = app
            .send(proxied(
                app.client
                    .post(app.url("/api/posts"))
                    .json(&json!({ "userId": user_id, "title": title, "content": "proxied" })),
                2,
            ))
            .await;
        assert_eq!(post.status, 201, "{:?}", post.body);
        let post_id = post.body["id"].as_str().unwrap();
        let doc = app.current(Container::Posts, post_id, post_id).await;
        app.deliver("PostsChangeFeed", &[doc])
            .await
            .assert_applied();
    }

    // The query string reaches the handler as the client wrote it.
    let page = app
        .send(proxied(app.client.get(app.url("/api/feed?limit=1")), 3))
        .await;
    assert_eq!(page.status, 200, "{:?}", page.body);
    assert_eq!(page.items().len(), 1, "{:?}", page.body);
    assert_eq!(page.items()[0]["title"], "second");
    assert!(
        page.body.get("Outputs").is_none(),
        "an HTTP answer, not an invocation reply"
    );
}

/// `enableForwardingHttpRequest`, what a host without the proxy does with an HTTP function
/// (the in-process host branch's `DefaultHttpWorkerService.ProcessHttpInAndOutInvocationRequest`
/// and `HttpRequestExtensions.ToHttpRequestMessage`): it rebuilds the request at the original
/// path (`/api/...`) with the query re-encoded, every client header copied (the public `Host`
/// among them), `X-Azure-Functions-HostVersion`, `X-Azure-Functions-InvocationId` and its own
/// product added to `User-Agent`, and the body with `Content-Length` and `Content-Type`; the
/// handler's answer becomes the HTTP output as it is. No `X-Forwarded-*` headers.
#[tokio::test]
async fn a_forwarded_http_request_is_served_as_the_client_sent_it() {
    let app = spawn_hosted().await;
    let forwarded = |req: reqwest::RequestBuilder, n: u32| {
        req.header(reqwest::header::HOST, "func-blog-x.azurewebsites.net")
            .header(
                reqwest::header::USER_AGENT,
                "curl/8.5.0 AzureFunctionsHost/4.1041.200.0",
            )
            .header("X-Azure-Functions-HostVersion", "4.1041.200.0")
            .header(
                "X-Azure-Functions-InvocationId",
                format!("9d1e4f3a-0000-4000-8000-{n:012}"),
            )
    };

    let body = json!({ "username": "bo" }).to_string();
    let user = app
        .send(forwarded(
            app.client
                .post(app.url("/api/users"))
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .header(reqwest::header::CONTENT_LENGTH, body.len())
                .body(body),
            1,
        ))
        .await;
    assert_eq!(user.status, 201, "{:?}", user.body);
    let user_id = user.body["id"].as_str().unwrap().to_string();
    assert_eq!(
        user.header("location"),
        Some(format!("/api/users/{user_id}").as_str()),
        "a relative Location, whatever Host the request names"
    );

    let post = app
        .send(forwarded(
            app.client
                .post(app.url("/api/posts"))
                .json(&json!({ "userId": user_id, "title": "forwarded", "content": "rebuilt" })),
            2,
        ))
        .await;
    assert_eq!(post.status, 201, "{:?}", post.body);
    let post_id = post.body["id"].as_str().unwrap().to_string();
    let doc = app.current(Container::Posts, &post_id, &post_id).await;
    app.deliver("PostsChangeFeed", &[doc])
        .await
        .assert_applied();

    // The query, as the host re-encodes it.
    let page = app
        .send(forwarded(app.client.get(app.url("/api/feed?limit=1")), 3))
        .await;
    assert_eq!(page.status, 200, "{:?}", page.body);
    assert_eq!(page.items().len(), 1, "{:?}", page.body);
    assert_eq!(page.items()[0]["id"], post_id.as_str());
    assert!(
        page.body.get("Outputs").is_none(),
        "an HTTP answer, not an invocation reply"
    );

    // An error is the API's own answer too, status and problem document.
    let missing = app
        .send(forwarded(
            app.client.get(app.url("/api/posts/no-such-post")),
            4,
        ))
        .await;
    missing.assert_problem(404);
}

/// Seconds since the epoch, as the store stamps `_ts`.
fn epoch_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// Each applied batch says how far behind its newest change it is, in the line the host writes
/// to the function's log, where a log query reads `lag_ms=<n>`.
#[tokio::test]
async fn an_applied_batch_reports_its_lag_behind_the_newest_change() {
    let app = spawn_hosted().await;
    let user = app.create_user("ana").await;
    let post = app
        .create_post(user["id"].as_str().unwrap(), "late", "two minutes behind")
        .await;
    let post_id = post["id"].as_str().unwrap();
    let mut newest = app.current(Container::Posts, post_id, post_id).await;
    let mut older = newest.clone();
    // As the change feed would deliver a backlog: the newest change two minutes old.
    newest["_ts"] = json!(epoch_secs() - 120);
    older["_ts"] = json!(epoch_secs() - 600);

    let applied = app.deliver("PostsChangeFeed", &[older, newest]).await;
    applied.assert_applied();
    let logs = applied.logs();
    let lag: u64 = logs
        .split("lag_ms=")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no lag_ms=<n> in {logs:?}"));
    // From the newest change, not the oldest; `_ts` has whole seconds.
    assert!((120_000..600_000).contains(&lag), "lag_ms={lag}: {logs}");

    // A batch with nothing stamped has no lag to report.
    let empty = app.deliver("UsersChangeFeed", &[]).await;
    empty.assert_applied();
    assert!(!empty.logs().contains("lag_ms"), "{}", empty.logs());
}

/// The real `handler` binary, started as the host starts it, with its stdout and stderr kept:
/// the build under test, or the one `BLOG_TEST_HANDLER` names (the packaged `dist/app/handler`,
/// to measure what ships).
pub(super) struct Handler {
    pub(super) child: std::process::Child,
    pub(super) base: String,
}

impl Handler {
    pub(super) fn start(dir: &std::path::Path, log_format: Option<&str>) -> Handler {
        let port = free_port();
        let binary = std::env::var_os("BLOG_TEST_HANDLER")
            .unwrap_or_else(|| env!("CARGO_BIN_EXE_handler").into());
        let mut cmd = Command::new(binary);
        // Only what the host would set: nothing from the developer's shell leaks in.
        cmd.env_clear()
            .env("FUNCTIONS_CUSTOMHANDLER_PORT", port.to_string())
            .env("BLOG_STORE", "embedded")
            .env("BLOG_DB_PATH", dir.join("blog.db"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(f) = log_format {
            cmd.env("BLOG_LOG_FORMAT", f);
        }
        Handler {
            child: cmd.spawn().expect("the handler binary starts"),
            base: format!("http://127.0.0.1:{port}"),
        }
    }

    /// Probe `/` as the host does until the handler answers.
    pub(super) async fn wait_ready(&self, client: &reqwest::Client) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(r) = client.get(format!("{}/", self.base)).send().await {
                assert_eq!(r.status(), StatusCode::OK);
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the handler never answered the probe"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Stop it and return (stdout, stderr).
    fn stop(mut self) -> (String, String) {
        self.child.kill().expect("kill the handler we started");
        self.child.wait().unwrap();
        let mut out = String::new();
        let mut err = String::new();
        self.child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        self.child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        (out, err)
    }
}

impl Drop for Handler {
    fn drop(&mut self) {
        // A failed assertion must not leave the process behind.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn invoke_twice(handler: &Handler, client: &reqwest::Client, invocation_id: &str) {
    let ok = client
        .post(format!("{}/PostsChangeFeed", handler.base))
        .header("X-Azure-Functions-InvocationId", invocation_id)
        .json(&json!({ "Data": { "documents": "[]" }, "Metadata": {} }))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), StatusCode::OK);
    let bad = client
        .post(format!("{}/PostsChangeFeed", handler.base))
        .header("X-Azure-Functions-InvocationId", invocation_id)
        .header("Content-Type", "application/json")
        .body("not json")
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn the_binary_logs_json_lines_to_stdout_only_with_the_invocation_id() {
    let dir = tempfile::tempdir().unwrap();
    let client = reqwest::Client::new();
    let handler = Handler::start(dir.path(), Some("json"));
    handler.wait_ready(&client).await;
    invoke_twice(&handler, &client, "inv-json-0001").await;
    // A change of a user the store does not hold, a minute old: nothing to project, still a batch.
    let stale = json!({ "id": "u-gone", "userId": "u-gone", "type": "user", "username": "gone", "_ts": epoch_secs() - 60 });
    let lagged = client
        .post(format!("{}/UsersChangeFeed", handler.base))
        .header("X-Azure-Functions-InvocationId", "inv-json-lag")
        .json(&json!({ "Data": { "documents": [stale] }, "Metadata": {} }))
        .send()
        .await
        .unwrap();
    assert_eq!(lagged.status(), StatusCode::OK);
    let (out, err) = handler.stop();

    // The host logs every stderr line as an error.
    assert!(err.is_empty(), "stderr: {err}");
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}")))
        .collect();
    assert!(lines.iter().any(|l| l["message"] == "listening"), "{out}");
    let in_span: Vec<&Value> = lines
        .iter()
        .filter(|l| l["span"]["invocation_id"] == "inv-json-0001")
        .collect();
    assert!(
        in_span.iter().any(|l| l["message"] == "batch applied"),
        "{out}"
    );
    // The lag is a field of its own, for a log query to read.
    let lagged = lines
        .iter()
        .find(|l| l["span"]["invocation_id"] == "inv-json-lag" && l["message"] == "batch applied")
        .unwrap_or_else(|| panic!("no applied batch with a lag: {out}"));
    let lag = lagged["lag_ms"]
        .as_u64()
        .unwrap_or_else(|| panic!("{lagged}"));
    assert!((60_000..600_000).contains(&lag), "{lagged}");
    assert!(
        in_span.iter().any(|l| l["level"] == "ERROR"),
        "the undecodable invocation is logged: {out}"
    );
}

#[tokio::test]
async fn the_binary_logs_readable_text_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let client = reqwest::Client::new();
    let handler = Handler::start(dir.path(), None);
    handler.wait_ready(&client).await;
    invoke_twice(&handler, &client, "inv-text-0002").await;
    let (out, err) = handler.stop();

    assert!(err.is_empty(), "stderr: {err}");
    assert!(
        out.lines()
            .all(|l| serde_json::from_str::<Value>(l).is_err()),
        "{out}"
    );
    assert!(
        !out.contains('\u{1b}'),
        "no colour codes when stdout is not a terminal: {out}"
    );
    let applied = out
        .lines()
        .find(|l| l.contains("batch applied"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        applied.contains("inv-text-0002") && applied.contains("PostsChangeFeed"),
        "{applied}"
    );
}

async fn get_json(client: &reqwest::Client, url: &str) -> Value {
    client.get(url).send().await.unwrap().json().await.unwrap()
}
