//! What every derived value should be, computed from the source of truth alone, and how a stored
//! value differs from it. Pure functions: the store traversal is in [`super::verify`].
//!
//! The sources are the user items in `users` (who is called what), and in `posts` each post's
//! own fields (`userId`, `title`, `content`, `creationDate`) and which comments and likes exist.
//! Everything else is derived:
//! - `userUsername` on posts, comments and likes is the author's current `username`;
//! - `commentCount` / `likeCount` on a post are the numbers of its comments and likes;
//! - `users` holds, in the author's partition, the short form of each of their posts as it should
//!   be (names and counts corrected); `feed` holds exactly the short forms of the 100 newest
//!   posts (by `creationDate`, then `id`; see [`super::newest`]).
//!
//! Copies are compared on the public post fields only ([`POST_FIELDS`]): system properties and
//! whatever bookkeeping the projections keep on an item are not part of what a client sees.

use serde_json::{Map, Value};

use crate::domain::{short_content, Kind};
use crate::store::Container;

/// The fields of a post (and of its short form) that a client sees.
pub const POST_FIELDS: [&str; 10] = [
    "id",
    Kind::FIELD,
    "postId",
    "userId",
    "userUsername",
    "title",
    "content",
    "commentCount",
    "likeCount",
    "creationDate",
];

/// The kinds of drift, in report order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DriftKind {
    /// A post's `userUsername` is not its author's name.
    PostUsername,
    CommentUsername,
    LikeUsername,
    /// A post's `commentCount` is not the number of its comments.
    CommentCount,
    LikeCount,
    /// A post has no short-form copy in its author's partition of `users`.
    CopyMissing,
    /// The copy differs from the short form of the post as it should be.
    CopyStale,
    /// A copy in `users` whose post does not exist (or belongs to someone else).
    CopyExtra,
    /// One of the newest posts is not in `feed`.
    FeedMissing,
    FeedStale,
    /// An entry in `feed` that is not one of the newest posts.
    FeedExtra,
}

impl DriftKind {
    pub const ALL: [DriftKind; 11] = [
        DriftKind::PostUsername,
        DriftKind::CommentUsername,
        DriftKind::LikeUsername,
        DriftKind::CommentCount,
        DriftKind::LikeCount,
        DriftKind::CopyMissing,
        DriftKind::CopyStale,
        DriftKind::CopyExtra,
        DriftKind::FeedMissing,
        DriftKind::FeedStale,
        DriftKind::FeedExtra,
    ];

    pub fn name(self) -> &'static str {
        match self {
            DriftKind::PostUsername => "post username",
            DriftKind::CommentUsername => "comment username",
            DriftKind::LikeUsername => "like username",
            DriftKind::CommentCount => "comment count",
            DriftKind::LikeCount => "like count",
            DriftKind::CopyMissing => "post copy missing",
            DriftKind::CopyStale => "post copy stale",
            DriftKind::CopyExtra => "post copy extra",
            DriftKind::FeedMissing => "feed entry missing",
            DriftKind::FeedStale => "feed entry stale",
            DriftKind::FeedExtra => "feed entry extra",
        }
    }
}

/// One derived item that is not what the sources say it should be.
#[derive(Debug, Clone, PartialEq)]
pub struct Drift {
    pub kind: DriftKind,
    pub container: Container,
    pub pk: String,
    pub id: String,
    /// What differs, e.g. `likeCount: 7, expected 1`.
    pub detail: String,
}

impl Drift {
    pub(super) fn new(
        kind: DriftKind,
        container: Container,
        pk: &str,
        id: &str,
        detail: String,
    ) -> Self {
        Drift {
            kind,
            container,
            pk: pk.into(),
            id: id.into(),
            detail,
        }
    }

    /// `container/pk/id`.
    pub fn target(&self) -> String {
        format!("{}/{}/{}", self.container.name(), self.pk, self.id)
    }
}

pub fn str_field<'a>(v: &'a Value, f: &str) -> Option<&'a str> {
    v.get(f).and_then(Value::as_str)
}

pub(super) fn show(v: Option<&Value>) -> String {
    match v {
        None => "missing".into(),
        Some(Value::String(s)) if s.chars().count() > 40 => {
            format!(
                "{:?}",
                format!("{}…", s.chars().take(40).collect::<String>())
            )
        }
        Some(v) => v.to_string(),
    }
}

