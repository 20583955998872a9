//! The HTTP server: hyper's HTTP/1 connection driver with the limits `axum::serve` does not
//! have, so a slow or idle client cannot hold the service.
//!
//! - **Header timeout**: a connection that has not sent complete request headers within
//!   [`ServerLimits::header_timeout`] (also between two requests on a kept-alive connection) is
//!   closed.
//! - **Request timeout**: a request that has no response within
//!   [`ServerLimits::request_timeout`] answers 503 problem+json with `Retry-After` (applied by the
//!   API router; the Functions triggers are exempt: a batch is applied or refused, never cut).
//! - **Write timeout**: a response write that makes no progress for the request timeout (the
//!   client stopped reading) ends the connection, so such a client cannot keep its slot.
//! - **Connection cap**: at most [`ServerLimits::max_connections`] connections are served at
//!   once; further ones wait in the listen backlog until one closes.
//! - **Graceful shutdown**: once the shutdown signal fires, no connection is accepted, idle
//!   connections close, and in-flight requests finish (for at most the request timeout plus a few
//!   seconds) before [`serve`] returns.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_io_timeout::TimeoutStream;

/// How long a client may take to send a request's headers (`BLOG_HEADER_TIMEOUT_SECS`).
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(20);
/// How long a request may take to be answered (`BLOG_REQUEST_TIMEOUT_SECS`).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How many connections are served at once (`BLOG_MAX_CONNECTIONS`).
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
/// How long in-flight requests get after the request timeout on shutdown.
const SHUTDOWN_MARGIN: Duration = Duration::from_secs(5);

/// The server's limits; see the module documentation for what each one does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerLimits {
    pub header_timeout: Duration,
    pub request_timeout: Duration,
    pub max_connections: usize,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

/// A malformed limit setting: its name and why.
pub type LimitError = (&'static str, String);

impl ServerLimits {
    /// From `BLOG_HEADER_TIMEOUT_SECS` (1..=30), `BLOG_REQUEST_TIMEOUT_SECS` (1..=3600) and
    /// `BLOG_MAX_CONNECTIONS` (1..=65536); unset means the default.
    pub fn from_lookup(get: &impl Fn(&str) -> Option<String>) -> Result<Self, LimitError> {
        let number = |name: &'static str, max: u64, default: u64| -> Result<u64, LimitError> {
            match get(name) {
                None => Ok(default),
                Some(v) => v
                    .trim()
                    .parse::<u64>()
                    .ok()
                    .filter(|n| (1..=max).contains(n))
                    .ok_or_else(|| (name, format!("`{v}` is not a whole number from 1 to {max}"))),
            }
        };
        let d = ServerLimits::default();
        Ok(ServerLimits {
            header_timeout: Duration::from_secs(number(
                "BLOG_HEADER_TIMEOUT_SECS",
                30,
                d.header_timeout.as_secs(),
            )?),
            request_timeout: Duration::from_secs(number(
                "BLOG_REQUEST_TIMEOUT_SECS",
                3600,
                d.request_timeout.as_secs(),
            )?),
            max_connections: number("BLOG_MAX_CONNECTIONS", 65_536, d.max_connections as u64)?
                as usize,
        })
    }
}

/// Serve `router` on `listener` within `limits` until `shutdown` resolves, then finish what is in
/// flight (see the module documentation) and return.
pub async fn serve(
    listener: TcpListener,
    router: axum::Router,
    limits: ServerLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    serve_with(listener, move || router.clone(), limits, shutdown).await
}

/// [`serve`], each new connection served by the router `router()` gives at its acceptance (the
/// start-up serves with one router while the store opens and another after).
pub async fn serve_with(
    listener: TcpListener,
    router: impl Fn() -> axum::Router,
    limits: ServerLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .keep_alive(true);
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);

    loop {
        let slot = tokio::select! {
            slot = slots.clone().acquire_owned() => slot.expect("the semaphore is never closed"),
            () = &mut shutdown => break,
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors and the like: pause rather than spin.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        // Every request knows its client's address (`ConnectInfo`), as `axum::serve` does it.
        let service = TowerToHyperService::new(tower::util::MapRequest::new(
            router(),
            move |mut req: hyper::Request<hyper::body::Incoming>| {
                req.extensions_mut()
                    .insert(axum::extract::ConnectInfo(peer));
                req
            },
        ));
        // A client that stops reading would block the response's write, and so hold its slot,
        // forever: a write that makes no progress for `request_timeout` ends the connection.
        let mut stream = TimeoutStream::new(stream);
        stream.set_write_timeout(Some(limits.request_timeout));
        let io = TokioIo::new(Box::pin(stream));
        let connection = graceful.watch(http.serve_connection(io, service));
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "connection ended with an error");
            }
            drop(slot);
        });
    }
    drop(listener);
    tracing::info!("shutting down: finishing in-flight requests");
    let grace = limits.request_timeout + SHUTDOWN_MARGIN;
    if tokio::time::timeout(grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            grace_secs = grace.as_secs(),
            "requests still in flight after the grace period; closing them"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn parse(pairs: &[(&str, &str)]) -> Result<ServerLimits, LimitError> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        ServerLimits::from_lookup(&|k: &str| m.get(k).cloned())
    }

    #[test]
    fn limits_default_and_parse() {
        assert_eq!(parse(&[]).unwrap(), ServerLimits::default());
        let l = parse(&[
            ("BLOG_HEADER_TIMEOUT_SECS", "5"),
            ("BLOG_REQUEST_TIMEOUT_SECS", " 60 "),
            ("BLOG_MAX_CONNECTIONS", "10"),
        ])
        .unwrap();
        assert_eq!(l.header_timeout, Duration::from_secs(5));
        assert_eq!(l.request_timeout, Duration::from_secs(60));
        assert_eq!(l.max_connections, 10);
        for (k, v) in [
            ("BLOG_HEADER_TIMEOUT_SECS", "0"),
            ("BLOG_HEADER_TIMEOUT_SECS", "31"),
            ("BLOG_REQUEST_TIMEOUT_SECS", "x"),
            ("BLOG_MAX_CONNECTIONS", "-1"),
        ] {
            assert_eq!(parse(&[(k, v)]).unwrap_err().0, k);
        }
    }
}
