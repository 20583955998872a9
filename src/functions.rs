//! Azure Functions custom-handler invocations.
//!
//! Under the Functions host, HTTP functions are forwarded to `/api/...` as they are and need
//! nothing here. Every other function is *invoked*: the host POSTs
//! `{"Data": {"<binding>": …}, "Metadata": {…}}` to `/<FunctionName>` and reads back
//! `{"Outputs": {}, "Logs": [...], "ReturnValue": null}`. The four Cosmos DB change-feed triggers
//! (the main lane and the timeline lane over each of the two feeds, each with its own lease
//! prefix, so the host scales and checkpoints them apart) arrive this way and run the same
//! projections as the standalone pump.
//!
//! A batch is acknowledged (200) only once it is applied: any other status makes the host fail the
//! invocation, and the function's `retry` policy redelivers the batch instead of the trigger
//! checkpointing past it. Redelivery is safe because the projections are idempotent and re-read
//! the source of truth. A batch that has failed `quarantine::ATTEMPTS` times is applied change by
//! change and what still fails is quarantined (`crate::quarantine`), then acknowledged: the lease
//! moves on and nothing is lost.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::extract::{FromRef, FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use http_body_util::BodyExt as _;
use serde_json::{json, Value};
use tracing::Instrument as _;

use crate::live::Push;
use crate::projection::{self, Lane, ProjectionError};
use crate::quarantine;
use crate::rechecks::Background;
use crate::store::{metrics, Container, Store};

mod decode;

pub use decode::{decode, Batch, DecodeError, MAX_DOCUMENTS, MAX_STRING_WRAPS, MAX_VALUES};

/// The header carrying the host's id for one invocation (and each retry of it).
pub const INVOCATION_ID_HEADER: &str = "x-azure-functions-invocationid";

/// Largest invocation body accepted. Far above the API's 1 MiB: a batch of 100 posts of up to
/// 20,000 characters each, every character escaped as `\uXXXX` and the array wrapped in two
/// strings, is about 16 MiB, and a batch refused for its size would be redelivered and refused
/// forever. Decoding keeps at most about four times the body in memory, so one invocation stays
/// well under 300 MiB whatever it holds.
pub const INVOCATION_BODY_LIMIT: usize = 32 * 1024 * 1024;

/// How many invocations are applied at once; more wait their turn once their bodies are read
/// (a body being read holds no turn, so an upload that stalls delays no other invocation). The
/// host runs at most one invocation per lease at a time; this bounds the memory whatever arrives
/// (`docs/functions-host.md` states the bound, which a test holds with this many bodies at the
/// limit decoded at once).
pub const INVOCATION_CONCURRENCY: usize = 2;

/// The turns of [`INVOCATION_CONCURRENCY`].
static APPLYING: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(INVOCATION_CONCURRENCY);

/// The bytes of invocation bodies read and applied at the same time: room for one body at the
/// limit and one of half of it. A body takes the bytes it has received from this budget as they
/// arrive, and gives them back once applied, so two bodies at the limit are applied one after
/// the other while smaller ones still go two at a time: decoding a body at the limit holds a few
/// times its size (the body, then the strings it wraps the documents in, then the documents),
/// and two of them at once were most of the process's peak memory. An upload that stalls holds
/// only what it has sent.
pub const INVOCATION_BYTES_AT_ONCE: usize = INVOCATION_BODY_LIMIT + INVOCATION_BODY_LIMIT / 2;

/// [`INVOCATION_BYTES_AT_ONCE`], counted in KiB (a semaphore's permits are `u32`).
static BODY_BUDGET: tokio::sync::Semaphore =
    tokio::sync::Semaphore::const_new(INVOCATION_BYTES_AT_ONCE / 1024);

/// The bytes of a body as it is read, taken from [`BODY_BUDGET`] as they arrive.
#[derive(Default)]
struct Budget {
    held: Option<tokio::sync::SemaphorePermit<'static>>,
    kib: u32,
}

impl Budget {
    /// Hold `bytes` in all (never more than the limit, so the budget always has room).
    async fn hold(&mut self, bytes: usize) {
        let bytes = bytes.min(INVOCATION_BODY_LIMIT);
        let kib = u32::try_from(bytes.div_ceil(1024)).expect("the body limit fits in u32 KiB");
        if kib <= self.kib {
            return;
        }
        let more = BODY_BUDGET
            .acquire_many(kib - self.kib)
            .await
            .expect("the budget is never closed");
        match &mut self.held {
            Some(held) => held.merge(more),
            None => self.held = Some(more),
        }
        self.kib = kib;
    }
}

