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
//! - `mutes-<U>` in U's partition of `users`: the users U has muted, by id alone ([`MuteList`]).
//!
//! Each names the other user (the followee, the follower, the post's author) in [`REF_USER`] and
//! carries that user's name in `userUsername`, so a rename's fan-out finds every copy of a name
//! with one query on [`REF_USER`]. These types are not among the four [`super::Kind`]s of the
//! article's model: the code written for those ignores them.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

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
/// The partition (and `type`) of the merged authors' posts in `feed` ([`MergedPost`]).
pub const MERGED: &str = "merged";

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

/// The `type` of the items follows and timelines add.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FollowKind {
    /// [`FOLLOWING`].
    Following,
    /// [`FOLLOWER`].
    Follower,
    /// [`TIMELINE`]: entries and merge markers.
    Timeline,
}

impl FollowKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FollowKind::Following => FOLLOWING,
            FollowKind::Follower => FOLLOWER,
            FollowKind::Timeline => TIMELINE,
        }
    }

    fn of(kind: &str) -> Option<FollowKind> {
        [
            FollowKind::Following,
            FollowKind::Follower,
            FollowKind::Timeline,
        ]
        .into_iter()
        .find(|k| k.as_str() == kind)
    }
}

/// A follow edge: `following-<X>` in F's partition (F follows X), or its mirror `follower-<F>`
/// in X's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Edge {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: FollowKind,
    /// Whose partition it is in.
    pub user_id: String,
    /// The user at the other end ([`REF_USER`]).
    pub ref_user_id: String,
    /// Their name (blanked in a tombstone).
    #[serde(default)]
    pub user_username: String,
    #[serde(default)]
    pub creation_date: String,
    /// A tombstone ([`DELETED`]): the follow was taken back.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deleted: bool,
}

impl Edge {
    /// An edge of `kind` in `owner`'s partition to `other`, who is called `other_name`, made at
    /// `date`.
    pub fn new(kind: FollowKind, owner: &str, other: &str, other_name: &str, date: &str) -> Edge {
        let id = match kind {
            FollowKind::Following => following_id(other),
            _ => follower_id(other),
        };
        Edge {
            id,
            kind,
            user_id: owner.into(),
            ref_user_id: other.into(),
            user_username: other_name.into(),
            creation_date: date.into(),
            deleted: false,
        }
    }

    /// A stored item as an edge, if it reads as one.
    pub fn read(item: &Value) -> Option<Edge> {
        Edge::deserialize(item).ok()
    }

    /// Whether this is a live edge of `kind`.
    pub fn is_live(&self, kind: FollowKind) -> bool {
        self.kind == kind && !self.deleted
    }

    pub fn to_item(&self) -> Value {
        super::value::to_value(self)
    }
}

/// The marker in `owner`'s timeline saying that an author's posts are not copied into it (the
/// author has more followers than the fan-out limit) but merged in when it is read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MergeMarker {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: FollowKind,
    /// The timeline's owner.
    pub user_id: String,
    /// The merged author.
    pub ref_user_id: String,
    /// Always `true` ([`MERGE`]).
    pub merge: bool,
    /// [`MARKER_DATE`].
    pub creation_date: String,
}

impl MergeMarker {
    pub fn new(owner: &str, author: &str) -> MergeMarker {
        MergeMarker {
            id: marker_id(author),
            kind: FollowKind::Timeline,
            user_id: owner.into(),
            ref_user_id: author.into(),
            merge: true,
            creation_date: MARKER_DATE.into(),
        }
    }

    pub fn to_item(&self) -> Value {
        super::value::to_value(self)
    }
}

/// The entry `timeline-<P>` for post P in a reader's timeline. It holds what rarely changes
/// ([`Post::copy_fields`]: title, short content, author and name, date) and no counts: a like or
/// a comment changes no entry, so its price does not grow with the author's audience; a
/// timeline read takes the counts from the post. Stored as the post's copy fields, with the
/// reader in `userId` and the author in [`REF_USER`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "StoredCopy", into = "StoredCopy")]
pub struct TimelineEntry {
    /// Whose timeline it is in.
    pub owner: String,
    /// The post as the entry shows it ([`Post::as_copied`]).
    pub post: Post,
}

/// A copy of a post as stored: its own identity, and the post's [`Post::copy_fields`].
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StoredCopy {
    id: String,
    #[serde(rename = "type")]
    kind: String,
    user_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ref_user_id: Option<String>,
    #[serde(flatten)]
    fields: Map<String, Value>,
}

impl TryFrom<StoredCopy> for TimelineEntry {
    type Error = String;

    fn try_from(s: StoredCopy) -> Result<Self, String> {
        let marker = s.fields.get(MERGE) == Some(&Value::Bool(true));
        if FollowKind::of(&s.kind) != Some(FollowKind::Timeline) || marker {
            return Err(format!("not a timeline entry (type {:?})", s.kind));
        }
        let author = s.ref_user_id.ok_or("a timeline entry names no author")?;
        let post = Post::from_copy_fields(s.fields, &author).map_err(|e| e.to_string())?;
        Ok(TimelineEntry {
            owner: s.user_id,
            post,
        })
    }
}

