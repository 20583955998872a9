//! Live updates (`GET /api/events`, docs/live.md): a stream gets the events of its topics, a
//! resumed stream exactly what it missed, a reader too far behind a reset; written once against
//! the HTTP API and run on each store (`live_suite!` in `embedded.rs` and `cosmos.rs`). The caps,
//! bad input and shutdown, which no store changes, are run on the embedded store only
//! (`embedded.rs`, `mod live`).
//!
//! A stream is read as a browser reads it, message by message; a read that brings nothing for
//! [`QUIET`] fails the test rather than hang it (a bound on liveness, not a measure of speed).

use std::time::Duration;

use blog::live::hub::Limits;
use serde_json::Value;

use crate::helpers::{id, TestApp};

/// How long a test waits for a message before it fails.
const QUIET: Duration = Duration::from_secs(30);

#[macro_export]
macro_rules! live_suite {
    ($fixture:path) => {
        $crate::live_suite!(@tests $fixture;
            a_stream_gets_the_events_of_its_topics_and_no_others,
            a_resumed_stream_gets_exactly_what_it_missed,
            a_reader_too_far_behind_is_told_to_reset,
            deletions_and_unfollows_are_events_too);
    };
    (@tests $fixture:path; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let app = $crate::helpers::TestApp::spawn_with($fixture().await, false, |a| {
                    a.live_limits($crate::live_suite::LIMITS)
                })
                .await;
                $crate::live_suite::$name(&app).await;
            }
        )*
    };
}

/// The suite's limits: a backlog of 6 changes, so that a reset needs few writes.
pub const LIMITS: Limits = Limits {
    per_client: 8,
    total: 256,
    backlog: 6,
    ring: 1024,
    lifetime: None,
};

/// One SSE message as a browser sees it: its event name (empty for an `id` alone), its data,
/// and its `id`, if it has one.
#[derive(Debug, Clone)]
pub struct Message {
    pub event: String,
    pub data: Value,
    pub id: Option<String>,
}

/// A stream being read.
pub struct Events {
    resp: reqwest::Response,
    buf: String,
}

impl Events {
    /// The next message, or `None` once the stream ended cleanly.
    pub async fn next(&mut self) -> Option<Message> {
        self.try_next()
            .await
            .unwrap_or_else(|quiet| panic!("{quiet}"))
    }

    /// [`Events::next`], or what the stream held when nothing came for [`QUIET`].
    async fn try_next(&mut self) -> Result<Option<Message>, String> {
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..end + 2).collect();
                let (mut event, mut data, mut id) = (String::new(), String::new(), None);
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("event:") {
                        event = v.trim().to_string();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.trim());
                    } else if let Some(v) = line.strip_prefix("id:") {
                        id = Some(v.trim().to_string());
                    }
                }
                if event.is_empty() && data.is_empty() && id.is_none() {
                    continue; // a keep-alive comment
                }
                let data = serde_json::from_str(&data).unwrap_or(Value::Null);
                return Ok(Some(Message { event, data, id }));
            }
            let Ok(chunk) = tokio::time::timeout(QUIET, self.resp.chunk()).await else {
                return Err(format!(
                    "no message within {QUIET:?}; unread: {:?}",
                    self.buf
                ));
            };
            let Some(chunk) = chunk.expect("the stream ends cleanly") else {
                return Ok(None);
            };
            self.buf
                .push_str(std::str::from_utf8(&chunk).expect("UTF-8"));
        }
    }

    /// The messages up to and including the first named `event`.
    pub async fn until(&mut self, event: &str) -> Vec<Message> {
        let mut out = Vec::new();
        loop {
            let m = self.next().await.expect("the stream goes on");
            let done = m.event == event;
            out.push(m);
            if done {
                return out;
            }
        }
    }

    /// Read until every one of `wanted` (event, topic, an id it names) has come; what came.
    pub async fn until_all(&mut self, wanted: &[(&str, &str, &str)]) -> Vec<Message> {
        let mut got = Vec::new();
        while !wanted.iter().all(|w| got.iter().any(|m| is(m, *w))) {
            match self.try_next().await {
                Ok(m) => got.push(m.expect("the stream goes on")),
                Err(quiet) => {
                    let missing: Vec<_> = wanted
                        .iter()
                        .filter(|w| !got.iter().any(|m| is(m, **w)))
                        .collect();
                    panic!("{quiet}: {missing:?} never came; came: {got:#?}")
                }
            }
        }
        got
    }
}

/// Whether `m` is event `event` on `topic` naming `named` (as its post, comment or user).
pub fn is(m: &Message, (event, topic, named): (&str, &str, &str)) -> bool {
    m.event == event
        && m.data["topic"] == topic
        && ["postId", "commentId", "userId"]
            .iter()
            .any(|f| m.data[*f] == named)
}

