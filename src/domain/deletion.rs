//! Soft deletes: how a deleted item looks while the change feed carries its deletion.
//!
//! Cosmos DB's change feed (latest-version mode) does not report deletions, so nothing is
//! deleted outright: a delete *marks* the item (`deleted: true`) and gives it a time to live.
//! The marked item (a tombstone) travels through the change feed like any other change, the
//! projections treat it as the item's deletion, and the store removes it when its time to live
//! has passed. Every read hides tombstones in the same store operation (`Query::live`, and point
//! reads check [`is_deleted`]).
//!
//! A tombstone keeps only what the projections need to find the item's consequences (`id`,
//! `type`, the partition key, `userId`, `postId`, `creationDate`): its texts (a post's tags
//! too) and the author's name are blanked at once, so an erased account's words and name are gone from the first
//! moment, not only after the time to live.

use serde_json::Value;

use super::Kind;
use super::PatchOp;

/// The property marking an item deleted (`true`).
pub const DELETED: &str = "deleted";

/// How long a tombstone stays, in seconds, before the store removes it: long enough for every
/// change-feed reader to see it even after an outage of days (the Functions triggers resume from
/// their leases), short enough not to keep dead items around.
pub const TOMBSTONE_TTL_SECS: i64 = 7 * 24 * 3600;

/// Whether an item is a tombstone.
pub fn is_deleted(item: &Value) -> bool {
    item.get(DELETED) == Some(&Value::Bool(true))
}

/// Whether a point read found a live item of this kind.
pub fn is_live(item: &Value, kind: Kind) -> bool {
    Kind::of(item) == Some(kind) && !is_deleted(item)
}

/// The texts an item of `kind` carries, blanked in its tombstone.
fn texts(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::User => &["username"],
        Kind::Post => &["title", "content", "userUsername"],
        Kind::Comment => &["content", "userUsername"],
        Kind::Like => &["userUsername"],
    }
}

/// The server-side patch that turns an item of `kind` into its tombstone.
pub fn tombstone_ops(kind: Kind) -> Vec<PatchOp> {
    let mut ops = vec![
        PatchOp::set(&format!("/{DELETED}"), true),
        PatchOp::set("/ttl", TOMBSTONE_TTL_SECS),
    ];
    ops.extend(
        texts(kind)
            .iter()
            .map(|f| PatchOp::set(&format!("/{f}"), "")),
    );
    if kind == Kind::Post {
        // A post's tags are words of its author's too: emptied, not blanked (a list stays one).
        ops.push(PatchOp::set("/tags", Value::Array(Vec::new())));
    }
    ops
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_posts_tombstone_has_no_tags() {
        let ops = tombstone_ops(Kind::Post);
        assert!(ops.contains(&PatchOp::set("/tags", Value::Array(Vec::new()))));
        assert!(ops.contains(&PatchOp::set("/title", "")));
    }

    #[test]
    fn a_tombstone_is_marked_expiring_and_blank() {
        let ops = tombstone_ops(Kind::Comment);
        assert_eq!(
            ops,
            vec![
                PatchOp::set("/deleted", true),
                PatchOp::set("/ttl", TOMBSTONE_TTL_SECS),
                PatchOp::set("/content", ""),
                PatchOp::set("/userUsername", ""),
            ]
        );
        assert!(is_deleted(&json!({"deleted": true})));
        assert!(!is_deleted(&json!({"deleted": false})));
        assert!(!is_deleted(&json!({})));
        assert!(is_live(&json!({"type": "post"}), Kind::Post));
        assert!(!is_live(
            &json!({"type": "post", "deleted": true}),
            Kind::Post
        ));
        assert!(!is_live(&json!({"type": "comment"}), Kind::Post));
    }
}
