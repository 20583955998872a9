//! A change to part of an item, as both stores apply it: the data model's own vocabulary for
//! what a deletion mark or a counter update writes, so that `domain` needs nothing of the store.

use serde_json::Value;

/// One patch operation, with Cosmos semantics (`set` creates or replaces a top-level or nested
/// property; `incr` adds to a number, creating it at the increment when missing).
#[derive(Debug, Clone, PartialEq)]
pub enum PatchOp {
    /// Path like `/commentCount`.
    Set(String, Value),
    Incr(String, i64),
}

impl PatchOp {
    pub fn set(path: &str, value: impl Into<Value>) -> Self {
        PatchOp::Set(path.to_string(), value.into())
    }
    pub fn incr(path: &str, by: i64) -> Self {
        PatchOp::Incr(path.to_string(), by)
    }
}
