//! Where the store keeps what: the `leases` item recording that what an earlier release kept
//! elsewhere has moved, and the record a new store starts with.

use serde_json::Value;

/// The `leases` item recording where the store keeps what an earlier release kept elsewhere:
/// `{ "id": LAYOUT_ID, TIMELINES_MOVED: true }` once no timeline item is left in `users` (a new
/// store records it when it creates its containers; an existing one once the timeline lane has
/// moved them, `crate::projection::upgrade::timelines`, which reads it).
pub const LAYOUT_ID: &str = "store.layout";
/// The field of [`LAYOUT_ID`] saying that timeline items live in `timelines` only.
pub const TIMELINES_MOVED: &str = "timelinesMoved";

/// The layout record of a store created by this release: nothing to move.
pub fn new_store_layout() -> Value {
    serde_json::json!({ "id": LAYOUT_ID, TIMELINES_MOVED: true })
}
