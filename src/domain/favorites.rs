//! A like seen from its user's side: the [`Favorite`] edge in the liker's partition of `users`,
//! so that "the posts U likes" is one query in one partition (the like itself lives in the
//! post's partition). Written and removed by the like's own request, so the liker's list shows
//! it at once.

use serde::{Deserialize, Serialize};

use super::clock::now;

/// `type` of a favorite edge.
pub const FAVORITE: &str = "favorite";

/// User `user_id` likes post `post_id` (since `creation_date`, the order of their list).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Favorite {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub user_id: String,
    pub post_id: String,
    pub creation_date: String,
}

impl Favorite {
    pub fn new(user_id: &str, post_id: &str) -> Favorite {
        Favorite {
            id: Favorite::id_of(post_id),
            kind: FAVORITE.into(),
            user_id: user_id.into(),
            post_id: post_id.into(),
            creation_date: now(),
        }
    }

    /// The id of a user's favorite edge of `post_id` (one per post, in the user's partition).
    pub fn id_of(post_id: &str) -> String {
        format!("{FAVORITE}-{post_id}")
    }
}
