//! Bind first, then build the store and start the pump, then serve: the Functions host probes
//! the port from the moment it starts the process.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;
use tokio::net::TcpListener;

use crate::auth::Auth;
use crate::settings::{Settings, StoreKind};
use crate::store::cosmos::CosmosStore;
use crate::store::embedded::EmbeddedStore;
use crate::store::Store;
use crate::{app, pump, AppState};

pub struct Application {
    listener: TcpListener,
    state: AppState,
    pump: bool,
}

impl Application {
    pub async fn build(settings: &Settings) -> anyhow::Result<Self> {
        let listener = TcpListener::bind(settings.addr)
            .await
            .with_context(|| format!("cannot listen on {}", settings.addr))?;
        let store = open_store(settings).await?;
        crate::auth::announce(&settings.auth, settings.addr);
        Ok(Self::new(listener, store, settings.pump).with_auth(Auth::new(&settings.auth)))
    }

    /// An application over an already bound listener and an already open store (tests, bench),
    /// with `BLOG_AUTH=none` unless [`Application::with_auth`] says otherwise.
    pub fn new(listener: TcpListener, store: Arc<dyn Store>, pump: bool) -> Self {
        Application {
            listener,
            state: AppState::new(store),
            pump,
        }
    }

    /// The same application identifying callers with `auth`.
    pub fn with_auth(self, auth: Auth) -> Self {
        Application {
            state: self.state.with_auth(auth),
            ..self
        }
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr().expect("bound listener")
    }

    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Serve until `shutdown` resolves; the pump stops with the server.
    pub async fn run_until(
        self,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        let pumps = if self.pump {
            pump::spawn(self.state.store.clone())
        } else {
            Vec::new()
        };
        let result = axum::serve(self.listener, app(self.state))
            .with_graceful_shutdown(shutdown)
            .await;
        for p in pumps {
            p.abort();
        }
        result.context("server failed")
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
