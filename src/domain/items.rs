//! The four kinds of item and their shapes. Stored items carry their kind in `type` and their
//! partition key; what a client sees of each is its view (`crate::api::views`), which names the
//! fields it keeps.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use unicode_segmentation::UnicodeSegmentation;

use super::clock::now;
use super::value::to_value;
use super::{Id, Text, Username, SHORT_CONTENT_CHARS};

/// What an item is: its `type` property.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    User,
    Post,
    Comment,
    Like,
}

impl Kind {
    /// The property that holds an item's kind.
    pub const FIELD: &'static str = "type";

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::User => "user",
            Kind::Post => "post",
            Kind::Comment => "comment",
            Kind::Like => "like",
        }
    }

    /// The kind of a stored item (or of a change-feed document), if it is one of the four.
    pub fn of(item: &Value) -> Option<Kind> {
        match item.get(Self::FIELD)?.as_str()? {
            "user" => Some(Kind::User),
            "post" => Some(Kind::Post),
            "comment" => Some(Kind::Comment),
            "like" => Some(Kind::Like),
            _ => None,
        }
    }
}

/// What stored items and change-feed documents carry whatever their kind, read without reading
/// the item as its kind: for the code that looks at a change or an item before (or instead of)
/// reading it whole. A property that is missing or not a string reads as `None`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Meta<'a> {
    pub id: Option<&'a str>,
    /// `type`: one of the four [`Kind`]s, or an internal item's.
    pub kind: Option<&'a str>,
    pub user_id: Option<&'a str>,
    pub post_id: Option<&'a str>,
    /// The name an item shows of its author (or of the other user, on an edge).
    pub user_username: Option<&'a str>,
    pub creation_date: Option<&'a str>,
    /// The stored version, for a write conditional on it.
    pub etag: Option<&'a str>,
}

