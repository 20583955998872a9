//! The request middleware as services of their own: the answer of each is a future with a name,
//! so a request passes through them without a box, or a clone of the service inside, per request
//! (as `axum::middleware::from_fn` costs).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::Request;
use axum::http::{header, HeaderName, HeaderValue, Method};
use axum::response::{IntoResponse, Response};
use axum::BoxError;
use tokio::task::futures::TaskLocalFuture;
use tower::Service;
use tracing::instrument::Instrumented;
use tracing::Instrument as _;

use crate::auth::ActingUser;
use crate::error::{ApiError, Failure};
use crate::store::metrics::{self, Meter};

/// The header a response counts its request's store operations in.
const STORE_OPERATIONS: HeaderName = HeaderName::from_static("x-store-operations");
/// The header a response states its request's request units in (where the store reports any).
const REQUEST_CHARGE: HeaderName = HeaderName::from_static("x-request-charge");

/// Answer every request within a time limit, else 503 with `Retry-After`.
#[derive(Clone, Copy)]
pub struct TimeLimit(pub Duration);

impl<S> tower::Layer<S> for TimeLimit {
    type Service = Timed<S>;

    fn layer(&self, inner: S) -> Timed<S> {
        Timed {
            inner,
            limit: self.0,
        }
    }
}

/// The service [`TimeLimit`] makes.
#[derive(Clone)]
pub struct Timed<S> {
    inner: S,
    limit: Duration,
}

impl<S> Service<Request> for Timed<S>
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = TimedAnswer<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        TimedAnswer {
            inner: tokio::time::timeout(self.limit, self.inner.call(req)),
            limit: self.limit,
        }
    }
}

pin_project_lite::pin_project! {
    /// The answer of [`Timed`], on its way.
    pub struct TimedAnswer<F> {
        #[pin]
        inner: tokio::time::Timeout<F>,
        limit: Duration,
    }
}

impl<F> Future for TimedAnswer<F>
where
    F: Future<Output = Result<Response, Infallible>>,
{
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        Poll::Ready(Ok(match ready!(this.inner.poll(cx)) {
            Ok(answer) => answer?,
            Err(_) => ApiError::TimedOut(*this.limit).into_response(),
        }))
    }
}

/// Count the store operations (and request units) a request used into response headers, and log
/// the request (with the user it acted as, never the token or principal that proved it).
/// Everything a request logs (here and in the handlers) is in its span, with method and path;
/// a server-side failure is logged here from the [`Failure`] the error response carries.
#[derive(Clone, Copy)]
pub struct Metering;

impl<S> tower::Layer<S> for Metering {
    type Service = Metered<S>;

    fn layer(&self, inner: S) -> Metered<S> {
        Metered(inner)
    }
}

/// The service [`Metering`] makes.
#[derive(Clone)]
pub struct Metered<S>(S);

impl<S, B> Service<Request> for Metered<S>
where
    S: Service<Request, Response = axum::http::Response<B>, Error = Infallible>,
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = MeteredAnswer<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request) -> Self::Future {
        let method = req.method().clone();
        let path = req.uri().path().to_string();
        let span = tracing::info_span!("request", %method, %path);
        let acting = ActingUser::default();
        req.extensions_mut().insert(acting.clone());
        let meter = Meter::default();
        let started = Instant::now();
        let inner = {
            let _in_span = span.enter();
            metrics::metered(meter.clone(), self.0.call(req))
        };
        MeteredAnswer {
            inner: inner.instrument(span),
            request: Some(Asked {
                method,
                path,
                acting,
                meter,
                started,
            }),
        }
    }
}

/// What [`Metered`] keeps of a request until its answer.
struct Asked {
    method: Method,
    path: String,
    acting: ActingUser,
    meter: Meter,
    started: Instant,
}

pin_project_lite::pin_project! {
    /// The answer of [`Metered`], on its way.
    pub struct MeteredAnswer<F> {
        #[pin]
        inner: Instrumented<TaskLocalFuture<Meter, F>>,
        request: Option<Asked>,
    }
}

impl<F, B> Future for MeteredAnswer<F>
where
    F: Future<Output = Result<axum::http::Response<B>, Infallible>>,
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let Ok(resp) = ready!(this.inner.as_mut().poll(cx));
        let mut resp = resp.map(Body::new);
        let Some(r) = this.request.take() else {
            return Poll::Ready(Ok(resp));
        };
        let _in_span = this.inner.span().enter();
        let usage = r.meter.usage();
        if let Some(failure) = resp.extensions_mut().remove::<Failure>() {
            failure.log();
        }
        let headers = resp.headers_mut();
        // Error bodies echo parts of the request: never let a browser sniff them into HTML.
        headers.insert(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        );
        headers.insert(STORE_OPERATIONS, HeaderValue::from(usage.operations));
        if usage.request_charge > 0.0 {
            if let Ok(v) = HeaderValue::from_str(&format!("{:.2}", usage.request_charge)) {
                headers.insert(REQUEST_CHARGE, v);
            }
        }
        tracing::info!(
            method = %r.method,
            path = %r.path,
            status = resp.status().as_u16(),
            user = r.acting.get(),
            store_operations = usage.operations,
            request_charge = usage.request_charge,
            elapsed_ms = r.started.elapsed().as_secs_f64() * 1000.0,
            "request"
        );
        Poll::Ready(Ok(resp))
    }
}
