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
//!   posts (by `creationDate`, then `id`; see [`super::newest`]). A copy holds the post's
//!   `bookmarkCount` as stored, as the posts projection copies it (the bookmarks part,
//!   `super::bookmarks`, checks that count, and runs first).
//!
//! Posts and their copies are compared as [`Post`]s: every field of the type, and nothing else
//! (system properties and whatever bookkeeping the projections keep on an item are not part of
//! a post), so a field added to `Post` is checked on every copy without more ado.

use serde::Deserialize;
use serde_json::Value;

use crate::domain::{Authored, Kind, Post};
use crate::store::Container;

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

/// The name a post, comment or like should carry, if its author's name is known and differs.
/// `author` is the author's current `username`; `None` when the user item does not exist (then
/// there is nothing to compare with).
pub fn author_drift(item: &Authored, author: Option<&str>) -> Option<Drift> {
    let kind = match item.kind {
        Kind::Post => DriftKind::PostUsername,
        Kind::Comment => DriftKind::CommentUsername,
        Kind::Like => DriftKind::LikeUsername,
        Kind::User => return None,
    };
    let expected = author?;
    let found = item.user_username.as_deref();
    if found == Some(expected) {
        return None;
    }
    let found = found.map(Value::from);
    Some(Drift::new(
        kind,
        Container::Posts,
        &item.post_id,
        &item.id,
        format!(
            "userUsername: {}, expected {expected:?}",
            show(found.as_ref())
        ),
    ))
}

/// The post as it should be: the stored post with its derived fields set from the sources.
/// `author` is `None` when the author's user item does not exist: the name is then kept.
pub fn expected_post(post: &Post, author: Option<&str>, comments: u64, likes: u64) -> Post {
    Post {
        user_username: author.map_or_else(|| post.user_username.clone(), String::from),
        comment_count: comments,
        like_count: likes,
        ..post.clone()
    }
}

/// The counter drift of a post against its counted comments and likes. The counters are judged
/// as `stored` holds them: a post reads a counter below zero as 0, which is not the count.
pub fn count_drift(post: &Post, stored: &Value, comments: u64, likes: u64) -> Vec<Drift> {
    let [c, l, _] = Post::COUNTERS;
    [
        (DriftKind::CommentCount, c, comments),
        (DriftKind::LikeCount, l, likes),
    ]
    .into_iter()
    .filter(|(_, field, n)| stored.get(*field).and_then(Value::as_u64) != Some(*n))
    .map(|(kind, field, n)| {
        Drift::new(
            kind,
            Container::Posts,
            &post.post_id,
            &post.id,
            format!("{field}: {}, expected {n}", show(stored.get(field))),
        )
    })
    .collect()
}

/// The short form of a post as kept in `users` and `feed`.
pub fn short_form(post: &Post) -> Post {
    post.summary()
}

/// The fields in which `found` differs from `expected`, as `field: found, expected x`: every
/// field of a post, as stored.
pub(super) fn differences(found: &Post, expected: &Post) -> Vec<String> {
    let (Value::Object(found), Value::Object(expected)) = (
        crate::domain::to_value(found),
        crate::domain::to_value(expected),
    ) else {
        unreachable!("a post serializes as an object")
    };
    let mut fields: Vec<&String> = expected.keys().collect();
    fields.extend(found.keys().filter(|f| !expected.contains_key(*f)));
    fields
        .into_iter()
        .filter(|f| found.get(*f) != expected.get(*f))
        .map(|f| {
            format!(
                "{f}: {}, expected {}",
                show(found.get(f)),
                show(expected.get(f))
            )
        })
        .collect()
}

/// Drift of a copy (in `users` or `feed`, as stored) against the short form it should hold.
pub fn copy_drift(container: Container, found: Option<&Value>, expected: &Post) -> Option<Drift> {
    let (missing, stale, pk) = match container {
        Container::Feed => (
            DriftKind::FeedMissing,
            DriftKind::FeedStale,
            crate::domain::FEED_PK,
        ),
        _ => (
            DriftKind::CopyMissing,
            DriftKind::CopyStale,
            expected.user_id.as_str(),
        ),
    };
    let id = expected.id.as_str();
    let Some(found) = found else {
        return Some(Drift::new(
            missing,
            container,
            pk,
            id,
            "no copy of the post".into(),
        ));
    };
    let diff = match Post::deserialize(found) {
        Ok(found) => differences(&found, expected),
        Err(e) => vec![format!("does not read as a post: {e}")],
    };
    (!diff.is_empty()).then(|| Drift::new(stale, container, pk, id, diff.join("; ")))
}

/// The author of a stored post, as far as telling whose copies it has goes.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Owner {
    pub user_id: String,
}

