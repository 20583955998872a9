//! The embedded store: the four containers in one SQLite file.
//!
//! One table of items keyed by `(container, pk, id)` holds each JSON body plus the columns the
//! queries use (`type`, `creation_date`) and `lsn`, a database-wide, strictly increasing number
//! bumped on every write. The change feed is "items of this container with `lsn` above the
//! checkpoint, in `lsn` order": because a write moves the item to a new `lsn`, each changed item
//! appears once, in its latest state, in commit order (Cosmos "latest version" mode).
//!
//! WAL with `synchronous = NORMAL`: a committed write is in the WAL before the call returns, so an
//! acknowledged write survives a killed process. One writer connection (SQLite serializes writers
//! anyway) and a few readers; all calls run on the blocking pool, never on the async runtime.
//!
//! Every write goes through this process, so the store knows when a container changed: after each
//! commit it bumps that container's [`ChangeNotifier`], which wakes the change-feed pump at once
//! (no polling delay) and tells snapshot readers (the feed answer) that their copy is stale.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use async_trait::async_trait;
use base64::Engine as _;
use rusqlite::types::Value as SqlValue;
use rusqlite::{params, params_from_iter, Connection, OptionalExtension, Transaction};
use serde_json::{Map, Value};
use tokio::sync::watch;

use super::{
    check_partition_key, item_id, metrics, BatchOp, ChangeNotifier, ChangePage, Cmp,
    ConditionalRead, Container, Order, Page, PatchOp, Query, Scope, Store, StoreError, StoreResult,
};

pub mod schema;

const READERS: usize = 4;

/// The SQLite-backed store. Cheap to share behind an `Arc`.
pub struct EmbeddedStore {
    inner: Arc<Inner>,
}

struct Inner {
    path: std::path::PathBuf,
    writer: Mutex<Connection>,
    /// Opened on first use: start-up opens only the writer.
    readers: Vec<OnceLock<Mutex<Connection>>>,
    next_reader: AtomicUsize,
    /// Commits per container, in [`Container::ALL`] order.
    committed: [watch::Sender<u64>; 4],
}

fn slot(c: Container) -> usize {
    match c {
        Container::Users => 0,
        Container::Posts => 1,
        Container::Feed => 2,
        Container::Leases => 3,
    }
}

impl EmbeddedStore {
    /// Open (creating when missing) the database file at `path`, and its parent directory.
    pub fn open(path: &Path) -> anyhow::Result<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let mut writer = Connection::open(path)?;
        configure(&writer)?;
        // WAL mode and the schema; a new file is created without waiting for the disk.
        schema::prepare(&mut writer)?;
        Ok(EmbeddedStore {
            inner: Arc::new(Inner {
                path: path.to_path_buf(),
                writer: Mutex::new(writer),
                readers: (0..READERS).map(|_| OnceLock::new()).collect(),
                next_reader: AtomicUsize::new(0),
                committed: std::array::from_fn(|_| watch::Sender::new(0)),
            }),
        })
    }

    async fn with_reader<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    ) -> StoreResult<T> {
        let inner = self.inner.clone();
        metrics::record(0.0);
        tokio::task::spawn_blocking(move || {
            let i = inner.next_reader.fetch_add(1, Ordering::Relaxed) % inner.readers.len();
            let reader = match inner.readers[i].get() {
                Some(r) => r,
                None => {
                    let c = Connection::open(&inner.path).map_err(sql)?;
                    configure(&c).map_err(sql)?;
                    // Another task may have opened it meanwhile: keep the first, drop this one.
                    let _ = inner.readers[i].set(Mutex::new(c));
                    inner.readers[i].get().expect("set above")
                }
            };
            let conn = reader.lock().map_err(|_| poisoned())?;
            f(&conn)
        })
        .await
        .map_err(|e| StoreError::Other(format!("store task failed: {e}")))?
    }

    /// Run `f` in one write transaction on `c`, committed only when `f` succeeds; a commit
    /// bumps `c`'s change notifier.
    async fn with_writer<T: Send + 'static>(
        &self,
        c: Container,
        f: impl FnOnce(&mut Writer<'_>) -> StoreResult<T> + Send + 'static,
    ) -> StoreResult<T> {
        let inner = self.inner.clone();
        metrics::record(0.0);
        tokio::task::spawn_blocking(move || {
            let mut conn = inner.writer.lock().map_err(|_| poisoned())?;
            let tx = conn.transaction().map_err(sql)?;
            let mut w = Writer { tx };
            let out = f(&mut w)?;
            w.tx.commit().map_err(sql)?;
            inner.committed[slot(c)].send_modify(|n| *n += 1);
            Ok(out)
        })
        .await
        .map_err(|e| StoreError::Other(format!("store task failed: {e}")))?
    }
}

