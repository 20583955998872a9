//! Start-up: the server answers the readiness probe from the moment it serves, while the store
//! is still opening; the requests that need the store wait for it, and a store that cannot be
//! opened ends the start with an error, never with a server that answers only the probe.

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use blog::settings::Settings;
use blog::store::Store;
use reqwest::StatusCode;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use crate::helpers::embedded_fixture;

/// `blog::startup::serve` on a fresh port, over the store `store` gives; `stop` ends it.
async fn serve_over(
    store: impl std::future::Future<Output = anyhow::Result<Arc<dyn Store>>> + Send + 'static,
) -> (
    String,
    oneshot::Sender<()>,
    tokio::task::JoinHandle<anyhow::Result<()>>,
) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let settings = Settings::from_lookup(|_| None).unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        blog::startup::serve(listener, &settings, store, async {
            let _ = stopped.await;
        })
        .await
    });
    (base, stop, server)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_probe_is_answered_while_the_store_opens_and_requests_wait_for_the_store() {
    let (open, opened) = oneshot::channel::<Arc<dyn Store>>();
    let (base, stop, server) = serve_over(async { Ok(opened.await?) }).await;
    let client = reqwest::Client::new();

    let probe = client.get(format!("{base}/")).send().await.unwrap();
    assert_eq!(probe.status(), StatusCode::OK);
    assert_eq!(probe.json::<Value>().await.unwrap()["status"], "ok");

    let feed = tokio::spawn(client.get(format!("{base}/api/feed")).send());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!feed.is_finished(), "the feed needs the store: it waits");

    let fixture = embedded_fixture().await;
    assert!(open.send(fixture.store.clone()).is_ok());
    let feed = feed.await.unwrap().unwrap();
    assert_eq!(feed.status(), StatusCode::OK);
    let body: Value = feed.json().await.unwrap();
    assert_eq!(body["items"], serde_json::json!([]));
    // The same connection pool, now served by the application itself.
    let user = client
        .post(format!("{base}/api/users"))
        .json(&serde_json::json!({ "username": "ana" }))
        .send()
        .await
        .unwrap();
    assert_eq!(user.status(), StatusCode::CREATED);

    let _ = stop.send(());
    server.await.unwrap().expect("served until stopped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_cannot_be_opened_answers_the_waiting_requests_503_and_ends_serving() {
    let (fail, failed) = oneshot::channel::<()>();
    let (base, _stop, server) = serve_over(async {
        let _ = failed.await;
        Err(anyhow::anyhow!("the disk is gone"))
    })
    .await;
    let client = reqwest::Client::new();
    let feed = tokio::spawn(client.get(format!("{base}/api/feed")).send());
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(fail.send(()).is_ok());

    let feed = feed.await.unwrap().unwrap();
    assert_eq!(feed.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(feed.headers().contains_key("retry-after"));
    let err = tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .expect("serving ends")
        .unwrap()
        .expect_err("the start failed");
    assert!(format!("{err:#}").contains("the disk is gone"), "{err:#}");
}

/// The process: a database path that cannot be created stops it with an error in its log.
#[test]
fn a_store_that_cannot_be_opened_stops_the_process() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"not a directory").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_handler"))
        .env_clear()
        .env("PORT", crate::helpers::free_port().to_string())
        .env("BLOG_DB_PATH", file.join("blog.db"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let log = String::from_utf8_lossy(&out.stdout);
    assert!(log.contains("start-up failed"), "{log}");
}

/// The start-up log says which addresses to open: the web client and the API's index.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_start_up_log_names_the_urls_to_open() {
    let dir = tempfile::tempdir().unwrap();
    let handler = crate::server::Handler::start(
        dir.path(),
        &[("BLOG_LOG_FORMAT", "json"), ("BLOG_BIND", "127.0.0.1")],
    )
    .await;
    let base = handler.base.clone();
    let out = handler.stdout();
    let listening = out
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|l| l["message"] == "listening")
        .unwrap_or_else(|| panic!("no `listening` line: {out}"));
    assert_eq!(listening["url"], format!("{base}/"), "{listening}");
    assert_eq!(listening["api"], format!("{base}/api"), "{listening}");
    assert_eq!(
        blog::startup::open_urls("0.0.0.0:7071".parse().unwrap()).0,
        "http://localhost:7071/"
    );
}

/// With no origins allowed, a refused preflight is logged with the setting that allows it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_preflight_names_the_cors_setting_in_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let handler = crate::server::Handler::start(
        dir.path(),
        &[("BLOG_LOG_FORMAT", "json"), ("BLOG_BIND", "127.0.0.1")],
    )
    .await;
    let r = reqwest::Client::new()
        .request(
            reqwest::Method::OPTIONS,
            format!("{}/api/users", handler.base),
        )
        .header("origin", "http://localhost:5173")
        .header("access-control-request-method", "POST")
        .send()
        .await
        .unwrap();
    assert!(r.headers().get("access-control-allow-origin").is_none());
    let out = handler.stdout();
    let hint = out
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|l| {
            l["message"]
                .as_str()
                .is_some_and(|m| m.contains("preflight"))
        })
        .unwrap_or_else(|| panic!("no hint: {out}"));
    let message = hint["message"].as_str().unwrap();
    assert!(
        message.contains("BLOG_CORS_ORIGINS=http://localhost:5173"),
        "{message}"
    );
    assert_eq!(hint["level"], "WARN");
}

/// A second `handler` on a database file another one serves refuses to start, saying why; the
/// first one serves on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_handler_on_a_file_in_use_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let first = crate::server::Handler::start(dir.path(), &[("BLOG_BIND", "127.0.0.1")]).await;
    let out = Command::new(env!("CARGO_BIN_EXE_handler"))
        .env_clear()
        .env("PORT", crate::helpers::free_port().to_string())
        .env("BLOG_BIND", "127.0.0.1")
        .env("BLOG_DB_PATH", dir.path().join("blog.db"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // It must give up at start; one still running after 20 s is serving the same file.
    let mut second = out;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while second.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            second.kill().unwrap();
            panic!("the second handler served the file in use");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let out = second.wait_with_output().unwrap();
    assert!(!out.status.success(), "the second handler served");
    let log =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("in use by another handler"), "{log}");
    let r = reqwest::get(format!("{}/api/feed", first.base))
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
}

/// A start that fails because the port is taken leaves no database file behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_start_leaves_no_new_database_file() {
    let dir = tempfile::tempdir().unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let db = dir.path().join("blog.db");
    let out = Command::new(env!("CARGO_BIN_EXE_handler"))
        .env_clear()
        .env("PORT", port.to_string())
        .env("BLOG_BIND", "127.0.0.1")
        .env("BLOG_DB_PATH", &db)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}
