//! The embedded store's writes: one write transaction, with Cosmos DB's semantics for creates,
//! replaces, deletes, server-side patches, etags, time to live and transactional batches.

use std::sync::atomic::{AtomicI64, Ordering};

use rusqlite::{params, Transaction};
use serde_json::{Map, Value};

use super::errors::sql;
use super::items::read_item;
use crate::store::keys::{check_partition_key, item_id};
use crate::store::{BatchOp, Container, PatchOp, StoreError, StoreResult};

/// The operations of one write transaction; batch and single calls share them.
pub(super) struct Writer<'c> {
    pub(super) tx: Transaction<'c>,
    pub(super) next_expiry: &'c AtomicI64,
}

impl Writer<'_> {
    /// Remove at most `limit` of the items whose time to live had passed at `now`, the first to
    /// expire first; when fewer remained, note when the next item expires. The number removed.
    pub(super) fn purge_expired(&self, now: i64, limit: usize) -> StoreResult<usize> {
        let removed = self
            .tx
            .execute(
                "DELETE FROM items WHERE (container, pk, id) IN (
                   SELECT container, pk, id FROM items
                   WHERE expires IS NOT NULL AND expires <= ?1 ORDER BY expires LIMIT ?2)",
                params![now, limit as i64],
            )
            .map_err(sql)?;
        if removed < limit {
            let next: Option<i64> = self
                .tx
                .query_row(
                    "SELECT MIN(expires) FROM items WHERE expires IS NOT NULL",
                    [],
                    |r| r.get(0),
                )
                .map_err(sql)?;
            self.next_expiry
                .store(next.unwrap_or(i64::MAX), Ordering::Relaxed);
        }
        Ok(removed)
    }

    pub(super) fn read(&self, c: Container, pk: &str, id: &str) -> StoreResult<Option<Value>> {
        read_item(&self.tx, c, pk, id)
    }

    pub(super) fn next_lsn(&self) -> StoreResult<i64> {
        self.tx
            .prepare_cached("UPDATE meta SET value = value + 1 WHERE key = 'lsn' RETURNING value")
            .and_then(|mut next| next.query_row([], |r| r.get(0)))
            .map_err(sql)
    }

    /// Stamp system properties and write the row (insert or overwrite).
    pub(super) fn write(&self, c: Container, pk: &str, mut item: Value) -> StoreResult<Value> {
        check_partition_key(c, pk, &item)?;
        let id = item_id(&item)?.to_string();
        let lsn = self.next_lsn()?;
        let obj = item
            .as_object_mut()
            .ok_or_else(|| StoreError::BadRequest("item must be a JSON object".into()))?;
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        // A version tag of this item alone, drawn at random as Cosmos DB's are: a tag derived
        // from the write sequence would tell clients how much the whole site writes, and let
        // them guess the tag of a version they were never shown.
        let etag = format!("\"{}\"", uuid::Uuid::new_v4().simple());
        obj.insert("_etag".into(), Value::String(etag));
        obj.insert("_ts".into(), Value::from(now));
        obj.insert("_lsn".into(), Value::from(lsn));
        // The properties the queries filter and order on get columns of their own.
        let column = |f: &str| obj.get(f).and_then(Value::as_str).unwrap_or("").to_string();
        let (ty, cd, user) = (column("type"), column("creationDate"), column("userId"));
        let deleted = obj.get(crate::domain::DELETED) == Some(&Value::Bool(true));
        // Cosmos semantics: a positive `ttl` expires the item that many seconds after its last
        // write; `-1` or none, never.
        let expires = obj
            .get("ttl")
            .and_then(Value::as_i64)
            .filter(|ttl| *ttl > 0)
            .map(|ttl| now.saturating_add(ttl));
        let body = serde_json::to_string(&item).map_err(|e| StoreError::Other(e.to_string()))?;
        self.tx
            .prepare_cached(
                "INSERT INTO items
                   (container, pk, id, type, creation_date, user_id, lsn, body, deleted, expires)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
                 ON CONFLICT (container, pk, id) DO UPDATE SET
                   type = excluded.type, creation_date = excluded.creation_date,
                   user_id = excluded.user_id, lsn = excluded.lsn, body = excluded.body,
                   deleted = excluded.deleted, expires = excluded.expires",
            )
            .and_then(|mut write| {
                write.execute(params![
                    c.name(),
                    pk,
                    id,
                    ty,
                    cd,
                    user,
                    lsn,
                    body,
                    deleted,
                    expires
                ])
            })
            .map_err(sql)?;
        if let Some(at) = expires {
            self.next_expiry.fetch_min(at, Ordering::Relaxed);
        }
        Ok(item)
    }

    pub(super) fn create(&self, c: Container, pk: &str, item: Value) -> StoreResult<Value> {
        let id = item_id(&item)?;
        if self.read(c, pk, id)?.is_some() {
            return Err(StoreError::Conflict);
        }
        self.write(c, pk, item)
    }

    pub(super) fn replace(
        &self,
        c: Container,
        pk: &str,
        id: &str,
        item: Value,
        if_match: Option<&str>,
    ) -> StoreResult<Value> {
        if item_id(&item)? != id {
            return Err(StoreError::BadRequest(
                "replace cannot change an item's id".into(),
            ));
        }
        let current = self.read(c, pk, id)?.ok_or(StoreError::NotFound)?;
        check_etag(&current, if_match)?;
        self.write(c, pk, item)
    }

    pub(super) fn delete(&self, c: Container, pk: &str, id: &str) -> StoreResult<()> {
        let n = self
            .tx
            .prepare_cached("DELETE FROM items WHERE container = ?1 AND pk = ?2 AND id = ?3")
            .and_then(|mut delete| delete.execute(params![c.name(), pk, id]))
            .map_err(sql)?;
        if n == 0 {
            return Err(StoreError::NotFound);
        }
        Ok(())
    }

    pub(super) fn delete_if_match(
        &self,
        c: Container,
        pk: &str,
        id: &str,
        etag: &str,
    ) -> StoreResult<()> {
        let current = self.read(c, pk, id)?.ok_or(StoreError::NotFound)?;
        check_etag(&current, Some(etag))?;
        self.delete(c, pk, id)
    }

    pub(super) fn patch(
        &self,
        c: Container,
        pk: &str,
        id: &str,
        ops: &[PatchOp],
        if_match: Option<&str>,
    ) -> StoreResult<Value> {
        let mut item = self.read(c, pk, id)?.ok_or(StoreError::NotFound)?;
        check_etag(&item, if_match)?;
        apply_patch(c, &mut item, ops)?;
        self.write(c, pk, item)
    }

    pub(super) fn batch_op(&self, c: Container, pk: &str, op: BatchOp) -> StoreResult<Value> {
        match op {
            BatchOp::Read { id } => self.read(c, pk, &id)?.ok_or(StoreError::NotFound),
            BatchOp::Create { item } => self.create(c, pk, item),
        }
    }
}