fn configure(c: &Connection) -> rusqlite::Result<()> {
    c.pragma_update(None, "synchronous", "NORMAL")?;
    c.pragma_update(None, "foreign_keys", "ON")?;
    c.busy_timeout(std::time::Duration::from_secs(10))?;
    Ok(())
}

fn poisoned() -> StoreError {
    StoreError::Other("store connection lock poisoned".into())
}

fn sql(e: rusqlite::Error) -> StoreError {
    match &e {
        rusqlite::Error::SqliteFailure(f, _)
            if matches!(
                f.code,
                rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
            ) =>
        {
            StoreError::Unavailable(e.to_string())
        }
        _ => StoreError::Other(e.to_string()),
    }
}

fn parse_body(text: &str) -> StoreResult<Value> {
    serde_json::from_str(text).map_err(|e| StoreError::Other(format!("corrupt item: {e}")))
}

/// The operations of one write transaction; batch and single calls share them.
struct Writer<'c> {
    tx: Transaction<'c>,
}

impl Writer<'_> {
    fn read(&self, c: Container, pk: &str, id: &str) -> StoreResult<Option<Value>> {
        read_item(&self.tx, c, pk, id)
    }

    fn next_lsn(&self) -> StoreResult<i64> {
        self.tx
            .query_row(
                "UPDATE meta SET value = value + 1 WHERE key = 'lsn' RETURNING value",
                [],
                |r| r.get(0),
            )
            .map_err(sql)
    }

    /// Stamp system properties and write the row (insert or overwrite).
    fn write(&self, c: Container, pk: &str, mut item: Value) -> StoreResult<Value> {
        check_partition_key(c, pk, &item)?;
        let id = item_id(&item)?.to_string();
        let lsn = self.next_lsn()?;
        let obj = item
            .as_object_mut()
            .ok_or_else(|| StoreError::BadRequest("item must be a JSON object".into()))?;
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        obj.insert("_etag".into(), Value::String(format!("\"{lsn:016x}\"")));
        obj.insert("_ts".into(), Value::from(now));
        obj.insert("_lsn".into(), Value::from(lsn));
        // The properties the queries filter and order on get columns of their own.
        let column = |f: &str| obj.get(f).and_then(Value::as_str).unwrap_or("").to_string();
        let (ty, cd, user) = (column("type"), column("creationDate"), column("userId"));
        let body = serde_json::to_string(&item).map_err(|e| StoreError::Other(e.to_string()))?;
        self.tx
            .execute(
                "INSERT INTO items (container, pk, id, type, creation_date, user_id, lsn, body)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                 ON CONFLICT (container, pk, id) DO UPDATE SET
                   type = excluded.type, creation_date = excluded.creation_date,
                   user_id = excluded.user_id, lsn = excluded.lsn, body = excluded.body",
                params![c.name(), pk, id, ty, cd, user, lsn, body],
            )
            .map_err(sql)?;
        Ok(item)
    }

    fn create(&self, c: Container, pk: &str, item: Value) -> StoreResult<Value> {
        let id = item_id(&item)?;
        if self.read(c, pk, id)?.is_some() {
            return Err(StoreError::Conflict);
        }
        self.write(c, pk, item)
    }

    fn replace(
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

    fn delete(&self, c: Container, pk: &str, id: &str) -> StoreResult<()> {
        let n = self
            .tx
            .execute(
                "DELETE FROM items WHERE container = ?1 AND pk = ?2 AND id = ?3",
                params![c.name(), pk, id],
            )
            .map_err(sql)?;
        if n == 0 {
            return Err(StoreError::NotFound);
        }
        Ok(())
    }

    fn patch(
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

    fn batch_op(&self, c: Container, pk: &str, op: BatchOp) -> StoreResult<Value> {
        match op {
            BatchOp::Read { id } => self.read(c, pk, &id)?.ok_or(StoreError::NotFound),
            BatchOp::Create { item } => self.create(c, pk, item),
            BatchOp::Upsert { item } => self.write(c, pk, item),
            BatchOp::Replace { id, item } => self.replace(c, pk, &id, item, None),
            BatchOp::Delete { id } => self.delete(c, pk, &id).map(|()| Value::Null),
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

fn read_item(conn: &Connection, c: Container, pk: &str, id: &str) -> StoreResult<Option<Value>> {
    let body: Option<String> = conn
        .query_row(
            "SELECT body FROM items WHERE container = ?1 AND pk = ?2 AND id = ?3",
            params![c.name(), pk, id],
            |r| r.get(0),
        )
        .optional()
        .map_err(sql)?;
    body.as_deref().map(parse_body).transpose()
}

/// Apply Cosmos-style patch operations to an item in memory.
pub(crate) fn apply_patch(c: Container, item: &mut Value, ops: &[PatchOp]) -> StoreResult<()> {
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

/// Position after the last item of a page, for keyset paging.
#[derive(serde::Serialize, serde::Deserialize)]
struct Cursor {
    /// `creation_date` (ordered queries) or `pk` (store order) of the last item.
    a: String,
    /// `id` of the last item.
    b: String,
}

fn encode_cursor(c: &Cursor) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(serde_json::to_vec(c).expect("cursor serializes"))
}

fn decode_cursor(token: &str) -> StoreResult<Cursor> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or_else(|| StoreError::BadContinuation("not a token of this store".into()))
}

fn sql_value(v: &Value) -> SqlValue {
    match v {
        Value::Null => SqlValue::Null,
        Value::Bool(b) => SqlValue::Integer(i64::from(*b)),
        Value::Number(n) => n
            .as_i64()
            .map(SqlValue::Integer)
            .unwrap_or_else(|| SqlValue::Real(n.as_f64().unwrap_or(0.0))),
        Value::String(s) => SqlValue::Text(s.clone()),
        other => SqlValue::Text(other.to_string()),
    }
}

/// The `WHERE` clause and its parameters shared by queries and counts.
fn where_clause(c: Container, q: &Query) -> StoreResult<(String, Vec<SqlValue>)> {
    let mut sql = String::from("container = ?");
    let mut args = vec![SqlValue::Text(c.name().into())];
    if let Scope::Partition(pk) = &q.scope {
        sql.push_str(" AND pk = ?");
        args.push(SqlValue::Text(pk.clone()));
    }
    for f in &q.filters {
        if f.field.is_empty()
            || !f
                .field
                .chars()
                .all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
        {
            return Err(StoreError::BadRequest(format!(
                "bad filter field `{}`",
                f.field
            )));
        }
        // The properties with a column of their own (string-valued, '' when missing) use it.
        let column = match (f.field.as_str(), f.value.is_string()) {
            ("type", true) => "type".to_string(),
            ("creationDate", true) => "creation_date".to_string(),
            ("userId", true) => "user_id".to_string(),
            (other, _) => format!("json_extract(body, '$.{other}')"),
        };
        let op = match f.cmp {
            Cmp::Eq => "=",
            Cmp::Ne => "!=",
        };
        if f.value.is_null() {
            // Cosmos compares with null like any value; SQL needs IS / IS NOT.
            let op = if f.cmp == Cmp::Eq { "IS" } else { "IS NOT" };
            sql.push_str(&format!(" AND {column} {op} NULL"));
        } else {
            sql.push_str(&format!(" AND {column} {op} ?"));
            args.push(sql_value(&f.value));
        }
    }
    Ok((sql, args))
}

fn run_query(conn: &Connection, c: Container, q: &Query) -> StoreResult<Page> {
    let (mut sql_where, mut args) = where_clause(c, q)?;
    let (key_a, dir) = match q.order_by_creation {
        Some(o) => ("creation_date", o),
        None => ("pk", Order::Asc),
    };
    let (cmp, dir_sql) = match dir {
        Order::Asc => (">", "ASC"),
        Order::Desc => ("<", "DESC"),
    };
    if let Some(token) = &q.continuation {
        let cur = decode_cursor(token)?;
        sql_where.push_str(&format!(" AND ({key_a}, id) {cmp} (?, ?)"));
        args.push(SqlValue::Text(cur.a));
        args.push(SqlValue::Text(cur.b));
    }
    let limit = q.limit.max(1);
    let offset = if q.continuation.is_none() {
        q.offset.unwrap_or(0)
    } else {
        0
    };
    // Without statistics SQLite scans the container by primary key rather than use this index;
    // the only cross-partition query (the rename fan-out, by author) names it.
    let by_user = q.scope == Scope::CrossPartition
        && q.filters
            .iter()
            .any(|f| f.field == "userId" && f.cmp == Cmp::Eq && f.value.is_string());
    let index = if by_user {
        "INDEXED BY items_by_user"
    } else {
        ""
    };
    let text = format!(
        "SELECT body, {key_a}, id FROM items {index} WHERE {sql_where}
         ORDER BY {key_a} {dir_sql}, id {dir_sql} LIMIT {} OFFSET {offset}",
        limit as u64 + 1
    );
    let mut stmt = conn.prepare_cached(&text).map_err(sql)?;
    let rows = stmt
        .query_map(params_from_iter(args), |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
            ))
        })
        .map_err(sql)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(sql)?;
    let more = rows.len() > limit as usize;
    let mut items = Vec::with_capacity(rows.len().min(limit as usize));
    let mut last = None;
    for (body, a, b) in rows.into_iter().take(limit as usize) {
        items.push(parse_body(&body)?);
        last = Some(Cursor { a, b });
    }
    let continuation = if more {
        last.as_ref().map(encode_cursor)
    } else {
        None
    };
    Ok(Page {
        items,
        continuation,
    })
}