impl From<TimelineEntry> for StoredCopy {
    fn from(e: TimelineEntry) -> StoredCopy {
        StoredCopy {
            id: timeline_id(&e.post.post_id),
            kind: TIMELINE.into(),
            user_id: e.owner,
            ref_user_id: Some(e.post.user_id.clone()),
            fields: e.post.copy_fields(),
        }
    }
}

impl TimelineEntry {
    /// The entry for `post` (any form; it is shown as [`Post::as_copied`]) in `owner`'s
    /// timeline.
    pub fn new(owner: &str, post: &Post) -> TimelineEntry {
        TimelineEntry {
            owner: owner.into(),
            post: post.as_copied(),
        }
    }

    pub fn to_item(&self) -> Value {
        super::value::to_value(self)
    }

    /// The entry in `owner`'s timeline holding `content` (what [`entry_content`] made), if it
    /// reads as that.
    pub fn of_content(owner: &str, content: &Value) -> Option<TimelineEntry> {
        let c = StoredContent::deserialize(content).ok()?;
        let post = Post::from_copy_fields(c.fields, &c.ref_user_id).ok()?;
        Some(TimelineEntry {
            owner: owner.into(),
            post,
        })
    }
}

/// [`entry_content`] as stored: the author, and the post's [`Post::copy_fields`].
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct StoredContent {
    ref_user_id: String,
    #[serde(flatten)]
    fields: Map<String, Value>,
}

/// An item of a timeline: an entry or a merge marker.
#[derive(Debug, Clone, PartialEq)]
pub enum TimelineItem {
    Entry(TimelineEntry),
    Marker(MergeMarker),
}

impl TimelineItem {
    /// A stored timeline item as what it is ([`MERGE`] tells a marker), or why it reads as
    /// neither.
    pub fn read(item: &Value) -> Result<TimelineItem, String> {
        if is_marker(item) {
            MergeMarker::deserialize(item)
                .map(TimelineItem::Marker)
                .map_err(|e| e.to_string())
        } else {
            TimelineEntry::deserialize(item)
                .map(TimelineItem::Entry)
                .map_err(|e| e.to_string())
        }
    }
}

/// A merged author's post in the shared partition ([`MERGED`] in `feed`), read together with the
/// others' when a timeline that holds their marker is read: the post's copy fields, with its
/// id and its author in `userId`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "StoredCopy", into = "StoredCopy")]
pub struct MergedPost {
    /// The post as the item shows it ([`Post::as_copied`]).
    pub post: Post,
}

impl TryFrom<StoredCopy> for MergedPost {
    type Error = String;

    fn try_from(s: StoredCopy) -> Result<Self, String> {
        if s.kind != MERGED {
            return Err(format!("not a merged author's post (type {:?})", s.kind));
        }
        let post = Post::from_copy_fields(s.fields, &s.user_id).map_err(|e| e.to_string())?;
        Ok(MergedPost { post })
    }
}

impl From<MergedPost> for StoredCopy {
    fn from(m: MergedPost) -> StoredCopy {
        StoredCopy {
            id: m.post.id.clone(),
            kind: MERGED.into(),
            user_id: m.post.user_id.clone(),
            ref_user_id: None,
            fields: m.post.copy_fields(),
        }
    }
}

impl MergedPost {
    /// The item for `post` (any form; it is shown as [`Post::as_copied`]).
    pub fn new(post: &Post) -> MergedPost {
        MergedPost {
            post: post.as_copied(),
        }
    }

    pub fn to_item(&self) -> Value {
        super::value::to_value(self)
    }
}

/// Whether a timeline item is a merge marker rather than an entry.
pub fn is_marker(item: &Value) -> bool {
    item.get(MERGE) == Some(&Value::Bool(true))
}

/// What every entry of `post` holds, whoever's timeline it is in (the entry without its `id`,
/// `type` and owner): the fields the timeline lane records as fanned out, and compares with a
/// post's copy to tell whether an entry changes.
pub fn entry_content(post: &Post) -> Value {
    content_of(&post.as_copied())
}

fn content_of(shown: &Post) -> Value {
    let mut out = Map::new();
    out.insert(REF_USER.into(), shown.user_id.clone().into());
    out.extend(shown.copy_fields());
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

/// `type` of a user's mute list: written by their requests alone, read with one point read.
pub const MUTES: &str = "mutes";
/// The most users one user may mute: the list stays one small item (about 4 KB of the service's
/// ids), so the point read each filtered read adds stays cheap, and one page of its listing.
pub const MAX_MUTES: usize = 100;

/// User `user_id`'s mute list: whose posts and comments their reads leave out, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MuteList {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub user_id: String,
    pub muted: Vec<String>,
}

impl MuteList {
    pub fn id_of(user_id: &str) -> String {
        format!("{MUTES}-{user_id}")
    }

