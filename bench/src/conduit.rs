//! The RealWorld ("Conduit") row: the same load against any RealWorld server on this machine,
//! so that this implementation and another can be measured side by side.
//!
//! Given the server's base URL (`--conduit-base`: what the RealWorld paths `/api/…` are
//! appended to, as the upstream suite's `host` in tests/conduit; e.g. `http://127.0.0.1:3000`,
//! and by default the handler the bench starts, at `/api/conduit`), it sends, kind after kind,
//! each kind by `--conduit-concurrency` clients at once and for at most `--conduit-seconds`:
//!
//! - **register** `--conduit-users` users (`POST /api/users`), whose tokens sign every later
//!   request;
//! - **follow**: each follows the next `--conduit-follows` users;
//! - **post** `--conduit-articles` articles each, each with one of five tags of the run;
//! - **favorite** `--conduit-favorites` articles of others each;
//! - then `--conduit-reads` requests of each read, signed in as a user drawn at random: the
//!   global **list**, a list **by author**, **by tag**, of what a user **favorited**, the
//!   **feed**, **get** one article, and the **tags**; every list and the feed a page of
//!   `--conduit-limit`.
//!
//! Only the RealWorld API is used: what this app adds (`x-store-operations`,
//! `x-request-charge`) is read where the answers carry it and reported, never needed. Names are
//! unique to the run, so a server can be driven again without being emptied. Only loopback
//! addresses are accepted: the load is for a server on this machine.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use rand::seq::IndexedRandom;
use rand::SeedableRng;
use rand_pcg::Pcg64;
use reqwest::{Method, Url};
use serde_json::{json, Value};
use tokio::task::JoinSet;

use crate::measure::Spread;
use crate::results::conduit::{Conduit, ConduitKind};
use crate::results::latency_of;

/// Tags of the run's articles (each article has one).
const TAGS: usize = 5;

/// What to send, and where.
#[derive(Debug, Clone)]
pub struct Plan {
    pub base: String,
    pub own_handler: bool,
    pub users: usize,
    pub follows: usize,
    pub articles: usize,
    pub favorites: usize,
    pub reads: usize,
    pub limit: u32,
    pub concurrency: usize,
    pub seconds: f64,
    pub seed: u64,
}

/// The base URL without its trailing `/`, if it is an `http` URL of this machine.
pub fn loopback_base(base: &str) -> anyhow::Result<String> {
    let url = Url::parse(base).with_context(|| format!("`{base}` is not a URL"))?;
    if url.scheme() != "http" {
        bail!("`{base}`: only http URLs are driven");
    }
    let host = url.host_str().unwrap_or_default();
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|a| a.is_loopback());
    if !loopback {
        bail!("`{base}`: the RealWorld row drives servers on this machine only (loopback)");
    }
    if url.query().is_some() || url.fragment().is_some() {
        bail!("`{base}`: a base URL has no query or fragment");
    }
    Ok(base.trim_end_matches('/').to_string())
}

/// One request: method, path under the base, the token that signs it, the body.
struct Call {
    method: Method,
    path: String,
    token: Option<String>,
    body: Option<Value>,
}

impl Call {
    fn get(path: String, token: &str) -> Call {
        Call {
            method: Method::GET,
            path,
            token: Some(token.to_string()),
            body: None,
        }
    }

    fn post(path: String, token: Option<&str>, body: Option<Value>) -> Call {
        Call {
            method: Method::POST,
            path,
            token: token.map(str::to_string),
            body,
        }
    }
}

/// One answer: its latency, body and this app's accounting headers where present.
struct Outcome {
    latency: Duration,
    body: Value,
    operations: Option<f64>,
    charge: Option<f64>,
}

/// The run's state between kinds: who signed up, what they posted.
struct Cast {
    names: Vec<String>,
    tokens: Vec<String>,
    /// `(author index, slug, tag index)` of every article.
    articles: Vec<(usize, String, usize)>,
    tags: Vec<String>,
}

