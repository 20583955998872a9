//! The product against a bare axum server serving the same bytes (`bare`, the `bench/bare` package), both
//! as processes on 127.0.0.1, measured in one run so that their ratios hold on a shared machine:
//!
//! - cold start: exec → the first 200 on `GET /api/feed` (the product on a fresh database), the
//!   two binaries alternating, `--cold-starts` times each;
//! - read throughput: `--concurrency` clients of this process (a bounded load generator) repeat
//!   `GET /api/feed?limit=<feed limit>` (Q6), then `GET /api/posts/{id}` (Q2), for `--seconds`
//!   against each; the product's feed holds that many posts and `bare` serves the very bytes
//!   the product answers;
//! - peak memory: the product's peak resident set (`VmHWM`) over its life, after a hot-post load
//!   (`--concurrency` clients commenting on one post for `--seconds`);
//! - size: the product binary's size on disk.
//!
//! (Longer than most files: the four measurements share how processes are started, warmed and stopped.)
//!
//! The product binary is `--handler` (e.g. the packaged `dist/app/handler`), by default the
//! `handler` next to this executable; `bare` is always the one next to it. Build both first
//! (`cargo build --release` at the root builds every binary of the workspace).

use std::io::{Read as _, Write as _};
use std::net::{Ipv4Addr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use serde_json::{json, Value};
use tokio::task::JoinSet;

use crate::args::Args;
use crate::results::{latency_of, ColdStart, HotPost, Load, ReadThroughput, Versus};
use crate::scratch::Scratch;

/// How long a process may take to answer its first 200.
const START_LIMIT: Duration = Duration::from_secs(20);
/// Builds one request of a load, given the client and the server's origin.
type MakeRequest = Arc<dyn Fn(&reqwest::Client, &str) -> reqwest::RequestBuilder + Send + Sync>;

/// A bound on each load worker besides the clock.
const MAX_PER_WORKER: usize = 1_000_000;

/// The product and `bare` binaries, or why they cannot be measured.
pub fn binaries(handler: Option<&Path>) -> Result<(PathBuf, PathBuf), String> {
    let here = std::env::current_exe().map_err(|e| e.to_string())?;
    let dir = here
        .parent()
        .ok_or("no directory of the bench executable")?;
    let handler = handler.map_or_else(|| dir.join("handler"), Path::to_path_buf);
    let bare = dir.join("bare");
    for b in [&handler, &bare] {
        if !b.is_file() {
            return Err(format!(
                "{} not found (build every binary first: `cargo build --release`)",
                b.display()
            ));
        }
    }
    Ok((handler, bare))
}

/// A server process, killed when dropped.
struct Server {
    child: Child,
    origin: String,
    /// The product's database directory.
    _dir: Option<Scratch>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// `VmHWM` of the process, MiB.
    fn peak_rss_mib(&self) -> anyhow::Result<f64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))?;
        let kib: f64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .context("no VmHWM in /proc/<pid>/status")?;
        Ok(kib / 1024.0)
    }
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
        .local_addr()?
        .port())
}

/// The product as the Functions host or a person starts it: default settings but the port, a
/// fresh embedded database and no per-caller write limit (the hot-post load is one address
/// writing as fast as it can, which that limit exists to refuse); its log goes nowhere.
fn handler_command(bin: &Path, port: u16) -> anyhow::Result<(Command, Scratch)> {
    let dir = Scratch::new("versus")?;
    let mut cmd = Command::new(bin);
    cmd.env_clear()
        .env("PORT", port.to_string())
        .env("BLOG_STORE", "embedded")
        .env("BLOG_DB_PATH", dir.0.join("blog.db"))
        .env("BLOG_WRITES_PER_MINUTE", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    Ok((cmd, dir))
}

fn bare_command(bin: &Path, port: u16, body: &Path) -> Command {
    let mut cmd = Command::new(bin);
    cmd.arg(port.to_string())
        .arg(body)
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    cmd
}

/// One HTTP/1.1 GET on a fresh connection, by hand: the status code, or an error while nothing
/// listens yet.
fn raw_get(port: u16, path: &str) -> std::io::Result<u16> {
    let mut s = TcpStream::connect((Ipv4Addr::LOCALHOST, port))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )?;
    let mut answer = Vec::new();
    s.read_to_end(&mut answer)?;
    let line = String::from_utf8_lossy(&answer);
    Ok(line
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0))
}

