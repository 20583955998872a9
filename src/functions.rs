//! Azure Functions custom-handler invocations (CONTRACT §5).
//!
//! Under the Functions host, HTTP functions are forwarded to `/api/...` as they are and need
//! nothing here. Every other function is *invoked*: the host POSTs
//! `{"Data": {"<binding>": …}, "Metadata": {…}}` to `/<FunctionName>` and reads back
//! `{"Outputs": {}, "Logs": [...], "ReturnValue": null}`. The two Cosmos DB change-feed triggers
//! arrive this way and run the same projections as the standalone pump.
//!
//! A batch is acknowledged (200) only once it is applied: any other status makes the host fail the
//! invocation, and the function's `retry` policy redelivers the batch instead of the trigger
//! checkpointing past it. Redelivery is safe because the projections are idempotent and re-read
//! the source of truth.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};
use tracing::Instrument as _;

use crate::projection::{self, ProjectionError, Report};
use crate::store::Container;
use crate::AppState;

/// The header carrying the host's id for one invocation (and each retry of it).
pub const INVOCATION_ID_HEADER: &str = "x-azure-functions-invocationid";

/// Largest invocation body accepted. Far above the API's 1 MiB: a batch of 100 posts of up to
/// 20,000 characters each, escaped twice when the host double-encodes it, can reach tens of MiB,
/// and a batch refused for its size would be redelivered and refused forever.
pub const INVOCATION_BODY_LIMIT: usize = 64 * 1024 * 1024;

/// Which change feed a trigger follows, hence which projection it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feed {
    Posts,
    Users,
}

/// A non-HTTP function of the app: its name (the folder under `functions/`, and the path the
/// host POSTs to) and the name of its trigger binding in `function.json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trigger {
    pub function: &'static str,
    pub binding: &'static str,
    pub feed: Feed,
}

/// Every trigger function; `functions/<function>/function.json` must declare each of them.
pub const TRIGGERS: &[Trigger] = &[
    Trigger {
        function: "PostsChangeFeed",
        binding: "documents",
        feed: Feed::Posts,
    },
    Trigger {
        function: "UsersChangeFeed",
        binding: "documents",
        feed: Feed::Users,
    },
];

/// `POST /<FunctionName>` for every trigger.
pub fn routes() -> Router<AppState> {
    TRIGGERS
        .iter()
        .fold(Router::new(), |router, trigger| {
            router.route(
                &format!("/{}", trigger.function),
                post(
                    move |State(state): State<AppState>,
                          headers: HeaderMap,
                          body: Result<Bytes, BytesRejection>| {
                        invoke(*trigger, state, headers, body)
                    },
                ),
            )
        })
        // A route layer runs inside the application-wide 1 MiB limit, so it overrides it here.
        .route_layer(DefaultBodyLimit::max(INVOCATION_BODY_LIMIT))
}

/// A decoded invocation of a change-feed trigger.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    /// The changed documents, in feed order.
    pub documents: Vec<Value>,
    /// `Metadata.RetryContext.RetryCount`: 0 on a first delivery.
    pub retry_count: u64,
}

/// Why an invocation body could not be understood.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DecodeError {
    #[error("the body is not JSON: {0}")]
    NotJson(String),
    #[error("the body has no `Data` object")]
    NoData,
    #[error("`Data` has no `{0}` binding")]
    NoBinding(String),
    #[error("`Data.{binding}` is not a JSON array of documents, nor a string holding one: {why}")]
    NotDocuments { binding: String, why: String },
}

/// How many times a string may wrap the documents: the host sends the array itself, the array
/// serialized into a string, or that string serialized once more.
const MAX_STRING_WRAPS: usize = 2;

