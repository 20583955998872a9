//! Bind, build the routes and serve from the first moment, while the store opens; the
//! change-feed pump starts once the first answer is handed over (or soon after serving began).
//!
//! The Functions host probes the port from the moment it starts the process, and forwards
//! requests once the probe is answered. On a fresh embedded database, creating its file and
//! schema is most of the time a start takes, so it runs on a thread of its own from the first
//! moment ([`StoreOpening`]), and [`serve`] answers the probe without waiting for it: only the
//! requests that need the application wait for the store (`startup/waiting.rs`).

mod waiting;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use axum::response::Response;
use axum::Router;
use http_body_util::BodyExt as _;
use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch, Notify};
use tower::util::MapResponseLayer;

use crate::auth::Auth;
use crate::live::hub::{Hub, Limits};
use crate::live::webpubsub::WebPubSub;
use crate::server::{self, ServerLimits};
use crate::settings::{Settings, StoreKind};
use crate::store::cosmos::CosmosStore;
use crate::store::embedded::EmbeddedStore;
use crate::store::Store;
use crate::{app, projection, pump, AppState};

/// The longest the change-feed pump waits for the first request to be answered before it starts.
const PUMP_START_DELAY: Duration = Duration::from_millis(100);

/// The application over an already open store, configured by its builder methods (the tests and
/// the bench); `handler` itself runs [`serve`], which starts serving before the store is open.
pub struct Application {
    listener: TcpListener,
    state: AppState,
    pump: bool,
    cors_origins: Vec<String>,
    hosted: bool,
    limits: ServerLimits,
    fanout_limit: Option<u64>,
}

impl Application {
    /// A standalone application with the default limits but no cap per client address (its
    /// clients, tests and the bench, all connect from this machine) over an already bound
    /// listener and an already open store, with `BLOG_AUTH=none` unless
    /// [`Application::with_auth`] says otherwise.
    pub fn new(listener: TcpListener, store: Arc<dyn Store>, pump: bool) -> Self {
        Application {
            listener,
            state: AppState::new(store),
            pump,
            cors_origins: Vec::new(),
            hosted: false,
            fanout_limit: None,
            limits: ServerLimits {
                max_connections_per_ip: 0,
                ..ServerLimits::default()
            },
        }
    }

    /// Answer cross-origin requests from these origins (`["*"]`: any); none by default.
    pub fn with_cors(mut self, origins: Vec<String>) -> Self {
        self.cors_origins = origins;
        self
    }

    /// The same application identifying callers with `auth`.
    pub fn with_auth(self, auth: Auth) -> Self {
        Application {
            state: self.state.with_auth(auth),
            ..self
        }
    }

    /// The same application with feed snapshots that hold for `max_age` on a store that does not
    /// signal its commits (`BLOG_FEED_CACHE_MS`); 0 turns them off.
    pub fn with_feed_cache(self, max_age: std::time::Duration) -> Self {
        Application {
            state: self.state.with_feed_cache(max_age),
            ..self
        }
    }

    /// The same application with at most `per_minute` writes per caller (`BLOG_WRITES_PER_MINUTE`);
    /// none by default here.
    pub fn with_write_limit(self, per_minute: u32) -> Self {
        Application {
            state: self.state.with_write_limit(per_minute),
            ..self
        }
    }

    /// The same application with at most `per_minute` searches per client address
    /// (`BLOG_SEARCHES_PER_MINUTE`) and `in_flight` at once; no budget by default here.
    pub fn with_search_limit(self, per_minute: u32, in_flight: usize) -> Self {
        Application {
            state: self.state.with_search_limit(per_minute, in_flight),
            ..self
        }
    }

    /// As under the Functions host: with the trigger endpoints.
    pub fn hosted(mut self, hosted: bool) -> Self {
        self.hosted = hosted;
        self
    }

    /// With the fan-out limit `BLOG_TIMELINE_FANOUT_LIMIT` sets: recorded in the store before
    /// the timeline lane's first batch (by the pump, or by the timeline triggers when hosted).
    pub fn fanout_limit(mut self, limit: Option<u64>) -> Self {
        self.fanout_limit = limit;
        self
    }

    /// The same application with live-update streams within `limits`.
    pub fn live_limits(self, limits: crate::live::hub::Limits) -> Self {
        Application {
            state: self.state.with_live(crate::live::hub::Hub::new(limits)),
            ..self
        }
    }

