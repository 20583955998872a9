//! One stream: its topics, what it has passed on, and the messages it sends.
//!
//! A stream opens by reading whom each of its timelines' readers follows (one query of the
//! reader's partition, at most `MAX_FOLLOWING` edges), and joins the hub's follower. With a
//! cursor it then reads both feeds from the cursor to the present itself (at most
//! [`Limits::backlog`](super::hub::Limits) changes, else `reset`), and only then the follower's
//! batches: it subscribed first, so no change falls between the two, and a change it passed on
//! from the backlog is not passed on again when the follower's batch brings it. `ready` says it
//! is live. A batch it finds nothing of its topics in moves its cursor only every
//! [`QUIET_POSITION_EVERY`] batches (an `id` alone), so a stream on a quiet topic neither sends a
//! message per change elsewhere nor falls far behind.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use serde_json::{Map, Value};
use tokio::sync::{broadcast::error::RecvError, watch};

use super::hub::{Hub, Joined, Slot};
use super::{Batch, Cursor, Event, Subject, Topic, FEEDS};
use crate::domain::follows::{FollowKind, MAX_FOLLOWING, REF_USER};
use crate::domain::Kind;
use crate::store::{Container, Query, Store, StoreResult};

/// Batches without an event for a stream after which it is sent where it stands.
pub const QUIET_POSITION_EVERY: usize = 100;
/// Changes read per page of a backlog.
const BACKLOG_PAGE: u32 = 100;

/// What a stream sends.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// An SSE event: its name, its data, and the cursor after it when it ends a batch.
    Event {
        name: &'static str,
        data: Value,
        id: Option<String>,
    },
    /// Only a cursor (an SSE `id` without data: the browser keeps it, no event fires).
    Position(String),
}

pub struct Stream {
    /// First, so that it is given back before the ring's receiver in `joined` is dropped: a
    /// follower that stops for want of streams finds the slots given back too.
    _slot: Slot,
    store: Arc<dyn Store>,
    hub: Arc<Hub>,
    topics: Vec<Topic>,
    /// Per timeline topic's reader, the authors they follow.
    follows: HashMap<String, HashSet<String>>,
    joined: Joined,
    closing: watch::Receiver<bool>,
    queue: VecDeque<Message>,
    /// `Some` until the stream is live: the cursor it resumes from, if any.
    start: Option<Option<Cursor>>,
    /// The changes the backlog passed on, until the follower's batches are past them.
    seen: HashSet<String>,
    quiet: usize,
}

impl Stream {
    /// Open a stream on `topics` (admitted: `slot`), resuming after `cursor` if given.
    pub async fn open(
        store: Arc<dyn Store>,
        hub: Arc<Hub>,
        slot: Slot,
        topics: Vec<Topic>,
        cursor: Option<Cursor>,
    ) -> StoreResult<Stream> {
        let mut follows = HashMap::new();
        for t in &topics {
            if let Topic::Timeline(reader) = t {
                follows.insert(reader.clone(), followed(&*store, reader).await?);
            }
        }
        let joined = hub.join(&store);
        Ok(Stream {
            closing: hub.closing(),
            store,
            hub,
            topics,
            follows,
            joined,
            queue: VecDeque::new(),
            start: Some(cursor),
            seen: HashSet::new(),
            quiet: 0,
            _slot: slot,
        })
    }

    /// The next message, or `None` once the stream ends (the server shuts down).
    pub async fn next(&mut self) -> Option<Message> {
        loop {
            if let Some(m) = self.queue.pop_front() {
                return Some(m);
            }
            if *self.closing.borrow() {
                return None;
            }
            if let Some(cursor) = self.start.take() {
                let here = self.live_position().await?;
                let at = match cursor {
                    Some(from) => self.backlog(from, here).await,
                    None => here,
                };
                self.push("ready", Map::new(), Some(at.encode()));
                continue;
            }
            let mut closing = self.closing.clone();
            let got = tokio::select! {
                got = self.joined.recv() => got,
                _ = closing.wait_for(|c| *c) => return None,
            };
            match got {
                Ok(batch) => self.take(&batch, false).await,
                Err(RecvError::Lagged(_)) => {
                    let here = self.joined.position.borrow().clone().unwrap_or_default();
                    self.seen.clear();
                    self.push("reset", Map::new(), Some(here.encode()));
                }
                Err(RecvError::Closed) => return None,
            }
        }
    }

