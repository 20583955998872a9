//! Start the application on `127.0.0.1:0` over a given store, and talk to it as a client would.
//!
//! **Waiting for the change feed.** A test that means "once the projections have run" starts the
//! app with the pump off (`TestApp::spawn(fixture, false)`) and calls [`TestApp::settle`], the
//! shape of a background-job runner's "run every pending job" in a test: it runs every lane's
//! projections over both feeds inline (`blog::pump::drain`, from the same checkpoints the pump
//! keeps) until nothing is left to do, the follow-up steps the projections schedule for
//! themselves included (a fan-out's next page, a sweep's next page, a counter recheck once it
//! falls due); then, on Cosmos DB, it drops this process's snapshots of the feed and of counts,
//! which would otherwise hold for their maximum age (the embedded store's commits drop them
//! themselves, and the tests see that they do). Nothing runs in the background, so an assertion
//! after `settle` sees the projections' final word, and one made before it sees only what the
//! requests did: a check that something does *not* appear means something. It is the same on
//! both stores: settle reads the change feed directly, so the Cosmos store's one-second idle poll
//! never enters a test. `settle` on an app whose pump runs refuses (the two would apply the same
//! changes at once).
//!
//! A test whose requests race the projections runs them [`TestApp::beside_the_pump`], then
//! settles: the end state is asserted once, after the pump stopped and the rest was drained.
//!
//! [`eventually`] (polling with a deadline) stays for what only a live pump or a clock can show:
//! that the pump wakes on a commit, resumes after a restart, moves past a quarantined change,
//! lets other posts through during a large sweep, replays its quarantine on its own, and the
//! like.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use blog::auth::Auth;
use blog::startup::Application;
use blog::store::embedded::EmbeddedStore;
use blog::store::{Container, Store};
use blog::AppState;
use reqwest::header::HeaderMap;
use serde_json::{json, Value};
use tempfile::TempDir;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A store for one test, with whatever must live as long as it (a temporary directory).
pub struct Fixture {
    pub store: Arc<dyn Store>,
    pub dir: Option<TempDir>,
}

impl Fixture {
    /// The same fixture, its store seen through `wrap` (a test wrapper such as `Hooked`).
    pub fn wrapped(self, wrap: impl FnOnce(Arc<dyn Store>) -> Arc<dyn Store>) -> Fixture {
        Fixture {
            store: wrap(self.store),
            dir: self.dir,
        }
    }
}

/// A fresh embedded store in a temporary directory.
pub async fn embedded_fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = EmbeddedStore::open(&dir.path().join("blog.db")).expect("open store");
    Fixture {
        store: Arc::new(store),
        dir: Some(dir),
    }
}

pub struct TestApp {
    /// `http://127.0.0.1:<port>`
    pub origin: String,
    pub client: reqwest::Client,
    pub store: Arc<dyn Store>,
    pub dir: Option<TempDir>,
    /// Whether the change-feed pump runs in the background (then [`TestApp::settle`] refuses).
    pump: bool,
    /// The application's state, for its snapshots.
    state: AppState,
    /// Held while settling: one drain at a time.
    settling: tokio::sync::Mutex<()>,
    stop: Option<oneshot::Sender<()>>,
    server: Option<JoinHandle<()>>,
}

/// The response as a client sees it.
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Value,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// `x-store-operations` as a number.
    pub fn store_operations(&self) -> u32 {
        self.header("x-store-operations")
            .expect("x-store-operations header")
            .parse()
            .expect("a number")
    }

    pub fn items(&self) -> &Vec<Value> {
        self.body["items"].as_array().expect("a list response")
    }

    /// Assert a problem+json error with this status.
    #[track_caller]
    pub fn assert_problem(&self, status: u16) {
        assert_eq!(self.status, status, "{:?}", self.body);
        assert_eq!(
            self.header("content-type"),
            Some("application/problem+json"),
            "{:?}",
            self.body
        );
        assert_eq!(self.body["status"], status);
        assert!(self.body["title"].is_string() && self.body["detail"].is_string());
        assert!(self.body["type"].is_string());
    }
}

