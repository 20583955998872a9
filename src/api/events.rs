//! `GET /api/events?topics=…`: live updates as server-sent events (`docs/live.md`), outside
//! the request timeout. Standalone a stream lasts as long as its page. Under the Functions host
//! each stream is an invocation the host proxies: it ends after the hub's `lifetime`, well
//! within the host's function timeout, and the page's `EventSource` reconnects with
//! `Last-Event-ID`; every stream reaches the handler over the host's own connection, so the
//! per-client cap (a client address) does not apply there and the per-process cap is per
//! instance.
//! `GET /api/events/negotiate?topics=…`: where the same topics are pushed by Azure Web PubSub,
//! the URL of a WebSocket that receives them.
//!
//! Each topic is open to whoever may make the read it shadows, and every one of those reads
//! is anonymous, so a topic is checked for its form only. The stream takes a slot under the
//! hub's caps before anything is read (429 `too-many-streams` for the client, 503
//! `streams-full` for the process, both with `Retry-After`), then reads whom its timelines'
//! readers follow, and answers.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt as _;

use super::views::NegotiatedView;
use super::AppState;
use crate::error::{ApiError, ApiResult, Place, Problem};
use crate::live::hub::Refused;
use crate::live::stream::{Message, Stream};
use crate::live::{Cursor, Topic};
use axum::Json;

/// The function that hands `GET /api/events` over under the Functions host (`functions/Events`):
/// a stream, not an operation of the OpenAPI document.
pub const FUNCTION_ROUTE: (&str, &str) = ("events", "GET");
/// The most topics one stream names.
pub const MAX_TOPICS: usize = 16;
/// How often a quiet stream sends a comment, so that proxies keep it open.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// When a refused stream is worth trying again.
const RETRY_AFTER: Duration = Duration::from_secs(5);
/// How long a page's `EventSource` waits before it reconnects to a stream that ended.
const RECONNECT: Duration = Duration::from_secs(1);

/// The topics named in `topics` (comma-separated, each once).
fn topics(params: &HashMap<String, String>) -> ApiResult<Vec<Topic>> {
    let invalid = |detail: String| ApiError::invalid(Place::Query, "topics", detail);
    let Some(list) = params.get("topics") else {
        return Err(invalid("`topics` is required: `timeline:<userId>`, `post:<postId>` or `user:<userId>`, comma-separated".into()));
    };
    let mut out: Vec<Topic> = Vec::new();
    for name in list.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        let topic = Topic::parse(name).map_err(|e| invalid(e.detail))?;
        if !out.contains(&topic) {
            out.push(topic);
        }
    }
    if out.is_empty() {
        return Err(invalid("`topics` names no topic".into()));
    }
    if out.len() > MAX_TOPICS {
        return Err(invalid(format!(
            "`topics` names more than {MAX_TOPICS} topics"
        )));
    }
    Ok(out)
}

/// Where to resume: `Last-Event-ID` (a browser's reconnection), else `cursor`.
fn cursor(params: &HashMap<String, String>, headers: &HeaderMap) -> ApiResult<Option<Cursor>> {
    let from_header = headers
        .get("last-event-id")
        .map(|v| (Place::Header, "Last-Event-ID", v.to_str().unwrap_or("")));
    let given = from_header.or_else(|| {
        params
            .get("cursor")
            .map(|v| (Place::Query, "cursor", v.as_str()))
    });
    let Some((place, field, text)) = given else {
        return Ok(None);
    };
    if text.is_empty() {
        return Ok(None);
    }
    Cursor::decode(text).map(Some).ok_or_else(|| {
        ApiError::invalid(
            place,
            field,
            format!("`{field}` is not a position this server gave"),
        )
    })
}

/// The stream's messages as SSE events.
fn event(m: Message) -> Event {
    match m {
        Message::Event { name, data, id } => {
            let e = Event::default().event(name).data(data.to_string());
            match id {
                Some(id) => e.id(id),
                None => e,
            }
        }
        Message::Position(id) => Event::default().id(id),
    }
}

/// `GET /api/events`, standalone: each client address under the per-client cap, the stream as
/// long as its page.
pub async fn events(State(s): State<AppState>, req: Request) -> ApiResult<Response> {
    let client = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| crate::server::client_of(c.0.ip()));
    serve(s, req, client).await
}

/// `GET /api/events` under the Functions host: no client address to go by (the host's
/// connection carries every stream).
pub async fn hosted(State(s): State<AppState>, req: Request) -> ApiResult<Response> {
    serve(s, req, None).await
}

async fn serve(s: AppState, req: Request, client: Option<std::net::IpAddr>) -> ApiResult<Response> {
    let (uri, headers) = (req.uri(), req.headers());
    let axum::extract::Query(params) =
        axum::extract::Query::<HashMap<String, String>>::try_from_uri(uri)
            .map_err(|_| ApiError::BadRequest("the query string could not be decoded".into()))?;
    let topics = topics(&params)?;
    let cursor = cursor(&params, headers)?;
    let limits = s.live.limits();
    let slot = s.live.admit(client).map_err(|refused| match refused {
        Refused::Client => ApiError::TooManyStreams {
            detail: format!(
                "too many live-update streams: at most {} per client",
                limits.per_client
            ),
            retry_after: RETRY_AFTER,
        },
        Refused::Full => ApiError::StreamsFull {
            detail: format!(
                "the server holds its {} live-update streams; retry later",
                limits.total
            ),
            retry_after: RETRY_AFTER,
        },
    })?;
    let stream = Stream::open(s.store.clone(), s.live.clone(), slot, topics, cursor).await?;
    // The first message tells the page how soon to come back once the stream ends.
    let first = futures::stream::once(async { Ok(Event::default().retry(RECONNECT)) });
    let messages = futures::stream::unfold(stream, |mut stream| async move {
        let m = stream.next().await?;
        Some((Ok::<_, Infallible>(event(m)), stream))
    });
    let messages = first.chain(messages);
    let messages = match limits.lifetime {
        Some(lifetime) => messages
            .take_until(tokio::time::sleep(lifetime))
            .left_stream(),
        None => messages.right_stream(),
    };
    let mut resp = Sse::new(messages)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE).text("keep-alive"))
        .into_response();
    // Proxies that buffer answers (nginx) pass this one on as it comes.
    resp.headers_mut()
        .insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(resp)
}

