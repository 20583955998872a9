//! Follows and timelines: the items they add, each in the partition of the user whose list it
//! belongs to, so that every list is one single-partition query.
//!
//! - `following-<X>` (`type: following`) in F's partition of `users`: F follows X. The fact,
//!   written by the request; its deletion is a mark, so the change feed carries it.
//! - `follower-<F>` (`type: follower`) in X's partition of `users`: its mirror, kept by the
//!   projection.
//! - `timeline-<P>` (`type: timeline`) in F's partition of `timelines`: the short form of post P
//!   by someone F follows, kept by the timeline lane; and `timeline-merge-<X>`, the marker of an
//!   author whose posts are merged in when the timeline is read. `timelines` has no change-feed
//!   follower: a fan-out's entries stay out of the users feed.
//!
//! Each names the other user (the followee, the follower, the post's author) in [`REF_USER`] and
//! carries that user's name in `userUsername`, so a rename's fan-out finds every copy of a name
//! with one query on [`REF_USER`]. These types are not among the four [`super::Kind`]s of the
//! article's model: the code written for those ignores them.

use serde_json::{json, Value};

use super::PatchOp;
use super::{Post, DELETED, TOMBSTONE_TTL_SECS};

/// `type` of the edge in the follower's partition.
pub const FOLLOWING: &str = "following";
/// `type` of the mirror edge in the followee's partition.
pub const FOLLOWER: &str = "follower";
/// `type` of a timeline entry.
pub const TIMELINE: &str = "timeline";
/// The property naming the user an edge or entry refers to (the other end of an edge, the
/// author of a timeline entry's post).
pub const REF_USER: &str = "refUserId";
/// A timeline shows this many posts at most, like the feed.
pub const TIMELINE_SIZE: usize = super::FEED_SIZE;
/// A timeline keeps this many newest entries, as the feed keeps [`super::FEED_KEEP`]: the margin
/// over [`TIMELINE_SIZE`] means a few deleted posts do not shrink what a read shows.
pub const TIMELINE_KEEP: usize = TIMELINE_SIZE + 20;
/// The most users one user may follow: a follow beyond is refused, so one query of a timeline
/// reads every merge marker it holds along with its entries.
pub const MAX_FOLLOWING: usize = 1_000;
/// About one copy in this many written into a timeline trims it (see [`trims`]).
pub const TRIM_EVERY: u64 = 16;

