//! The embedded store's schema and its forward migrations.
//!
//! The file records its schema version in `PRAGMA user_version`. Opening a file runs, in one
//! transaction, every migration above the recorded version, then records [`CURRENT`]; a file from
//! a newer handler (a version above [`CURRENT`]) is refused rather than guessed at.
//!
//! Files written before versions were recorded say `0`; their version is read off the tables
//! instead ([`detect_unversioned`]). Every later schema change appends one migration to
//! [`MIGRATIONS`] and adds a file written by the previous version to `tests/fixtures/embedded/`.

use rusqlite::{Connection, OptionalExtension};

/// One step: the SQL that takes a file from version `n` to `n + 1` is `MIGRATIONS[n]`.
const MIGRATIONS: &[&str] = &[
    // 0 → 1: items keyed by (container, pk, id) with their query columns, the change-feed
    // sequence `lsn`, and the counter behind it.
    "
    CREATE TABLE items (
        container     TEXT    NOT NULL,
        pk            TEXT    NOT NULL,
        id            TEXT    NOT NULL,
        type          TEXT    NOT NULL DEFAULT '',
        creation_date TEXT    NOT NULL DEFAULT '',
        lsn           INTEGER NOT NULL,
        body          TEXT    NOT NULL,
        PRIMARY KEY (container, pk, id)
    ) WITHOUT ROWID;
    CREATE INDEX items_by_lsn ON items (container, lsn);
    CREATE INDEX items_by_partition ON items (container, pk, type, creation_date, id);
    CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
    INSERT INTO meta (key, value) VALUES ('lsn', 0);
    ",
    // 1 → 2: the author of each item as a column, indexed for the username fan-out's
    // cross-partition query by author, filled from the bodies already stored.
    "
    ALTER TABLE items ADD COLUMN user_id TEXT NOT NULL DEFAULT '';
    UPDATE items SET user_id = json_extract(body, '$.userId')
        WHERE json_type(body, '$.userId') = 'text';
    CREATE INDEX items_by_user ON items (container, user_id, pk, id);
    ",
    // 2 → 3: soft deletes. `deleted` (1 for `deleted: true`) ends the partition index, so the
    // queries that hide deleted items and the counts stay index-only; `expires` (unix seconds,
    // `_ts + ttl`) is set for items with a positive `ttl`, which the store purges once past it.
    "
    ALTER TABLE items ADD COLUMN deleted INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE items ADD COLUMN expires INTEGER;
    UPDATE items SET deleted = 1 WHERE json_type(body, '$.deleted') = 'true';
    UPDATE items SET expires = json_extract(body, '$._ts') + json_extract(body, '$.ttl')
        WHERE json_type(body, '$.ttl') = 'integer' AND json_extract(body, '$.ttl') > 0
          AND json_type(body, '$._ts') = 'integer';
    DROP INDEX items_by_partition;
    CREATE INDEX items_by_partition ON items (container, pk, type, creation_date, id, deleted);
    CREATE INDEX items_by_expiry ON items (expires) WHERE expires IS NOT NULL;
    ",
];

/// The schema version this build writes.
pub const CURRENT: u32 = MIGRATIONS.len() as u32;

/// Why a file could not be brought to the current schema.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    #[error(
        "the database file has schema version {found}, newer than this handler's {CURRENT}; \
         run a newer handler or restore a backup"
    )]
    Newer { found: u32 },
    #[error("migrating the database file to schema version {to} failed: {source}")]
    Migration {
        to: u32,
        #[source]
        source: rusqlite::Error,
    },
    #[error(transparent)]
    Sql(#[from] rusqlite::Error),
}

/// The version a file is at: `user_version`, or what its tables show when it predates versions.
pub fn version(conn: &Connection) -> Result<u32, SchemaError> {
    let recorded: u32 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    if recorded > 0 {
        return Ok(recorded);
    }
    detect_unversioned(conn)
}

/// The version of a file that records none: 0 when empty, else what its `items` table has.
fn detect_unversioned(conn: &Connection) -> Result<u32, SchemaError> {
    let has_items: Option<String> = conn
        .query_row(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'items'",
            [],
            |r| r.get(0),
        )
        .optional()?;
    if has_items.is_none() {
        return Ok(0);
    }
    let has_column = |name: &str| -> rusqlite::Result<bool> {
        conn.query_row(
            "SELECT EXISTS (SELECT 1 FROM pragma_table_info('items') WHERE name = ?1)",
            [name],
            |r| r.get(0),
        )
    };
    Ok(if has_column("deleted")? {
        3
    } else if has_column("user_id")? {
        2
    } else {
        1
    })
}