/// Which change feed a trigger follows, hence which projection it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeFeed {
    Posts,
    Users,
}

/// A non-HTTP function of the app: its name (the folder under `functions/`, and the path the
/// host POSTs to) and the name of its trigger binding in `function.json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trigger {
    pub function: &'static str,
    pub binding: &'static str,
    pub feed: ChangeFeed,
    /// The projections it runs.
    pub lane: Lane,
}

/// Every trigger function; `functions/<function>/function.json` must declare each of them.
pub const TRIGGERS: &[Trigger] = &[
    Trigger {
        function: "PostsChangeFeed",
        binding: "documents",
        feed: ChangeFeed::Posts,
        lane: Lane::Main,
    },
    Trigger {
        function: "UsersChangeFeed",
        binding: "documents",
        feed: ChangeFeed::Users,
        lane: Lane::Main,
    },
    Trigger {
        function: "PostsTimeline",
        binding: "documents",
        feed: ChangeFeed::Posts,
        lane: Lane::Timeline,
    },
    Trigger {
        function: "UsersTimeline",
        binding: "documents",
        feed: ChangeFeed::Users,
        lane: Lane::Timeline,
    },
];

/// `POST /<FunctionName>` for every trigger. Only the Functions host invokes these, so the
/// router mounts them only under the host: standalone they do not exist (404).
///
/// An invocation's body must arrive whole within `read_timeout` (`BLOG_HEADER_TIMEOUT_SECS`;
/// the host sends it over loopback at once), else it answers 408 and nothing of it is applied:
/// an upload that stalls gives its turn back instead of holding it forever, and the host
/// redelivers the batch.
/// The routes take from the application's state only its store and the push service of live
/// updates (axum's `FromRef`), so this module knows nothing of the API's state.
pub fn routes<S>(read_timeout: Duration, fanout_limit: Option<u64>) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    Arc<dyn Store>: FromRef<S>,
    Push: FromRef<S>,
{
    let limit = ConfiguredLimit {
        limit: fanout_limit,
        recorded: Arc::default(),
    };
    TRIGGERS.iter().fold(Router::new(), |router, trigger| {
        let limit = limit.clone();
        router.route(
            &format!("/{}", trigger.function),
            post(
                move |State(store): State<Arc<dyn Store>>,
                      State(push): State<Push>,
                      headers: HeaderMap,
                      _: JsonInvocation,
                      body: Body| async move {
                    let announced = headers
                        .get(header::CONTENT_LENGTH)
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.parse::<usize>().ok());
                    let mut budget = Budget::default();
                    let body = read_body(body, announced, read_timeout, &mut budget).await;
                    let _turn = APPLYING.acquire().await.expect("never closed");
                    invoke(*trigger, store, &push, &limit, headers, body).await
                },
            ),
        )
    })
}

/// The fan-out limit this process was configured with (`BLOG_TIMELINE_FANOUT_LIMIT`), recorded
/// in the store before the first timeline batch it projects (every process judges by the
/// recorded one).
#[derive(Clone)]
struct ConfiguredLimit {
    limit: Option<u64>,
    recorded: Arc<tokio::sync::OnceCell<()>>,
}

impl ConfiguredLimit {
    async fn record(&self, store: &dyn Store) -> crate::store::StoreResult<()> {
        let Some(limit) = self.limit else {
            return Ok(());
        };
        self.recorded
            .get_or_try_init(|| projection::timeline::record_limit(store, limit))
            .await
            .map(drop)
    }
}

/// Why an invocation's body was not read: the status to answer and what to log.
#[derive(Debug)]
struct Unread(StatusCode, String);

