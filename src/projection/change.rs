//! A change as the projections see it: decoded once per batch ([`decode`]) from the document
//! the change feed delivered into what it is ([`Item`]), so that no unit re-discovers it. Each
//! kind of stored item a unit can watch is a [`ChangeKind`]; the engine hands a unit only the
//! changes of the kinds it watches (`super::Unit::watches`). A change whose `type` names one of
//! those kinds but does not decode as it is an error naming the kind, never passed over: the
//! batch fails, and once isolated the change is quarantined with the unit that watches it. A
//! `type` no unit watches (a bookmarked post's copy, a favorite, an account guard, ...) decodes
//! as [`Item::Other`] and reaches no unit.
//!
//! Decoding reads what a change is known by (its id, partition, the items it refers to, whether
//! it is a deletion mark), not every field: a change is a notification, and the units read the
//! item as it is now. A job item is read whole, its work being what routes it.

use serde::Deserialize;
use serde_json::Value;

use crate::domain::bookmarks::BOOKMARK;
use crate::domain::follows::{FOLLOWER, FOLLOWING};
use crate::domain::jobs::{Job, Work, JOB};
use crate::domain::pending::PENDING_COUNT;
use crate::domain::{is_deleted, Kind};
use crate::store::Container;

/// Marks the change a driver makes up to look at a post's counters again: it recounts, and
/// writes no copy (a counter it corrects comes back as a change of the post, whose projection
/// refreshes the copies).
pub const RECHECK: &str = "recheck";

/// The change that makes the posts projection look at `post_id`'s counters again.
pub fn recheck(post_id: &str) -> Value {
    serde_json::json!({ "id": post_id, "postId": post_id, "type": Kind::Post, RECHECK: true })
}

/// The kinds of change a unit can watch, each of one feed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ChangeKind {
    /// `posts`: a post (or its deletion mark).
    Post,
    /// `posts`: a driver's [`recheck`] of a post's counters (`type: post`, `recheck: true`).
    Recheck,
    /// `posts`: a comment.
    Comment,
    /// `posts`: a like.
    Like,
    /// `posts`: a pending count (`crate::domain::pending`).
    PendingCount,
    /// `posts`: a bookmark (`crate::domain::bookmarks`).
    Bookmark,
    /// `users`: a user.
    User,
    /// `users`: a `following` edge in the follower's partition.
    Following,
    /// `users`: its `follower` mirror in the followee's partition.
    Follower,
    /// `users`: a post's short form in its author's partition.
    PostCopy,
    /// `users`: a job item of the timeline lane's work.
    Job,
    /// `users`: a job item of a bookmarked post's fan-out.
    BookmarksJob,
}

impl ChangeKind {
    pub const ALL: [ChangeKind; 12] = [
        ChangeKind::Post,
        ChangeKind::Recheck,
        ChangeKind::Comment,
        ChangeKind::Like,
        ChangeKind::PendingCount,
        ChangeKind::Bookmark,
        ChangeKind::User,
        ChangeKind::Following,
        ChangeKind::Follower,
        ChangeKind::PostCopy,
        ChangeKind::Job,
        ChangeKind::BookmarksJob,
    ];

    /// The feed that delivers it.
    pub fn feed(self) -> Container {
        match self {
            ChangeKind::Post
            | ChangeKind::Recheck
            | ChangeKind::Comment
            | ChangeKind::Like
            | ChangeKind::PendingCount
            | ChangeKind::Bookmark => Container::Posts,
            _ => Container::Users,
        }
    }

    /// The `type` its documents carry.
    pub fn type_name(self) -> &'static str {
        match self {
            ChangeKind::Post | ChangeKind::Recheck | ChangeKind::PostCopy => Kind::Post.as_str(),
            ChangeKind::Comment => Kind::Comment.as_str(),
            ChangeKind::Like => Kind::Like.as_str(),
            ChangeKind::PendingCount => PENDING_COUNT,
            ChangeKind::Bookmark => BOOKMARK,
            ChangeKind::User => Kind::User.as_str(),
            ChangeKind::Following => FOLLOWING,
            ChangeKind::Follower => FOLLOWER,
            ChangeKind::Job | ChangeKind::BookmarksJob => JOB,
        }
    }
}