#[async_trait]
impl Store for EmbeddedStore {
    fn kind(&self) -> &'static str {
        "embedded"
    }

    fn idle_poll(&self) -> std::time::Duration {
        // Only a fallback: every commit wakes the followers through `change_notifier`. The poll
        // still picks up a write made by another process on the same file.
        std::time::Duration::from_millis(500)
    }

    fn change_notifier(&self, c: Container) -> Option<ChangeNotifier> {
        Some(self.inner.committed[slot(c)].subscribe())
    }

    async fn read(&self, c: Container, pk: &str, id: &str) -> StoreResult<Option<Value>> {
        let (pk, id) = (pk.to_string(), id.to_string());
        self.with_reader(move |conn| read_item(conn, c, &pk, &id))
            .await
    }

    async fn read_if_none_match(
        &self,
        c: Container,
        pk: &str,
        id: &str,
        etag: &str,
    ) -> StoreResult<ConditionalRead> {
        let (pk, id) = (pk.to_string(), id.to_string());
        let item = self
            .with_reader(move |conn| read_item(conn, c, &pk, &id))
            .await?;
        Ok(match item {
            None => ConditionalRead::Missing,
            Some(item)
                if etag == "*" || item.get("_etag").and_then(Value::as_str) == Some(etag) =>
            {
                ConditionalRead::Unchanged
            }
            Some(item) => ConditionalRead::Changed(item),
        })
    }

    async fn create(&self, c: Container, pk: &str, item: Value) -> StoreResult<Value> {
        let pk = pk.to_string();
        self.with_writer(c, move |w| w.create(c, &pk, item)).await
    }

    async fn upsert(&self, c: Container, pk: &str, item: Value) -> StoreResult<Value> {
        let pk = pk.to_string();
        self.with_writer(c, move |w| w.write(c, &pk, item)).await
    }

    async fn replace(
        &self,
        c: Container,
        pk: &str,
        id: &str,
        item: Value,
        if_match: Option<&str>,
    ) -> StoreResult<Value> {
        let (pk, id, etag) = (pk.to_string(), id.to_string(), if_match.map(str::to_string));
        self.with_writer(c, move |w| w.replace(c, &pk, &id, item, etag.as_deref()))
            .await
    }

    async fn delete(&self, c: Container, pk: &str, id: &str) -> StoreResult<()> {
        let (pk, id) = (pk.to_string(), id.to_string());
        self.with_writer(c, move |w| w.delete(c, &pk, &id)).await
    }

    async fn patch(
        &self,
        c: Container,
        pk: &str,
        id: &str,
        ops: &[PatchOp],
        if_match: Option<&str>,
    ) -> StoreResult<Value> {
        let (pk, id, ops) = (pk.to_string(), id.to_string(), ops.to_vec());
        let etag = if_match.map(str::to_string);
        self.with_writer(c, move |w| w.patch(c, &pk, &id, &ops, etag.as_deref()))
            .await
    }

    async fn query(&self, c: Container, q: &Query) -> StoreResult<Page> {
        let q = q.clone();
        self.with_reader(move |conn| run_query(conn, c, &q)).await
    }

    async fn count(&self, c: Container, q: &Query) -> StoreResult<u64> {
        let q = q.clone();
        self.with_reader(move |conn| {
            let (sql_where, args) = where_clause(c, &q)?;
            let text = format!("SELECT COUNT(*) FROM items WHERE {sql_where}");
            let n: i64 = conn
                .prepare_cached(&text)
                .map_err(sql)?
                .query_row(params_from_iter(args), |r| r.get(0))
                .map_err(sql)?;
            Ok(n as u64)
        })
        .await
    }

    async fn batch(&self, c: Container, pk: &str, ops: Vec<BatchOp>) -> StoreResult<Vec<Value>> {
        let pk = pk.to_string();
        self.with_writer(c, move |w| {
            ops.into_iter()
                .enumerate()
                .map(|(index, op)| {
                    w.batch_op(c, &pk, op).map_err(|e| StoreError::BatchFailed {
                        index,
                        source: Box::new(e),
                    })
                })
                .collect()
        })
        .await
    }

    async fn changes(
        &self,
        c: Container,
        continuation: Option<&str>,
        max_items: u32,
    ) -> StoreResult<ChangePage> {
        let from: i64 = match continuation {
            None => 0,
            Some(t) => t
                .parse()
                .map_err(|_| StoreError::BadContinuation("not a change feed position".into()))?,
        };
        self.with_reader(move |conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT body, lsn FROM items WHERE container = ?1 AND lsn > ?2
                     ORDER BY lsn LIMIT ?3",
                )
                .map_err(sql)?;
            let rows = stmt
                .query_map(params![c.name(), from, max_items.max(1)], |r| {
                    Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))
                })
                .map_err(sql)?
                .collect::<Result<Vec<_>, _>>()
                .map_err(sql)?;
            let last = rows.last().map(|r| r.1).unwrap_or(from);
            let items = rows
                .iter()
                .map(|(b, _)| parse_body(b))
                .collect::<StoreResult<Vec<_>>>()?;
            Ok(ChangePage {
                items,
                continuation: last.to_string(),
            })
        })
        .await
    }
}