/// The whole body, at most [`INVOCATION_BODY_LIMIT`] bytes (413 beyond), arriving within
/// `deadline` (408 after; the time spent waiting for `budget` to take a chunk's bytes is not
/// the upload's), or 400 when the upload breaks off. Each chunk is copied into one buffer as it
/// arrives (sized from `Content-Length` when the host announces it) and freed at once, so a
/// body is held once, never as its chunks and a copy of them together.
async fn read_body(
    body: Body,
    announced: Option<usize>,
    deadline: Duration,
    budget: &mut Budget,
) -> Result<Vec<u8>, Unread> {
    let too_large = || {
        Unread(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the body is larger than {INVOCATION_BODY_LIMIT} bytes"),
        )
    };
    let late = || {
        Unread(
            StatusCode::REQUEST_TIMEOUT,
            format!("the body did not arrive within {} s", deadline.as_secs()),
        )
    };
    let mut body = body;
    // An announced size over the limit is refused once the limit is reached, as one not
    // announced: the host reads an answer only once it has sent its request.
    let mut buf = Vec::with_capacity(
        announced
            .filter(|&n| n <= INVOCATION_BODY_LIMIT)
            .unwrap_or(0),
    );
    let mut left = deadline;
    loop {
        let started = tokio::time::Instant::now();
        let frame = tokio::time::timeout(left, body.frame())
            .await
            .map_err(|_| late())?;
        left = left.saturating_sub(started.elapsed());
        let Some(frame) = frame else {
            return Ok(buf);
        };
        let frame = frame.map_err(|e| {
            Unread(
                StatusCode::BAD_REQUEST,
                format!("the upload broke off: {e}"),
            )
        })?;
        if let Ok(data) = frame.into_data() {
            if buf.len() + data.len() > INVOCATION_BODY_LIMIT {
                return Err(too_large());
            }
            budget.hold(buf.len() + data.len()).await;
            buf.extend_from_slice(&data);
        }
    }
}

/// The host sends every invocation as `application/json`; anything else (a form or `text/plain`
/// POST a web page can send) is refused with 415 before the body is read.
pub struct JsonInvocation;

impl<S: Send + Sync> FromRequestParts<S> for JsonInvocation {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Response> {
        let content_type = parts
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let essence = content_type.split(';').next().unwrap_or("").trim();
        if essence.eq_ignore_ascii_case("application/json") {
            Ok(JsonInvocation)
        } else {
            Err(answer(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                vec![format!(
                    "an invocation must be `Content-Type: application/json`, not `{content_type}`"
                )],
            ))
        }
    }
}

/// The custom-handler response body. `Logs` lines are written to the function's log by the host
/// (on success only: a failed invocation's body is not read, so failures also go to stdout).
fn answer(status: StatusCode, logs: Vec<String>) -> Response {
    (
        status,
        Json(json!({ "Outputs": {}, "Logs": logs, "ReturnValue": null })),
    )
        .into_response()
}