/// A post, a comment or a like as a change names it: the item, its post, its author by id and
/// by the name it shows (missing on an item that lost it), and whether it is a deletion mark.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Authored {
    pub id: String,
    pub post_id: String,
    pub user_id: String,
    #[serde(default)]
    pub user_username: Option<String>,
    /// Its live bookmarks, on a post (none on a comment or a like).
    #[serde(default)]
    pub bookmark_count: u64,
    #[serde(skip)]
    pub deleted: bool,
}

/// A pending count: its id and its post.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pending {
    pub id: String,
    pub post_id: String,
}

/// A bookmark of post `post_id` by `user_id` (none: `verify --repair`'s recount of the post).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BookmarkChange {
    pub id: String,
    pub post_id: String,
    #[serde(default)]
    pub user_id: Option<String>,
}

/// A user: whose item it is, and whether it is a deletion mark (an erased account).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UserChange {
    pub user_id: String,
    #[serde(skip)]
    pub deleted: bool,
}

/// A follow edge or its mirror: `user_id` holds it in their partition, `ref_user_id` is at the
/// other end.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EdgeChange {
    pub id: String,
    pub user_id: String,
    pub ref_user_id: String,
}

/// What a change is.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    Post(Authored),
    Recheck {
        post_id: String,
    },
    Comment(Authored),
    Like(Authored),
    PendingCount(Pending),
    Bookmark(BookmarkChange),
    User(UserChange),
    Following(EdgeChange),
    Follower(EdgeChange),
    /// A post's copy in its author's partition of `users`.
    PostCopy(Authored),
    Job(Job),
    /// A kind no unit watches, by its `type` (empty when it has none).
    Other(String),
}

impl Item {
    /// Its kind, unless no unit watches it.
    pub fn kind(&self) -> Option<ChangeKind> {
        Some(match self {
            Item::Post(_) => ChangeKind::Post,
            Item::Recheck { .. } => ChangeKind::Recheck,
            Item::Comment(_) => ChangeKind::Comment,
            Item::Like(_) => ChangeKind::Like,
            Item::PendingCount(_) => ChangeKind::PendingCount,
            Item::Bookmark(_) => ChangeKind::Bookmark,
            Item::User(_) => ChangeKind::User,
            Item::Following(_) => ChangeKind::Following,
            Item::Follower(_) => ChangeKind::Follower,
            Item::PostCopy(_) => ChangeKind::PostCopy,
            Item::Job(j) if matches!(j.work, Work::Bookmarks { .. }) => ChangeKind::BookmarksJob,
            Item::Job(_) => ChangeKind::Job,
            Item::Other(_) => return None,
        })
    }

    /// The post it belongs to, for a change of the posts feed.
    pub fn post_id(&self) -> Option<&str> {
        match self {
            Item::Post(a) | Item::Comment(a) | Item::Like(a) => Some(&a.post_id),
            Item::Recheck { post_id } => Some(post_id),
            Item::PendingCount(p) => Some(&p.post_id),
            Item::Bookmark(b) => Some(&b.post_id),
            _ => None,
        }
    }
}

/// One change of a batch: the document as delivered (its version stamps, and what a unit that
/// reads no fresher copy projects) and what it is.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub doc: Value,
    pub item: Item,
}

impl Change {
    /// The changed item's `container/pk/id`, as an error names it.
    pub fn label(&self, feed: Container) -> String {
        let s = |f: &str| self.doc.get(f).and_then(Value::as_str).unwrap_or("?");
        format!(
            "{}/{}/{}",
            feed.name(),
            s(feed.partition_key_field()),
            s("id")
        )
    }

