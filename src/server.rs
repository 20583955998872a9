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
//!   once. At the cap, a new connection is accepted and held while an idle one makes room: the
//!   connection idle the longest (one that has not sent a request yet, or a kept-alive one
//!   between requests) is closed at once, so a new client is served without waiting for a
//!   timeout. A connection with a request in flight is never cut: when every connection is busy
//!   the new one waits for the first to finish, and further ones wait in the listen backlog.
//! - **Per-address cap**: at most [`ServerLimits::max_connections_per_ip`] of them from one client
//!   address (an IPv6 address by its /64 network); a connection over it is closed at once, so one
//!   client cannot take the slots every other client needs.
//! - **Header size**: a request whose header block is larger than [`MAX_HEADER_BYTES`] answers
//!   431 and the connection closes, so an unfinished header holds at most that much memory.
//! - **Graceful shutdown**: once the shutdown signal fires, no connection is accepted,
//!   connections without a request in flight (also one still sending its headers) close, and
//!   in-flight requests finish (for at most the request timeout plus a few
//!   seconds) before [`serve`] returns.

use axum::response::IntoResponse as _;
use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{watch, Notify, Semaphore};
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
    let open = Open::new();
    let mut shutdown = std::pin::pin!(shutdown);

    'accept: loop {
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
        // Over its address's cap: closed at once.
        let Some(address_slot) = per_address.admit(peer.ip()) else {
            tracing::debug!("connection closed: its address holds its cap of connections");
            continue;
        };
        // At the cap: close the connection idle the longest, and again every moment until a
        // slot is free (when every connection is busy, none is closed: the first to finish
        // makes room). Nothing else is accepted meanwhile.
        let slot = match slots.clone().try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => loop {
                if open.close_longest_idle() {
                    tracing::debug!("at the connection cap: closed an idle connection");
                }
                tokio::select! {
                    slot = slots.clone().acquire_owned() => {
                        break slot.expect("the semaphore is never closed")
                    }
                    () = tokio::time::sleep(SHED_RETRY) => {}
                    () = &mut shutdown => break 'accept,
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let conn = open.register();
        let router = router();
        let service_conn = conn.clone();
        let service = TowerToHyperService::new(tower::service_fn(
            move |mut req: hyper::Request<hyper::body::Incoming>| {
                let router = router.clone();
                let busy = service_conn.busy();
                async move {
                    // hyper stops reading a header block at about its buffer size; this makes
                    // the limit exact for the ones it still parsed.
                    if header_block_len(&req) > MAX_HEADER_BYTES {
                        return Ok::<_, std::convert::Infallible>(
                            headers_too_large().map(|body| Tracked { body, _busy: busy }),
                        );
                    }
                    // Every request knows its client's address (`ConnectInfo`), as
                    // `axum::serve` does it.
                    req.extensions_mut()
                        .insert(axum::extract::ConnectInfo(peer));
                    let response = router.oneshot(req).await?;
                    Ok(response.map(|body| Tracked { body, _busy: busy }))
                }
            },
        ));
        // A client that stops reading would block the response's write, and so hold its slot,
        // forever: a write that makes no progress for `request_timeout` ends the connection.
        let mut stream = TimeoutStream::new(stream);
        stream.set_write_timeout(Some(limits.request_timeout));
        let io = TokioIo::new(Box::pin(stream));
        let connection = http.serve_connection(io, service);
        let open = open.clone();
        tokio::spawn(async move {
            let mut connection = std::pin::pin!(connection);
            let ended = tokio::select! {
                ended = connection.as_mut() => ended,
                () = conn.told_to_close(&open) => {
                    // hyper closes it now if it has read nothing yet or is between requests,
                    // else once the request in flight is answered.
                    connection.as_mut().graceful_shutdown();
                    // A connection with part of a request's headers would wait for the rest:
                    // with no request in flight it holds nothing of anyone's, and goes.
                    loop {
                        tokio::select! {
                            ended = connection.as_mut() => break ended,
                            () = tokio::time::sleep(SHED_RETRY) => {
                                if conn.in_flight.load(Ordering::SeqCst) == 0 {
                                    break Ok(());
                                }
                            }
                        }
                    }
                }
            };
            if let Err(e) = ended {
                tracing::debug!(error = %e, "connection ended with an error");
            }
            open.remove(&conn);
            drop(slot);
            drop(address_slot);
        });
    }
    drop(listener);
    tracing::info!("shutting down: finishing in-flight requests");
    open.close_all();
    let grace = limits.request_timeout + SHUTDOWN_MARGIN;
    let all_slots = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    if tokio::time::timeout(grace, slots.acquire_many(all_slots))
        .await
        .is_err()
    {
        tracing::warn!(
            grace_secs = grace.as_secs(),
            "requests still in flight after the grace period; closing them"
        );
    }
}