async fn invoke(
    trigger: Trigger,
    store: Arc<dyn Store>,
    push: &Push,
    limit: &ConfiguredLimit,
    headers: HeaderMap,
    body: Result<Vec<u8>, Unread>,
) -> Response {
    let invocation_id = headers
        .get(INVOCATION_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let span = tracing::info_span!(
        "invocation",
        function = trigger.function,
        invocation_id = %invocation_id
    );
    async move {
        match body {
            Ok(body) => run(trigger, store, push, limit, body).await,
            // Over the limit, cut off or too slow: answered in the same JSON shape as every
            // other outcome.
            Err(Unread(status, why)) => {
                tracing::error!(error = %why, "invocation body not read; nothing applied");
                let log = format!("{}: invocation body not read: {why}", trigger.function);
                answer(status, vec![log])
            }
        }
    }
    .instrument(span)
    .await
}

async fn run(
    trigger: Trigger,
    store: Arc<dyn Store>,
    push: &Push,
    limit: &ConfiguredLimit,
    body: Vec<u8>,
) -> Response {
    let decoded = decode(&body, trigger.binding);
    // The documents are decoded: the body is not held while they are applied.
    drop(body);
    let batch = match decoded {
        Ok(batch) => batch,
        Err(e) => {
            tracing::error!(error = %e, "invocation not decoded; nothing applied");
            let status = if e.is_too_large() {
                StatusCode::PAYLOAD_TOO_LARGE
            } else {
                StatusCode::BAD_REQUEST
            };
            return answer(
                status,
                vec![format!("{}: invocation not decoded: {e}", trigger.function)],
            );
        }
    };
    if batch.retry_count > 0 {
        tracing::warn!(
            retry_count = batch.retry_count,
            "redelivered batch (an earlier attempt failed)"
        );
    }

    let container = match trigger.feed {
        ChangeFeed::Posts => Container::Posts,
        ChangeFeed::Users => Container::Users,
    };
    if trigger.lane == Lane::Timeline {
        if let Err(e) = limit.record(&*store).await {
            tracing::error!(error = %e, "fan-out limit not recorded; nothing applied");
            let log = format!("{}: batch not applied: {e}", trigger.function);
            return answer(StatusCode::INTERNAL_SERVER_ERROR, vec![log]);
        }
    }
    // A batch redelivered `quarantine::ATTEMPTS` times is split and what fails is quarantined,
    // so the lease moves on; its attempts are counted here (by its ids and `_lsn`s), the host's
    // retry count standing in where this process saw fewer.
    static ATTEMPTS: std::sync::LazyLock<quarantine::Attempts> =
        std::sync::LazyLock::new(Default::default);
    let key = quarantine::batch_key(trigger.lane, container, &batch.documents);
    let result: Result<quarantine::Projected, ProjectionError> =
        metrics::projecting(quarantine::project(
            &*store,
            trigger.lane,
            container,
            &batch.documents,
            (key, &ATTEMPTS),
            batch.retry_count.saturating_add(1),
        ))
        .await;
    // The rechecks this process owes, run as they fall due (`crate::rechecks`).
    static RECHECKS: std::sync::LazyLock<Background> = std::sync::LazyLock::new(Default::default);
    if quarantine::due(trigger.lane, container) {
        let store = store.clone();
        let lane = trigger.lane;
        tokio::spawn(async move {
            let deferred = quarantine::retry_lane(&*store, lane, container).await;
            RECHECKS.defer(&store, deferred);
        });
    }
    match result {
        Ok(quarantine::Projected {
            report,
            quarantined,
        }) => {
            RECHECKS.defer(&store, report.deferred.clone());
            // Live updates: each change once, from the main lane (the timeline lane reads the
            // same changes), once applied; queued, so the batch never waits on the push service.
            if let (Some(push), Lane::Main) = (&push.0, trigger.lane) {
                let cursor = crate::live::Cursor::default();
                push.publish(Arc::new(crate::live::Batch::of(
                    container,
                    &batch.documents,
                    cursor,
                )));
            }
            let lag = lag_ms(&batch.documents, SystemTime::now());
            tracing::info!(
                changes = report.changes,
                writes = report.writes,
                lag_ms = lag,
                "batch applied"
            );
            // The host writes these lines to the function's log (Application Insights traces in
            // Azure), where a query reads `lag_ms=<n>` back out.
            // One line per quarantined change, which an alert counts (`quarantined=`).
            let lag_text = lag.map(|ms| format!("; lag_ms={ms}")).unwrap_or_default();
            let mut logs = vec![format!(
                "{}: {} changes applied with {} writes{lag_text}",
                trigger.function, report.changes, report.writes
            )];
            logs.extend(quarantined.iter().map(|e| {
                format!(
                    "{}: quarantined={} attempts={} unit={}",
                    trigger.function,
                    e.label(),
                    e.attempts,
                    e.unit
                )
            }));
            answer(StatusCode::OK, logs)
        }
        Err(e) => {
            // Logged here as well as answered: the host does not read the body of a failure.
            tracing::error!(
                unit = e.unit,
                reason = %e.reason,
                not_applied = ?e.not_applied,
                "batch not applied; the function's retry policy redelivers it"
            );
            answer(
                StatusCode::INTERNAL_SERVER_ERROR,
                vec![
                    format!("{}: batch not applied: {}", trigger.function, e.cause()),
                    format!("not applied: {}", e.not_applied.join(", ")),
                ],
            )
        }
    }
}

/// How far a change-feed batch is behind: from its newest document's `_ts` (whole seconds since
/// the epoch, stamped by the store on every write) to `now`, in milliseconds, never negative;
/// `None` when no document carries one. `_ts` has whole-second resolution, so the lag reads up to
/// a second high; what it is for is watching a backlog grow.
pub fn lag_ms(documents: &[Value], now: SystemTime) -> Option<u64> {
    let newest = documents
        .iter()
        .filter_map(|d| d.get("_ts").and_then(Value::as_i64))
        .max()?;
    let now_ms = i64::try_from(now.duration_since(UNIX_EPOCH).ok()?.as_millis()).ok()?;
    Some(u64::try_from(now_ms.saturating_sub(newest.saturating_mul(1000))).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;

    fn at(secs: u64, millis: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_millis(millis)
    }

    #[test]
    fn lag_runs_from_the_newest_documents_ts() {
        let docs = [
            json!({"_ts": 1_700_000_000}),
            json!({"_ts": 1_700_000_090}),
            json!({"_ts": 1_700_000_030}),
        ];
        assert_eq!(lag_ms(&docs, at(1_700_000_100, 250)), Some(10_250));
    }

    #[test]
    fn lag_is_never_negative_and_absent_without_ts() {
        assert_eq!(
            lag_ms(&[json!({"_ts": 1_700_000_100})], at(1_700_000_099, 0)),
            Some(0)
        );
        assert_eq!(
            lag_ms(
                &[json!({"id": "p1"}), json!({"_ts": "soon"})],
                at(1_700_000_000, 0)
            ),
            None
        );
        assert_eq!(lag_ms(&[], at(1_700_000_000, 0)), None);
    }
}
