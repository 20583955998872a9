//! The real binary as a process: data survives a restart, also after `kill -9`; its settings
//! set what a client observes.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::helpers::free_port;

struct Handler {
    child: Child,
    base: String,
}

/// Start the real `handler` on a free loopback port over the embedded store at `db`, with only
/// the given settings besides, and wait until it answers; the process and its base URL.
pub async fn spawn_handler(db: &std::path::Path, settings: &[(&str, &str)]) -> (Child, String) {
    let port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_handler"))
        .env_clear()
        .env("PORT", port.to_string())
        .env("BLOG_DB_PATH", db)
        .env("RUST_LOG", "warn")
        .envs(settings.iter().copied())
        .stdout(Stdio::null())
        .spawn()
        .expect("handler starts");
    let base = format!("http://127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(20);
    while reqwest::get(format!("{base}/")).await.is_err() {
        assert!(Instant::now() < deadline, "handler never answered");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (child, base)
}

impl Handler {
    async fn start(db: &std::path::Path) -> Handler {
        let (child, base) = spawn_handler(db, &[]).await;
        Handler { child, base }
    }

    async fn post(&self, path: &str, body: Value) -> Value {
        let r = reqwest::Client::new()
            .post(format!("{}{path}", self.base))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "{}", r.status());
        r.json().await.unwrap()
    }

    async fn get(&self, path: &str) -> Value {
        reqwest::get(format!("{}{path}", self.base))
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    fn kill(mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().unwrap();
    }
}

#[tokio::test]
async fn acknowledged_writes_survive_kill_9_and_the_pump_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("blog.db");
    let h = Handler::start(&db).await;
    let user = h.post("/api/users", json!({ "username": "ana" })).await;
    let u = user["id"].as_str().unwrap().to_string();
    let post = h
        .post(
            "/api/posts",
            json!({ "userId": u, "title": "t", "content": "c" }),
        )
        .await;
    let p = post["id"].as_str().unwrap().to_string();
    let comment = h
        .post(
            &format!("/api/posts/{p}/comments"),
            json!({ "userId": u, "content": "hi" }),
        )
        .await;
    // Killed at once: the pump may not have projected anything yet.
    h.kill();

    let h = Handler::start(&db).await;
    assert_eq!(h.get(&format!("/api/users/{u}")).await["username"], "ana");
    assert_eq!(h.get(&format!("/api/posts/{p}")).await["commentCount"], 1);
    let comments = h.get(&format!("/api/posts/{p}/comments")).await;
    assert_eq!(comments["items"][0]["id"], comment["id"]);
    // The restarted pump finishes what the killed one left.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let feed = h.get("/api/feed").await;
        let copies = h.get(&format!("/api/users/{u}/posts")).await;
        if feed["items"][0]["id"] == p.as_str() && copies["items"][0]["id"] == p.as_str() {
            break;
        }
        assert!(Instant::now() < deadline, "the pump did not resume");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    h.kill();
}

#[tokio::test]
async fn a_malformed_setting_stops_the_process_naming_it() {
    let out = Command::new(env!("CARGO_BIN_EXE_handler"))
        .env_clear()
        .env("PORT", "not-a-port")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stderr) + String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("PORT"), "{text}");
}

/// The caps on live-update streams are the settings given: with `BLOG_LIVE_STREAMS=2` the third
/// stream open at once is refused 503 `streams-full`; with `BLOG_LIVE_STREAMS_PER_CLIENT=1` a
/// client's second, 429 `too-many-streams`; each with `Retry-After`.
#[tokio::test]
async fn the_stream_caps_are_the_ones_set() {
    let dir = tempfile::tempdir().unwrap();
    // The setting, the streams it admits, and how the next one is refused.
    let cases = [
        (("BLOG_LIVE_STREAMS", "2"), 2, 503, "/streams-full"),
        (
            ("BLOG_LIVE_STREAMS_PER_CLIENT", "1"),
            1,
            429,
            "/too-many-streams",
        ),
    ];
    for (i, (setting, admitted, status, kind)) in cases.into_iter().enumerate() {
        let settings = &[setting];
        let db = dir.path().join(format!("blog-{i}.db"));
        let (mut child, base) = spawn_handler(&db, settings).await;
        let client = reqwest::Client::new();
        let url = format!("{base}/api/events?topics=post:p");
        let mut open = Vec::new();
        for _ in 0..admitted {
            let stream = client.get(&url).send().await.unwrap();
            assert_eq!(stream.status(), 200, "{settings:?}");
            open.push(stream);
        }
        let refused = client.get(&url).send().await.unwrap();
        assert_eq!(refused.status(), status, "{settings:?}");
        assert!(refused.headers().contains_key("retry-after"));
        let body: Value = refused.json().await.unwrap();
        assert!(body["type"].as_str().unwrap().ends_with(kind), "{body}");
        drop(open);
        child.kill().expect("SIGKILL");
        child.wait().unwrap();
    }
}
