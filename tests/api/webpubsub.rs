//! Live updates pushed to Azure Web PubSub (`docs/live.md`), against a stand-in of its REST API
//! on loopback that records what it gets: what the change-feed triggers send (one message per
//! subject of a change, to that subject's group, with the bearer token), that a push service
//! failing or silent neither fails nor holds a batch and is never retried, and what
//! `GET /api/events/negotiate` answers.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use blog::live::webpubsub::{Credential, WebPubSub, QUEUE};
use blog::live::{Batch, Cursor, Publish as _};
use blog::store::Container;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::functions::common::spawn_hosted_with;
use crate::helpers::{embedded_fixture, id, TestApp};

const TOKEN: &str = "fake-entra-token";

struct Fake;

#[async_trait::async_trait]
impl Credential for Fake {
    async fn token(&self) -> Result<String, String> {
        Ok(TOKEN.into())
    }
}

/// One request the stand-in got.
#[derive(Debug, Clone)]
struct Got {
    method: Method,
    path: String,
    query: Vec<(String, String)>,
    authorization: String,
    content_type: String,
    body: Value,
}

impl Got {
    fn query(&self, name: &str) -> Vec<&str> {
        self.query
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }
}

const ANSWER: u8 = 0;
const FAIL: u8 = 1;
const HANG: u8 = 2;

/// The stand-in: answers `:generateToken` with a token and a send with 202 (or 500, or never,
/// as `mode` says), and hands each request it got to `got`.
struct StandIn {
    endpoint: String,
    mode: Arc<AtomicU8>,
    got: mpsc::UnboundedReceiver<Got>,
    all: Arc<Mutex<Vec<Got>>>,
}

impl StandIn {
    async fn start(mode: u8) -> StandIn {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let (tx, got) = mpsc::unbounded_channel();
        let mode = Arc::new(AtomicU8::new(mode));
        let all = Arc::new(Mutex::new(Vec::new()));
        let (m, a) = (mode.clone(), all.clone());
        let app = axum::Router::new().fallback(
            move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
                let (tx, mode, all) = (tx.clone(), m.clone(), a.clone());
                async move {
                    let header = |n: &str| {
                        headers
                            .get(n)
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or("")
                            .to_string()
                    };
                    let query = url_pairs(uri.query().unwrap_or(""));
                    let got = Got {
                        method,
                        path: uri.path().to_string(),
                        query,
                        authorization: header("authorization"),
                        content_type: header("content-type"),
                        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
                    };
                    all.lock().unwrap().push(got.clone());
                    let _ = tx.send(got.clone());
                    match mode.load(Ordering::SeqCst) {
                        HANG => std::future::pending::<Response>().await,
                        FAIL => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
                        _ if got.path.ends_with("/:generateToken") => {
                            axum::Json(json!({"token": "client.jwt.token"})).into_response()
                        }
                        _ => StatusCode::ACCEPTED.into_response(),
                    }
                }
            },
        );
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        StandIn {
            endpoint,
            mode,
            got,
            all,
        }
    }

    /// The next `n` requests, in the order they came.
    async fn next(&mut self, n: usize) -> Vec<Got> {
        let mut out = Vec::new();
        while out.len() < n {
            out.push(self.got.recv().await.expect("the stand-in runs"));
        }
        out
    }

    fn publisher(&self) -> Arc<WebPubSub> {
        WebPubSub::new(&self.endpoint, "live", Arc::new(Fake))
    }
}