/// Bring the file to [`CURRENT`], all steps in one transaction (a crash leaves the old version).
/// Returns the version the file was at.
pub fn migrate(conn: &mut Connection) -> Result<u32, SchemaError> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let from = version(&tx)?;
    if from > CURRENT {
        return Err(SchemaError::Newer { found: from });
    }
    for (step, sql) in MIGRATIONS.iter().enumerate().skip(from as usize) {
        let to = step as u32 + 1;
        tx.execute_batch(sql)
            .map_err(|source| SchemaError::Migration { to, source })?;
    }
    tx.pragma_update(None, "user_version", CURRENT)?;
    tx.commit()?;
    Ok(from)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn columns(conn: &Connection) -> Vec<String> {
        let mut s = conn
            .prepare("SELECT name FROM pragma_table_info('items')")
            .unwrap();
        s.query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }

    #[test]
    fn a_new_file_gets_every_step_and_records_the_version() {
        let mut c = Connection::open_in_memory().unwrap();
        assert_eq!(migrate(&mut c).unwrap(), 0);
        assert_eq!(version(&c).unwrap(), CURRENT);
        assert!(columns(&c).contains(&"user_id".to_string()));
        // Opening again changes nothing.
        assert_eq!(migrate(&mut c).unwrap(), CURRENT);
    }

    #[test]
    fn a_version_1_file_gains_the_author_column_filled_from_the_bodies() {
        let mut c = Connection::open_in_memory().unwrap();
        c.execute_batch(MIGRATIONS[0]).unwrap();
        c.execute(
            "INSERT INTO items (container, pk, id, type, lsn, body) VALUES
             ('posts', 'p', 'c1', 'comment', 1, '{\"id\":\"c1\",\"userId\":\"u1\"}'),
             ('feed', 'post', 'p', 'post', 2, '{\"id\":\"p\",\"userId\":7}'),
             ('leases', 'l', 'l', '', 3, '{\"id\":\"l\"}')",
            [],
        )
        .unwrap();
        assert_eq!(version(&c).unwrap(), 1);
        assert_eq!(migrate(&mut c).unwrap(), 1);
        let mut s = c
            .prepare("SELECT id, user_id FROM items ORDER BY lsn")
            .unwrap();
        let rows: Vec<(String, String)> = s
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let expected = [("c1", "u1"), ("p", ""), ("l", "")];
        let expected: Vec<(String, String)> = expected
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        assert_eq!(rows, expected);
    }

    #[test]
    fn a_version_2_file_gains_the_deletion_columns_filled_from_the_bodies() {
        let mut c = Connection::open_in_memory().unwrap();
        c.execute_batch(MIGRATIONS[0]).unwrap();
        c.execute_batch(MIGRATIONS[1]).unwrap();
        c.pragma_update(None, "user_version", 2).unwrap();
        c.execute(
            "INSERT INTO items (container, pk, id, type, lsn, body) VALUES
             ('posts', 'p', 'c1', 'comment', 1, '{\"id\":\"c1\",\"deleted\":true,\"ttl\":60,\"_ts\":1000}'),
             ('posts', 'p', 'c2', 'comment', 2, '{\"id\":\"c2\",\"deleted\":false,\"ttl\":-1,\"_ts\":1000}'),
             ('posts', 'p', 'c3', 'comment', 3, '{\"id\":\"c3\",\"_ts\":1000}')",
            [],
        )
        .unwrap();
        assert_eq!(migrate(&mut c).unwrap(), 2);
        let mut s = c
            .prepare("SELECT id, deleted, expires FROM items ORDER BY lsn")
            .unwrap();
        let rows: Vec<(String, i64, Option<i64>)> = s
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(
            rows,
            vec![
                ("c1".to_string(), 1, Some(1060)),
                ("c2".to_string(), 0, None),
                ("c3".to_string(), 0, None)
            ]
        );
    }

    #[test]
    fn a_file_from_a_newer_handler_is_refused() {
        let mut c = Connection::open_in_memory().unwrap();
        migrate(&mut c).unwrap();
        c.pragma_update(None, "user_version", CURRENT + 1).unwrap();
        let e = migrate(&mut c).unwrap_err();
        assert!(matches!(e, SchemaError::Newer { found } if found == CURRENT + 1));
        assert!(e.to_string().contains("newer"), "{e}");
    }
}
