//! A stream of `GET /api/events` read as a browser's `EventSource` reads it, message by message:
//! a minimal reader of the lines of each message over the bench's HTTP client, since a message's
//! `event:` and `data:` are all the row reads.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context as _};
use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;
use tokio::task::JoinHandle;

/// A stream received the first event naming `token` (a comment's id, a liker's, a post's).
pub struct Receipt {
    pub token: String,
    pub at: Instant,
}

/// What every stream received, counted together.
pub struct Counts {
    base: Instant,
    events: AtomicU64,
    /// When the last event came, in nanoseconds after `base`.
    last: AtomicU64,
}

impl Counts {
    pub fn new() -> Arc<Counts> {
        Arc::new(Counts {
            base: Instant::now(),
            events: AtomicU64::new(0),
            last: AtomicU64::new(0),
        })
    }

    /// Events received so far (besides `ready`).
    pub fn events(&self) -> u64 {
        self.events.load(Ordering::Relaxed)
    }

    /// When the last event came.
    pub fn last(&self) -> Instant {
        self.base + std::time::Duration::from_nanos(self.last.load(Ordering::Relaxed))
    }

    fn event(&self) {
        self.events.fetch_add(1, Ordering::Relaxed);
        let at = self.base.elapsed().as_nanos() as u64;
        self.last.fetch_max(at, Ordering::Relaxed);
    }
}

/// One SSE message: its event name (empty for an `id:` alone or a comment) and its data.
#[derive(Debug, PartialEq)]
pub struct Message {
    pub event: String,
    pub data: Value,
}

/// The complete messages at the front of `buf`, taken out of it (a message ends with a blank
/// line; what follows the last one waits for the next chunk).
pub fn take_messages(buf: &mut Vec<u8>) -> Vec<Message> {
    let mut out = Vec::new();
    while let Some(end) = buf.windows(2).position(|w| w == b"\n\n") {
        let raw: Vec<u8> = buf.drain(..end + 2).collect();
        let text = String::from_utf8_lossy(&raw);
        let (mut event, mut data) = (String::new(), String::new());
        for line in text.lines() {
            if let Some(v) = line.strip_prefix("event:") {
                event = v.trim().to_string();
            } else if let Some(v) = line.strip_prefix("data:") {
                data.push_str(v.trim());
            }
        }
        out.push(Message {
            event,
            data: serde_json::from_str(&data).unwrap_or(Value::Null),
        });
    }
    out
}

/// The write an event names, for the events the row's writes give: a comment by its id, a like
/// by its liker, a new post by its id.
pub fn token(m: &Message) -> Option<&str> {
    let field = match m.event.as_str() {
        "comment" => "commentId",
        "like" => "userId",
        "post" => "postId",
        _ => return None,
    };
    m.data[field].as_str()
}

/// Open a stream at `url` and read it until its `ready`; then go on reading it in a task of its
/// own, counting its events in `counts` and sending the first receipt of each token to
/// `receipts`, until the stream ends or the task is aborted.
pub async fn open(
    http: &reqwest::Client,
    url: &str,
    counts: Arc<Counts>,
    receipts: UnboundedSender<Receipt>,
) -> anyhow::Result<JoinHandle<()>> {
    let mut resp = http
        .get(url)
        .send()
        .await
        .with_context(|| format!("GET {url} failed"))?;
    if resp.status() != 200 {
        let status = resp.status();
        bail!("GET {url} answered {status}: {}", resp.text().await?);
    }
    let mut buf = Vec::new();
    'ready: loop {
        let chunk = resp
            .chunk()
            .await?
            .with_context(|| format!("GET {url} ended before `ready`"))?;
        buf.extend_from_slice(&chunk);
        for m in take_messages(&mut buf) {
            if m.event == "ready" {
                break 'ready;
            }
        }
    }
    Ok(tokio::spawn(async move {
        let mut seen = HashSet::new();
        while let Ok(Some(chunk)) = resp.chunk().await {
            let at = Instant::now();
            buf.extend_from_slice(&chunk);
            for m in take_messages(&mut buf) {
                if m.event.is_empty() {
                    continue;
                }
                counts.event();
                if let Some(t) = token(&m) {
                    if seen.insert(t.to_string()) {
                        let _ = receipts.send(Receipt {
                            token: t.to_string(),
                            at,
                        });
                    }
                }
            }
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_read_across_chunks_and_name_their_writes() {
        let mut buf =
            b"event: ready\nid: x\n\nevent: comment\ndata: {\"topic\":\"post:p\",".to_vec();
        let first = take_messages(&mut buf);
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].event, "ready");
        buf.extend_from_slice(
            b"\"postId\":\"p\",\"commentId\":\"c\",\"userId\":\"u\"}\n\nid: y\n\n: keep",
        );
        let next = take_messages(&mut buf);
        assert_eq!(next.len(), 2);
        assert_eq!(token(&next[0]), Some("c"));
        assert_eq!(next[1].event, "");
        assert_eq!(token(&next[1]), None);
        assert_eq!(buf, b": keep");
        let like = Message {
            event: "like".into(),
            data: serde_json::json!({ "postId": "p", "userId": "liker" }),
        };
        assert_eq!(token(&like), Some("liker"));
    }
}