impl<'a> Meta<'a> {
    pub fn of(item: &'a Value) -> Meta<'a> {
        let s = |f: &str| item.get(f).and_then(Value::as_str);
        Meta {
            id: s("id"),
            kind: s(Kind::FIELD),
            user_id: s("userId"),
            post_id: s("postId"),
            user_username: s("userUsername"),
            creation_date: s("creationDate"),
            etag: s("_etag"),
        }
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<Kind> for Value {
    fn from(k: Kind) -> Value {
        Value::String(k.as_str().into())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct User {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: Kind,
    pub user_id: String,
    pub username: String,
    /// Bumped by every rename, in the rename's own patch.
    #[serde(default)]
    pub rename_version: u64,
    /// The `renameVersion` whose name the fan-out has carried to every item of this user. A
    /// fan-out is owed while it is missing or lower than `renameVersion`. Internal: neither
    /// version is returned to clients.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub propagated_version: Option<u64>,
    /// How many users follow this one, and how many this one follows: recounted by the users
    /// projection whenever an edge of theirs changes (`crate::projection::timeline`).
    #[serde(default)]
    pub follower_count: u64,
    #[serde(default)]
    pub following_count: u64,
    /// A local account's profile (what a RealWorld client shows): a short text about the user
    /// and the address of a picture, absent when not given; the account's email, which only the
    /// user sees.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bio: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
}

impl User {
    /// A new user: nothing carries their name yet, so there is nothing to propagate either.
    pub fn new(id: &Id, username: &Username) -> Self {
        User {
            id: id.to_string(),
            kind: Kind::User,
            user_id: id.to_string(),
            username: username.as_str().to_string(),
            rename_version: 0,
            propagated_version: Some(0),
            follower_count: 0,
            following_count: 0,
            bio: None,
            image: None,
            email: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Post {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: Kind,
    pub post_id: String,
    pub user_id: String,
    pub user_username: String,
    pub title: String,
    /// A one-line summary of the post (what a list shows under its title), when its author gave
    /// one; posts written before descriptions read as having none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub content: String,
    /// A counter reads as at least 0: a delete's decrement may land before the increment of the
    /// item's creation (see `super::pending`), leaving the stored value below zero for a moment.
    #[serde(deserialize_with = "at_least_zero")]
    pub comment_count: u64,
    #[serde(deserialize_with = "at_least_zero")]
    pub like_count: u64,
    pub creation_date: String,
    /// When the post was last edited (`PUT`); absent on a post never edited. Not on the short
    /// form: copies show what the feed lists, and an edit changes their title or content anyway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
    /// Its live bookmarks, recounted by the change feed (`crate::projection::bookmarks`).
    #[serde(default)]
    pub bookmark_count: u64,
    /// Its tags (`super::tags`), lowercased, each once, at most 10; absent when none (posts
    /// stored before tags read as having none). In every copy of the post.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
}

fn at_least_zero<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let n = i64::deserialize(d)?;
    Ok(u64::try_from(n).unwrap_or(0))
}

impl Post {
    /// A new post by `author` (whose current name is `username`): no comments or likes yet.
    pub fn new(author: &Id, username: String, title: &Text, content: &Text) -> Self {
        let id = Id::new();
        Post {
            id: id.to_string(),
            kind: Kind::Post,
            post_id: id.to_string(),
            user_id: author.to_string(),
            user_username: username,
            title: title.as_str().into(),
            description: None,
            content: content.as_str().into(),
            comment_count: 0,
            like_count: 0,
            creation_date: now(),
            updated_at: None,
            bookmark_count: 0,
            tags: Vec::new(),
        }
    }

    /// The short form kept in `users` and `feed`: the same post with `content` cut.
    pub fn summary(&self) -> Post {
        Post {
            content: short_content(&self.content),
            updated_at: None,
            ..self.clone()
        }
    }

    /// The post's counters, as stored. They are on the post and on its short form in `users`
    /// and `feed`, and on no copy in another partition (see [`Post::copy_fields`]).
    pub const COUNTERS: [&'static str; 3] = ["commentCount", "likeCount", "bookmarkCount"];

    /// What a copy of the post kept outside its author's own lists holds (timeline entries, the
    /// merged authors' posts), given the post in the form the copy shows ([`Post::as_copied`]):
    /// every field but the post's identity (`id`, `type` and the author's `userId`, which the
    /// copy's place names in its own way) and its [counters](Post::COUNTERS) (a like or a comment
    /// changes no such copy; a read takes the counts from the post). A field added to `Post` is
    /// in every copy without more ado.
    pub fn copy_fields(&self) -> Map<String, Value> {
        let Value::Object(mut fields) = to_value(self) else {
            unreachable!("a post serializes as an object")
        };
        for f in ["id", Kind::FIELD, "userId"]
            .into_iter()
            .chain(Post::COUNTERS)
        {
            fields.remove(f);
        }
        fields
    }

    /// The post a copy shows, from the copy's fields (what [`Post::copy_fields`] wrote, and
    /// whatever else the stored copy holds: system properties, the counts older copies kept)
    /// and its author: counters read as 0. A copy written before a field was added to `Post`
    /// reads only if that field has a serde default (the unit tests hold every kind of copy to
    /// it).
    pub fn from_copy_fields(
        mut fields: Map<String, Value>,
        author: &str,
    ) -> Result<Post, serde_json::Error> {
        let post_id = fields.get("postId").cloned().unwrap_or(Value::Null);
        fields.insert("id".into(), post_id);
        fields.insert(Kind::FIELD.into(), Kind::Post.into());
        fields.insert("userId".into(), author.into());
        for f in Post::COUNTERS {
            fields.insert(f.into(), 0.into());
        }
        serde_json::from_value(Value::Object(fields))
    }

    /// The post as a copy outside its author's lists shows it: the short form, counters 0.
    pub fn as_copied(&self) -> Post {
        Post {
            comment_count: 0,
            like_count: 0,
            bookmark_count: 0,
            ..self.summary()
        }
    }
}

/// What a post, a comment and a like each carry: the item, its post, and its author by id and
/// by the name the item shows (missing on an item that lost it).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Authored {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: Kind,
    pub post_id: String,
    pub user_id: String,
    #[serde(default)]
    pub user_username: Option<String>,
}

impl Authored {
    /// A stored item as what it carries, if it reads as a post, a comment or a like.
    pub fn read(item: &Value) -> Option<Authored> {
        Authored::deserialize(item).ok()
    }

    /// The author of a stored post, comment or like, if it reads as one.
    pub fn author_of(item: &Value) -> Option<String> {
        Authored::read(item).map(|a| a.user_id)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Comment {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: Kind,
    pub post_id: String,
    pub user_id: String,
    pub user_username: String,
    pub content: String,
    pub creation_date: String,
}

impl Comment {
    /// A new comment's number: milliseconds since 2024-01-01 times 10,000 plus a random part,
    /// so that numbers grow with time, collide only by chance within one millisecond (a
    /// creation that meets one tries again with a new number), and stay below 2^53, where every
    /// JSON client reads an integer exactly (until the year 2052).
    pub fn new_number() -> u64 {
        const EPOCH_MS: i128 = 1_704_067_200_000;
        let ms = (time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000) - EPOCH_MS;
        let random = u64::from(uuid::Uuid::new_v4().as_u128() as u16) % 10_000;
        (ms.max(0) as u64) * 10_000 + random
    }

    /// The id of the comment numbered `n` (`c-<n>`).
    pub fn id_of_number(n: u64) -> String {
        format!("c-{n}")
    }

    /// The number a comment is addressed by where a client needs an integer: the one its id
    /// carries, or for a comment stored before comments were numbered, the first 53 bits of the
    /// SHA-256 of its id.
    pub fn number_of(id: &str) -> u64 {
        if let Some(n) = id.strip_prefix("c-").and_then(|n| n.parse::<u64>().ok()) {
            if n < (1 << 53) {
                return n;
            }
        }
        use sha2::Digest as _;
        let d = sha2::Sha256::digest(id.as_bytes());
        u64::from_be_bytes(d[..8].try_into().expect("8 bytes")) >> 11
    }

    /// A new comment on `post` by `author` (whose current name is `username`).
    pub fn new(post: &Id, author: &Id, username: String, content: &Text) -> Self {
        Comment {
            id: Comment::id_of_number(Comment::new_number()),
            kind: Kind::Comment,
            post_id: post.to_string(),
            user_id: author.to_string(),
            user_username: username,
            content: content.as_str().into(),
            creation_date: now(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Like {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: Kind,
    pub post_id: String,
    pub user_id: String,
    pub user_username: String,
    pub creation_date: String,
}

impl Like {
    /// `author`'s like of `post` (whose current name is `username`). Its id is derived from the
    /// user ([`Like::id_of`]), so a repeat like is a conflict.
    pub fn new(post: &Id, author: &Id, username: String) -> Self {
        Like {
            id: Like::id_of(author.as_str()),
            kind: Kind::Like,
            post_id: post.to_string(),
            user_id: author.to_string(),
            user_username: username,
            creation_date: now(),
        }
    }

    /// The id of `user_id`'s like on a post.
    pub fn id_of(user_id: &str) -> String {
        format!("like-{user_id}")
    }
}

/// `content` cut to at most [`SHORT_CONTENT_CHARS`] characters at a grapheme boundary, with `…`
/// appended when cut (the ellipsis counts towards the limit).
pub fn short_content(content: &str) -> String {
    if content.chars().count() <= SHORT_CONTENT_CHARS {
        return content.to_string();
    }
    let budget = SHORT_CONTENT_CHARS - 1;
    let mut out = String::new();
    let mut used = 0;
    for g in content.graphemes(true) {
        let n = g.chars().count();
        if used + n > budget {
            break;
        }
        out.push_str(g);
        used += n;
    }
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What every item carries reads whatever the kind; what is missing or not a string is
    /// `None`, and the rest still reads.
    #[test]
    fn meta_reads_the_common_properties_of_any_item() {
        let job = serde_json::json!({"id": "timelineJob-erase", "type": "timelineJob",
                                     "userId": "u1", "_etag": "e1", "postId": 7});
        let m = Meta::of(&job);
        assert_eq!(
            (m.id, m.kind, m.user_id, m.etag, m.post_id),
            (
                Some("timelineJob-erase"),
                Some("timelineJob"),
                Some("u1"),
                Some("e1"),
                None
            )
        );
        assert_eq!(Meta::of(&Value::Null), Meta::default());
    }
    use serde_json::json;

    /// Every kind of stored item, as earlier releases wrote it (`tests/fixtures/items`), reads
    /// as its type, and nothing it held is lost in the reading (but the counts an entry once
    /// carried, which no copy shows). This fails when a field is added to a stored type
    /// without a serde default: the items already stored would stop reading.
    #[test]
    fn items_written_by_earlier_releases_read_as_their_types() {
        use crate::domain::follows::{Edge, MergedPost, TimelineItem};
        use std::collections::BTreeSet;

        let fixture: Value = serde_json::from_str(include_str!(
            "../../tests/fixtures/items/earlier-releases.json"
        ))
        .unwrap();
        fn read<T: serde::de::DeserializeOwned + Serialize>(item: &Value) -> Value {
            let typed: T =
                serde_json::from_value(item.clone()).unwrap_or_else(|e| panic!("{e}: {item:#}"));
            super::super::value::to_value(&typed)
        }
        let mut kinds = BTreeSet::new();
        for (place, items) in fixture.as_object().unwrap() {
            for item in items.as_array().unwrap() {
                let kind = item["type"].as_str().unwrap();
                let marker = item.get("merge").is_some();
                let back = match (place.as_str(), kind) {
                    ("users", "user") => read::<User>(item),
                    ("users" | "posts" | "feed", "post") => read::<Post>(item),
                    ("posts", "comment") => read::<Comment>(item),
                    ("posts", "like") => read::<Like>(item),
                    ("users", "following" | "follower") => read::<Edge>(item),
                    ("merged", "merged") => read::<MergedPost>(item),
                    ("timelines" | "merged", "timeline") => {
                        match TimelineItem::read(item).unwrap_or_else(|e| panic!("{e}")) {
                            TimelineItem::Entry(e) => super::super::value::to_value(&e),
                            TimelineItem::Marker(m) => super::super::value::to_value(&m),
                        }
                    }
                    other => panic!("no type for {other:?}"),
                };
                kinds.insert(format!(
                    "{place}/{kind}{}",
                    if marker { " marker" } else { "" }
                ));
                let carried_no_more = ["propagatedUsername", "commentCount", "likeCount"];
                for (field, v) in item.as_object().unwrap() {
                    if back.get(field) != Some(v) {
                        assert!(
                            kind != "post" && carried_no_more.contains(&field.as_str()),
                            "{place}/{kind}: {field} lost in the reading"
                        );
                    }
                }
            }
        }
        let all = [
            "feed/post",
            "merged/merged",
            "merged/timeline marker",
            "posts/comment",
            "posts/like",
            "posts/post",
            "timelines/timeline",
            "users/follower",
            "users/following",
            "users/post",
            "users/user",
        ];
        assert_eq!(kinds, all.into_iter().map(String::from).collect());
    }

    #[test]
    fn kinds_are_stored_in_type() {
        let ana = Id::parse("id", "u1").unwrap();
        let like = super::super::value::to_value(&Like::new(
            &Id::parse("id", "p1").unwrap(),
            &ana,
            "ana".into(),
        ));
        assert_eq!(like["type"], "like");
        assert_eq!(like["id"], "like-u1");
        assert_eq!(Kind::of(&like), Some(Kind::Like));
        assert_eq!(Kind::of(&json!({"type": "other"})), None);
        assert_eq!(Kind::of(&json!({})), None);
        for k in [Kind::User, Kind::Post, Kind::Comment, Kind::Like] {
            assert_eq!(Kind::of(&json!({ "type": k })), Some(k));
        }
    }
}
