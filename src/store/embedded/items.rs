//! Reading a stored item: its row in `items`, its body parsed.

use rusqlite::{params, Connection, OptionalExtension};
use serde_json::Value;

use super::errors::sql;
use super::{Container, StoreError, StoreResult};

/// An item's stored body (its row's `body`), parsed; a body that does not parse is `Other`.
pub(super) fn parse_body(text: &str) -> StoreResult<Value> {
    serde_json::from_str(text).map_err(|e| StoreError::Other(format!("corrupt item: {e}")))
}

/// The item `id` in partition `pk` of `c`, as stored (deleted or not).
pub(super) fn read_item(
    conn: &Connection,
    c: Container,
    pk: &str,
    id: &str,
) -> StoreResult<Option<Value>> {
    let body: Option<String> = conn
        .prepare_cached("SELECT body FROM items WHERE container = ?1 AND pk = ?2 AND id = ?3")
        .and_then(|mut read| read.query_row(params![c.name(), pk, id], |r| r.get(0)))
        .optional()
        .map_err(sql)?;
    body.as_deref().map(parse_body).transpose()
}