    /// Whether the item is a deletion mark.
    pub fn is_deleted(&self) -> bool {
        is_deleted(&self.doc)
    }
}

/// A document of a feed whose `type` names a kind a unit watches, but which does not decode as
/// that kind.
#[derive(Debug, Clone, PartialEq)]
pub struct Undecodable {
    /// The `type` it carries.
    pub type_name: String,
    /// The changed item's `container/pk/id`.
    pub label: String,
    pub error: String,
}

/// Each document of a batch of `feed` decoded, in the batch's order.
pub fn decode(feed: Container, docs: &[Value]) -> Vec<Result<Change, Undecodable>> {
    docs.iter().map(|d| decode_one(feed, d)).collect()
}

/// One document of `feed` decoded.
pub fn decode_one(feed: Container, doc: &Value) -> Result<Change, Undecodable> {
    let type_name = doc.get(Kind::FIELD).and_then(Value::as_str).unwrap_or("");
    let deleted = is_deleted(doc);
    let item = match (feed, type_name) {
        (Container::Posts, "post") if doc.get(RECHECK) == Some(&Value::Bool(true)) => {
            read::<Pending>(doc).map(|p| Item::Recheck { post_id: p.post_id })
        }
        (Container::Posts, "post") => read(doc).map(|a| Item::Post(marked(a, deleted))),
        (Container::Posts, "comment") => read(doc).map(|a| Item::Comment(marked(a, deleted))),
        (Container::Posts, "like") => read(doc).map(|a| Item::Like(marked(a, deleted))),
        (Container::Posts, PENDING_COUNT) => read(doc).map(Item::PendingCount),
        (Container::Posts, BOOKMARK) => read(doc).map(Item::Bookmark),
        (Container::Users, "user") => {
            read::<UserChange>(doc).map(|u| Item::User(UserChange { deleted, ..u }))
        }
        (Container::Users, FOLLOWING) => read(doc).map(Item::Following),
        (Container::Users, FOLLOWER) => read(doc).map(Item::Follower),
        (Container::Users, "post") => read(doc).map(|a| Item::PostCopy(marked(a, deleted))),
        (Container::Users, JOB) => Job::read(doc).map(Item::Job),
        _ => Ok(Item::Other(type_name.to_string())),
    };
    match item {
        Ok(item) => Ok(Change {
            doc: doc.clone(),
            item,
        }),
        Err(error) => {
            let change = Change {
                doc: doc.clone(),
                item: Item::Other(String::new()),
            };
            Err(Undecodable {
                type_name: type_name.to_string(),
                label: change.label(feed),
                error,
            })
        }
    }
}

fn marked(a: Authored, deleted: bool) -> Authored {
    Authored { deleted, ..a }
}

fn read<'a, T: Deserialize<'a>>(doc: &'a Value) -> Result<T, String> {
    T::deserialize(doc).map_err(|e| e.to_string())
}

