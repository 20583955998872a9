//! How a request is measured: its latency, the store operations and request units it used
//! (`blog::store::metrics`, the same accounting behind `x-store-operations`), and the partitions
//! it touched (a wrapper around the store that notes every partition key an operation names,
//! or the container when a query fans out across partitions).
//!
//! The store wrapper is [`tally`]; the statistics and the HTTP client here share the one
//! `Sample` they all produce.

mod tally;

use std::collections::BTreeSet;
use std::future::Future;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use axum::body::Body;
use blog::AppState;
use reqwest::Method;
use serde::Serialize;
use serde_json::Value;
use tower::ServiceExt as _;

pub use tally::{touched, writes, writes_total, Tally, Touched};

/// One measured request.
#[derive(Debug, Clone, Default)]
pub struct Sample {
    pub latency: Duration,
    pub operations: u32,
    pub request_charge: f64,
    pub touched: Touched,
}

/// Mean, least and greatest of a per-request quantity.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Spread {
    pub mean: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    pub fn of(values: impl IntoIterator<Item = f64>) -> Spread {
        let (mut n, mut sum, mut min, mut max) = (0usize, 0.0, f64::INFINITY, f64::NEG_INFINITY);
        for v in values {
            n += 1;
            sum += v;
            min = min.min(v);
            max = max.max(v);
        }
        if n == 0 {
            return Spread::default();
        }
        Spread {
            mean: sum / n as f64,
            min,
            max,
        }
    }
}

#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Partitions {
    /// Containers read across every partition ("all" in the table).
    pub cross_partition: Vec<&'static str>,
    /// Distinct partitions named by single-partition operations.
    pub distinct: Spread,
}

/// The figures of one row and version.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Stats {
    pub samples: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub mean_ms: f64,
    pub max_ms: f64,
    pub operations: Spread,
    /// `None` when the store reports no request units (the embedded store).
    pub request_charge: Option<Spread>,
    pub partitions: Partitions,
}

/// The value at quantile `q` of sorted `xs` (nearest rank).
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Latency percentiles of a set of durations: `(p50, p99, mean, max)` in milliseconds.
pub fn latency(durations: &[Duration]) -> (f64, f64, f64, f64) {
    let mut xs: Vec<f64> = durations.iter().copied().map(ms).collect();
    xs.sort_by(f64::total_cmp);
    let mean = xs.iter().sum::<f64>() / xs.len().max(1) as f64;
    (
        percentile(&xs, 0.50),
        percentile(&xs, 0.99),
        mean,
        xs.last().copied().unwrap_or(0.0),
    )
}

pub fn stats(samples: &[Sample]) -> Stats {
    let durations: Vec<Duration> = samples.iter().map(|s| s.latency).collect();
    let (p50_ms, p99_ms, mean_ms, max_ms) = latency(&durations);
    let charged = samples.iter().any(|s| s.request_charge > 0.0);
    let cross: BTreeSet<&'static str> = samples
        .iter()
        .flat_map(|s| s.touched.cross.iter().copied())
        .collect();
    Stats {
        samples: samples.len(),
        p50_ms,
        p99_ms,
        mean_ms,
        max_ms,
        operations: Spread::of(samples.iter().map(|s| f64::from(s.operations))),
        request_charge: charged.then(|| Spread::of(samples.iter().map(|s| s.request_charge))),
        partitions: Partitions {
            cross_partition: cross.into_iter().collect(),
            distinct: Spread::of(samples.iter().map(|s| s.touched.partitions.len() as f64)),
        },
    }
}

/// Run `fut` as one measured unit of work against the store directly (the V1 requests).
pub async fn measured<F: Future>(fut: F) -> (F::Output, Sample) {
    let started = Instant::now();
    let ((out, usage), touched) = touched(blog::store::metrics::scope(fut)).await;
    let sample = Sample {
        latency: started.elapsed(),
        operations: usage.operations,
        request_charge: usage.request_charge,
        touched,
    };
    (out, sample)
}

/// A request to the API.
#[derive(Debug, Clone)]
pub struct Req {
    pub method: Method,
    pub path: String,
    pub body: Option<Value>,
}

impl Req {
    pub fn get(path: impl Into<String>) -> Req {
        Req {
            method: Method::GET,
            path: path.into(),
            body: None,
        }
    }

    pub fn post(path: impl Into<String>, body: Value) -> Req {
        Req {
            method: Method::POST,
            path: path.into(),
            body: Some(body),
        }
    }

    pub fn put(path: impl Into<String>, body: Option<Value>) -> Req {
        Req {
            method: Method::PUT,
            path: path.into(),
            body,
        }
    }

    pub fn delete(path: impl Into<String>) -> Req {
        Req {
            method: Method::DELETE,
            path: path.into(),
            body: None,
        }
    }

    fn describe(&self) -> String {
        format!("{} {}", self.method, self.path)
    }
}

/// A successful answer.
#[derive(Debug, Clone)]
pub struct Answer {
    pub body: Value,
    pub sample: Sample,
}

fn header_num<T: std::str::FromStr>(h: &axum::http::HeaderMap, name: &str) -> Option<T> {
    h.get(name)?.to_str().ok()?.parse().ok()
}