/// The name a comment or like should carry, if its author's name is known and differs.
/// `author` is the author's current `username`; `None` when the user item does not exist (then
/// there is nothing to compare with).
pub fn author_drift(item: &Value, author: Option<&str>) -> Option<Drift> {
    let kind = match Kind::of(item)? {
        Kind::Post => DriftKind::PostUsername,
        Kind::Comment => DriftKind::CommentUsername,
        Kind::Like => DriftKind::LikeUsername,
        Kind::User => return None,
    };
    let expected = author?;
    let found = item.get("userUsername");
    if found.and_then(Value::as_str) == Some(expected) {
        return None;
    }
    Some(Drift::new(
        kind,
        Container::Posts,
        str_field(item, "postId")?,
        str_field(item, "id")?,
        format!("userUsername: {}, expected {expected:?}", show(found)),
    ))
}

/// The post as it should be: the stored post with its derived fields set from the sources.
/// `author` is `None` when the author's user item does not exist: the name is then kept.
pub fn expected_post(post: &Value, author: Option<&str>, comments: u64, likes: u64) -> Value {
    let mut p = post.clone();
    if let Some(o) = p.as_object_mut() {
        if let Some(name) = author {
            o.insert("userUsername".into(), name.into());
        }
        o.insert("commentCount".into(), comments.into());
        o.insert("likeCount".into(), likes.into());
    }
    p
}

/// The counter drift of a stored post against its counted comments and likes.
pub fn count_drift(post: &Value, comments: u64, likes: u64) -> Vec<Drift> {
    let (Some(pk), Some(id)) = (str_field(post, "postId"), str_field(post, "id")) else {
        return Vec::new();
    };
    [
        (DriftKind::CommentCount, "commentCount", comments),
        (DriftKind::LikeCount, "likeCount", likes),
    ]
    .into_iter()
    .filter(|(_, field, n)| post.get(*field).and_then(Value::as_u64) != Some(*n))
    .map(|(kind, field, n)| {
        Drift::new(
            kind,
            Container::Posts,
            pk,
            id,
            format!("{field}: {}, expected {n}", show(post.get(field))),
        )
    })
    .collect()
}

/// The short form of a post as kept in `users` and `feed`: its public fields, `content` cut.
pub fn short_form(post: &Value) -> Value {
    let mut out = Map::new();
    for f in POST_FIELDS {
        if let Some(v) = post.get(f) {
            out.insert(f.into(), v.clone());
        }
    }
    if let Some(Value::String(c)) = out.get("content") {
        let cut = short_content(c);
        out.insert("content".into(), cut.into());
    }
    Value::Object(out)
}

/// The public fields in which `found` differs from `expected`, as `field: found, expected x`.
fn differences(found: &Value, expected: &Value) -> Vec<String> {
    POST_FIELDS
        .iter()
        .filter(|f| found.get(**f) != expected.get(**f))
        .map(|f| {
            format!(
                "{f}: {}, expected {}",
                show(found.get(*f)),
                show(expected.get(*f))
            )
        })
        .collect()
}

/// Drift of a copy (in `users` or `feed`) against the short form it should hold.
pub fn copy_drift(container: Container, found: Option<&Value>, expected: &Value) -> Option<Drift> {
    let (missing, stale, pk) = match container {
        Container::Feed => (
            DriftKind::FeedMissing,
            DriftKind::FeedStale,
            crate::domain::FEED_PK,
        ),
        _ => (
            DriftKind::CopyMissing,
            DriftKind::CopyStale,
            str_field(expected, "userId")?,
        ),
    };
    let id = str_field(expected, "id")?;
    match found {
        None => Some(Drift::new(
            missing,
            container,
            pk,
            id,
            "no copy of the post".into(),
        )),
        Some(found) => {
            let diff = differences(found, expected);
            (!diff.is_empty()).then(|| Drift::new(stale, container, pk, id, diff.join("; ")))
        }
    }
}

