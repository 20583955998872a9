//! Live updates (`docs/live.md`): hints that something a page shows has changed, derived from the
//! change feed. A change maps to its events by what it is ([`events_of`], pure, no store read);
//! the position after a batch of changes, one per followed feed, is the [`Cursor`] a stream
//! resumes from, so resuming reads the store and nothing is buffered to be lost. A batch is
//! handed to a [`Publish`]er once, whatever the audience: the in-process [`hub::Hub`] passes it
//! to the open streams ([`stream::Stream`]), each keeping what concerns its [`Topic`]s.

pub mod hub;
pub mod stream;
pub mod webpubsub;

use std::sync::Arc;

use base64::Engine as _;
use serde_json::Value;

use crate::domain::follows::{FOLLOWER, FOLLOWING, REF_USER};
use crate::domain::{is_deleted, Id, Invalid, Kind};
use crate::store::Container;

/// The feeds live updates follow, in the order a [`Cursor`] holds their positions.
pub const FEEDS: [Container; 2] = [Container::Posts, Container::Users];

/// What a stream listens to, named after the read it shadows.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Topic {
    /// `timeline:<userId>`: posts of the authors the user follows, and their follows.
    Timeline(String),
    /// `post:<postId>`: the post, its comments and likes.
    Post(String),
    /// `user:<userId>`: their followers, and changes of their posts.
    User(String),
}

impl Topic {
    /// `timeline:<id>`, `post:<id>` or `user:<id>`, the id as the API's ids are.
    pub fn parse(s: &str) -> Result<Topic, Invalid> {
        let bad = || {
            Invalid::new(
                "topics",
                format!(
                    "`{s}` is not a topic: `timeline:<userId>`, `post:<postId>` or `user:<userId>`"
                ),
            )
        };
        let (kind, id) = s.split_once(':').ok_or_else(bad)?;
        let id = Id::parse("topics", id)?.to_string();
        match kind {
            "timeline" => Ok(Topic::Timeline(id)),
            "post" => Ok(Topic::Post(id)),
            "user" => Ok(Topic::User(id)),
            _ => Err(bad()),
        }
    }

    pub fn name(&self) -> String {
        match self {
            Topic::Timeline(id) => format!("timeline:{id}"),
            Topic::Post(id) => format!("post:{id}"),
            Topic::User(id) => format!("user:{id}"),
        }
    }
}

/// Whom or what a change concerns, before any stream's topics are known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    /// The post with this id (`post:<id>`).
    Post(String),
    /// The user with this id (`user:<id>`).
    User(String),
    /// A post by this author: the timelines of whoever follows them.
    Author(String),
    /// This user's following edges: their own timeline (`timeline:<id>`).
    Follows(String),
}

/// One event of a change: what it concerns, its kind (the SSE event name) and the ids a page
/// reads the change through. `change` names the change itself (container, item id, version), so
/// that a stream can tell a change it already passed on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub subject: Subject,
    pub kind: &'static str,
    pub post_id: Option<String>,
    pub comment_id: Option<String>,
    pub user_id: Option<String>,
    pub change: String,
}

fn text(item: &Value, field: &str) -> Option<String> {
    item.get(field).and_then(Value::as_str).map(String::from)
}

/// Whether a post looks just written: never edited, nothing counted yet. A hint: a page tells a
/// post it shows already by its id.
fn looks_new(post: &Value) -> bool {
    let zero = |f: &str| post.get(f).and_then(Value::as_i64).unwrap_or(0) <= 0;
    post.get("updatedAt").is_none() && zero("commentCount") && zero("likeCount")
}

/// The events of one change of container `c` (as the change feed delivers it): none for what no
/// topic shows (pending counts, copies, job items). One change gives at most one event per
/// subject, whoever follows, likes or reads it.
pub fn events_of(c: Container, item: &Value) -> Vec<Event> {
    let id = text(item, "id").unwrap_or_default();
    let version = text(item, "_etag")
        .or_else(|| item.get("_lsn").map(Value::to_string))
        .unwrap_or_default();
    let change = format!("{}/{id}/{version}", c.name());
    let deleted = is_deleted(item);
    let event = |subject, kind, post_id: Option<String>, comment_id, user_id| Event {
        subject,
        kind,
        post_id,
        comment_id,
        user_id,
        change: change.clone(),
    };
    let kind = item.get(Kind::FIELD).and_then(Value::as_str).unwrap_or("");
    match (c, kind) {
        (Container::Posts, "post") => {
            let (Some(post), Some(author)) = (text(item, "postId"), text(item, "userId")) else {
                return Vec::new();
            };
            let p = Some(post.clone());
            let mut out = vec![event(
                Subject::Post(post.clone()),
                if deleted { "deleted" } else { "changed" },
                p.clone(),
                None,
                None,
            )];
            if !deleted {
                out.push(event(
                    Subject::User(author.clone()),
                    "post",
                    p.clone(),
                    None,
                    None,
                ));
            }
            if deleted || looks_new(item) {
                let kind = if deleted { "removed" } else { "post" };
                out.push(event(
                    Subject::Author(author.clone()),
                    kind,
                    p,
                    None,
                    Some(author),
                ));
            }
            out
        }
        (Container::Posts, "comment") | (Container::Posts, "like") => {
            let Some(post) = text(item, "postId") else {
                return Vec::new();
            };
            let (name, comment) = match (kind, deleted) {
                ("comment", false) => ("comment", Some(id.clone())),
                ("comment", true) => ("commentRemoved", Some(id.clone())),
                (_, false) => ("like", None),
                (_, true) => ("unliked", None),
            };
            let user = text(item, "userId");
            vec![event(
                Subject::Post(post.clone()),
                name,
                Some(post),
                comment,
                user,
            )]
        }
        // A new follower once their mirror is in the followee's list; a follow taken back from
        // its edge's mark (the mirror is removed outright, which no feed reports).
        (Container::Users, FOLLOWER) if !deleted => {
            let (Some(followee), follower) = (text(item, "userId"), text(item, REF_USER)) else {
                return Vec::new();
            };
            vec![event(
                Subject::User(followee),
                "follower",
                None,
                None,
                follower,
            )]
        }
        (Container::Users, FOLLOWING) => {
            let (Some(follower), Some(followee)) = (text(item, "userId"), text(item, REF_USER))
            else {
                return Vec::new();
            };
            let mut out = vec![event(
                Subject::Follows(follower.clone()),
                "follows",
                None,
                None,
                Some(followee.clone()),
            )];
            if deleted {
                out.push(event(
                    Subject::User(followee),
                    "unfollowed",
                    None,
                    None,
                    Some(follower),
                ));
            }
            out
        }
        // The user: their name, or their counts once a follow or unfollow is recounted.
        (Container::Users, "user") => {
            let Some(user) = text(item, "userId") else {
                return Vec::new();
            };
            vec![event(
                Subject::User(user.clone()),
                "changed",
                None,
                None,
                Some(user),
            )]
        }
        _ => Vec::new(),
    }
}

