//! A domain type as the JSON value it is stored as.

use serde::Serialize;
use serde_json::Value;

/// `t` as a JSON value; every domain type serializes.
pub fn to_value<T: Serialize>(t: &T) -> Value {
    serde_json::to_value(t).expect("domain types serialize")
}