fn check_etag(current: &Value, if_match: Option<&str>) -> StoreResult<()> {
    match if_match {
        Some(etag) if current.get("_etag").and_then(Value::as_str) != Some(etag) => {
            Err(StoreError::PreconditionFailed)
        }
        _ => Ok(()),
    }
}

/// Apply Cosmos-style patch operations to an item in memory.
fn apply_patch(c: Container, item: &mut Value, ops: &[PatchOp]) -> StoreResult<()> {
    for op in ops {
        let path = match op {
            PatchOp::Set(p, _) | PatchOp::Incr(p, _) => p,
        };
        let segments: Vec<&str> = path
            .strip_prefix('/')
            .filter(|p| !p.is_empty())
            .ok_or_else(|| StoreError::BadRequest(format!("bad patch path `{path}`")))?
            .split('/')
            .collect();
        if segments.len() == 1 && (segments[0] == "id" || segments[0] == c.partition_key_field()) {
            return Err(StoreError::BadRequest(format!(
                "patch cannot change `{}`",
                segments[0]
            )));
        }
        let (last, parents) = segments.split_last().expect("non-empty path");
        let mut target = &mut *item;
        for seg in parents {
            target = target
                .as_object_mut()
                .and_then(|o| o.get_mut(*seg))
                .ok_or_else(|| StoreError::BadRequest(format!("patch path `{path}` not found")))?;
        }
        let obj: &mut Map<String, Value> = target
            .as_object_mut()
            .ok_or_else(|| StoreError::BadRequest(format!("patch path `{path}` not an object")))?;
        match op {
            PatchOp::Set(_, v) => {
                obj.insert((*last).to_string(), v.clone());
            }
            PatchOp::Incr(_, by) => {
                let new = match obj.get(*last) {
                    None => *by,
                    Some(v) => {
                        v.as_i64().ok_or_else(|| {
                            StoreError::BadRequest(format!("`{path}` is not an integer"))
                        })? + by
                    }
                };
                obj.insert((*last).to_string(), Value::from(new));
            }
        }
    }
    Ok(())
}