/// Open a stream on `topics`, resuming after `last` if given; the answer if it is not a stream.
pub async fn open(
    app: &TestApp,
    topics: &str,
    last: Option<&str>,
) -> Result<Events, crate::helpers::Resp> {
    let mut req = app
        .client
        .get(app.url(&format!("/api/events?topics={topics}")));
    if let Some(last) = last {
        req = req.header("last-event-id", last);
    }
    let resp = req.send().await.expect("request sent");
    if resp.status() != 200 {
        let (status, headers) = (resp.status().as_u16(), resp.headers().clone());
        let body = resp.json().await.unwrap_or(Value::Null);
        return Err(crate::helpers::Resp {
            status,
            headers,
            body,
        });
    }
    assert_eq!(
        resp.headers()["content-type"],
        "text/event-stream",
        "a stream"
    );
    Ok(Events {
        resp,
        buf: String::new(),
    })
}

/// Open a stream that must open, and read its `ready`: the stream and where it stands.
pub async fn ready(app: &TestApp, topics: &str, last: Option<&str>) -> (Events, Vec<Message>) {
    let mut events = open(app, topics, last)
        .await
        .unwrap_or_else(|r| panic!("{} {:?}", r.status, r.body));
    let before = events.until("ready").await;
    (events, before)
}

/// A new stream on `topics` and where it stands once `ready`: the cursor to resume from.
async fn standing(app: &TestApp, topics: &str) -> (Events, String) {
    let (events, seen) = ready(app, topics, None).await;
    let at = seen.last().and_then(|m| m.id.clone());
    (events, at.expect("ready says where it stands"))
}

async fn follow(app: &TestApp, user: &str, followee: &str) {
    let r = app
        .put(
            &format!("/api/users/{user}/following/{followee}"),
            Value::Null,
        )
        .await;
    assert_eq!(r.status, 204, "{:?}", r.body);
}

pub async fn a_stream_gets_the_events_of_its_topics_and_no_others(app: &TestApp) {
    let ana = id(&app.create_user("ana").await);
    let bob = id(&app.create_user("bob").await);
    let cy = id(&app.create_user("cy").await);
    let post = id(&app.create_post(&ana, "Hello", "first").await);
    let other = id(&app.create_post(&cy, "Elsewhere", "not followed").await);
    follow(app, &bob, &ana).await;
    app.settle().await;
    let (topic_post, topic_ana, topic_bob) = (
        format!("post:{post}"),
        format!("user:{ana}"),
        format!("timeline:{bob}"),
    );
    let (mut events, _) = ready(app, &format!("{topic_post},{topic_ana},{topic_bob}"), None).await;

    let comment = app.comment(&post, &cy, "nice").await;
    assert_eq!(comment.status, 201);
    let comment = id(&comment.body);
    assert_eq!(app.like(&other, &cy).await.status, 201);
    let newer = id(&app.create_post(&ana, "Again", "second").await);
    follow(app, &cy, &ana).await;
    app.settle().await;
    let mut got = events
        .until_all(&[
            ("comment", &topic_post, &comment),
            ("changed", &topic_post, &post),
            ("post", &topic_ana, &post),
            ("post", &topic_bob, &newer),
            ("follower", &topic_ana, &cy),
        ])
        .await;
    for m in &got {
        let topic = m.data["topic"].as_str().unwrap_or("");
        assert!(
            [&topic_post, &topic_ana, &topic_bob].contains(&&topic.to_string()),
            "an event of another topic: {m:?}"
        );
        assert!(
            !m.data.to_string().contains(&other),
            "cy's post is none of these topics: {m:?}"
        );
    }
    // The last message of each batch carries where the stream stands: the batch in hand ends
    // with one.
    while got.last().unwrap().id.is_none() {
        got.push(events.next().await.expect("the stream goes on"));
    }
    let at = got.last().unwrap().id.clone().unwrap();
    assert!(
        at.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_".contains(c)),
        "{at}"
    );
}

