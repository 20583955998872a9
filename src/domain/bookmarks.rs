//! Bookmarks' two kinds of item: a user's [`Bookmark`] of a post, in the post's partition of
//! `posts`, and the [`Bookmarked`] copy of the post their list shows, in their partition of
//! `users` (kept by `crate::projection::bookmarks`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::clock::now;
use super::{is_deleted, Post};

/// `type` of a bookmark (in `posts`) and of a bookmarked post's copy (in `users`).
pub const BOOKMARK: &str = "bookmark";
pub const BOOKMARKED: &str = "bookmarked";

/// User `user_id`'s bookmark of post `post_id`, dated when made (the order of the list).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Bookmark {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub post_id: String,
    pub user_id: String,
    pub creation_date: String,
}

impl Bookmark {
    pub fn new(post_id: &str, user_id: &str) -> Bookmark {
        Bookmark {
            id: Bookmark::id_of(user_id),
            kind: BOOKMARK.into(),
            post_id: post_id.into(),
            user_id: user_id.into(),
            creation_date: now(),
        }
    }

    /// The id of `user_id`'s bookmark of a post (a repeat is the same item).
    pub fn id_of(user_id: &str) -> String {
        format!("{BOOKMARK}-{user_id}")
    }

    /// A stored item as a live bookmark, if it is one.
    pub fn live(item: &Value) -> Option<Bookmark> {
        let b = Bookmark::deserialize(item)
            .ok()
            .filter(|_| !is_deleted(item))?;
        (b.kind == BOOKMARK).then_some(b)
    }
}

/// The copy of a bookmarked post in its bookmarker's partition: the post as a copy outside its
/// author's lists shows it ([`Post::as_copied`]), without its counters: a like, a comment or
/// another bookmark rewrites no bookmarker's copy, and the list reads the counts from the post
/// when it shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Bookmarked {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    /// The bookmarker, and the bookmark's date.
    pub user_id: String,
    pub post_id: String,
    pub creation_date: String,
    pub post: Post,
}

impl Bookmarked {
    pub fn id_of(post_id: &str) -> String {
        format!("{BOOKMARKED}-{post_id}")
    }

    /// `owner`'s copy of `post` (any form), bookmarked at `date`.
    pub fn new(owner: &str, date: &str, post: &Post) -> Bookmarked {
        let post = post.as_copied();
        Bookmarked {
            id: Bookmarked::id_of(&post.post_id),
            kind: BOOKMARKED.into(),
            user_id: owner.into(),
            post_id: post.post_id.clone(),
            creation_date: date.into(),
            post,
        }
    }

    /// The copy as it would be written today: the counts a copy written by an earlier release
    /// holds are not part of it (they are read from the post when shown).
    pub fn as_written(&self) -> Bookmarked {
        Bookmarked {
            post: self.post.as_copied(),
            ..self.clone()
        }
    }
}