/// Drive the plan's load against its base; the figures of every kind.
pub async fn run(plan: &Plan) -> anyhow::Result<Conduit> {
    let started = Instant::now();
    let http = reqwest::Client::new();
    let mut rng = Pcg64::seed_from_u64(plan.seed.wrapping_add(7));
    // Unique to this run: a server may be driven again without being emptied.
    let run = time::OffsetDateTime::now_utc().unix_timestamp_nanos() as u64 % 0xff_ffff;
    let mut kinds = Vec::new();
    let mut cast = Cast {
        names: Vec::new(),
        tokens: Vec::new(),
        articles: Vec::new(),
        tags: (0..TAGS).map(|k| format!("cb{run:x}t{k}")).collect(),
    };

    let names: Vec<String> = (0..plan.users).map(|i| format!("cb{run:x}u{i}")).collect();
    let calls = names
        .iter()
        .map(|n| {
            let user = json!({ "user": {
                "username": n, "email": format!("{n}@example.com"), "password": "bench-password-1"
            } });
            Call::post("/api/users".into(), None, Some(user))
        })
        .collect();
    let (kind, out) = phase(&http, plan, "register", "POST /api/users", calls, None).await?;
    kinds.push(kind);
    for (name, o) in names.into_iter().zip(out) {
        let Some(o) = o else { continue };
        let token = o.body["user"]["token"]
            .as_str()
            .context("a user without a token")?;
        cast.tokens.push(token.to_string());
        cast.names.push(name);
    }
    let n = cast.names.len();
    if n == 0 {
        bail!("no user was registered at {}", plan.base);
    }

    let mut calls = Vec::new();
    for i in 0..n {
        for f in 0..plan.follows.min(n - 1) {
            let path = format!("/api/profiles/{}/follow", cast.names[(i + 1 + f) % n]);
            calls.push(Call::post(path, Some(&cast.tokens[i]), None));
        }
    }
    let route = "POST /api/profiles/{username}/follow";
    kinds.push(phase(&http, plan, "follow", route, calls, None).await?.0);

    let mut calls = Vec::new();
    let mut authors = Vec::new();
    for i in 0..n {
        for a in 0..plan.articles {
            let k = (i * plan.articles + a) % TAGS;
            let article = json!({ "article": {
                "title": format!("Bench article {a} of {}", cast.names[i]),
                "description": "a benchmark article",
                "body": "The same load against any RealWorld implementation, side by side.",
                "tagList": [cast.tags[k]],
            } });
            calls.push(Call::post(
                "/api/articles".into(),
                Some(&cast.tokens[i]),
                Some(article),
            ));
            authors.push((i, k));
        }
    }
    let (kind, out) = phase(&http, plan, "post", "POST /api/articles", calls, None).await?;
    kinds.push(kind);
    for ((author, tag), o) in authors.into_iter().zip(out) {
        let Some(o) = o else { continue };
        let slug = o.body["article"]["slug"]
            .as_str()
            .context("an article without a slug")?;
        cast.articles.push((author, slug.to_string(), tag));
    }
    if cast.articles.is_empty() {
        bail!("no article was posted at {}", plan.base);
    }

    // Each user favorites the articles of others that follow their own in the list: distinct.
    let mut calls = Vec::new();
    let m = cast.articles.len();
    for i in 0..n {
        let start = cast
            .articles
            .iter()
            .position(|(a, ..)| *a == i)
            .unwrap_or(0);
        let picks = (1..m)
            .map(|d| &cast.articles[(start + d) % m])
            .filter(|(a, ..)| *a != i)
            .take(plan.favorites);
        for (_, slug, _) in picks {
            let path = format!("/api/articles/{slug}/favorite");
            calls.push(Call::post(path, Some(&cast.tokens[i]), None));
        }
    }
    let route = "POST /api/articles/{slug}/favorite";
    kinds.push(phase(&http, plan, "favorite", route, calls, None).await?.0);

    let limit = plan.limit;
    let bound = Some(4 + 3 * limit);
    let reads: [(&str, &str, Option<u32>); 7] = [
        ("list", "GET /api/articles?limit=", bound),
        (
            "by author",
            "GET /api/articles?author={username}&limit=",
            bound,
        ),
        ("by tag", "GET /api/articles?tag={tag}&limit=", bound),
        (
            "favorited",
            "GET /api/articles?favorited={username}&limit=",
            bound,
        ),
        ("feed", "GET /api/articles/feed?limit=", bound),
        ("get", "GET /api/articles/{slug}", None),
        ("tags", "GET /api/tags", None),
    ];
    for (kind, route, bound) in reads {
        let calls = (0..plan.reads)
            .map(|_| {
                let viewer = cast.tokens.choose(&mut rng).expect("users");
                let name = cast.names.choose(&mut rng).expect("users");
                let path = match kind {
                    "list" => format!("/api/articles?limit={limit}"),
                    "by author" => format!("/api/articles?author={name}&limit={limit}"),
                    "by tag" => {
                        // A tag some article has: drawn as often as it is used.
                        let (.., k) = cast.articles.choose(&mut rng).expect("articles");
                        format!("/api/articles?tag={}&limit={limit}", cast.tags[*k])
                    }
                    "favorited" => format!("/api/articles?favorited={name}&limit={limit}"),
                    "feed" => format!("/api/articles/feed?limit={limit}"),
                    "get" => {
                        let (_, slug, _) = cast.articles.choose(&mut rng).expect("articles");
                        format!("/api/articles/{slug}")
                    }
                    _ => "/api/tags".to_string(),
                };
                Call::get(path, viewer)
            })
            .collect();
        let (mut figures, out) = phase(&http, plan, kind, route, calls, bound).await?;
        if bound.is_some() {
            let pages = out.iter().flatten().map(|o| {
                o.body["articles"]
                    .as_array()
                    .map_or(0.0, |a| a.len() as f64)
            });
            figures.items = Some(Spread::of(pages));
        }
        kinds.push(figures);
    }
    Ok(Conduit {
        base: plan.base.clone(),
        own_handler: plan.own_handler,
        users: n,
        follows_per_user: plan.follows,
        articles_per_user: plan.articles,
        favorites_per_user: plan.favorites,
        reads: plan.reads,
        limit,
        concurrency: plan.concurrency,
        seconds_per_kind: plan.seconds,
        kinds,
        total_seconds: started.elapsed().as_secs_f64(),
    })
}