pub async fn a_resumed_stream_gets_exactly_what_it_missed(app: &TestApp) {
    let ana = id(&app.create_user("ana").await);
    let post = id(&app.create_post(&ana, "Hello", "first").await);
    app.settle().await;
    let topic = format!("post:{post}");
    let (events, at) = standing(app, &topic).await;
    drop(events);

    let first = id(&app.comment(&post, &ana, "one").await.body);
    let second = id(&app.comment(&post, &ana, "two").await.body);
    app.settle().await;

    let (mut resumed, missed) = ready(app, &topic, Some(&at)).await;
    let comments: Vec<&str> = missed
        .iter()
        .filter(|m| m.event == "comment")
        .map(|m| m.data["commentId"].as_str().unwrap())
        .collect();
    assert_eq!(comments, [first.as_str(), second.as_str()], "{missed:?}");
    assert!(
        missed
            .iter()
            .all(|m| ["comment", "changed", "ready"].contains(&m.event.as_str())),
        "only what was missed: {missed:?}"
    );
    assert!(missed.iter().any(|m| m.event == "changed"), "the counts");
    // Live from there: the next comment comes, and nothing of before it.
    let third = id(&app.comment(&post, &ana, "three").await.body);
    let next = resumed.next().await.unwrap();
    assert_eq!(
        (next.event.as_str(), next.data["commentId"].as_str()),
        ("comment", Some(third.as_str())),
        "{next:?}"
    );
    // Resuming from where `ready` stood misses nothing and repeats nothing.
    let now = missed.last().unwrap().id.clone().unwrap();
    let (_, again) = ready(app, &topic, Some(&now)).await;
    let repeated: Vec<&Message> = again
        .iter()
        .filter(|m| m.event == "comment" && m.data["commentId"] != third.as_str())
        .collect();
    assert!(repeated.is_empty(), "{again:?}");
    assert!(
        again
            .iter()
            .any(|m| m.event == "comment" && m.data["commentId"] == third.as_str()),
        "{again:?}"
    );
}

pub async fn a_reader_too_far_behind_is_told_to_reset(app: &TestApp) {
    let ana = id(&app.create_user("ana").await);
    let post = id(&app.create_post(&ana, "Hello", "first").await);
    app.settle().await;
    let topic = format!("post:{post}");
    let (events, seen) = ready(app, &topic, None).await;
    let at = seen.last().unwrap().id.clone().unwrap();
    drop(events);
    // More changes than the backlog of 6 (each comment is itself and its post's counter).
    for n in 0..8 {
        assert_eq!(app.comment(&post, &ana, &format!("c{n}")).await.status, 201);
    }
    app.settle().await;
    let (_, missed) = ready(app, &topic, Some(&at)).await;
    let names: Vec<&str> = missed.iter().map(|m| m.event.as_str()).collect();
    assert_eq!(names, ["reset", "ready"], "{missed:?}");
}

pub async fn deletions_and_unfollows_are_events_too(app: &TestApp) {
    let ana = id(&app.create_user("ana").await);
    let bob = id(&app.create_user("bob").await);
    let post = id(&app.create_post(&ana, "Hello", "first").await);
    follow(app, &bob, &ana).await;
    let comment = id(&app.comment(&post, &bob, "soon gone").await.body);
    app.settle().await;
    let (topic_post, topic_ana, topic_bob) = (
        format!("post:{post}"),
        format!("user:{ana}"),
        format!("timeline:{bob}"),
    );
    let (mut events, _) = ready(app, &format!("{topic_post},{topic_ana},{topic_bob}"), None).await;
    let r = app
        .delete(&format!("/api/posts/{post}/comments/{comment}"))
        .await;
    assert_eq!(r.status, 204, "{:?}", r.body);
    assert_eq!(app.delete(&format!("/api/posts/{post}")).await.status, 204);
    let r = app
        .delete(&format!("/api/users/{bob}/following/{ana}"))
        .await;
    assert_eq!(r.status, 204, "{:?}", r.body);
    app.settle().await;
    events
        .until_all(&[
            ("commentRemoved", &topic_post, &comment),
            ("deleted", &topic_post, &post),
            ("removed", &topic_bob, &post),
            ("follows", &topic_bob, &ana),
            ("unfollowed", &topic_ana, &bob),
        ])
        .await;
}

/// The change-feed follower runs while a stream is open, and stops once none is: an idle
/// process reads nothing for live updates.
pub async fn the_follower_runs_only_while_streams_are_open() {
    let app = crate::helpers::spawn_settling_app().await;
    let hub = app.state().live.clone();
    assert!(!hub.following(), "no stream, no follower");
    let (events, _) = ready(&app, "post:p", None).await;
    assert!(hub.following());
    assert_eq!(hub.open_streams(), 1);
    drop(events);
    // The server notices the closed connection, the stream gives back its slot, the follower
    // stops (or the test's bound on liveness fails it).
    tokio::time::timeout(QUIET, hub.stopped())
        .await
        .expect("the follower stopped");
    assert_eq!(hub.open_streams(), 0);
    // Its reads of the feeds are counted, and none comes while no follower runs.
    let spent = hub.spent().operations;
    assert!(spent >= 2, "the follower read both feeds: {spent}");
    app.settle().await;
    assert_eq!(hub.spent().operations, spent, "no stream, no read");
    // Started again, it starts from the present: what came meanwhile is no live event.
    let ana = id(&app.create_user("ana").await);
    let post = id(&app.create_post(&ana, "Hello", "first").await);
    let before = id(&app.comment(&post, &ana, "before").await.body);
    let (mut events, _) = ready(&app, &format!("post:{post}"), None).await;
    let after = id(&app.comment(&post, &ana, "after").await.body);
    let next = events.next().await.unwrap();
    assert_eq!(next.event, "comment", "{next:?}");
    assert_eq!(
        next.data["commentId"],
        after.as_str(),
        "not {before}: {next:?}"
    );
}

