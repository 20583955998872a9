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
//! - **Per-address cap**: at most [`ServerLimits::max_connections_per_ip`] of them from one client
//!   address (an IPv6 address by its /64 network); a connection over it is closed at once, so one
//!   client cannot take the slots every other client needs.
//! - **Header size**: a request whose header block is larger than [`MAX_HEADER_BYTES`] answers
//!   431 and the connection closes, so an unfinished header holds at most that much memory.
//! - **Graceful shutdown**: once the shutdown signal fires, no connection is accepted, idle
//!   connections close, and in-flight requests finish (for at most the request timeout plus a few
//!   seconds) before [`serve`] returns.

use axum::response::IntoResponse as _;
use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_io_timeout::TimeoutStream;
use tower::ServiceExt as _;

pub use crate::settings::ServerLimits;

/// The largest request header block read (request line and headers); larger answers 431. Tens
/// of KiB, as other servers allow: far above a bearer token and the usual headers, while an
/// unfinished header on each of many connections cannot add up to much memory. (hyper's own
/// default is about 400 KB.)
pub const MAX_HEADER_BYTES: usize = 32 * 1024;
/// How long in-flight requests get after the request timeout on shutdown.
const SHUTDOWN_MARGIN: Duration = Duration::from_secs(5);

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
        .max_buf_size(MAX_HEADER_BYTES)
        .keep_alive(true);
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let per_address = PerAddress::new(limits.max_connections_per_ip);
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
        // Over its address's cap: closed at once, giving its slot back.
        let Some(address_slot) = per_address.admit(peer.ip()) else {
            tracing::debug!("connection closed: its address holds its cap of connections");
            continue;
        };
        let _ = stream.set_nodelay(true);
        let router = router();
        let service = TowerToHyperService::new(tower::service_fn(
            move |mut req: hyper::Request<hyper::body::Incoming>| {
                let router = router.clone();
                async move {
                    // hyper stops reading a header block at about its buffer size; this makes
                    // the limit exact for the ones it still parsed.
                    if header_block_len(&req) > MAX_HEADER_BYTES {
                        return Ok(headers_too_large());
                    }
                    // Every request knows its client's address (`ConnectInfo`), as
                    // `axum::serve` does it.
                    req.extensions_mut()
                        .insert(axum::extract::ConnectInfo(peer));
                    router.oneshot(req).await
                }
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
            drop(address_slot);
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

/// The size of a request's header block as sent: request line and header lines.
fn header_block_len<B>(req: &hyper::Request<B>) -> usize {
    let line = req.method().as_str().len() + req.uri().to_string().len() + "  HTTP/1.1\r\n".len();
    req.headers()
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + ": \r\n".len())
        .sum::<usize>()
        + line
}

/// 431 problem+json, closing the connection.
fn headers_too_large() -> axum::response::Response {
    let status = hyper::StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE;
    let kind = crate::error::HEADERS_TOO_LARGE;
    let body = serde_json::json!({
        "type": kind.uri(),
        "title": kind.title,
        "status": status.as_u16(),
        "detail": format!("the request's header block is larger than {MAX_HEADER_BYTES} bytes"),
    });
    let mut response = (status, axum::Json(body)).into_response();
    let headers = response.headers_mut();
    headers.insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/problem+json"),
    );
    headers.insert(
        hyper::header::CONNECTION,
        hyper::header::HeaderValue::from_static("close"),
    );
    response
}

/// The client a connection or a write is counted against: its address, an IPv6 address by its
/// /64 network (one subscriber usually holds a whole /64, so counting its addresses one by one
/// would count nothing), an IPv4-mapped IPv6 address as the IPv4 address it is.
pub fn client_of(addr: IpAddr) -> IpAddr {
    match addr.to_canonical() {
        IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !((1u128 << 64) - 1))),
        v4 => v4,
    }
}

/// How many connections each client address holds (only addresses with one or more: at most
/// as many entries as open connections).
struct PerAddress {
    max: usize,
    open: Mutex<HashMap<IpAddr, usize>>,
}

impl PerAddress {
    fn new(max: usize) -> Arc<Self> {
        Arc::new(PerAddress {
            max,
            open: Mutex::new(HashMap::new()),
        })
    }

    /// A slot for one more connection from `addr`, or `None` when it holds its cap.
    fn admit(self: &Arc<Self>, addr: IpAddr) -> Option<AddressSlot> {
        if self.max == 0 {
            return Some(AddressSlot(None));
        }
        let client = client_of(addr);
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let held = open.entry(client).or_insert(0);
        if *held >= self.max {
            return None;
        }
        *held += 1;
        Some(AddressSlot(Some((self.clone(), client))))
    }
}

/// One connection's place in its address's count, given back when dropped.
struct AddressSlot(Option<(Arc<PerAddress>, IpAddr)>);

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let Some((per_address, client)) = self.0.take() else {
            return;
        };
        let mut open = per_address.open.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(held) = open.get_mut(&client) {
            *held -= 1;
            if *held == 0 {
                open.remove(&client);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_holds_at_most_its_cap_and_gets_slots_back() {
        let per = PerAddress::new(2);
        let a: IpAddr = "127.0.0.2".parse().unwrap();
        let b: IpAddr = "127.0.0.1".parse().unwrap();
        let first = per.admit(a).unwrap();
        let _second = per.admit(a).unwrap();
        assert!(per.admit(a).is_none());
        assert!(per.admit(b).is_some());
        drop(first);
        assert!(per.admit(a).is_some());
        // The same /64 is one client; the entries go when their connections do.
        let v6 = |s: &str| s.parse::<IpAddr>().unwrap();
        let x = per.admit(v6("2001:db8::1")).unwrap();
        let y = per.admit(v6("2001:db8::2")).unwrap();
        assert!(per.admit(v6("2001:db8::3")).is_none());
        drop((x, y));
        assert!(!per.open.lock().unwrap().contains_key(&v6("2001:db8::")));
    }
}