    /// The same application pushing live updates to, and negotiating client URLs with, Azure
    /// Web PubSub (`BLOG_WEBPUBSUB_ENDPOINT`).
    pub fn with_webpubsub(self, webpubsub: Arc<WebPubSub>) -> Self {
        Application {
            state: self.state.with_webpubsub(webpubsub),
            ..self
        }
    }

    pub fn limits(mut self, limits: ServerLimits) -> Self {
        self.limits = limits;
        self
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr().expect("bound listener")
    }

    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Serve until `shutdown` resolves, then finish the requests in flight, then let the pump
    /// finish and checkpoint the batches it is applying.
    pub async fn run_until(
        self,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        let store = self.state.store.clone();
        let progress = self.state.progress.clone();
        // Live-update streams end at once on shutdown: the server then waits for nothing of theirs.
        let live = self.state.live.clone();
        let shutdown = async move {
            shutdown.await;
            live.close();
        };
        let config = app::Config {
            hosted: self.hosted,
            limits: self.limits,
            cors_origins: self.cors_origins,
            fanout_limit: self.fanout_limit,
            conduit: true,
        };
        let router = app::router(self.state, &config);
        let (router, answered) = notice_first_answer(router);
        let pump = self
            .pump
            .then(|| start_pump(store, answered, self.fanout_limit, progress));
        server::serve(self.listener, router, self.limits, shutdown).await;
        if let Some(pump) = pump {
            pump.stop().await;
        }
        Ok(())
    }
}

/// `handler`'s service: serve on `listener` from now until `shutdown` resolves, the application
/// the settings describe over the store `store` opens. Until it is open, `/` answers the
/// readiness probe and every other request waits for it (`startup/waiting.rs`). If it cannot be
/// opened, those requests are answered 503, serving stops, and the error is returned.
pub async fn serve(
    listener: TcpListener,
    settings: &Settings,
    store: impl std::future::Future<Output = anyhow::Result<Arc<dyn Store>>>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    // Before the first answer: the start-up log says how callers are identified.
    crate::auth::announce(&settings.auth, settings.addr);
    let routes = app::routes(&app::Config {
        hosted: settings.hosted,
        limits: settings.server,
        cors_origins: settings.cors_origins.clone(),
        fanout_limit: settings.timeline_fanout_limit,
        conduit: settings.conduit,
    });
    let (ready, app) = watch::channel::<Option<Router>>(None);
    let waiting = waiting::router(app.clone(), settings.server.request_timeout);
    let (stop, stopped) = oneshot::channel::<()>();
    // Live-update streams end at once on shutdown: the server then waits for nothing of theirs.
    let live = Limits::streams(settings.live);
    let live = Hub::new(if settings.hosted { live.hosted() } else { live });
    let closing = live.clone();
    let shutdown = async move {
        tokio::select! {
            () = shutdown => {}
            _ = stopped => {}
        }
        closing.close();
    };
    let (url, api) = open_urls(settings.addr);
    tracing::info!(
        addr = %settings.addr,
        url = %url,
        api = %api,
        store = settings.store.as_str(),
        hosted = settings.hosted,
        pump = settings.pump,
        auth = settings.auth.mode.as_str(),
        "listening"
    );
    // Each connection is served by the application once it is ready, by `waiting` before.
    let server = tokio::spawn(server::serve_with(
        listener,
        move || app.borrow().clone().unwrap_or_else(|| waiting.clone()),
        settings.server,
        shutdown,
    ));
    let store = match store.await {
        Ok(store) => store,
        Err(e) => {
            drop(ready);
            let _ = stop.send(());
            let _ = server.await;
            return Err(e);
        }
    };
    let state = state(settings, store.clone())?.with_live(live);
    let progress = state.progress.clone();
    let (router, answered) = notice_first_answer(routes.with_state(state));
    let _ = ready.send(Some(router));
    let pump = settings
        .pump
        .then(|| start_pump(store, answered, settings.timeline_fanout_limit, progress));
    server.await.context("the server task failed")?;
    if let Some(pump) = pump {
        pump.stop().await;
    }
    Ok(())
}

