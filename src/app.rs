//! The composition root: the one place the application is put together. `handler` (through
//! `startup::serve`), the tests and the bench (through `startup::Application`) all get their
//! router from [`routes`], so what they run is what ships.
//!
//! From the inside out: the API's routes, each answered within the request timeout; under the
//! Functions host the trigger invocations (which do not exist standalone); `/` and the web
//! client; problem+json for unknown routes and methods; the body limit; answers to panics;
//! per-request store accounting and logging; compression (not of the trigger invocations'
//! answers, which only the host reads, on the same machine); and outermost CORS on `/api/...` when origins are
//! allowed. The modules it assembles know nothing of each other or of this one.

use axum::extract::{DefaultBodyLimit, Request};
use axum::middleware::Next;
use axum::Router;

use crate::api::{self, AppState};
use crate::settings::ServerLimits;

/// What shapes the application besides its state.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// As under the Functions host: with the trigger endpoints.
    pub hosted: bool,
    /// The request timeout (API requests) and the header timeout (trigger bodies).
    pub limits: ServerLimits,
    /// Origins allowed to call the API from a browser (`BLOG_CORS_ORIGINS`); none by default.
    pub cors_origins: Vec<String>,
    /// The fan-out limit this process records before its first timeline batch
    /// (`BLOG_TIMELINE_FANOUT_LIMIT`); none keeps the recorded one.
    pub fanout_limit: Option<u64>,
    /// With the RealWorld ("Conduit") API under `/api/conduit` (`BLOG_CONDUIT`).
    pub conduit: bool,
}

/// The whole application, waiting for its state (start-up builds it while the store opens).
pub fn routes(config: &Config) -> Router<AppState> {
    let api = api::timed_routes(config.limits.request_timeout);
    let routes = if config.hosted {
        api.merge(crate::functions::routes(
            config.limits.header_timeout,
            config.fanout_limit,
        ))
    } else {
        api
    };
    // Live updates: under the Functions host each stream is an invocation the host proxies.
    let events = if config.hosted {
        axum::routing::get(api::events::hosted)
    } else {
        axum::routing::get(api::events::events)
    };
    let routes = routes.route("/api/events", events);
    let routes = if config.conduit {
        routes.merge(api::conduit::routes(config.limits.request_timeout))
    } else {
        routes
    };
    let routes = routes
        // `/` (the Functions host's readiness probe, or the page for a browser) and the client.
        .merge(crate::web::routes())
        .route("/api", axum::routing::get(api::index))
        .fallback(api::not_found)
        .method_not_allowed_fallback(api::method_not_allowed)
        // One stack, outermost first: each `Router::layer` call wraps every route in a service
        // of its own, cloned and boxed again on every request.
        .layer(
            tower::ServiceBuilder::new()
                .layer(crate::compression::Layer::except(is_trigger))
                .layer(api::middleware::Metering)
                // Inside `meter`, so that a panic is answered, counted and logged like any failure.
                .layer(tower_http::catch_panic::CatchPanicLayer::custom(
                    api::panicked,
                ))
                .layer(DefaultBodyLimit::max(api::BODY_LIMIT)),
        );
    let Some(cors) = api::cors::layer(&config.cors_origins) else {
        return routes;
    };
    // Outermost, so that preflights are answered before routing and every answer under `/api/`,
    // errors included, carries the CORS headers; any other path passes by it untouched.
    routes.layer(axum::middleware::from_fn(
        move |req: Request, next: Next| {
            let cors = cors.clone();
            async move {
                if api::cors::covers(req.uri().path()) {
                    use tower::{Layer as _, ServiceExt as _};
                    match cors.layer(next).oneshot(req).await {
                        Ok(response) => response.map(axum::body::Body::new),
                        Err(never) => match never {},
                    }
                } else {
                    next.run(req).await
                }
            }
        },
    ))
}

/// Whether `path` is a trigger invocation's (`/<FunctionName>`).
fn is_trigger(path: &str) -> bool {
    crate::functions::TRIGGERS
        .iter()
        .any(|t| path.strip_prefix('/') == Some(t.function))
}

/// [`routes`] with its state.
pub fn router(state: AppState, config: &Config) -> Router {
    routes(config).with_state(state)
}