    /// Where the follower stands once it has read to the present.
    async fn live_position(&mut self) -> Option<Cursor> {
        let mut position = self.joined.position.clone();
        let mut closing = self.closing.clone();
        tokio::select! {
            at = position.wait_for(Option::is_some) => at.ok().and_then(|at| at.clone()),
            _ = closing.wait_for(|c| *c) => None,
        }
    }

    /// Pass on the changes from `from` to the present; where it ends. More than the backlog
    /// allows, or a read that fails: `reset`, and the stream goes on from `here`.
    async fn backlog(&mut self, from: Cursor, here: Cursor) -> Cursor {
        let most = self.hub.limits().backlog;
        let mut at = from;
        let mut read = 0;
        for c in FEEDS {
            loop {
                let page = match self.store.changes(c, at.at(c), BACKLOG_PAGE).await {
                    Ok(page) => page,
                    Err(e) => {
                        tracing::warn!(error = %e, "live updates: a backlog read failed; reset");
                        return self.reset(here);
                    }
                };
                let done = page.items.is_empty();
                read += page.items.len();
                at = at.with(c, page.continuation);
                if read > most {
                    return self.reset(here);
                }
                if done {
                    break;
                }
                let batch = Batch::of(c, &page.items, at.clone());
                self.take(&batch, true).await;
            }
        }
        at
    }

    /// Drop what the backlog queued and tell the page to refetch; the stream goes on from
    /// `here`.
    fn reset(&mut self, here: Cursor) -> Cursor {
        self.queue.clear();
        self.seen.clear();
        self.push("reset", Map::new(), Some(here.encode()));
        here
    }

    /// Queue the events of `batch` that concern this stream, the last one carrying its cursor.
    async fn take(&mut self, batch: &Batch, backlog: bool) {
        let before = self.queue.len();
        let mut known = false;
        for e in &batch.events {
            if backlog {
                self.seen.insert(e.change.clone());
            } else if self.seen.contains(&e.change) {
                known = true;
                continue;
            }
            if let Subject::Follows(reader) = &e.subject {
                if let Some(set) = self.follows.get_mut(reader) {
                    match followed(&*self.store, reader).await {
                        Ok(now) => *set = now,
                        Err(err) => {
                            tracing::warn!(error = %err, "live updates: cannot read whom a reader follows")
                        }
                    }
                }
            }
            for topic in self.topics_of(e) {
                self.push(e.kind, data(e, &topic), None);
            }
        }
        if !backlog && !known && !batch.events.is_empty() {
            // The follower's batches are past what the backlog read.
            self.seen.clear();
        }
        let id = batch.cursor.encode();
        if self.queue.len() > before {
            self.quiet = 0;
            if let Some(Message::Event { id: last, .. }) = self.queue.back_mut() {
                *last = Some(id);
            }
        } else {
            self.quiet += 1;
            if self.quiet >= QUIET_POSITION_EVERY {
                self.quiet = 0;
                self.queue.push_back(Message::Position(id));
            }
        }
    }

    /// The topics of this stream that `e` concerns.
    fn topics_of(&self, e: &Event) -> Vec<String> {
        self.topics
            .iter()
            .filter(|t| match (&e.subject, t) {
                (Subject::Post(p), Topic::Post(q)) => p == q,
                (Subject::User(u), Topic::User(v)) => u == v,
                (Subject::Follows(u), Topic::Timeline(v)) => u == v,
                (Subject::Author(a), Topic::Timeline(reader)) => {
                    self.follows.get(reader).is_some_and(|f| f.contains(a))
                }
                _ => false,
            })
            .map(Topic::name)
            .collect()
    }