fn url_pairs(query: &str) -> Vec<(String, String)> {
    reqwest::Url::parse(&format!("http://x/?{query}"))
        .unwrap()
        .query_pairs()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

/// The app as under the Functions host, pushing to `webpubsub`.
async fn hosted_pushing_to(webpubsub: Arc<WebPubSub>) -> TestApp {
    let fixture = embedded_fixture().await.wrapped(|s| s);
    TestApp::spawn_with(fixture, false, |app| {
        app.hosted(true).with_webpubsub(webpubsub)
    })
    .await
}

fn sends(got: &[Got]) -> Vec<(String, &str)> {
    got.iter()
        .map(|g| (g.path.clone(), g.body["kind"].as_str().unwrap_or("")))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_is_one_send_to_its_authors_group_whoever_follows() {
    let mut standin = StandIn::start(ANSWER).await;
    let app = hosted_pushing_to(standin.publisher()).await;
    let author = id(&app.create_user("ana").await);
    let mut edges = Vec::new();
    for name in ["bob", "cy", "dee", "eve", "fay"] {
        let follower = id(&app.create_user(name).await);
        let path = format!("/api/users/{follower}/following/{author}");
        assert_eq!(app.put(&path, Value::Null).await.status, 204);
        let edge = format!("following-{author}");
        edges.push(app.current(Container::Users, &follower, &edge).await);
    }
    app.deliver("UsersChangeFeed", &edges)
        .await
        .assert_applied();
    // Each follow is one message, to the follower's own `follows:` group.
    let follows = standin.next(edges.len()).await;
    assert!(follows.iter().all(
        |g| g.path.starts_with("/api/hubs/live/groups/follows:") && g.body["kind"] == "follows"
    ));

    let post = id(&app.create_post(&author, "Live", "Watch this").await);
    let doc = app.current(Container::Posts, &post, &post).await;
    // The timeline lane sends nothing: each change is sent once, from the main lane.
    app.deliver("PostsTimeline", std::slice::from_ref(&doc))
        .await
        .assert_applied();
    app.deliver("PostsChangeFeed", &[doc])
        .await
        .assert_applied();
    let got = standin.next(3).await;
    assert_eq!(
        sends(&got),
        [
            (
                format!("/api/hubs/live/groups/post:{post}/:send"),
                "changed"
            ),
            (format!("/api/hubs/live/groups/user:{author}/:send"), "post"),
            (
                format!("/api/hubs/live/groups/author:{author}/:send"),
                "post"
            ),
        ]
    );
    for g in &got {
        assert_eq!(g.method, Method::POST);
        assert_eq!(g.query("api-version"), ["2024-01-01"]);
        assert_eq!(g.authorization, format!("Bearer {TOKEN}"));
        assert_eq!(g.content_type, "application/json");
    }
    assert_eq!(
        got[2].body,
        json!({"topic": format!("author:{author}"), "postId": post, "userId": author, "kind": "post"})
    );
    // A later batch's message comes next: nothing else was sent meanwhile.
    let user = app.current(Container::Users, &author, &author).await;
    app.deliver("UsersChangeFeed", &[user])
        .await
        .assert_applied();
    let got = standin.next(1).await;
    assert_eq!(
        sends(&got),
        [(
            format!("/api/hubs/live/groups/user:{author}/:send"),
            "changed"
        )]
    );
    assert_eq!(standin.all.lock().unwrap().len(), edges.len() + 4);
}

/// Once the publisher is done with `n` messages (sent or failed), or a failure after 30 s: a
/// bound on liveness, not a measure of speed.
async fn done(webpubsub: &blog::live::webpubsub::WebPubSub, n: u64) {
    tokio::time::timeout(Duration::from_secs(30), webpubsub.counts().done(n))
        .await
        .unwrap_or_else(|_| panic!("the publisher never got through {n} messages"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_or_silent_push_service_neither_fails_nor_holds_a_batch() {
    let mut standin = StandIn::start(FAIL).await;
    let webpubsub = standin.publisher();
    let app = hosted_pushing_to(webpubsub.clone()).await;
    let ana = id(&app.create_user("ana").await);
    let post = id(&app.create_post(&ana, "Live", "Watch this").await);
    let doc = app.current(Container::Posts, &post, &post).await;
    // Refused: the batch is applied all the same, each message tried once.
    app.deliver("PostsChangeFeed", &[doc])
        .await
        .assert_applied();
    standin.next(3).await;
    done(&webpubsub, 3).await;
    assert_eq!(webpubsub.counts().failed.load(Ordering::SeqCst), 3);
    assert_eq!(app.get(&format!("/api/posts/{post}")).await.status, 200);

    // Silent: the batch is applied without waiting for an answer; the send is given up after
    // its timeout and not tried again.
    standin.mode.store(HANG, Ordering::SeqCst);
    let user = app.current(Container::Users, &ana, &ana).await;
    app.deliver("UsersChangeFeed", &[user])
        .await
        .assert_applied();
    standin.next(1).await;
    done(&webpubsub, 4).await;
    assert_eq!(webpubsub.counts().failed.load(Ordering::SeqCst), 4);
    standin.mode.store(ANSWER, Ordering::SeqCst);
    let comment = app.comment(&post, &ana, "seen").await;
    assert_eq!(comment.status, 201);
    let c = app
        .current(Container::Posts, &post, &id(&comment.body))
        .await;
    app.deliver("PostsChangeFeed", &[c]).await.assert_applied();
    let got = standin.next(1).await;
    assert_eq!(got[0].body["kind"], "comment");
    // Four tried once each, then the comment: nothing was retried.
    assert_eq!(standin.all.lock().unwrap().len(), 5);
    done(&webpubsub, 5).await;
    assert_eq!(webpubsub.counts().sent.load(Ordering::SeqCst), 1);
    assert_eq!(webpubsub.counts().failed.load(Ordering::SeqCst), 4);
    assert_eq!(webpubsub.counts().dropped.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beyond_its_queue_a_message_is_dropped_and_counted() {
    let standin = StandIn::start(HANG).await;
    let webpubsub = standin.publisher();
    let event = |i: usize| blog::live::Event {
        subject: blog::live::Subject::Post(format!("p{i}")),
        kind: "changed",
        post_id: Some(format!("p{i}")),
        comment_id: None,
        user_id: None,
        change: format!("posts/p{i}/1"),
    };
    let batch = Batch {
        events: (0..QUEUE + 2).map(event).collect(),
        cursor: Cursor::default(),
    };
    // Handing a batch over never waits, whatever the service does.
    webpubsub.publish(Arc::new(batch));
    let dropped = webpubsub.counts().dropped.load(Ordering::SeqCst);
    assert!((1..=2).contains(&dropped), "{dropped} dropped");
}

/// The app standalone (no pump needed: negotiating reads the following edges themselves),
/// negotiating with `webpubsub` when given.
async fn negotiating_with(webpubsub: Option<Arc<WebPubSub>>) -> TestApp {
    let fixture = embedded_fixture().await;
    TestApp::spawn_with(fixture, false, |app| match webpubsub {
        Some(w) => app.with_webpubsub(w),
        None => app,
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn negotiate_answers_a_url_joined_to_the_groups_of_the_topics() {
    let mut standin = StandIn::start(ANSWER).await;
    let app = negotiating_with(Some(standin.publisher())).await;
    let ana = id(&app.create_user("ana").await);
    let bob = id(&app.create_user("bob").await);
    let cy = id(&app.create_user("cy").await);
    for followee in [&bob, &cy] {
        let path = format!("/api/users/{ana}/following/{followee}");
        assert_eq!(app.put(&path, Value::Null).await.status, 204);
    }
    let post = id(&app.create_post(&bob, "Live", "Watch this").await);

    let r = app
        .get(&format!(
            "/api/events/negotiate?topics=timeline:{ana},post:{post},user:{bob}"
        ))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let host = standin.endpoint.trim_start_matches("http://");
    assert_eq!(
        r.body,
        json!({"url": format!("ws://{host}/client/hubs/live?access_token=client.jwt.token")})
    );
    let got = standin.next(1).await.remove(0);
    assert_eq!(got.method, Method::POST);
    assert_eq!(got.path, "/api/hubs/live/:generateToken");
    assert_eq!(got.authorization, format!("Bearer {TOKEN}"));
    assert_eq!(got.query("api-version"), ["2024-01-01"]);
    assert_eq!(got.query("minutesToExpire"), ["60"]);
    // `BLOG_AUTH=none`: nobody is verified, so the connection names no user.
    assert!(got.query("userId").is_empty());
    let mut authors = vec![format!("author:{bob}"), format!("author:{cy}")];
    authors.sort();
    let mut expected = vec![format!("follows:{ana}")];
    expected.extend(authors);
    expected.extend([format!("post:{post}"), format!("user:{bob}")]);
    assert_eq!(got.query("group"), expected);

    // Bad topics: 400 naming `topics`, and nothing asked of the service.
    for topics in [
        "".to_string(),
        "posts:x".to_string(),
        format!("timeline:{ana},timeline:{bob}"),
        "post:a/b".to_string(),
    ] {
        let r = app
            .get(&format!("/api/events/negotiate?topics={topics}"))
            .await;
        r.assert_problem(400);
        assert_eq!(
            r.body["errors"][0]["field"], "topics",
            "{topics}: {}",
            r.body
        );
    }
    let r = app.get("/api/events/negotiate").await;
    r.assert_problem(400);

    // The service failing: 503 `push-unavailable` with `Retry-After`.
    standin.mode.store(FAIL, Ordering::SeqCst);
    let r = app
        .get(&format!("/api/events/negotiate?topics=post:{post}"))
        .await;
    r.assert_problem(503);
    assert!(r.body["type"]
        .as_str()
        .unwrap()
        .ends_with("/push-unavailable"));
    assert!(r.header("retry-after").is_some());
    // The cause is the server's log's, not the client's.
    let detail = r.body["detail"].as_str().unwrap();
    assert!(!detail.contains("500"), "{detail}");
    // One call for the failing request, none for the bad ones.
    assert_eq!(standin.all.lock().unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_web_client_may_open_web_pubsubs_websockets() {
    let standin = StandIn::start(ANSWER).await;
    let app = negotiating_with(Some(standin.publisher())).await;
    let r = app.client.get(app.url("/api/web/")).send().await.unwrap();
    let csp = r.headers()["content-security-policy"].to_str().unwrap();
    let host = standin.endpoint.trim_start_matches("http://");
    assert!(
        csp.contains(&format!("connect-src 'self' ws://{host};")),
        "{csp}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn negotiate_is_404_without_web_pubsub() {
    let app = negotiating_with(None).await;
    let r = app.get("/api/events/negotiate?topics=post:p1").await;
    r.assert_problem(404);
    assert!(r.body["detail"]
        .as_str()
        .unwrap()
        .contains("BLOG_WEBPUBSUB_ENDPOINT"));
    // The same under the Functions host.
    let hosted = spawn_hosted_with(|s| s).await;
    let r = hosted.get("/api/events/negotiate?topics=post:p1").await;
    r.assert_problem(404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_in_callers_connection_is_theirs_whatever_the_query_says() {
    let mut standin = StandIn::start(ANSWER).await;
    let webpubsub = standin.publisher();
    let app = TestApp::spawn_with(embedded_fixture().await, false, |app| {
        app.with_auth(blog::auth::Auth::easy_auth())
            .with_webpubsub(webpubsub)
    })
    .await;
    let signed_in = |req: reqwest::RequestBuilder| {
        req.header("X-MS-CLIENT-PRINCIPAL-IDP", "aad")
            .header("X-MS-CLIENT-PRINCIPAL-ID", "subject-of-ana")
    };
    let created = app
        .send(signed_in(app.client.post(app.url("/api/users"))).json(&json!({"username": "ana"})))
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let ana = id(&created.body);
    let negotiate = "/api/events/negotiate?topics=post:p1&userId=someone-else";
    let r = app
        .send(signed_in(app.client.get(app.url(negotiate))))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(standin.next(1).await[0].query("userId"), [ana.as_str()]);
    // Anonymous: a connection of nobody's.
    let r = app.get(negotiate).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(standin.next(1).await[0].query("userId").is_empty());
}