/// Send `calls` with the plan's concurrency until all are answered or the kind's time is out;
/// the kind's figures and each call's answer (`None`: not sent in time). Any answer but a 2xx
/// fails the run.
async fn phase(
    http: &reqwest::Client,
    plan: &Plan,
    kind: &'static str,
    route: &'static str,
    calls: Vec<Call>,
    bound: Option<u32>,
) -> anyhow::Result<(ConduitKind, Vec<Option<Outcome>>)> {
    let planned = calls.len();
    let calls = Arc::new(calls);
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(plan.seconds);
    let mut workers = JoinSet::new();
    for _ in 0..plan.concurrency.min(planned.max(1)) {
        let (http, calls, next, base) =
            (http.clone(), calls.clone(), next.clone(), plan.base.clone());
        workers.spawn(async move {
            let mut done = Vec::new();
            while Instant::now() < deadline {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(call) = calls.get(i) else { break };
                done.push((i, send(&http, &base, call).await?));
            }
            anyhow::Ok(done)
        });
    }
    let mut out: Vec<Option<Outcome>> = (0..planned).map(|_| None).collect();
    while let Some(r) = workers.join_next().await {
        for (i, o) in r.context("a RealWorld client panicked")?? {
            out[i] = Some(o);
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let answered: Vec<&Outcome> = out.iter().flatten().collect();
    let durations: Vec<Duration> = answered.iter().map(|o| o.latency).collect();
    let all = |f: fn(&Outcome) -> Option<f64>| {
        let xs: Option<Vec<f64>> = answered.iter().map(|o| f(o)).collect();
        xs.filter(|xs| !xs.is_empty()).map(Spread::of)
    };
    let figures = ConduitKind {
        kind,
        route,
        planned,
        requests: answered.len(),
        seconds,
        requests_per_second: answered.len() as f64 / seconds.max(1e-9),
        latency: latency_of(&durations),
        items: None,
        operations: all(|o| o.operations),
        request_charge: all(|o| o.charge),
        operations_bound: bound,
    };
    eprintln!(
        "bench: [RW] {kind}: {}/{planned} in {seconds:.1} s, {:.0} requests/s, p50 {:.2} ms, \
         p99 {:.2} ms",
        figures.requests,
        figures.requests_per_second,
        figures.latency.p50_ms,
        figures.latency.p99_ms
    );
    Ok((figures, out))
}

/// Send one call; its answer, which must be a 2xx.
async fn send(http: &reqwest::Client, base: &str, call: &Call) -> anyhow::Result<Outcome> {
    let mut rb = http.request(call.method.clone(), format!("{base}{}", call.path));
    if let Some(t) = &call.token {
        rb = rb.header(reqwest::header::AUTHORIZATION, format!("Token {t}"));
    }
    if let Some(b) = &call.body {
        rb = rb.json(b);
    }
    let t = Instant::now();
    let resp = rb
        .send()
        .await
        .with_context(|| format!("{} {} failed", call.method, call.path))?;
    let status = resp.status();
    let header =
        |name: &str| -> Option<f64> { resp.headers().get(name)?.to_str().ok()?.parse().ok() };
    let (operations, charge) = (header("x-store-operations"), header("x-request-charge"));
    let bytes = resp.bytes().await?;
    let latency = t.elapsed();
    let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    if !status.is_success() {
        bail!(
            "{} {}{} answered {status}: {}",
            call.method,
            base,
            call.path,
            String::from_utf8_lossy(&bytes[..bytes.len().min(300)])
        );
    }
    Ok(Outcome {
        latency,
        body,
        operations,
        charge,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_bases_are_driven() {
        let ok = loopback_base("http://127.0.0.1:7071/api/conduit/").unwrap();
        assert_eq!(ok, "http://127.0.0.1:7071/api/conduit");
        assert_eq!(
            loopback_base("http://127.0.0.1:3000").unwrap(),
            "http://127.0.0.1:3000"
        );
        assert!(loopback_base("http://localhost:8080/api").is_ok());
        assert!(loopback_base("http://[::1]:8080/api").is_ok());
        assert!(loopback_base("http://example.com/api").is_err());
        assert!(loopback_base("http://10.0.0.1/api").is_err());
        assert!(loopback_base("https://127.0.0.1/api").is_err());
        assert!(loopback_base("not a url").is_err());
    }
}