/// Whether writing post `post_id`'s copy into `owner`'s timeline trims that timeline to its
/// [`TIMELINE_KEEP`] newest entries: for one (timeline, post) pair in [`TRIM_EVERY`], by a hash
/// of the two ids (FNV-1a, the same in every process and release). So each timeline is trimmed
/// about every [`TRIM_EVERY`]-th copy it receives, whoever the authors, the cost is spread over
/// the followers of a post rather than falling on one post, and a redelivered copy decides the
/// same way.
pub fn trims(owner: &str, post_id: &str) -> bool {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in owner.bytes().chain([0]).chain(post_id.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h.is_multiple_of(TRIM_EVERY)
}

pub fn following_id(followee: &str) -> String {
    format!("{FOLLOWING}-{followee}")
}

pub fn follower_id(follower: &str) -> String {
    format!("{FOLLOWER}-{follower}")
}

pub fn timeline_id(post_id: &str) -> String {
    format!("{TIMELINE}-{post_id}")
}

/// The property that tells a merge marker from a timeline entry (`true` on markers only).
pub const MERGE: &str = "merge";

/// The `creationDate` of a merge marker: later than any post's, so that a timeline query, newest
/// first, finds the markers before the entries.
pub const MARKER_DATE: &str = "9999-12-31T23:59:59.999Z";

pub fn marker_id(author: &str) -> String {
    format!("{TIMELINE}-merge-{author}")
}

/// The marker in `owner`'s timeline saying that `author`'s posts are not copied into it (the
/// author has more followers than the fan-out limit) but merged in when it is read.
pub fn merge_marker(owner: &str, author: &str) -> Value {
    json!({
        "id": marker_id(author),
        "type": TIMELINE,
        "userId": owner,
        REF_USER: author,
        MERGE: true,
        "creationDate": MARKER_DATE,
    })
}

/// Whether a timeline item is a merge marker rather than an entry.
pub fn is_marker(item: &Value) -> bool {
    item.get(MERGE) == Some(&Value::Bool(true))
}

/// An edge of `kind` ([`FOLLOWING`] or [`FOLLOWER`]) in `owner`'s partition to `other`, who is
/// called `other_name`, made at `date`.
pub fn edge(kind: &str, owner: &str, other: &str, other_name: &str, date: &str) -> Value {
    let id = if kind == FOLLOWING {
        following_id(other)
    } else {
        follower_id(other)
    };
    json!({
        "id": id,
        "type": kind,
        "userId": owner,
        REF_USER: other,
        "userUsername": other_name,
        "creationDate": date,
    })
}

/// The entry for `post` (any form; its content is cut to the short form) in `owner`'s timeline.
/// It holds what rarely changes (title, short content, author and name, date) and no counts:
/// a like or a comment changes no entry, so its price does not grow with the author's audience;
/// a timeline read takes the counts from the post.
pub fn timeline_entry(owner: &str, post: &Post) -> Value {
    let mut entry = entry_content(post);
    let o = entry.as_object_mut().expect("an object");
    o.insert("id".into(), timeline_id(&post.id).into());
    o.insert("type".into(), TIMELINE.into());
    o.insert("userId".into(), owner.into());
    entry
}

/// What every entry of `post` holds, whoever's timeline it is in: the fields the timeline lane
/// records as fanned out, and compares with a post's copy to tell whether an entry changes.
pub fn entry_content(post: &Post) -> Value {
    let s = post.summary();
    json!({
        REF_USER: s.user_id,
        "postId": s.post_id,
        "userUsername": s.user_username,
        "title": s.title,
        "content": s.content,
        "creationDate": s.creation_date,
    })
}

/// [`entry_content`] of a stored entry (whatever else it holds, such as the counts entries
/// written by earlier releases carried).
pub fn stored_entry_content(entry: &Value) -> Value {
    let mut out = serde_json::Map::new();
    for f in [
        REF_USER,
        "postId",
        "userUsername",
        "title",
        "content",
        "creationDate",
    ] {
        if let Some(v) = entry.get(f) {
            out.insert(f.into(), v.clone());
        }
    }
    Value::Object(out)
}

/// The patch that marks an edge deleted: the other user's name is blanked at once, as every
/// tombstone's texts are.
pub fn edge_tombstone_ops() -> Vec<PatchOp> {
    vec![
        PatchOp::set(&format!("/{DELETED}"), true),
        PatchOp::set("/ttl", TOMBSTONE_TTL_SECS),
        PatchOp::set("/userUsername", ""),
    ]
}

/// Whether `item` is a live item of this follow `kind`.
pub fn is_live_of(item: &Value, kind: &str) -> bool {
    item.get("type").and_then(Value::as_str) == Some(kind) && !super::is_deleted(item)
}

/// The post an entry copies. An entry holds no counts (see [`timeline_entry`]): they read as 0
/// here, and a timeline read replaces them with the post's.
pub fn entry_post(entry: &Value) -> Option<Post> {
    serde_json::from_value(json!({
        "id": entry.get("postId")?,
        "type": "post",
        "postId": entry.get("postId")?,
        "userId": entry.get(REF_USER)?,
        "userUsername": entry.get("userUsername")?,
        "title": entry.get("title")?,
        "content": entry.get("content")?,
        "commentCount": 0,
        "likeCount": 0,
        "creationDate": entry.get("creationDate")?,
    }))
    .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Kind, Post};

    #[test]
    fn an_entry_shows_the_post_as_its_author_wrote_it_in_short_form() {
        let p = Post {
            id: "p1".into(),
            kind: Kind::Post,
            post_id: "p1".into(),
            user_id: "x".into(),
            user_username: "xena".into(),
            title: "t".into(),
            content: "c".repeat(300),
            comment_count: 2,
            like_count: 1,
            creation_date: "2026-01-01T00:00:00.000Z".into(),
            updated_at: None,
        };
        let e = timeline_entry("f", &p);
        assert_eq!(e["userId"], "f", "in the follower's partition");
        assert_eq!(e["id"], "timeline-p1");
        let mut shown = p.summary();
        (shown.comment_count, shown.like_count) = (0, 0);
        assert_eq!(entry_post(&e), Some(shown), "no counts");
        assert!(e.get("likeCount").is_none() && e.get("commentCount").is_none());
        assert_eq!(stored_entry_content(&e), entry_content(&p));
        assert_eq!(Kind::of(&e), None, "not one of the article's kinds");
    }

    #[test]
    fn about_one_copy_in_trim_every_trims() {
        let n = 16_000;
        let trimming = (0..n).filter(|i| trims("f", &format!("p{i}"))).count() as u64;
        let expected = n / TRIM_EVERY;
        assert!(
            trimming > expected * 3 / 4 && trimming < expected * 5 / 4,
            "{trimming}"
        );
        assert_eq!(trims("f", "p1"), trims("f", "p1"), "the same every time");
        assert!(
            (0..64).any(|i| trims(&format!("f{i}"), "p") != trims("f0", "p")),
            "followers of one post differ"
        );
    }

    #[test]
    fn edges_name_the_other_user() {
        let e = edge(FOLLOWING, "f", "x", "xena", "d");
        assert_eq!(e["id"], "following-x");
        assert_eq!(e[REF_USER], "x");
        assert_eq!(e["userUsername"], "xena");
        assert_eq!(edge(FOLLOWER, "x", "f", "fay", "d")["id"], "follower-f");
        assert!(is_live_of(&e, FOLLOWING));
        assert!(!is_live_of(&e, FOLLOWER));
    }
}