/// Caps: a client over its streams is answered 429, the process over its streams 503, each
/// problem+json with `Retry-After`; a stream that ends gives its slot back.
pub async fn caps_answer_429_per_client_and_503_in_total() {
    let app = TestApp::spawn_with(crate::helpers::embedded_fixture().await, false, |a| {
        a.live_limits(Limits {
            per_client: 1,
            ..LIMITS
        })
    })
    .await;
    let (_first, _) = ready(&app, "post:p", None).await;
    another_is_refused(&app, 429, "/too-many-streams").await;
    // Other requests go on.
    assert_eq!(app.get("/api/feed").await.status, 200);

    let app = TestApp::spawn_with(crate::helpers::embedded_fixture().await, false, |a| {
        a.live_limits(Limits {
            per_client: 0,
            total: 1,
            ..LIMITS
        })
    })
    .await;
    let (first, _) = ready(&app, "post:p", None).await;
    another_is_refused(&app, 503, "/streams-full").await;
    drop(first);
}

/// Another stream of `app` is refused with `status`, a problem whose type ends with `kind`, and
/// `Retry-After`.
async fn another_is_refused(app: &TestApp, status: u16, kind: &str) {
    let refused = open(app, "post:p", None).await.err().expect("refused");
    refused.assert_problem(status);
    assert!(refused.body["type"].as_str().unwrap().ends_with(kind));
    assert!(refused.header("retry-after").is_some());
}

/// Bad topics or a cursor this server never gave: 400 naming the input, and no stream.
pub async fn bad_input_is_a_400_naming_it() {
    let app = crate::helpers::spawn_settling_app().await;
    for (query, field) in [
        ("", "topics"),
        ("?topics=", "topics"),
        ("?topics=posts:p", "topics"),
        ("?topics=post:a%2Fb", "topics"),
        ("?topics=post:p&cursor=nope", "cursor"),
    ] {
        let r = app.get(&format!("/api/events{query}")).await;
        r.assert_problem(400);
        assert_eq!(r.body["errors"][0]["field"], field, "{query}: {:?}", r.body);
    }
    let many: Vec<String> = (0..17).map(|n| format!("post:p{n}")).collect();
    let r = app
        .get(&format!("/api/events?topics={}", many.join(",")))
        .await;
    r.assert_problem(400);
    let r = app
        .send(
            app.client
                .get(app.url("/api/events?topics=post:p"))
                .header("last-event-id", "not-a-cursor"),
        )
        .await;
    r.assert_problem(400);
    assert_eq!(r.body["errors"][0]["field"], "Last-Event-ID");
}

/// A stream ends, cleanly, when the server shuts down: the shutdown does not wait for it.
pub async fn streams_end_when_the_server_shuts_down() {
    let app = crate::helpers::spawn_settling_app().await;
    let (mut events, _) = ready(&app, "post:p", None).await;
    app.stop().await;
    // Keep-alives would keep a stream that goes on from ever being quiet: the end must come.
    let end = tokio::time::timeout(QUIET, events.next()).await;
    assert!(matches!(end, Ok(None)), "the stream ended: {end:?}");
}

/// Under the Functions host a stream is served as standalone, but every stream comes over the host's own connection so the per-client cap does not apply, and
/// each ends after its lifetime: the page resumes from its last `id:` and misses nothing.
pub async fn under_the_functions_host_streams_end_and_resume() {
    let lifetime = Duration::from_secs(2);
    let app = TestApp::spawn_with(crate::helpers::embedded_fixture().await, false, |a| {
        a.hosted(true).live_limits(Limits {
            per_client: 1,
            lifetime: Some(lifetime),
            ..LIMITS
        })
    })
    .await;
    let ana = id(&app.create_user("ana").await);
    let post = id(&app.create_post(&ana, "Hello", "first").await);
    app.settle().await;
    let topic = format!("post:{post}");
    let (mut events, at) = standing(&app, &topic).await;
    // A second stream from the same address: under the host that is any two readers.
    let (_second, _) = ready(&app, &topic, None).await;
    // The stream ends cleanly after its lifetime (within `QUIET`, or `next` fails the test).
    while let Some(m) = events.next().await {
        assert!(m.event.is_empty(), "nothing happened: {m:?}");
    }
    let comment = id(&app.comment(&post, &ana, "while away").await.body);
    app.settle().await;
    let (_, missed) = ready(&app, &topic, Some(&at)).await;
    assert!(
        missed
            .iter()
            .any(|m| m.event == "comment" && m.data["commentId"] == comment.as_str()),
        "{missed:?}"
    );
}