    /// `user_id`'s list as stored (`item`, when there is one), or an empty one.
    pub fn read(user_id: &str, item: Option<&Value>) -> MuteList {
        let stored = item.and_then(|i| MuteList::deserialize(i).ok());
        stored.unwrap_or_else(|| MuteList {
            id: MuteList::id_of(user_id),
            kind: MUTES.into(),
            user_id: user_id.into(),
            muted: Vec::new(),
        })
    }
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
            description: None,
            content: "c".repeat(300),
            comment_count: 2,
            like_count: 1,
            creation_date: "2026-01-01T00:00:00.000Z".into(),
            updated_at: None,
            bookmark_count: 0,
            tags: Vec::new(),
        };
        let e = TimelineEntry::new("f", &p).to_item();
        assert_eq!(e["userId"], "f", "in the follower's partition");
        assert_eq!(e["id"], "timeline-p1");
        let mut shown = p.summary();
        (shown.comment_count, shown.like_count) = (0, 0);
        let read = TimelineEntry::deserialize(&e).unwrap();
        assert_eq!(read.post, shown, "no counts");
        assert!(e.get("likeCount").is_none() && e.get("commentCount").is_none());
        assert_eq!(
            entry_content(&read.post),
            entry_content(&p),
            "a copy's copy is itself"
        );
        assert_eq!(
            TimelineEntry::of_content("f", &entry_content(&p)),
            Some(TimelineEntry::new("f", &p)),
            "the content recorded makes the entry"
        );
        assert_eq!(Kind::of(&e), None, "not one of the article's kinds");
    }

    fn keys(v: &Value) -> Vec<&str> {
        let mut k: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        k.sort_unstable();
        k
    }

    /// The stored shapes are those earlier releases wrote and read: same properties, no more.
    #[test]
    fn each_item_is_stored_with_the_properties_it_always_had() {
        let p = Post::new(
            &crate::domain::Id::parse("id", "x").unwrap(),
            "xena".into(),
            &crate::domain::Text::title("t").unwrap(),
            &crate::domain::Text::post_content(&"c".repeat(300)).unwrap(),
        );
        // A copy holds every field of the post's short form but its identity and counters,
        // under an identity of its own: what earlier releases wrote, and a field added to `Post`.
        let summary = crate::domain::to_value(&p.summary());
        let copied = |own: &[&'static str]| {
            let post = keys(&summary)
                .into_iter()
                .filter(|k| !["id", "type", "userId"].contains(k) && !Post::COUNTERS.contains(k));
            let mut k: Vec<&str> = post.chain(own.iter().copied()).collect();
            k.sort_unstable();
            k
        };
        let e = TimelineEntry::new("f", &p).to_item();
        assert_eq!(keys(&e), copied(&["id", "type", "userId", "refUserId"]));
        assert_eq!(
            (e["type"].as_str(), e[REF_USER].as_str()),
            (Some(TIMELINE), Some("x"))
        );
        assert_eq!(e["content"].as_str().unwrap().chars().count(), 200);
        let m = MergeMarker::new("f", "x").to_item();
        assert_eq!(
            keys(&m),
            ["creationDate", "id", "merge", "refUserId", "type", "userId"]
        );
        assert_eq!(
            (m["id"].as_str(), m["merge"].as_bool()),
            (Some("timeline-merge-x"), Some(true))
        );
        assert!(is_marker(&m) && !is_marker(&e));
        let edge = Edge::new(FollowKind::Follower, "x", "f", "fay", "d").to_item();
        assert_eq!(
            keys(&edge),
            [
                "creationDate",
                "id",
                "refUserId",
                "type",
                "userId",
                "userUsername"
            ]
        );
        let merged = MergedPost::new(&p).to_item();
        assert_eq!(keys(&merged), copied(&["id", "type", "userId"]));
        assert_eq!(
            (merged["type"].as_str(), merged["userId"].as_str()),
            (Some(MERGED), Some("x"))
        );
        // Each reads back as what it is.
        assert_eq!(
            TimelineItem::read(&e),
            Ok(TimelineItem::Entry(TimelineEntry::new("f", &p)))
        );
        assert_eq!(
            TimelineItem::read(&m),
            Ok(TimelineItem::Marker(MergeMarker::new("f", "x")))
        );
        assert_eq!(
            serde_json::from_value::<MergedPost>(merged).unwrap().post,
            p.as_copied()
        );
        assert!(TimelineItem::read(&edge).is_err(), "an edge is no entry");
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
        let e = Edge::new(FollowKind::Following, "f", "x", "xena", "d").to_item();
        assert_eq!(e["id"], "following-x");
        assert_eq!(e[REF_USER], "x");
        assert_eq!(e["userUsername"], "xena");
        let mirror = Edge::new(FollowKind::Follower, "x", "f", "fay", "d");
        assert_eq!(mirror.to_item()["id"], "follower-f");
        let read = Edge::read(&e).unwrap();
        assert!(read.is_live(FollowKind::Following));
        assert!(!read.is_live(FollowKind::Follower));
    }
}