/// Decode `{"Data": {"<binding>": documents}, "Metadata": {…}}`, whichever of the three encodings
/// `documents` arrives in.
pub fn decode(body: &[u8], binding: &str) -> Result<Batch, DecodeError> {
    let envelope: Value =
        serde_json::from_slice(body).map_err(|e| DecodeError::NotJson(e.to_string()))?;
    let data = envelope
        .get("Data")
        .and_then(Value::as_object)
        .ok_or(DecodeError::NoData)?;
    let raw = data
        .get(binding)
        .ok_or_else(|| DecodeError::NoBinding(binding.to_string()))?;
    let not_documents = |why: String| DecodeError::NotDocuments {
        binding: binding.to_string(),
        why,
    };

    let mut value = raw.clone();
    let mut wraps = 0;
    let documents = loop {
        match value {
            Value::Array(items) => break items,
            Value::String(s) if wraps < MAX_STRING_WRAPS => {
                value = serde_json::from_str(&s)
                    .map_err(|e| not_documents(format!("the string is not JSON: {e}")))?;
                wraps += 1;
            }
            Value::String(_) => {
                return Err(not_documents(format!(
                    "wrapped in more than {MAX_STRING_WRAPS} strings"
                )))
            }
            other => return Err(not_documents(format!("found {}", kind(&other)))),
        }
    };
    if let Some(i) = documents.iter().position(|d| !d.is_object()) {
        return Err(not_documents(format!("item {i} is not an object")));
    }

    let retry_count = envelope
        .pointer("/Metadata/RetryContext/RetryCount")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    Ok(Batch {
        documents,
        retry_count,
    })
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
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
    state: AppState,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
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
            Ok(body) => run(trigger, state, &body).await,
            // Over the limit or cut off: answered in the same JSON shape as every other outcome.
            Err(e) => {
                let why = e.body_text();
                tracing::error!(error = %why, "invocation body not read; nothing applied");
                let log = format!("{}: invocation body not read: {why}", trigger.function);
                answer(e.status(), vec![log])
            }
        }
    }
    .instrument(span)
    .await
}

async fn run(trigger: Trigger, state: AppState, body: &[u8]) -> Response {
    let batch = match decode(body, trigger.binding) {
        Ok(batch) => batch,
        Err(e) => {
            tracing::error!(error = %e, "invocation not decoded; nothing applied");
            return answer(
                StatusCode::BAD_REQUEST,
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
        Feed::Posts => Container::Posts,
        Feed::Users => Container::Users,
    };
    let result: Result<Report, ProjectionError> =
        projection::project(&*state.store, container, &batch.documents).await;
    match result {
        Ok(report) => {
            projection::recheck_later(state.store.clone(), report.deferred.clone());
            tracing::info!(
                changes = report.changes,
                writes = report.writes,
                "batch applied"
            );
            answer(
                StatusCode::OK,
                vec![format!(
                    "{}: {} changes applied with {} writes",
                    trigger.function, report.changes, report.writes
                )],
            )
        }
        Err(e) => {
            // Logged here as well as answered: the host does not read the body of a failure.
            tracing::error!(
                reason = %e.reason,
                not_applied = ?e.not_applied,
                "batch not applied; the function's retry policy redelivers it"
            );
            answer(
                StatusCode::INTERNAL_SERVER_ERROR,
                vec![
                    format!("{}: batch not applied: {}", trigger.function, e.reason),
                    format!("not applied: {}", e.not_applied.join(", ")),
                ],
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(documents: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "Data": { "documents": documents },
            "Metadata": { "RetryContext": { "RetryCount": 2, "MaxRetryCount": -1 } }
        }))
        .unwrap()
    }

    #[test]
    fn documents_decode_from_an_array_a_string_or_a_string_in_a_string() {
        let docs = json!([{ "id": "p1", "postId": "p1", "type": "post" }]);
        let once = serde_json::to_string(&docs).unwrap();
        let twice = serde_json::to_string(&once).unwrap();
        for encoded in [docs.clone(), Value::String(once), Value::String(twice)] {
            let batch = decode(&body(encoded), "documents").unwrap();
            assert_eq!(Value::Array(batch.documents), docs);
            assert_eq!(batch.retry_count, 2);
        }
    }

    #[test]
    fn a_first_delivery_has_no_retry_context() {
        let b = br#"{"Data":{"documents":[]},"Metadata":{}}"#;
        assert_eq!(
            decode(b, "documents").unwrap(),
            Batch {
                documents: vec![],
                retry_count: 0
            }
        );
    }

    #[test]
    fn what_is_not_a_batch_is_named() {
        let thrice =
            Value::String(serde_json::to_string(&serde_json::to_string("[]").unwrap()).unwrap());
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (b"not json".to_vec(), "not JSON"),
            (br#"{"Metadata":{}}"#.to_vec(), "no `Data`"),
            (br#"{"Data":{"other":[]}}"#.to_vec(), "no `documents`"),
            (body(json!({"id": "p1"})), "found an object"),
            (body(json!(7)), "found a number"),
            (body(json!("{not json")), "string is not JSON"),
            (body(thrice), "more than 2 strings"),
            (body(json!([{"id": "p1"}, 3])), "item 1 is not an object"),
        ];
        for (b, expected) in cases {
            let e = decode(&b, "documents").unwrap_err().to_string();
            assert!(e.contains(expected), "{e:?} should mention {expected:?}");
        }
    }
}