/// The app over a fresh embedded store, with the change-feed pump running.
pub async fn spawn_app() -> TestApp {
    TestApp::spawn(embedded_fixture().await, true).await
}

/// The app over a fresh embedded store, without a pump: its test settles the change feed itself.
pub async fn spawn_settling_app() -> TestApp {
    TestApp::spawn(embedded_fixture().await, false).await
}

impl TestApp {
    /// The app with `BLOG_AUTH=none`.
    pub async fn spawn(fixture: Fixture, pump: bool) -> TestApp {
        Self::spawn_with(fixture, pump, |app| app).await
    }

    /// With a feed snapshot that holds for `feed_max_age` where the store signals no commits.
    /// Without a pump: the test drives the projections (`blog::pump::drain`, which leaves the
    /// snapshots alone).
    pub async fn spawn_with_feed_cache(fixture: Fixture, feed_max_age: Duration) -> TestApp {
        Self::spawn_with(fixture, false, |app| app.with_feed_cache(feed_max_age)).await
    }

    pub async fn spawn_with_auth(fixture: Fixture, pump: bool, auth: Auth) -> TestApp {
        Self::spawn_with(fixture, pump, |app| app.with_auth(auth)).await
    }

    /// As [`TestApp::spawn`], with `configure` adjusting the application (auth, hosted, limits).
    pub async fn spawn_with(
        fixture: Fixture,
        pump: bool,
        configure: impl FnOnce(Application) -> Application,
    ) -> TestApp {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let origin = format!("http://{}", listener.local_addr().unwrap());
        let app = configure(Application::new(listener, fixture.store.clone(), pump));
        let state = app.state().clone();
        let (stop, stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(async move {
            app.run_until(async {
                let _ = stopped.await;
            })
            .await
            .expect("server runs");
        });
        TestApp {
            origin,
            client: client(),
            store: fixture.store,
            dir: fixture.dir,
            pump,
            state,
            settling: tokio::sync::Mutex::new(()),
            stop: Some(stop),
            server: Some(server),
        }
    }

    /// Stop the server (and its pump) and hand back the store's directory.
    pub async fn stop(mut self) -> Option<TempDir> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(server) = self.server.take() {
            let _ = server.await;
        }
        self.dir.take()
    }

    /// Run the change feed's projections until nothing is left to do (see the module's doc):
    /// every lane over both feeds, round after round, then, on a store that does not signal its
    /// commits, drop the snapshots of the feed and of counts. For an app started with the pump
    /// off.
    pub async fn settle(&self) {
        assert!(
            !self.pump,
            "settle() runs the projections itself: start the app with the pump off"
        );
        let _one = self.settling.lock().await;
        blog::pump::drain(&*self.store)
            .await
            .unwrap_or_else(|e| panic!("the change feed did not settle: {e:#}"));
        // Where the store signals its commits, the projections' writes dropped the snapshots
        // already (and tests see that they do); elsewhere a snapshot would hold for its age.
        if self.store.change_notifier(Container::Feed).is_none() {
            self.state.feed.forget();
            self.state.counts.forget();
        }
    }

    /// Run `work` beside a running change-feed pump, as the service runs it, so that the
    /// projections race its requests; the pump is stopped once `work` is done, and
    /// [`TestApp::settled`] then finishes what it left and checks the end state. For an app
    /// started with the pump off.
    pub async fn beside_the_pump<T>(&self, work: impl Future<Output = T>) -> T {
        assert!(!self.pump, "the app runs a pump of its own");
        let pump = blog::pump::spawn(self.store.clone());
        let out = work.await;
        pump.stop().await;
        out
    }

    /// [`TestApp::settle`], then assert `check`: what the projections leave once they are done.
    pub async fn settled<F, Fut>(&self, what: &str, check: F)
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = bool>,
    {
        self.settle().await;
        assert!(check().await, "not so once the change feed settled: {what}");
    }