/// A copy in `users` partition `user_id` whose post is `post` (`None`: no such post; read as
/// its [`Owner`] alone, so a post that does not read whole still keeps its copies) is extra
/// unless the post exists and is that user's.
pub fn extra_copy(user_id: &str, copy_id: &str, post: Option<&Value>) -> Option<Drift> {
    let owner = post.and_then(|p| Owner::deserialize(p).ok());
    let owner = owner.as_ref().map(|o| o.user_id.as_str());
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

    fn stored(id: &str, name: &str, date: &str, comments: u64, likes: u64) -> Value {
        json!({"id": id, "type": "post", "postId": id, "userId": "u1", "userUsername": name,
               "title": "t", "content": "x".repeat(300), "commentCount": comments,
               "likeCount": likes, "creationDate": date, "_etag": "\"e\"", "_ts": 1})
    }

    fn post(id: &str, name: &str, date: &str, comments: u64, likes: u64) -> Post {
        serde_json::from_value(stored(id, name, date, comments, likes)).unwrap()
    }

    fn authored(v: Value) -> Authored {
        serde_json::from_value(v).unwrap()
    }

    fn date(i: usize) -> String {
        format!("2026-01-01T00:{:02}:{:02}.000Z", i / 60, i % 60)
    }

    #[test]
    fn names_are_compared_with_the_authors_current_name() {
        let c = authored(
            json!({"id":"c1","type":"comment","postId":"p1","userId":"u2","userUsername":"old"}),
        );
        let d = author_drift(&c, Some("new")).unwrap();
        assert_eq!(d.kind, DriftKind::CommentUsername);
        assert_eq!(d.target(), "posts/p1/c1");
        assert_eq!(d.detail, r#"userUsername: "old", expected "new""#);
        assert_eq!(author_drift(&c, Some("old")), None);
        assert_eq!(author_drift(&c, None), None, "unknown author: no verdict");
        let like = authored(json!({"id":"like-u2","type":"like","postId":"p1","userId":"u2"}));
        let d = author_drift(&like, Some("x")).unwrap();
        assert_eq!(d.kind, DriftKind::LikeUsername);
        assert_eq!(d.detail, r#"userUsername: missing, expected "x""#);
    }

    #[test]
    fn counters_are_compared_with_the_counted_items() {
        let s = stored("p1", "ana", &date(1), 2, 7);
        let p = post("p1", "ana", &date(1), 2, 7);
        let d = count_drift(&p, &s, 2, 1);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].kind, DriftKind::LikeCount);
        assert_eq!(d[0].detail, "likeCount: 7, expected 1");
        assert!(count_drift(&p, &s, 2, 7).is_empty());
        // A counter stored below zero reads as 0 on the post, but is not the count.
        let mut below = s.clone();
        below["likeCount"] = json!(-1);
        let d = count_drift(&p, &below, 2, 0);
        assert_eq!(d[0].detail, "likeCount: -1, expected 0");
    }

    #[test]
    fn a_copy_is_the_short_form_of_the_corrected_post() {
        let p = post("p1", "old", &date(1), 0, 7);
        let expected = expected_post(&p, Some("new"), 3, 1);
        let copy = short_form(&expected);
        assert_eq!(copy.user_username, "new");
        assert_eq!((copy.comment_count, copy.like_count), (3, 1));
        assert_eq!(copy.content.chars().count(), 200);
        // System properties and bookkeeping on the stored copy are not drift.
        let mut found = crate::domain::to_value(&copy);
        found["_etag"] = json!("\"x\"");
        found["renameVersion"] = json!(4);
        assert_eq!(copy_drift(Container::Users, Some(&found), &copy), None);
        // A stale title is.
        found["title"] = json!("old title");
        let d = copy_drift(Container::Users, Some(&found), &copy).unwrap();
        assert_eq!(d.kind, DriftKind::CopyStale);
        assert_eq!(d.target(), "users/u1/p1");
        assert_eq!(d.detail, r#"title: "old title", expected "t""#);
        // So is a copy that does not read as a post, and a field the short form has not.
        found["title"] = json!(7);
        let d = copy_drift(Container::Users, Some(&found), &copy).unwrap();
        assert!(
            d.detail.starts_with("does not read as a post"),
            "{}",
            d.detail
        );
        found["title"] = json!("t");
        found["updatedAt"] = json!("2026-02-01T00:00:00.000Z");
        let d = copy_drift(Container::Users, Some(&found), &copy).unwrap();
        assert_eq!(
            d.detail,
            r#"updatedAt: "2026-02-01T00:00:00.000Z", expected missing"#
        );
        let d = copy_drift(Container::Feed, None, &copy).unwrap();
        assert_eq!(
            (d.kind, d.target()),
            (DriftKind::FeedMissing, "feed/post/p1".into())
        );
        // Unknown author: the stored name stands.
        assert_eq!(expected_post(&p, None, 0, 0).user_username, "old");
    }

    #[test]
    fn a_copy_without_its_post_is_extra() {
        let p = stored("p1", "ana", &date(1), 0, 0);
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