/// Where a stream stands: a position in each feed of [`FEEDS`] (`None`: its beginning). Sent to
/// clients as an opaque SSE `id` (base64url of the positions), handed back as `Last-Event-ID`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cursor(pub [Option<String>; 2]);

impl Cursor {
    pub fn encode(&self) -> String {
        let json = serde_json::to_vec(&self.0).expect("positions serialize");
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json)
    }

    /// The cursor [`Cursor::encode`] gave, or `None` for anything else.
    pub fn decode(s: &str) -> Option<Cursor> {
        let json = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(s.trim())
            .ok()?;
        serde_json::from_slice::<[Option<String>; 2]>(&json)
            .ok()
            .map(Cursor)
    }

    /// The position in feed `c`.
    pub fn at(&self, c: Container) -> Option<&str> {
        let i = FEEDS.iter().position(|f| *f == c)?;
        self.0[i].as_deref()
    }

    /// The same cursor, standing at `position` in feed `c`.
    pub fn with(&self, c: Container, position: String) -> Cursor {
        let mut next = self.clone();
        if let Some(i) = FEEDS.iter().position(|f| *f == c) {
            next.0[i] = Some(position);
        }
        next
    }
}

/// A page of one feed's changes as events, and the cursor after it.
#[derive(Debug, Clone)]
pub struct Batch {
    pub events: Vec<Event>,
    pub cursor: Cursor,
}

impl Batch {
    /// The events of the changes `items` of feed `c`, ending at `cursor`.
    pub fn of(c: Container, items: &[Value], cursor: Cursor) -> Batch {
        Batch {
            events: items.iter().flat_map(|i| events_of(c, i)).collect(),
            cursor,
        }
    }
}

/// Where the batches of the change feed go: each batch once, whatever its audience. The
/// in-process hub is one publisher; a push service (a group per post and per author) is another.
/// Publishing never waits on a reader.
pub trait Publish: Send + Sync {
    fn publish(&self, batch: Arc<Batch>);
}

/// The push service the change-feed triggers publish each batch to, when one is configured
/// (`BLOG_WEBPUBSUB_ENDPOINT`): what they take from the application's state.
#[derive(Clone, Default)]
pub struct Push(pub Option<Arc<dyn Publish>>);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_cursor_reads_back_and_nothing_else_does() {
        let c = Cursor([Some("12".into()), None]).with(Container::Users, "[\"x\"]".into());
        assert_eq!(Cursor::decode(&c.encode()), Some(c.clone()));
        assert_eq!(c.at(Container::Posts), Some("12"));
        assert_eq!(Cursor::decode("not a cursor"), None);
        assert!(!c.encode().contains(['\n', '\r', ':']));
    }

    #[test]
    fn a_post_is_one_event_per_subject_whoever_follows() {
        let post = json!({"id": "p", "type": "post", "postId": "p", "userId": "a",
            "commentCount": 0, "likeCount": 0, "_etag": "1"});
        let subjects: Vec<_> = events_of(Container::Posts, &post)
            .into_iter()
            .map(|e| (e.subject, e.kind))
            .collect();
        assert_eq!(
            subjects,
            [
                (Subject::Post("p".into()), "changed"),
                (Subject::User("a".into()), "post"),
                (Subject::Author("a".into()), "post"),
            ]
        );
        // Its copy in the author's partition of `users` is no event.
        assert!(events_of(Container::Users, &post).is_empty());
        let liked = json!({"id": "p", "type": "post", "postId": "p", "userId": "a",
            "commentCount": 0, "likeCount": 1});
        assert!(!events_of(Container::Posts, &liked)
            .iter()
            .any(|e| matches!(e.subject, Subject::Author(_))));
    }

    #[test]
    fn topics_are_named_after_their_reads() {
        assert_eq!(Topic::parse("post:p1"), Ok(Topic::Post("p1".into())));
        assert_eq!(Topic::parse("timeline:u").unwrap().name(), "timeline:u");
        assert!(Topic::parse("posts:p1").is_err());
        assert!(Topic::parse("post:").is_err());
        assert!(Topic::parse("post:a/b").is_err());
    }
}
