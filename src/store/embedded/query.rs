//! The embedded store's queries: a [`Query`] as SQL over the item columns (partition, kind,
//! author, creation date, deleted mark), paged by keyset cursors in opaque continuation tokens.

use base64::Engine as _;
use rusqlite::types::Value as SqlValue;
use rusqlite::{params_from_iter, Connection};
use serde_json::Value;

use super::errors::sql;
use super::items::parse_body;
use crate::store::{
    Cmp, Container, Order, Page, Query, Scope, StoreError, StoreResult, Words, SEARCHABLE,
};

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
pub(super) fn where_clause(c: Container, q: &Query) -> StoreResult<(String, Vec<SqlValue>)> {
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
        if f.cmp == Cmp::NotTrue {
            // `deleted` has a column (1 for `true`); any other property is read from the body.
            if f.field == crate::domain::DELETED {
                sql.push_str(" AND deleted = 0");
            } else {
                sql.push_str(&format!(
                    " AND json_type(body, '$.{}') IS NOT 'true'",
                    f.field
                ));
            }
            continue;
        }
        // The properties with a column of their own (string-valued, '' when missing) use it.
        let string_valued = match &f.value {
            Value::Array(values) => values.iter().all(Value::is_string),
            v => v.is_string(),
        };
        let column = match (f.field.as_str(), string_valued) {
            ("type", true) => "type".to_string(),
            ("creationDate", true) => "creation_date".to_string(),
            ("userId", true) => "user_id".to_string(),
            ("id", true) => "id".to_string(),
            (other, _) => format!("json_extract(body, '$.{other}')"),
        };
        if f.cmp == Cmp::In {
            sql.push_str(&format!(
                " AND {column} IN (SELECT value FROM json_each(?))"
            ));
            args.push(SqlValue::Text(f.value.to_string()));
            continue;
        }
        let op = match f.cmp {
            Cmp::Eq => "=",
            Cmp::Ne | Cmp::NotTrue | Cmp::In => "!=",
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
    if let Some(words) = &q.words {
        // The posts' words are in the FTS5 table `post_text` (schema.rs keeps it in step with
        // the live posts), keyed through `post_words` by the post's id, which is its partition.
        sql.push_str(
            " AND (pk, id) IN (SELECT w.post_id, w.post_id FROM post_text
               JOIN post_words w ON w.rowid = post_text.rowid WHERE post_text MATCH ?)",
        );
        args.push(SqlValue::Text(match_expression(c, words)?));
    }
    Ok((sql, args))
}

/// A query with words, in the full-text index's order: the posts most recently indexed (created,
/// or edited in their words) first, whatever order the query asks for, paged by the index's
/// row id. The index yields its matches in that order, so a page reads its matches up to the
/// page's end and the items of those alone; ordering by any other key would read and sort the
/// body of every match first, whose work grows with the posts holding the words. `CROSS JOIN`
/// keeps SQLite's planner to that order of the tables: the index first.
fn run_search(conn: &Connection, c: Container, q: &Query, words: &Words) -> StoreResult<Page> {
    let rest = Query {
        words: None,
        order_by_creation: None,
        continuation: None,
        ..q.clone()
    };
    let (sql_where, rest_args) = where_clause(c, &rest)?;
    let mut args = vec![SqlValue::Text(match_expression(c, words)?)];
    let mut after = String::new();
    if let Some(token) = &q.continuation {
        let cur = decode_cursor(token)?;
        let rowid: i64 = cur
            .a
            .parse()
            .map_err(|_| StoreError::BadContinuation("not a token of this search".into()))?;
        after.push_str(" AND post_text.rowid < ?");
        args.push(SqlValue::Integer(rowid));
    }
    args.extend(rest_args);
    let limit = q.limit.max(1);
    let text = format!(
        "SELECT items.body, post_text.rowid FROM post_text
           CROSS JOIN post_words w ON w.rowid = post_text.rowid
           CROSS JOIN items ON items.container = 'posts' AND items.pk = w.post_id
                AND items.id = w.post_id
         WHERE post_text MATCH ?{after} AND {sql_where}
         ORDER BY post_text.rowid DESC LIMIT {}",
        limit as u64 + 1
    );
    let mut stmt = conn.prepare_cached(&text).map_err(sql)?;
    let rows = stmt
        .query_map(params_from_iter(args), |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))
        })
        .map_err(sql)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(sql)?;
    let more = rows.len() > limit as usize;
    let mut items = Vec::with_capacity(rows.len().min(limit as usize));
    let mut last = None;
    for (body, rowid) in rows.into_iter().take(limit as usize) {
        items.push(parse_body(&body)?);
        last = Some(rowid);
    }
    let continuation = match (more, last) {
        (true, Some(rowid)) => Some(encode_cursor(&Cursor {
            a: rowid.to_string(),
            b: String::new(),
        })),
        _ => None,
    };
    Ok(Page {
        items,
        continuation,
    })
}

/// The FTS5 query of [`Words`]: `{title content} : ("w1" AND "w2")`, each word a quoted string
/// (so that no word is read as an operator), its `"` doubled.
fn match_expression(c: Container, words: &Words) -> StoreResult<String> {
    if c != Container::Posts {
        return Err(StoreError::BadRequest(format!(
            "only the posts' {SEARCHABLE:?} are indexed for full text"
        )));
    }
    words.check()?;
    let quoted: Vec<String> = words
        .words
        .iter()
        .map(|w| format!("\"{}\"", w.replace('"', "\"\"")))
        .collect();
    Ok(format!(
        "{{{}}} : ({})",
        words.fields.join(" "),
        quoted.join(" AND ")
    ))
}

pub(super) fn run_query(conn: &Connection, c: Container, q: &Query) -> StoreResult<Page> {
    if let Some(words) = &q.words {
        return run_search(conn, c, q, words);
    }
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
    // Without statistics SQLite scans the container by primary key rather than use this index;
    // the cross-partition queries (the rename fan-out, a batch's authors: by user) name it.
    let by_user = q.scope == Scope::CrossPartition
        && q.filters.iter().any(|f| {
            f.field == "userId"
                && match f.cmp {
                    Cmp::Eq => f.value.is_string(),
                    Cmp::In => f
                        .value
                        .as_array()
                        .is_some_and(|v| v.iter().all(Value::is_string)),
                    Cmp::Ne | Cmp::NotTrue => false,
                }
        });
    let index = if by_user {
        "INDEXED BY items_by_user"
    } else {
        ""
    };
    let text = format!(
        "SELECT body, {key_a}, id FROM items {index} WHERE {sql_where}
         ORDER BY {key_a} {dir_sql}, id {dir_sql} LIMIT {}",
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