    fn push(&mut self, name: &'static str, data: Map<String, Value>, id: Option<String>) {
        self.queue.push_back(Message::Event {
            name,
            data: Value::Object(data),
            id,
        });
    }
}

/// What an event says: its topic and the ids it has.
pub(crate) fn data(e: &Event, topic: &str) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("topic".into(), topic.into());
    for (field, v) in [
        ("postId", &e.post_id),
        ("commentId", &e.comment_id),
        ("userId", &e.user_id),
    ] {
        if let Some(v) = v {
            m.insert(field.into(), v.as_str().into());
        }
    }
    m
}

/// Whom `reader` follows: their live following edges (one query of their partition).
pub(crate) async fn followed(store: &dyn Store, reader: &str) -> StoreResult<HashSet<String>> {
    let mut out = HashSet::new();
    let mut continuation = None;
    loop {
        let q = Query::partition(reader)
            .eq(Kind::FIELD, FollowKind::Following.as_str())
            .live()
            .limit(MAX_FOLLOWING as u32)
            .continuation(continuation);
        let page = store.query(Container::Users, &q).await?;
        out.extend(
            page.items
                .iter()
                .filter_map(|i| i.get(REF_USER).and_then(Value::as_str).map(String::from)),
        );
        continuation = page.continuation;
        if continuation.is_none() || out.len() >= MAX_FOLLOWING {
            return Ok(out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::hub::Limits;
    use crate::live::Publish as _;
    use crate::store::embedded::EmbeddedStore;

    fn comment_on(post: &str, n: usize) -> Event {
        Event {
            subject: Subject::Post(post.into()),
            kind: "comment",
            post_id: Some(post.into()),
            comment_id: Some(format!("c-{n}")),
            user_id: None,
            change: format!("posts/c-{n}/1"),
        }
    }

    /// A stream that is not read holds up neither the publisher nor another stream, and holds
    /// no more than the ring: once it reads again it is told `reset`, then goes on.
    #[tokio::test]
    async fn a_slow_stream_holds_no_memory_and_slows_no_other() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> =
            Arc::new(EmbeddedStore::open(&dir.path().join("b.db")).unwrap());
        let ring = 4;
        let hub = Hub::new(Limits {
            ring,
            ..Limits::default()
        });
        let topics = || vec![Topic::Post("p".into())];
        let open = |hub: &Arc<Hub>| {
            let slot = hub.admit(None).unwrap();
            Stream::open(store.clone(), hub.clone(), slot, topics(), None)
        };
        let mut fast = open(&hub).await.unwrap();
        let mut slow = open(&hub).await.unwrap();
        for s in [&mut fast, &mut slow] {
            assert!(matches!(
                s.next().await,
                Some(Message::Event { name: "ready", .. })
            ));
        }
        let batches = 10 * ring;
        for n in 0..batches {
            // Never waits on `slow`, which reads nothing meanwhile.
            hub.publish(Arc::new(Batch {
                events: vec![comment_on("p", n)],
                cursor: Cursor([Some(n.to_string()), None]),
            }));
            assert!(hub.held() <= ring);
            let Some(Message::Event { name, data, id }) = fast.next().await else {
                panic!("the fast stream ended");
            };
            assert_eq!(
                (name, data["commentId"].as_str()),
                ("comment", Some(&*format!("c-{n}")))
            );
            assert_eq!(id, Some(Cursor([Some(n.to_string()), None]).encode()));
        }
        let Some(Message::Event { name, .. }) = slow.next().await else {
            panic!("the slow stream ended");
        };
        assert_eq!(name, "reset");
        // Then what the ring still holds, the newest batches.
        let Some(Message::Event { name, data, .. }) = slow.next().await else {
            panic!("the slow stream ended");
        };
        assert_eq!(name, "comment");
        let n = batches - ring;
        assert_eq!(data["commentId"], format!("c-{n}"));
    }
}