fn answer(
    req: &Req,
    status: u16,
    headers: &axum::http::HeaderMap,
    bytes: &[u8],
    latency: Duration,
) -> anyhow::Result<Answer> {
    let body: Value = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(bytes).unwrap_or_else(|_| Value::String(format!("{bytes:?}")))
    };
    if !(200..300).contains(&status) {
        bail!("{} answered {status}: {body}", req.describe());
    }
    let operations = header_num(headers, "x-store-operations")
        .with_context(|| format!("{} answered without x-store-operations", req.describe()))?;
    Ok(Answer {
        body,
        sample: Sample {
            latency,
            operations,
            // Sent only where the store reports request units.
            request_charge: header_num(headers, "x-request-charge").unwrap_or(0.0),
            touched: Touched::default(),
        },
    })
}

/// Talks to the running application: over HTTP for the measurements, and in process through
/// the same router for a probe that can see which partitions a request touches (the HTTP
/// server runs handlers in its own tasks, out of reach of the bench's task-local tally).
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    origin: String,
    router: axum::Router,
}

impl Client {
    /// A client of the application at `origin`, whose state is `state`.
    pub fn new(origin: String, state: AppState) -> Client {
        Client {
            http: reqwest::Client::new(),
            origin,
            router: blog::app::router(state, &blog::app::Config::default()),
        }
    }

    /// The same client sending from `ip`, a local address of this machine (on Linux every
    /// address of 127.0.0.0/8 is one), so that the server sees another client address.
    pub fn sending_from(&self, ip: std::net::IpAddr) -> anyhow::Result<Client> {
        Ok(Client {
            http: reqwest::Client::builder().local_address(ip).build()?,
            ..self.clone()
        })
    }

    /// Send `req` over HTTP and read the whole answer, whatever its status: the status and the
    /// client's latency.
    pub async fn status(&self, req: &Req) -> anyhow::Result<(u16, Duration)> {
        let mut rb = self
            .http
            .request(req.method.clone(), format!("{}{}", self.origin, req.path));
        if let Some(body) = &req.body {
            rb = rb.json(body);
        }
        let started = Instant::now();
        let resp = rb
            .send()
            .await
            .with_context(|| format!("{} failed", req.describe()))?;
        let status = resp.status().as_u16();
        resp.bytes().await?;
        Ok((status, started.elapsed()))
    }

    /// Send `req` over HTTP; the latency is the client's: send, then read the whole body.
    pub async fn send(&self, req: &Req) -> anyhow::Result<Answer> {
        let mut rb = self
            .http
            .request(req.method.clone(), format!("{}{}", self.origin, req.path));
        if let Some(body) = &req.body {
            rb = rb.json(body);
        }
        let started = Instant::now();
        let resp = rb
            .send()
            .await
            .with_context(|| format!("{} failed", req.describe()))?;
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let bytes = resp.bytes().await?;
        let latency = started.elapsed();
        answer(req, status, &headers, &bytes, latency)
    }

    /// Send `req` over HTTP as a client that takes gzip (`Accept-Encoding: gzip`); the latency
    /// includes decoding the answer. Fails unless the answer came compressed.
    pub async fn send_gzip(&self, req: &Req) -> anyhow::Result<Answer> {
        use std::io::Read as _;
        let started = Instant::now();
        let resp = self
            .http
            .request(req.method.clone(), format!("{}{}", self.origin, req.path))
            .header(reqwest::header::ACCEPT_ENCODING, "gzip")
            .send()
            .await
            .with_context(|| format!("{} failed", req.describe()))?;
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        if headers
            .get(reqwest::header::CONTENT_ENCODING)
            .map(|v| v.as_bytes())
            != Some(b"gzip")
        {
            bail!(
                "{} answered uncompressed to a client taking gzip",
                req.describe()
            );
        }
        let wire = resp.bytes().await?;
        let mut bytes = Vec::new();
        flate2::read::GzDecoder::new(&wire[..]).read_to_end(&mut bytes)?;
        let latency = started.elapsed();
        answer(req, status, &headers, &bytes, latency)
    }

    /// Answer `req` through the application's router in this task, noting the partitions.
    pub async fn probe(&self, req: &Req) -> anyhow::Result<Answer> {
        let body = match &req.body {
            Some(v) => Body::from(serde_json::to_vec(v)?),
            None => Body::empty(),
        };
        let request = axum::http::Request::builder()
            .method(req.method.clone())
            .uri(&req.path)
            .header(axum::http::header::CONTENT_TYPE, "application/json")
            .body(body)?;
        let started = Instant::now();
        let (resp, touched) = touched(self.router.clone().oneshot(request)).await;
        let resp = resp.expect("the router is infallible");
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX).await?;
        let mut a = answer(req, status, &headers, &bytes, started.elapsed())?;
        a.sample.touched = touched;
        Ok(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let xs: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&xs, 0.5), 50.0);
        assert_eq!(percentile(&xs, 0.99), 99.0);
        assert_eq!(percentile(&[3.0], 0.99), 3.0);
        assert_eq!(percentile(&[1.0, 2.0], 0.5), 1.0);
        assert_eq!(percentile(&[], 0.5), 0.0);
    }

    #[test]
    fn stats_report_no_charge_when_the_store_reports_none() {
        let s = Sample {
            latency: Duration::from_millis(2),
            operations: 3,
            ..Sample::default()
        };
        let st = stats(&[s.clone(), s]);
        assert!(st.request_charge.is_none());
        assert_eq!(st.operations.mean, 3.0);
        assert_eq!(st.p50_ms, 2.0);
    }
}