/// How often a new connection held at the cap looks again for an idle connection to close.
const SHED_RETRY: Duration = Duration::from_millis(100);

/// The open connections, and whether each is idle (no request in flight) and since when, so the
/// one idle the longest can be told to close; and the shutdown that tells them all.
struct Open {
    connections: Mutex<HashMap<u64, Arc<Connection>>>,
    next_id: AtomicU64,
    closing: watch::Sender<bool>,
}

struct Connection {
    id: u64,
    /// Requests in flight (the response's body not handed whole to the connection yet).
    in_flight: AtomicUsize,
    /// When it last became idle (accepted, or its last response's body handed over).
    idle_since: Mutex<Instant>,
    /// Told to close (at most once).
    told: AtomicBool,
    close: Notify,
}

impl Open {
    fn new() -> Arc<Self> {
        Arc::new(Open {
            connections: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
            closing: watch::Sender::new(false),
        })
    }

    fn register(&self) -> Arc<Connection> {
        let conn = Arc::new(Connection {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            in_flight: AtomicUsize::new(0),
            idle_since: Mutex::new(Instant::now()),
            told: AtomicBool::new(false),
            close: Notify::new(),
        });
        lock(&self.connections).insert(conn.id, conn.clone());
        conn
    }

    fn remove(&self, conn: &Connection) {
        lock(&self.connections).remove(&conn.id);
    }

    /// Tell the connection idle the longest to close; `false` when every connection is busy
    /// (or already told).
    fn close_longest_idle(&self) -> bool {
        let connections = lock(&self.connections);
        let longest = connections
            .values()
            .filter(|c| c.in_flight.load(Ordering::SeqCst) == 0 && !c.told.load(Ordering::SeqCst))
            .min_by_key(|c| *lock(&c.idle_since));
        match longest {
            Some(conn) => {
                conn.told.store(true, Ordering::SeqCst);
                conn.close.notify_one();
                true
            }
            None => false,
        }
    }

    /// Shutdown: every connection closes once idle.
    fn close_all(&self) {
        self.closing.send_replace(true);
    }
}

impl Connection {
    /// Marks a request in flight until the returned guard is dropped.
    fn busy(self: &Arc<Self>) -> Busy {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        Busy(self.clone())
    }

    /// Resolves once this connection is told to close, alone or with all at shutdown.
    async fn told_to_close(&self, open: &Open) {
        let mut closing = open.closing.subscribe();
        tokio::select! {
            () = self.close.notified() => {}
            _ = closing.wait_for(|closing| *closing) => {}
        }
    }
}

struct Busy(Arc<Connection>);

/// A response's body, keeping its connection busy until the connection drops it: once handed
/// over whole (or the connection ends). A type of its own rather than a mapped, boxed body: every
/// response goes through it.
struct Tracked {
    body: axum::body::Body,
    _busy: Busy,
}

impl hyper::body::Body for Tracked {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        std::pin::Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        *lock(&self.0.idle_since) = Instant::now();
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
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
