//! The server's edges: clients that never finish their headers, more connections than the cap,
//! requests the store does not answer in time, shutdown with work in flight, and a pump
//! follower that fails.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use blog::server::ServerLimits;
use blog::store::Container;
use futures::FutureExt as _;
use serde_json::Value;
use tokio::sync::Semaphore;

use crate::helpers::{embedded_fixture, eventually, free_port, id, TestApp};
use crate::hooks::Hooked;

/// The real binary, standalone on the embedded store, with extra settings.
pub(crate) struct Handler {
    pub(crate) child: Child,
    port: u16,
    pub(crate) base: String,
}

impl Handler {
    pub(crate) async fn start(dir: &std::path::Path, settings: &[(&str, &str)]) -> Handler {
        let port = free_port();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_handler"));
        cmd.env_clear()
            .env("PORT", port.to_string())
            .env("BLOG_DB_PATH", dir.join("blog.db"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in settings {
            cmd.env(k, v);
        }
        let handler = Handler {
            child: cmd.spawn().expect("the handler starts"),
            port,
            base: format!("http://127.0.0.1:{port}"),
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while reqwest::get(format!("{}/", handler.base)).await.is_err() {
            assert!(Instant::now() < deadline, "the handler never answered");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        handler
    }

    /// Stop it (SIGKILL) and return what it wrote to stdout.
    pub(crate) fn stdout(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let mut out = String::new();
        self.child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        out
    }

    /// A connection with a request in flight: `POST /api/users` whose headers are sent and
    /// only the start of its body ([`finish_upload`] sends the rest).
    fn slow_upload(&self) -> TcpStream {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        let length = UPLOAD_START.len() + UPLOAD_REST.len();
        write!(
            s,
            "POST /api/users HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
             Content-Length: {length}\r\n\r\n{UPLOAD_START}"
        )
        .unwrap();
        s
    }

    /// A connection that sent part of a request's headers and nothing more.
    fn half_request(&self) -> TcpStream {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.write_all(b"GET /api/feed HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            .unwrap();
        s
    }
}

/// The rest of [`Handler::slow_upload`]'s body, and the answer's first line.
fn finish_upload(s: &mut TcpStream) -> String {
    s.write_all(UPLOAD_REST.as_bytes()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut answer = [0u8; 256];
    let n = s.read(&mut answer).unwrap();
    String::from_utf8_lossy(&answer[..n])
        .lines()
        .next()
        .unwrap_or_default()
        .to_string()
}

const UPLOAD_START: &str = r#"{"username": "#;
const UPLOAD_REST: &str = r#""uploader"}"#;

impl Drop for Handler {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether the server closed `s` within `within` (EOF or reset), without anything more sent.
fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
    s.set_read_timeout(Some(within)).unwrap();
    let mut buf = [0u8; 1024];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            // A 408 or similar before closing is fine; keep reading until the close.
            Ok(_) => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return false
            }
            Err(_) => return true,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_that_never_finish_their_headers_are_closed() {
    let dir = tempfile::tempdir().unwrap();
    let handler = Handler::start(dir.path(), &[("BLOG_HEADER_TIMEOUT_SECS", "1")]).await;
    let started = Instant::now();
    let mut slow: Vec<TcpStream> = (0..50).map(|_| handler.half_request()).collect();
    let mut silent: Vec<TcpStream> = (0..10)
        .map(|_| TcpStream::connect(("127.0.0.1", handler.port)).unwrap())
        .collect();
    for (i, s) in slow.iter_mut().chain(silent.iter_mut()).enumerate() {
        let left = Duration::from_secs(15).saturating_sub(started.elapsed());
        assert!(closed_within(s, left), "connection {i} still open");
    }
    // And the server still serves.
    let r = reqwest::get(format!("{}/api/feed", handler.base))
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

/// At the cap, connections with a request in flight are not cut: a new client waits until one
/// of them is done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_over_the_cap_wait_for_a_busy_one_to_finish() {
    let dir = tempfile::tempdir().unwrap();
    let handler = Handler::start(
        dir.path(),
        &[
            ("BLOG_MAX_CONNECTIONS", "2"),
            ("BLOG_HEADER_TIMEOUT_SECS", "30"),
        ],
    )
    .await;
    // The readiness probe's connection may still be open; let it go.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut first = handler.slow_upload();
    let _second = handler.slow_upload();
    tokio::time::sleep(Duration::from_millis(200)).await;

    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let over = client
        .get(format!("{}/api/feed", handler.base))
        .send()
        .await;
    assert!(
        over.is_err(),
        "a third connection was served: {:?}",
        over.map(|r| r.status())
    );

    // The first upload was not cut: it finishes and is answered.
    assert!(finish_upload(&mut first).starts_with("HTTP/1.1 201"));
    drop(first);
    let r = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
        .get(format!("{}/api/feed", handler.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

/// At the cap, connections without a request in flight make room for new clients: one that has
/// sent nothing, one that sent part of its headers and a kept-alive one between requests are
/// closed, longest idle first, so three new clients are served well before the header timeout
/// (30 s), while an upload in flight on a fourth connection is not cut.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_cap_idle_connections_make_room_for_new_clients() {
    let dir = tempfile::tempdir().unwrap();
    let handler = Handler::start(
        dir.path(),
        &[
            ("BLOG_MAX_CONNECTIONS", "4"),
            ("BLOG_HEADER_TIMEOUT_SECS", "30"),
        ],
    )
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut busy = handler.slow_upload();
    let mut silent = TcpStream::connect(("127.0.0.1", handler.port)).unwrap();
    let mut half = handler.half_request();
    let mut kept = TcpStream::connect(("127.0.0.1", handler.port)).unwrap();
    kept.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    kept.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut answer = [0u8; 64];
    let n = kept.read(&mut answer).unwrap();
    assert!(answer[..n].starts_with(b"HTTP/1.1 200"));
    tokio::time::sleep(Duration::from_millis(200)).await;

    let mut clients = Vec::new();
    for i in 0..3 {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap();
        let r = client
            .get(format!("{}/api/feed", handler.base))
            .send()
            .await
            .unwrap_or_else(|e| panic!("new client {i} not served at the cap: {e}"));
        assert_eq!(r.status(), 200);
        // Kept alive: this client's connection stays open, idle.
        clients.push(client);
    }
    for (name, s) in [
        ("silent", &mut silent),
        ("half", &mut half),
        ("kept", &mut kept),
    ] {
        assert!(
            closed_within(s, Duration::from_secs(5)),
            "{name} still open"
        );
    }
    assert!(finish_upload(&mut busy).starts_with("HTTP/1.1 201"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_the_process_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let mut handler = Handler::start(dir.path(), &[]).await;
    let status = Command::new("kill")
        .args(["-TERM", &handler.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(20);
    let exit = loop {
        if let Some(exit) = handler.child.try_wait().unwrap() {
            break exit;
        }
        assert!(Instant::now() < deadline, "still running after SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(exit.success(), "{exit:?}");
    let mut out = String::new();
    handler
        .child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    assert!(out.contains("change-feed pump stopped"), "{out}");
}

fn limits(request_timeout: Duration) -> ServerLimits {
    ServerLimits {
        request_timeout,
        ..ServerLimits::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_the_store_does_not_answer_in_time_gets_503() {
    let fixture = embedded_fixture().await;
    let fixture = fixture.wrapped(Hooked::wrap(|call| {
        async move {
            if call.op == "read" && call.pk == "slow" {
                tokio::time::sleep(Duration::from_secs(30)).await;
            }
            Ok(())
        }
        .boxed()
    }));
    let app =
        TestApp::spawn_with(fixture, false, |a| a.limits(limits(Duration::from_secs(1)))).await;
    let started = Instant::now();
    let r = app.get("/api/users/slow").await;
    r.assert_problem(503);
    assert!(r.header("retry-after").is_some());
    assert!(started.elapsed() < Duration::from_secs(20));
    assert_eq!(app.get("/api/users/other").await.status, 404);
}

/// Holds the calls a test picks at a gate until the test opens it, and says when one arrived.
struct Gate {
    arrived: Semaphore,
    open: Semaphore,
}

impl Gate {
    fn new() -> Arc<Gate> {
        Arc::new(Gate {
            arrived: Semaphore::new(0),
            open: Semaphore::new(0),
        })
    }
    async fn pass(&self) {
        self.arrived.add_permits(1);
        let _ = self.open.acquire().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_finishes_requests_in_flight_and_the_batch_in_hand_then_checkpoints() {
    let gate = Gate::new();
    let g = gate.clone();
    let fixture = embedded_fixture().await;
    let fixture = fixture.wrapped(Hooked::wrap(move |call| {
        let g = g.clone();
        async move {
            let held = (call.op == "upsert" && call.container == Container::Feed)
                || (call.op == "read" && call.pk == "in-flight");
            if held {
                g.pass().await;
            }
            Ok(())
        }
        .boxed()
    }));
    let store = fixture.store.clone();
    let app = TestApp::spawn(fixture, true).await;
    let user = app.create_user("ana").await;
    let post = app.create_post(&id(&user), "t", "c").await;
    // The pump is projecting the post into the feed, and a request is waiting for the store.
    gate.arrived.acquire_many(1).await.unwrap().forget();
    let request = tokio::spawn({
        let client = app.client.clone();
        let url = app.url("/api/users/in-flight");
        async move { client.get(url).send().await.map(|r| r.status().as_u16()) }
    });
    gate.arrived.acquire_many(1).await.unwrap().forget();

    let origin = app.origin.clone();
    let stopping = tokio::spawn(app.stop());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!stopping.is_finished(), "stopped with work in flight");
    gate.open.add_permits(1_000);
    let _dir = stopping.await.unwrap();

    assert_eq!(
        request.await.unwrap().unwrap(),
        404,
        "the request in flight was answered"
    );
    assert!(
        reqwest::get(format!("{origin}/")).await.is_err(),
        "no connection is accepted after shutdown"
    );
    // The batch in hand was applied and checkpointed.
    let copy = store
        .read(Container::Feed, "post", &id(&post))
        .await
        .unwrap();
    assert!(copy.is_some(), "the post reached the feed");
    let lease = store
        .read(Container::Leases, "pump.posts", "pump.posts")
        .await
        .unwrap()
        .expect("the posts checkpoint");
    let after = store
        .changes(Container::Posts, lease["continuation"].as_str(), 10)
        .await
        .unwrap();
    assert_eq!(
        after.items,
        Vec::<Value>::new(),
        "the posts feed is checkpointed at its end"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_that_panics_is_restarted() {
    let panicked = Arc::new(AtomicBool::new(false));
    let p = panicked.clone();
    let fixture = embedded_fixture().await;
    let fixture = fixture.wrapped(Hooked::wrap(move |call| {
        let p = p.clone();
        async move {
            if call.op == "changes"
                && call.container == Container::Posts
                && !p.swap(true, Ordering::SeqCst)
            {
                panic!("injected: the posts follower fails once");
            }
            Ok(())
        }
        .boxed()
    }));
    let app = TestApp::spawn(fixture, true).await;
    let user = app.create_user("ana").await;
    let post = app.create_post(&id(&user), "t", "c").await;
    eventually("the post reaches the feed after the restart", || async {
        app.get("/api/feed").await.body["items"][0]["id"] == post["id"]
    })
    .await;
    assert!(panicked.load(Ordering::SeqCst));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trigger_batch_is_not_cut_off_by_the_request_timeout() {
    let fixture = embedded_fixture().await;
    let fixture = fixture.wrapped(Hooked::wrap(|call| {
        async move {
            if call.op == "read" && call.pk == "slow-post" {
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
            Ok(())
        }
        .boxed()
    }));
    let app = TestApp::spawn_with(fixture, false, |a| {
        a.hosted(true).limits(limits(Duration::from_secs(1)))
    })
    .await;
    let doc = serde_json::json!({ "id": "slow-post", "postId": "slow-post", "userId": "ana",
        "type": "post" });
    let inv = app.deliver("PostsChangeFeed", &[doc]).await;
    inv.assert_applied();
    // While an API request on the same store is cut off.
    app.get("/api/posts/slow-post").await.assert_problem(503);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_does_not_keep_its_connection() {
    let dir = tempfile::tempdir().unwrap();
    let handler = Handler::start(
        dir.path(),
        &[
            ("BLOG_MAX_CONNECTIONS", "1"),
            ("BLOG_REQUEST_TIMEOUT_SECS", "2"),
            ("BLOG_HEADER_TIMEOUT_SECS", "30"),
        ],
    )
    .await;
    // The readiness probe's connection may still be open; let it go.
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Far more response bytes than the socket buffers hold, asked for and never read.
    let mut reader = TcpStream::connect(("127.0.0.1", handler.port)).unwrap();
    let request = b"GET /api/openapi.json HTTP/1.1\r\nHost: x\r\n\r\n";
    for _ in 0..1_000 {
        reader.write_all(request).unwrap();
    }
    // It holds the only slot until its stalled write times out; then another client is served.
    let r = reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap()
        .get(format!("{}/api/feed", handler.base))
        .send()
        .await
        .expect("served once the stalled connection is cut off");
    assert_eq!(r.status(), 200);
    drop(reader);
}

/// With `BLOG_AUTH=none` writes are counted per client address: a flood from 127.0.0.2 is
/// refused with 429 once its budget is spent, writing nothing, while 127.0.0.1 writes as usual.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_are_limited_per_client_address_without_sign_in() {
    let app = TestApp::spawn_with(embedded_fixture().await, false, |a| a.with_write_limit(5)).await;
    let from = |ip: [u8; 4]| {
        reqwest::Client::builder()
            .local_address(std::net::IpAddr::from(ip))
            .build()
            .unwrap()
    };
    let flood = from([127, 0, 0, 2]);
    let other = from([127, 0, 0, 1]);
    let mut answers = Vec::new();
    for i in 0..20 {
        let r = flood
            .post(app.url("/api/users"))
            .json(&serde_json::json!({ "username": format!("flood{i}") }))
            .send()
            .await
            .unwrap();
        answers.push((
            r.status().as_u16(),
            r.headers().get("retry-after").is_some(),
            r.headers()
                .get("content-type")
                .map(|v| v.to_str().unwrap().to_string()),
        ));
    }
    let created = answers.iter().filter(|a| a.0 == 201).count();
    assert_eq!(created, 5, "{answers:?}");
    for (status, retry_after, content_type) in &answers[5..] {
        assert_eq!(*status, 429);
        assert!(retry_after);
        assert_eq!(content_type.as_deref(), Some("application/problem+json"));
    }
    // Only the five acknowledged users exist.
    let users = blog::store::Query::cross_partition();
    assert_eq!(app.store.count(Container::Users, &users).await.unwrap(), 5);
    for i in 0..5 {
        let r = other
            .post(app.url("/api/users"))
            .json(&serde_json::json!({ "username": format!("other{i}") }))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201);
    }
}

/// One idle connection from `from` to `port` (nothing sent).
async fn idle_connection(from: [u8; 4], port: u16) -> tokio::net::TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(std::net::SocketAddr::from((from, 0))).unwrap();
    socket
        .connect(std::net::SocketAddr::from(([127, 0, 0, 1], port)))
        .await
        .unwrap()
}

/// Whether the server closed `s` within `within`.
async fn closed_soon(s: &mut tokio::net::TcpStream, within: Duration) -> bool {
    use tokio::io::AsyncReadExt as _;
    let mut buf = [0u8; 256];
    loop {
        match tokio::time::timeout(within, s.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => continue,
        }
    }
}

/// A client that opens many idle connections from one address (127.0.0.2) gets only its cap of
/// them; the rest are closed at once, and a client at another address (127.0.0.1) is served at
/// once although the flood is larger than the whole connection cap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_cannot_take_every_connection() {
    let dir = tempfile::tempdir().unwrap();
    let handler = Handler::start(
        dir.path(),
        &[
            ("BLOG_MAX_CONNECTIONS", "16"),
            ("BLOG_MAX_CONNECTIONS_PER_IP", "4"),
            ("BLOG_HEADER_TIMEOUT_SECS", "30"),
        ],
    )
    .await;
    let mut flood = Vec::new();
    for _ in 0..40 {
        flood.push(idle_connection([127, 0, 0, 2], handler.port).await);
    }
    let mut closed = 0;
    for s in flood.iter_mut() {
        if closed_soon(s, Duration::from_millis(300)).await {
            closed += 1;
        }
    }
    assert_eq!(
        closed, 36,
        "connections beyond the address's cap of 4 are closed"
    );

    let client = reqwest::Client::builder()
        .local_address(std::net::IpAddr::from([127, 0, 0, 1]))
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let r = client
        .get(format!("{}/api/feed", handler.base))
        .send()
        .await
        .expect("another address is served while the flood holds its connections");
    assert_eq!(r.status(), 200);
    drop(flood);
}

/// A request header block over the limit answers 431; one well within it is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_header_block_over_the_limit_answers_431() {
    let dir = tempfile::tempdir().unwrap();
    let handler = Handler::start(dir.path(), &[]).await;
    let ask = |header_bytes: usize| {
        let port = handler.port;
        async move {
            use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
            let mut s = idle_connection([127, 0, 0, 1], port).await;
            let filler = "a".repeat(header_bytes);
            let request = format!(
                "GET /api/feed HTTP/1.1\r\nHost: x\r\nX-Filler: {filler}\r\nConnection: close\r\n\r\n"
            );
            // The server may answer and close before taking all of it.
            let _ = s.write_all(request.as_bytes()).await;
            let mut answer = Vec::new();
            let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut answer)).await;
            let answer = String::from_utf8_lossy(&answer).to_string();
            answer
                .split(' ')
                .nth(1)
                .and_then(|code| code.parse::<u16>().ok())
                .unwrap_or_else(|| panic!("no status line in {answer:?}"))
        }
    };
    assert_eq!(ask(16 * 1024).await, 200);
    assert_eq!(ask(40 * 1024).await, 431);
    assert_eq!(ask(400 * 1024).await, 431);
}