/// The application's state as the settings describe it, over `store`.
fn state(settings: &Settings, store: Arc<dyn Store>) -> anyhow::Result<AppState> {
    let key = token_key(settings)?;
    let state = AppState::new(store)
        .with_auth(Auth::new(&settings.auth).with_token_key(key))
        .with_feed_cache(settings.feed_cache)
        .with_write_limit(settings.writes_per_minute)
        .with_search_limit(
            settings.searches_per_minute,
            crate::api::search_limit::DEFAULT_SEARCHES_IN_FLIGHT,
        );
    let Some(webpubsub) = &settings.webpubsub else {
        return Ok(state);
    };
    let publisher = WebPubSub::from_settings(webpubsub).map_err(|e| anyhow::anyhow!(e))?;
    tracing::info!(endpoint = %webpubsub.endpoint, hub = %webpubsub.hub, "live updates pushed to Azure Web PubSub");
    Ok(state.with_webpubsub(publisher))
}

/// The key local accounts' tokens are signed with: `BLOG_TOKEN_KEY`; else, on the embedded store,
/// the one kept beside its file (made at the first start); else one made for this process alone,
/// whose tokens end with it (said in the log).
fn token_key(settings: &Settings) -> anyhow::Result<crate::auth::local::TokenKey> {
    use crate::auth::local::TokenKey;
    if let Some(text) = &settings.token_key {
        return TokenKey::from_base64(text.expose())
            .map_err(|e| anyhow::anyhow!("BLOG_TOKEN_KEY is not usable: {e}"));
    }
    if settings.store == crate::settings::StoreKind::Embedded {
        let at = crate::settings::token_key_path(&settings.db_path);
        return TokenKey::load_or_create(&at).map_err(|e| anyhow::anyhow!(e));
    }
    tracing::warn!(
        "BLOG_TOKEN_KEY is not set: local accounts' tokens are signed with a key made for this \
         process, so they end when it stops and other instances refuse them"
    );
    Ok(TokenKey::generate().0)
}

/// `router`, and a notice given once its first answer has been handed to its connection: the
/// connection drops the answer's body once it has taken its last bytes, so the notice travels
/// with the body, not with the response head. (With the head, the pump's start-up still
/// overlapped the answer's writing and delayed the first answer.)
fn notice_first_answer(router: Router) -> (Router, Arc<Notify>) {
    let answered = Arc::new(Notify::new());
    let first = answered.clone();
    let once = Arc::new(AtomicBool::new(false));
    let router = router.layer(MapResponseLayer::new(move |response: Response| {
        if once.load(Ordering::Relaxed) || once.swap(true, Ordering::Relaxed) {
            return response;
        }
        let sent = NotifyOnDrop(first.clone());
        response.map(|body| {
            axum::body::Body::new(body.map_frame(move |frame| {
                let _ = &sent;
                frame
            }))
        })
    }));
    (router, answered)
}

/// The change-feed pump, started once `answered` is notified or PUMP_START_DELAY after serving
/// began if no request came: its first reads (a checkpoint and a page of changes per container
/// it follows) would otherwise compete with the first answer, which does not need them, on a
/// small machine. A configured fan-out limit is recorded in the store before the followers
/// start (retried until it is: the timeline lane must not project by another).
fn start_pump(
    store: Arc<dyn Store>,
    answered: Arc<Notify>,
    fanout_limit: Option<u64>,
    progress: Arc<pump::Progress>,
) -> pump::Pump {
    let recording = store.clone();
    let every = crate::quarantine::RETRY_EVERY;
    pump::spawn_reporting(
        store,
        async move {
            let _ = tokio::time::timeout(PUMP_START_DELAY, answered.notified()).await;
            let Some(limit) = fanout_limit else {
                return;
            };
            let mut wait = Duration::from_millis(100);
            while let Err(e) = projection::timeline::record_limit(&*recording, limit).await {
                tracing::warn!(error = %e, "fan-out limit not recorded yet; the pump waits");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(5));
            }
        },
        every,
        progress,
    )
}

/// Open the store the settings choose (the bench and the operations commands open theirs
/// through this too).
pub async fn open_store(settings: &Settings) -> anyhow::Result<Arc<dyn Store>> {
    StoreOpening::start(settings)?.finish().await
}

/// A store being opened: the embedded store opens (creating its file and schema when new) on a
/// thread of its own from [`StoreOpening::start`] on, which needs no async runtime, so that
/// `handler` can start it before anything else. The Cosmos store does no I/O to open: it
/// connects on its first call, so a slow or unreachable account never delays binding; until it
/// answers, requests get 503 + Retry-After.
pub struct StoreOpening(Opening);