    /// The application's state (its snapshots, its live-update hub).
    pub fn state(&self) -> &AppState {
        &self.state
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.origin, path)
    }

    pub async fn send(&self, req: reqwest::RequestBuilder) -> Resp {
        let resp = req.send().await.expect("request sent");
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let text = resp.text().await.expect("body");
        let body = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        Resp {
            status,
            headers,
            body,
        }
    }

    pub async fn get(&self, path: &str) -> Resp {
        self.send(self.client.get(self.url(path))).await
    }

    pub async fn post(&self, path: &str, body: Value) -> Resp {
        self.send(self.client.post(self.url(path)).json(&body))
            .await
    }

    pub async fn put(&self, path: &str, body: Value) -> Resp {
        self.send(self.client.put(self.url(path)).json(&body)).await
    }

    pub async fn delete(&self, path: &str) -> Resp {
        self.send(self.client.delete(self.url(path))).await
    }

    /// C1, asserting success; returns the user.
    pub async fn create_user(&self, name: &str) -> Value {
        let r = self.post("/api/users", json!({ "username": name })).await;
        assert_eq!(r.status, 201, "{:?}", r.body);
        r.body
    }

    /// C2, asserting success; returns the post.
    pub async fn create_post(&self, user_id: &str, title: &str, content: &str) -> Value {
        let r = self
            .post(
                "/api/posts",
                json!({ "userId": user_id, "title": title, "content": content }),
            )
            .await;
        assert_eq!(r.status, 201, "{:?}", r.body);
        r.body
    }

    pub async fn comment(&self, post_id: &str, user_id: &str, content: &str) -> Resp {
        self.post(
            &format!("/api/posts/{post_id}/comments"),
            json!({ "userId": user_id, "content": content }),
        )
        .await
    }

    pub async fn like(&self, post_id: &str, user_id: &str) -> Resp {
        self.post(
            &format!("/api/posts/{post_id}/likes"),
            json!({ "userId": user_id }),
        )
        .await
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if let Some(server) = &self.server {
            server.abort();
        }
    }
}

/// Wait until `check` holds (the change feed is eventually consistent), or fail naming `what`.
pub async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if check().await {
            return;
        }
        assert!(Instant::now() < deadline, "never converged: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A port nobody listens on right now, for a process that must be told its port up front.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("an ephemeral port")
        .port()
}

pub fn id(v: &Value) -> String {
    v["id"].as_str().expect("an id").to_string()
}

/// Let the clock pass a millisecond, so that the next item's `creationDate` is later than the
/// last one's: items created within the same millisecond tie, and a tie's order is the store's.
pub async fn next_millisecond() {
    tokio::time::sleep(std::time::Duration::from_millis(2)).await;
}

/// The tests' HTTP client. It drops a pooled connection after idling for half the server's
/// header timeout (`BLOG_HEADER_TIMEOUT_SECS`, which also closes a kept-alive connection that
/// idles between requests), as any client of a server with an idle timeout should: otherwise a
/// request sent on a connection idle for the whole timeout (a test that worked on the store
/// directly meanwhile) can meet the server's close and fail with "connection closed".
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_idle_timeout(blog::settings::DEFAULT_HEADER_TIMEOUT / 2)
        .build()
        .expect("the tests' client builds")
}

/// A verification's parts, each by its outcome's type (`blog::ops::PARTS` lists them).
pub trait Parts {
    fn posts(&self) -> &blog::ops::posts::Outcome;
    fn bookmarks(&self) -> &blog::ops::bookmarks::Outcome;
    fn timelines(&self) -> &blog::ops::timeline::Outcome;
    fn tags(&self) -> &blog::ops::tags::Outcome;
    fn quarantined(&self) -> &[blog::quarantine::Entry];
}

impl Parts for blog::ops::Outcome {
    fn posts(&self) -> &blog::ops::posts::Outcome {
        self.get().expect("the posts part ran")
    }

    fn bookmarks(&self) -> &blog::ops::bookmarks::Outcome {
        self.get().expect("the bookmarks part ran")
    }

    fn timelines(&self) -> &blog::ops::timeline::Outcome {
        self.get().expect("the timelines part ran")
    }

    fn tags(&self) -> &blog::ops::tags::Outcome {
        self.get().expect("the tags part ran")
    }

    fn quarantined(&self) -> &[blog::quarantine::Entry] {
        let q: &blog::ops::quarantine::Quarantined = self.get().expect("the quarantine part ran");
        &q.0
    }
}
