//! Reading a Conduit request body: the object under its key (`{"user": {…}}`) and its string
//! fields, or 422.

use serde_json::{Map, Value};

use super::errors::unprocessable;
use super::Result;

/// A request body: a JSON object holding the object `key` (`{"user": {…}}`), or 422.
pub(super) fn body_object(bytes: &[u8], key: &str) -> Result<Map<String, Value>> {
    let value: Value =
        serde_json::from_slice(bytes).map_err(|_| unprocessable("body", "is not a JSON object"))?;
    match value.get(key) {
        Some(Value::Object(m)) => Ok(m.clone()),
        _ => Err(unprocessable(key, "is missing")),
    }
}

/// A string field of a body: `None` when absent; 422 when null or not a string (`nullable`
/// turns null into `Some("")`, which the callers read as "cleared").
pub(super) fn string_field(
    m: &Map<String, Value>,
    field: &str,
    nullable: bool,
) -> Result<Option<String>> {
    match m.get(field) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(Value::Null) if nullable => Ok(Some(String::new())),
        Some(Value::Null) => Err(unprocessable(field, "can't be null")),
        Some(_) => Err(unprocessable(field, "must be a string")),
    }
}