/// The most authors' groups one connection joins for its `timeline:` topic: the reader's
/// following edges, read once (the stream's bound).
pub const MAX_TIMELINE_AUTHORS: usize = crate::domain::follows::MAX_FOLLOWING;

/// When a failed negotiation is worth trying again.
const NEGOTIATE_RETRY_AFTER: Duration = Duration::from_secs(5);

/// The Web PubSub groups a connection joins for `topics`: `post:<id>` and `user:<id>` as named;
/// for `timeline:<id>` (at most one), `follows:<id>` and the `author:<a>` group of each author
/// the user follows.
async fn groups(s: &AppState, topics: &[Topic]) -> ApiResult<Vec<String>> {
    let timelines = topics
        .iter()
        .filter(|t| matches!(t, Topic::Timeline(_)))
        .count();
    if timelines > 1 {
        return Err(ApiError::invalid(
            Place::Query,
            "topics",
            "`topics` names more than one `timeline:` topic",
        ));
    }
    let mut out = Vec::new();
    for topic in topics {
        match topic {
            Topic::Post(_) | Topic::User(_) => out.push(topic.name()),
            Topic::Timeline(reader) => {
                out.push(format!("follows:{reader}"));
                let mut authors: Vec<String> = crate::live::stream::followed(&*s.store, reader)
                    .await?
                    .into_iter()
                    .collect();
                authors.sort();
                authors.truncate(MAX_TIMELINE_AUTHORS);
                out.extend(authors.into_iter().map(|a| format!("author:{a}")));
            }
        }
    }
    Ok(out)
}

/// `GET /api/events/negotiate`.
#[utoipa::path(
    get,
    path = "/api/events/negotiate",
    tag = "feed",
    summary = "Where live updates of some topics are pushed: a WebSocket URL (Azure Web PubSub)",
    description = "Live updates (`docs/live.md`) through Azure Web PubSub, where the deployment has it (`BLOG_WEBPUBSUB_ENDPOINT`): the URL of a WebSocket (`wss://<name>.webpubsub.azure.com/client/hubs/<hub>?access_token=…`) whose connection is joined to the groups of `topics` and receives each change's event as a JSON message. Open it within an hour (the token's life); negotiate again to reconnect, and when a `follows` message says whom the timeline's reader follows changed. Each topic is open to whoever may make the read it shadows, and each of those reads is anonymous; a signed-in caller's connection carries their user id. One query (whom the reader follows, at most 1,000 edges) for a `timeline:` topic, then one call to Web PubSub.",
    params(
        ("topics" = String, Query, description = "At most 16 comma-separated topics, at most one of them `timeline:`: `timeline:<userId>`, `post:<postId>` or `user:<userId>`."),
    ),
    responses(
        (status = 200, description = "The WebSocket URL", body = NegotiatedView),
        (status = 400, description = "`topics` is missing, names no topic, more than 16, more than one `timeline:`, or one that is malformed", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "This deployment pushes no live updates (no `BLOG_WEBPUBSUB_ENDPOINT`)", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Web PubSub gave no URL (`push-unavailable`, with `Retry-After`)", body = Problem, content_type = "application/problem+json",
            headers(("Retry-After" = u64, description = "Seconds to wait before trying again"))),
    )
)]
pub async fn negotiate(State(s): State<AppState>, req: Request) -> ApiResult<Json<NegotiatedView>> {
    let Some(webpubsub) = s.webpubsub.clone() else {
        return Err(ApiError::NotFound(
            "this deployment pushes no live updates through Azure Web PubSub (`BLOG_WEBPUBSUB_ENDPOINT` is not set)".into(),
        ));
    };
    let axum::extract::Query(params) =
        axum::extract::Query::<HashMap<String, String>>::try_from_uri(req.uri())
            .map_err(|_| ApiError::BadRequest("the query string could not be decoded".into()))?;
    let topics = topics(&params)?;
    // Who the connection is: the verified caller, never a parameter; anonymous otherwise.
    let (parts, _) = req.into_parts();
    let user = s.auth.identify(&parts).await?.map(|i| i.user_id());
    let groups = groups(&s, &topics).await?;
    let url = webpubsub
        .client_url(user.as_ref().map(|u| u.as_str()), &groups)
        .await
        .map_err(|e| {
            // The cause is logged, not answered: it may name the app's identity or the service.
            tracing::warn!(error = %e, "no Web PubSub client URL");
            ApiError::PushUnavailable {
                detail: "Azure Web PubSub gave no client URL; retry later".into(),
                retry_after: NEGOTIATE_RETRY_AFTER,
            }
        })?;
    Ok(Json(NegotiatedView { url }))
}
