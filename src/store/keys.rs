//! The checks every store makes of an item it is given to write: its partition key property
//! matches the key it is written under, and it has a string `id`.

use serde_json::Value;

use super::{Container, StoreError, StoreResult};

/// The error a store should report when an item's partition key property does not match `pk`.
pub(super) fn check_partition_key(c: Container, pk: &str, item: &Value) -> StoreResult<()> {
    let field = c.partition_key_field();
    match item.get(field).and_then(Value::as_str) {
        Some(v) if v == pk => Ok(()),
        _ => Err(StoreError::BadRequest(format!(
            "item property `{field}` must equal the partition key"
        ))),
    }
}

/// The `id` of an item, or a `BadRequest`.
pub(super) fn item_id(item: &Value) -> StoreResult<&str> {
    item.get("id")
        .and_then(Value::as_str)
        .ok_or_else(|| StoreError::BadRequest("item has no string `id`".into()))
}