/// A copy in `users` partition `user_id` whose post is `post` (`None`: no such post) is extra
/// unless the post exists and is that user's.
pub fn extra_copy(user_id: &str, copy_id: &str, post: Option<&Value>) -> Option<Drift> {
    let owner = post.and_then(|p| str_field(p, "userId"));
    if owner == Some(user_id) {
        return None;
    }
    let detail = match owner {
        None => "its post does not exist".to_string(),
        Some(other) => format!("its post belongs to user {other:?}"),
    };
    Some(Drift::new(
        DriftKind::CopyExtra,
        Container::Users,
        user_id,
        copy_id,
        detail,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn post(id: &str, name: &str, date: &str, comments: u64, likes: u64) -> Value {
        json!({"id": id, "type": "post", "postId": id, "userId": "u1", "userUsername": name,
               "title": "t", "content": "x".repeat(300), "commentCount": comments,
               "likeCount": likes, "creationDate": date, "_etag": "\"e\"", "_ts": 1})
    }

    fn date(i: usize) -> String {
        format!("2026-01-01T00:{:02}:{:02}.000Z", i / 60, i % 60)
    }

    #[test]
    fn names_are_compared_with_the_authors_current_name() {
        let c =
            json!({"id":"c1","type":"comment","postId":"p1","userId":"u2","userUsername":"old"});
        let d = author_drift(&c, Some("new")).unwrap();
        assert_eq!(d.kind, DriftKind::CommentUsername);
        assert_eq!(d.target(), "posts/p1/c1");
        assert_eq!(d.detail, r#"userUsername: "old", expected "new""#);
        assert_eq!(author_drift(&c, Some("old")), None);
        assert_eq!(author_drift(&c, None), None, "unknown author: no verdict");
        let like = json!({"id":"like-u2","type":"like","postId":"p1","userId":"u2"});
        assert_eq!(
            author_drift(&like, Some("x")).unwrap().kind,
            DriftKind::LikeUsername
        );
    }

    #[test]
    fn counters_are_compared_with_the_counted_items() {
        let p = post("p1", "ana", &date(1), 2, 7);
        let d = count_drift(&p, 2, 1);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].kind, DriftKind::LikeCount);
        assert_eq!(d[0].detail, "likeCount: 7, expected 1");
        assert!(count_drift(&p, 2, 7).is_empty());
        let no_counter = json!({"id":"p2","type":"post","postId":"p2"});
        assert_eq!(count_drift(&no_counter, 0, 0).len(), 2);
    }

    #[test]
    fn a_copy_is_the_short_form_of_the_corrected_post() {
        let stored = post("p1", "old", &date(1), 0, 7);
        let expected = expected_post(&stored, Some("new"), 3, 1);
        let copy = short_form(&expected);
        assert_eq!(copy["userUsername"], "new");
        assert_eq!(
            (copy["commentCount"].clone(), copy["likeCount"].clone()),
            (json!(3), json!(1))
        );
        assert_eq!(copy["content"].as_str().unwrap().chars().count(), 200);
        assert!(copy.get("_etag").is_none());
        // System properties and bookkeeping on the stored copy are not drift.
        let mut found = copy.clone();
        found["_etag"] = json!("\"x\"");
        found["renameVersion"] = json!(4);
        assert_eq!(copy_drift(Container::Users, Some(&found), &copy), None);
        // A stale title is.
        found["title"] = json!("old title");
        let d = copy_drift(Container::Users, Some(&found), &copy).unwrap();
        assert_eq!(d.kind, DriftKind::CopyStale);
        assert_eq!(d.target(), "users/u1/p1");
        assert_eq!(d.detail, r#"title: "old title", expected "t""#);
        let d = copy_drift(Container::Feed, None, &copy).unwrap();
        assert_eq!(
            (d.kind, d.target()),
            (DriftKind::FeedMissing, "feed/post/p1".into())
        );
        // Unknown author: the stored name stands.
        assert_eq!(expected_post(&stored, None, 0, 0)["userUsername"], "old");
    }

    #[test]
    fn a_copy_without_its_post_is_extra() {
        let p = post("p1", "ana", &date(1), 0, 0);
        assert_eq!(extra_copy("u1", "p1", Some(&p)), None);
        assert_eq!(
            extra_copy("u1", "p1", None).unwrap().kind,
            DriftKind::CopyExtra
        );
        assert!(extra_copy("u9", "p1", Some(&p))
            .unwrap()
            .detail
            .contains("u1"));
    }
}
