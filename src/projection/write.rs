//! What a projection writes: [`Write`], planned before it is applied (by the engine,
//! `super::engine`), so that a plan is a value a unit test can compare.

use serde_json::Value;

use crate::domain::Meta;
use crate::store::{Container, PatchOp};

/// One write a projection implies.
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    Upsert {
        container: Container,
        pk: String,
        item: Value,
    },
    Patch {
        container: Container,
        pk: String,
        id: String,
        ops: Vec<PatchOp>,
        /// Only if the item is still at this `_etag`; if it changed, the newer change is on its
        /// way through the feed and will be projected in turn, so the patch is moot.
        if_match: Option<String>,
    },
    Delete {
        container: Container,
        pk: String,
        id: String,
    },
}

impl Write {
    /// Write `item` into partition `pk` of `container`, whatever is there.
    pub fn upsert(container: Container, pk: impl Into<String>, item: Value) -> Write {
        Write::Upsert {
            container,
            pk: pk.into(),
            item,
        }
    }

    /// Apply `ops` to item `id`, unconditionally (see [`Write::if_match`]).
    pub fn patch(
        container: Container,
        pk: impl Into<String>,
        id: impl Into<String>,
        ops: Vec<PatchOp>,
    ) -> Write {
        Write::Patch {
            container,
            pk: pk.into(),
            id: id.into(),
            ops,
            if_match: None,
        }
    }

    /// Delete item `id`; nothing when it is not there.
    pub fn delete(container: Container, pk: impl Into<String>, id: impl Into<String>) -> Write {
        Write::Delete {
            container,
            pk: pk.into(),
            id: id.into(),
        }
    }

    /// The same patch, made only while the item is at `etag` (a write of another kind is left
    /// as it is).
    pub fn if_match(mut self, etag: Option<&str>) -> Write {
        if let Write::Patch { if_match, .. } = &mut self {
            *if_match = etag.map(String::from);
        }
        self
    }

    /// `container/pk/id`, for logs naming what was not applied.
    pub fn target(&self) -> String {
        let (c, pk, id) = match self {
            Write::Upsert {
                container,
                pk,
                item,
            } => (container, pk, Meta::of(item).id.unwrap_or("?")),
            Write::Patch {
                container, pk, id, ..
            }
            | Write::Delete { container, pk, id } => (container, pk, id.as_str()),
        };
        format!("{}/{}/{}", c.name(), pk, id)
    }
}

pub(crate) fn str_field<'a>(v: &'a Value, f: &str) -> Option<&'a str> {
    v.get(f).and_then(Value::as_str)
}

/// An item as a copy compares: without the store's own properties (`_etag`, `_ts`, ...).
pub fn content(item: &Value) -> Value {
    let mut item = item.clone();
    if let Some(o) = item.as_object_mut() {
        o.retain(|k, _| !k.starts_with('_'));
    }
    item
}