/// Decode `docs` of `feed`, failing on the first that does not (for tests and tools that build
/// their changes by hand).
pub fn decoded(feed: Container, docs: &[Value]) -> Result<Vec<Change>, Undecodable> {
    docs.iter().map(|d| decode_one(feed, d)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_kind_decodes_from_its_feed_and_a_broken_one_says_why() {
        let post = json!({"id":"p1","type":"post","postId":"p1","userId":"u1","deleted":true});
        let c = decode_one(Container::Posts, &post).unwrap();
        assert_eq!(c.item.kind(), Some(ChangeKind::Post));
        assert!(matches!(&c.item, Item::Post(a) if a.deleted && a.user_id == "u1"));
        let copy = decode_one(Container::Users, &post).unwrap();
        assert_eq!(copy.item.kind(), Some(ChangeKind::PostCopy));
        let r = decode_one(Container::Posts, &recheck("p1")).unwrap();
        assert_eq!(
            r.item,
            Item::Recheck {
                post_id: "p1".into()
            }
        );

        let edge = json!({"id":"following-x","type":"following","userId":"f"});
        let e = decode_one(Container::Users, &edge).unwrap_err();
        assert_eq!(e.type_name, "following");
        assert_eq!(e.label, "users/f/following-x");
        assert!(e.error.contains("refUserId"), "{}", e.error);

        let other = json!({"id":"favorite-p1","type":"favorite","userId":"u1"});
        let o = decode_one(Container::Users, &other).unwrap();
        assert_eq!(o.item, Item::Other("favorite".into()));
        assert_eq!(o.item.kind(), None);
    }

    #[test]
    fn every_kind_names_a_type_of_its_feed() {
        for k in ChangeKind::ALL {
            assert!(!k.type_name().is_empty());
            assert!(matches!(k.feed(), Container::Posts | Container::Users));
        }
    }

    /// Kinds of change the items of earlier releases (`tests/fixtures/items`) hold none of,
    /// and why; every other kind must have an item there that decodes as it.
    const NOT_IN_THE_FIXTURE: [(ChangeKind, &str); 5] = [
        (ChangeKind::Recheck, "made by the drivers, never stored"),
        (
            ChangeKind::PendingCount,
            "not in the fixture's release; current shape in touched.rs",
        ),
        (
            ChangeKind::Bookmark,
            "not in the fixture's release; current shape in touched.rs",
        ),
        (
            ChangeKind::Job,
            "not in the fixture; current shape in touched.rs",
        ),
        (
            ChangeKind::BookmarksJob,
            "not in the fixture; current shape in touched.rs",
        ),
    ];

    /// Every change an earlier release's item makes decodes as its kind, and every kind of the
    /// table has such an item or says why not: a kind added to [`ChangeKind`] fails here
    /// until it is one or the other.
    #[test]
    fn items_of_earlier_releases_decode_as_every_kind_of_change() {
        let fixture: Value = serde_json::from_str(include_str!(
            "../../tests/fixtures/items/earlier-releases.json"
        ))
        .unwrap();
        let mut found = std::collections::BTreeSet::new();
        for feed in [Container::Posts, Container::Users] {
            for item in fixture[feed.name()].as_array().unwrap() {
                let change = decode_one(feed, item).unwrap_or_else(|e| panic!("{e:?}"));
                found.extend(change.item.kind());
            }
        }
        let missing: Vec<ChangeKind> = ChangeKind::ALL
            .into_iter()
            .filter(|k| !found.contains(k) && !NOT_IN_THE_FIXTURE.iter().any(|(n, _)| n == k))
            .collect();
        assert!(
            missing.is_empty(),
            "kinds of change with no item of an earlier release: {missing:?}"
        );
        for (k, why) in NOT_IN_THE_FIXTURE {
            assert!(!found.contains(&k), "{k:?} is in the fixture now ({why})");
        }
    }

    /// Where each kind stands in [`ChangeKind::ALL`]: a kind added to the enum does not compile
    /// here until it is given a place, and the test below holds `ALL` to it.
    fn position(k: ChangeKind) -> usize {
        match k {
            ChangeKind::Post => 0,
            ChangeKind::Recheck => 1,
            ChangeKind::Comment => 2,
            ChangeKind::Like => 3,
            ChangeKind::PendingCount => 4,
            ChangeKind::Bookmark => 5,
            ChangeKind::User => 6,
            ChangeKind::Following => 7,
            ChangeKind::Follower => 8,
            ChangeKind::PostCopy => 9,
            ChangeKind::Job => 10,
            ChangeKind::BookmarksJob => 11,
        }
    }

    #[test]
    fn the_table_of_kinds_lists_every_kind() {
        for (i, k) in ChangeKind::ALL.into_iter().enumerate() {
            assert_eq!(position(k), i, "{k:?}");
        }
    }
}
