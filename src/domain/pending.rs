//! Counter changes on their way: how a post's `commentCount` and `likeCount` stay exact without
//! ever being recounted in the normal course of things.
//!
//! A comment or like changes its post's counter in a second write (a server-side increment or
//! decrement of the post), after the write that creates, revives or marks the item. Before the
//! first write, or in the same transactional batch, the writer creates a *pending count* item in
//! the post's partition (`type: pendingCount`); once the counter write has landed, it deletes it.
//! A pending count still there means a counter change that may not have landed; only then does
//! the posts projection recount (see `crate::projection::posts::counters::counter_fix`). A writer whose
//! pending count is gone when it comes to delete it (a recount took it, deciding the change was
//! lost) creates a new one, so the recount is made again with its change in place.

use serde_json::{json, Value};

use super::TOMBSTONE_TTL_SECS;

/// The `type` of a pending count.
pub const PENDING_COUNT: &str = "pendingCount";

/// A pending count in post `post_id`'s partition, made at `since` (a `creationDate`). It carries
/// the time to live of a tombstone (deleting a post leaves its pending counts to it).
pub fn pending_count(post_id: &str, since: &str) -> Value {
    json!({
        "id": format!("pending-{}", uuid::Uuid::new_v4().simple()),
        "type": PENDING_COUNT,
        "postId": post_id,
        "creationDate": since,
        "ttl": TOMBSTONE_TTL_SECS,
    })
}

/// A pending count that asks for a recount at the next look: no change is on its way, the
/// counter is only doubted (`handler verify --repair` files one for each post whose counters
/// drifted). Dated at the epoch, so it is past any grace at once.
pub fn recount_owed(post_id: &str) -> Value {
    pending_count(post_id, "1970-01-01T00:00:00.000Z")
}

/// Whether `item` is a pending count.
pub fn is_pending_count(item: &Value) -> bool {
    super::Meta::of(item).kind == Some(PENDING_COUNT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pending_count_lives_in_its_posts_partition_and_expires() {
        let p = pending_count("p1", "2026-01-01T00:00:00.000Z");
        assert!(is_pending_count(&p));
        assert_eq!(p["postId"], "p1");
        assert_eq!(p["creationDate"], "2026-01-01T00:00:00.000Z");
        assert_eq!(p["ttl"], TOMBSTONE_TTL_SECS);
        assert_ne!(p["id"], pending_count("p1", "x")["id"], "ids are unique");
        // Not one of the article's kinds: no query for comments or likes finds it.
        assert_eq!(super::super::Kind::of(&p), None);
        assert!(recount_owed("p1")["creationDate"].as_str().unwrap() < "2000");
    }
}