enum Opening {
    Embedded {
        path: std::path::PathBuf,
        opened: oneshot::Receiver<anyhow::Result<EmbeddedStore>>,
    },
    Cosmos(crate::settings::CosmosSettings),
}

impl StoreOpening {
    /// Start opening the store the settings choose; fails only when no thread can be started.
    pub fn start(settings: &Settings) -> anyhow::Result<Self> {
        Ok(StoreOpening(match settings.store {
            StoreKind::Embedded => {
                let path = settings.db_path.clone();
                let (done, opened) = oneshot::channel();
                let at = path.clone();
                std::thread::Builder::new()
                    .name("open-store".into())
                    .spawn(move || match EmbeddedStore::open(&at) {
                        Ok(store) => {
                            let reader = store.clone();
                            let _ = done.send(Ok(store));
                            // While the first request is on its way.
                            if let Err(e) = reader.open_first_reader() {
                                tracing::warn!(error = %e, "cannot open the embedded store's first reader yet");
                            }
                        }
                        Err(e) => {
                            let _ = done.send(Err(e));
                        }
                    })
                    .context("cannot start a thread to open the embedded store")?;
                Opening::Embedded { path, opened }
            }
            StoreKind::Cosmos => Opening::Cosmos(settings.cosmos.clone()),
        }))
    }

    /// The open store, once it is.
    pub async fn finish(self) -> anyhow::Result<Arc<dyn Store>> {
        match self.0 {
            Opening::Embedded { path, opened } => {
                // A blocking-pool thread, started while the store opens: the first request's
                // store call finds it idle instead of starting one (tokio keeps an idle thread
                // for 10 s).
                tokio::task::spawn_blocking(|| ());
                let store = opened
                    .await
                    .context("the thread opening the embedded store ended without an answer")?
                    .with_context(|| {
                        format!("cannot open the embedded store at {}", path.display())
                    })?;
                Ok(Arc::new(store))
            }
            Opening::Cosmos(settings) => Ok(Arc::new(CosmosStore::new(settings))),
        }
    }
}

/// Notifies one waiter when dropped.
struct NotifyOnDrop(Arc<Notify>);

impl Drop for NotifyOnDrop {
    fn drop(&mut self) {
        self.0.notify_one();
    }
}
/// The embedded store's file when this start is about to create it (`None`: it exists, or the
/// store is Cosmos DB).
pub fn new_database_file(settings: &Settings) -> Option<std::path::PathBuf> {
    (settings.store == StoreKind::Embedded && !settings.db_path.exists())
        .then(|| settings.db_path.clone())
}

/// Remove a database file this start created (with its WAL and shared-memory files).
pub fn remove_database_file(path: &std::path::Path) {
    for suffix in ["", "-wal", "-shm"] {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        let _ = std::fs::remove_file(std::path::PathBuf::from(name));
    }
}

/// Hold the embedded store's file for this process: an exclusive advisory lock (`flock`, which
/// SQLite's own locks do not touch) taken by serving handlers only, so a second `handler` on a
/// file in use refuses to start (two pumps on one file would project every change twice), while
/// `handler verify` and `handler backup` may still open it. Released when the process ends.
pub fn hold_database_file(settings: &Settings) -> anyhow::Result<()> {
    if settings.store != StoreKind::Embedded {
        return Ok(());
    }
    let path = &settings.db_path;
    let file = std::fs::File::open(path)
        .with_context(|| format!("cannot open {} to hold it", path.display()))?;
    match file.try_lock() {
        Ok(()) => {
            // Held until the process exits.
            std::mem::forget(file);
            Ok(())
        }
        Err(std::fs::TryLockError::WouldBlock) => Err(anyhow::anyhow!(
            "the database file {} is in use by another handler: run one handler per database \
             file (stop the other one, or set BLOG_DB_PATH to another file)",
            path.display()
        )),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(anyhow::Error::new(e).context(format!("cannot lock {}", path.display())))
        }
    }
}

/// The addresses to open once serving: the web client at `/` and the API's index at `/api`; an
/// address that listens on every interface is opened as `localhost`.
pub fn open_urls(addr: std::net::SocketAddr) -> (String, String) {
    let host = match addr.ip() {
        ip if ip.is_unspecified() => "localhost".to_string(),
        std::net::IpAddr::V6(ip) => format!("[{ip}]"),
        ip => ip.to_string(),
    };
    let base = format!("http://{host}:{}", addr.port());
    (format!("{base}/"), format!("{base}/api"))
}