/// Spawn `cmd` and time exec → the first 200 on `/api/feed`, polling every 100 µs.
fn time_to_first_200(mut cmd: Command, port: u16) -> anyhow::Result<(Duration, Child)> {
    let started = Instant::now();
    let child = cmd.spawn().context("cannot start the server")?;
    loop {
        if let Ok(200) = raw_get(port, "/api/feed") {
            return Ok((started.elapsed(), child));
        }
        if started.elapsed() > START_LIMIT {
            bail!("no 200 on /api/feed within {START_LIMIT:?}");
        }
        std::thread::sleep(Duration::from_micros(100));
    }
}

fn stop(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// Exec → first 200 for both binaries, alternating; `bare` serves the product's empty feed.
fn cold_starts(handler: &Path, bare: &Path, n: usize, work: &Path) -> anyhow::Result<ColdStart> {
    let empty = work.join("empty-feed.json");
    std::fs::write(
        &empty,
        serde_json::to_vec(&json!({ "items": [], "continuationToken": null }))?,
    )?;
    let (mut product, mut base) = (Vec::new(), Vec::new());
    for _ in 0..n {
        let port = free_port()?;
        let (cmd, _dir) = handler_command(handler, port)?;
        let (t, child) = time_to_first_200(cmd, port)?;
        stop(child);
        product.push(t);
        let port = free_port()?;
        let (t, child) = time_to_first_200(bare_command(bare, port, &empty), port)?;
        stop(child);
        base.push(t);
    }
    let (product, bare) = (latency_of(&product), latency_of(&base));
    Ok(ColdStart {
        ratio: product.p50_ms / bare.p50_ms,
        product,
        bare,
    })
}

/// `concurrency` clients repeat `make(i)` against `origin` for `seconds`; every answer must be
/// a 2xx.
async fn load(
    http: &reqwest::Client,
    origin: &str,
    concurrency: usize,
    seconds: f64,
    make: MakeRequest,
) -> anyhow::Result<Load> {
    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(seconds);
    let mut workers = JoinSet::new();
    for _ in 0..concurrency {
        let (http, origin, make) = (http.clone(), origin.to_string(), make.clone());
        workers.spawn(async move {
            let mut durations = Vec::new();
            while Instant::now() < deadline && durations.len() < MAX_PER_WORKER {
                let t = Instant::now();
                let resp = make(&http, &origin).send().await?;
                let status = resp.status();
                resp.bytes().await?;
                if !status.is_success() {
                    bail!("answered {status}");
                }
                durations.push(t.elapsed());
            }
            anyhow::Ok(durations)
        });
    }
    let mut durations = Vec::new();
    while let Some(r) = workers.join_next().await {
        durations.extend(r.context("a load worker panicked")??);
    }
    let elapsed = started.elapsed().as_secs_f64();
    Ok(Load {
        requests: durations.len(),
        requests_per_second: durations.len() as f64 / elapsed,
        latency: latency_of(&durations),
    })
}

async fn wait_ready(http: &reqwest::Client, origin: &str) -> anyhow::Result<()> {
    let started = Instant::now();
    while http.get(format!("{origin}/")).send().await.is_err() {
        if started.elapsed() > START_LIMIT {
            bail!("{origin} never answered");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(())
}

async fn post_json(http: &reqwest::Client, url: String, body: Value) -> anyhow::Result<Value> {
    let resp = http.post(&url).json(&body).send().await?;
    let status = resp.status();
    let answer: Value = resp.json().await?;
    if !status.is_success() {
        bail!("POST {url} answered {status}: {answer}");
    }
    Ok(answer)
}

pub async fn run(args: &Args, handler: &Path, bare: &Path) -> anyhow::Result<Versus> {
    let work = Scratch::new("versus-work")?;
    let (h, b, n, w) = (
        handler.to_path_buf(),
        bare.to_path_buf(),
        args.cold_starts,
        work.0.clone(),
    );
    let cold_start = tokio::task::spawn_blocking(move || cold_starts(&h, &b, n, &w)).await??;
    eprintln!(
        "bench: cold start p50 {:.2} ms, bare {:.2} ms ({:.2}×)",
        cold_start.product.p50_ms, cold_start.bare.p50_ms, cold_start.ratio
    );

    // The product, with a feed of `feed_limit` posts.
    let http = reqwest::Client::new();
    let port = free_port()?;
    let (mut cmd, dir) = handler_command(handler, port)?;
    let product = Server {
        child: cmd.spawn().context("cannot start the product")?,
        origin: format!("http://127.0.0.1:{port}"),
        _dir: Some(dir),
    };
    wait_ready(&http, &product.origin).await?;
    let api = |p: &str| format!("{}/api{p}", product.origin);
    let user = post_json(&http, api("/users"), json!({ "username": "versus" })).await?;
    let user_id = user["id"].as_str().context("a user id")?.to_string();
    let items = args.feed_limit as usize;
    let content = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. ".repeat(6);
    let mut post_id = String::new();
    for i in 0..items {
        let body =
            json!({ "userId": user_id, "title": format!("Post number {i}"), "content": content });
        let post = post_json(&http, api("/posts"), body).await?;
        post_id = post["id"].as_str().context("a post id")?.to_string();
    }
    let feed_path = format!("/api/feed?limit={items}");
    let started = Instant::now();
    let feed_body = loop {
        let bytes = http
            .get(format!("{}{feed_path}", product.origin))
            .send()
            .await?
            .bytes()
            .await?;
        let v: Value = serde_json::from_slice(&bytes)?;
        if v["items"].as_array().map_or(0, Vec::len) == items {
            break bytes;
        }
        if started.elapsed() > START_LIMIT {
            bail!("the product's feed never filled");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let post_path = format!("/api/posts/{post_id}");
    let post_body = http
        .get(format!("{}{post_path}", product.origin))
        .send()
        .await?
        .error_for_status()?
        .bytes()
        .await?;
    let (feed_file, post_file) = (work.0.join("feed.json"), work.0.join("post.json"));
    std::fs::write(&feed_file, &feed_body)?;
    std::fs::write(&post_file, &post_body)?;
    let port = free_port()?;
    let mut cmd = bare_command(bare, port, &feed_file);
    let bare_server = Server {
        child: cmd.arg(&post_file).spawn()?,
        origin: format!("http://127.0.0.1:{port}"),
        _dir: None,
    };
    wait_ready(&http, &bare_server.origin).await?;
    let servers = [&product.origin, &bare_server.origin];
    let (c, s) = (args.concurrency, args.seconds);
    let feed_throughput =
        read_throughput(&http, servers, ("Q6", &feed_path), &feed_body, items, c, s).await?;
    let post_throughput =
        read_throughput(&http, servers, ("Q2", &post_path), &post_body, 1, c, s).await?;

    // A hot post: every client comments on the same post as fast as it can.
    let hot = post_json(
        &http,
        api("/posts"),
        json!({ "userId": user_id, "title": "Hot", "content": "Everyone comments here." }),
    )
    .await?;
    let comment: MakeRequest = {
        let path = format!(
            "/api/posts/{}/comments",
            hot["id"].as_str().unwrap_or_default()
        );
        let body = json!({ "userId": user_id, "content": "Me too." });
        Arc::new(move |h, o| h.post(format!("{o}{path}")).json(&body))
    };
    let comments = load(&http, &product.origin, c, s, comment).await?;
    let hot_post = HotPost {
        concurrency: c,
        seconds: s,
        comments,
        peak_rss_mib: product.peak_rss_mib()?,
        bare_peak_rss_mib: bare_server.peak_rss_mib()?,
    };
    eprintln!(
        "bench: hot post {:.0} comments/s, peak RSS {:.1} MiB (bare {:.1} MiB)",
        hot_post.comments.requests_per_second, hot_post.peak_rss_mib, hot_post.bare_peak_rss_mib
    );
    drop((product, bare_server));

    Ok(Versus {
        handler: handler.display().to_string(),
        handler_bytes: std::fs::metadata(handler)?.len(),
        handler_packaged: crate::guards::packaged(&std::fs::read(handler)?),
        bare_bytes: std::fs::metadata(bare)?.len(),
        cold_start,
        feed_throughput,
        post_throughput,
        hot_post,
    })
}

/// `GET path` (the read `request`) by `concurrency` clients for `seconds`, against the product
/// and then `bare`, which must answer the very bytes `body` the product does.
async fn read_throughput(
    http: &reqwest::Client,
    [product, bare]: [&String; 2],
    (request, path): (&'static str, &str),
    body: &[u8],
    items: usize,
    concurrency: usize,
    seconds: f64,
) -> anyhow::Result<ReadThroughput> {
    let same = http
        .get(format!("{bare}{path}"))
        .send()
        .await?
        .bytes()
        .await?;
    if same != body {
        bail!("bare does not serve the product's bytes for {path}");
    }
    let get: MakeRequest = {
        let path = path.to_string();
        Arc::new(move |h, o| h.get(format!("{o}{path}")))
    };
    let product = load(http, product, concurrency, seconds, get.clone()).await?;
    let bare = load(http, bare, concurrency, seconds, get).await?;
    let ratio = product.requests_per_second / bare.requests_per_second;
    eprintln!(
        "bench: [{request}] throughput {:.0}/s, bare {:.0}/s ({ratio:.2})",
        product.requests_per_second, bare.requests_per_second
    );
    Ok(ReadThroughput {
        request,
        items,
        body_bytes: body.len(),
        concurrency,
        seconds,
        product,
        bare,
        ratio,
    })
}
