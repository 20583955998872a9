//! Bind first, then build the store and start the pump, then serve: the Functions host probes
//! the port from the moment it starts the process.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;
use tokio::net::TcpListener;

use crate::auth::Auth;
use crate::server::{self, ServerLimits};
use crate::settings::{Settings, StoreKind};
use crate::store::cosmos::CosmosStore;
use crate::store::embedded::EmbeddedStore;
use crate::store::Store;
use crate::{api, pump, AppState};

pub struct Application {
    listener: TcpListener,
    state: AppState,
    pump: bool,
    cors_origins: Vec<String>,
    hosted: bool,
    limits: ServerLimits,
}

impl Application {
    pub async fn build(settings: &Settings) -> anyhow::Result<Self> {
        let listener = TcpListener::bind(settings.addr)
            .await
            .with_context(|| format!("cannot listen on {}", settings.addr))?;
        let store = open_store(settings).await?;
        crate::auth::announce(&settings.auth, settings.addr);
        Ok(Self::new(listener, store, settings.pump)
            .with_auth(Auth::new(&settings.auth))
            .with_cors(settings.cors_origins.clone())
            .with_feed_cache(settings.feed_cache)
            .hosted(settings.hosted)
            .limits(settings.server))
    }

    /// A standalone application with the default limits over an already bound listener and an
    /// already open store (tests, bench), with `BLOG_AUTH=none` unless [`Application::with_auth`]
    /// says otherwise.
    pub fn new(listener: TcpListener, store: Arc<dyn Store>, pump: bool) -> Self {
        Application {
            listener,
            state: AppState::new(store),
            pump,
            cors_origins: Vec::new(),
            hosted: false,
            limits: ServerLimits::default(),
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

    /// As under the Functions host: with the trigger endpoints.
    pub fn hosted(mut self, hosted: bool) -> Self {
        self.hosted = hosted;
        self
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
        let mut router = api::router(self.state, self.hosted, self.limits.request_timeout);
        // Outermost, so that preflights are answered before routing and every answer, errors
        // included, carries the CORS headers.
        if let Some(cors) = api::cors::layer(&self.cors_origins) {
            router = router.layer(cors);
        }
        // The pump starts once the routes are built, just before serving: its first reads do not
        // compete with building them (the readiness answer does not need the pump).
        let pump = self.pump.then(|| pump::spawn(store));
        server::serve(self.listener, router, self.limits, shutdown).await;
        if let Some(pump) = pump {
            pump.stop().await;
        }
        Ok(())
    }
}

/// Open the store the settings choose (the bench opens its store through this too).
pub async fn open_store(settings: &Settings) -> anyhow::Result<Arc<dyn Store>> {
    match settings.store {
        StoreKind::Embedded => {
            let path = settings.db_path.clone();
            let store = tokio::task::spawn_blocking(move || EmbeddedStore::open(&path))
                .await?
                .with_context(|| {
                    format!(
                        "cannot open the embedded store at {}",
                        settings.db_path.display()
                    )
                })?;
            Ok(Arc::new(store))
        }
        // No I/O here: the Cosmos store connects on its first call, so a slow or unreachable
        // account never delays binding; until it answers, requests get 503 + Retry-After.
        StoreKind::Cosmos => Ok(Arc::new(CosmosStore::new(settings.cosmos.clone()))),
    }
}
