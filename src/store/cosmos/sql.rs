//! The Cosmos DB SQL text and parameters of a [`Query`]: values always travel as parameters,
//! never inside the text, and field names are checked to be plain identifiers.

use serde_json::Value;

use crate::store::{Cmp, Order, Query, StoreError, StoreResult};

/// Query text and its `@name` parameters.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Sql {
    pub text: String,
    pub params: Vec<(String, Value)>,
}

impl Sql {
    pub fn into_query(self) -> StoreResult<azure_data_cosmos::Query> {
        let mut q = azure_data_cosmos::Query::from(self.text);
        for (name, value) in self.params {
            q = q
                .with_parameter(name, value)
                .map_err(|e| StoreError::BadRequest(format!("bad query parameter: {e}")))?;
        }
        Ok(q)
    }
}

/// `SELECT * FROM c WHERE … [ORDER BY c.creationDate …] [OFFSET @o LIMIT …]`.
///
/// The page size is not in the text: it is the SDK's max item count, so the continuation token
/// pages on through all results (a `LIMIT` in the text would end the query after one page).
///
/// Order is by `creationDate` alone. A second key (`c.id`) would need a composite index on
/// `(creationDate, id)` in every container, which the infra's indexing policy does not have, and
/// a multi-property `ORDER BY` without one fails with 400. Ties (same millisecond) come back in
/// the store's own stable order, and continuation tokens remain exact across them.
pub(super) fn select(q: &Query) -> StoreResult<Sql> {
    let mut sql = filtered("SELECT * FROM c", q)?;
    if let Some(order) = q.order_by_creation {
        sql.text.push_str(match order {
            Order::Asc => " ORDER BY c.creationDate ASC",
            Order::Desc => " ORDER BY c.creationDate DESC",
        });
    }
    Ok(sql)
}

/// `SELECT VALUE COUNT(1) FROM c WHERE …` (order and page size do not apply).
pub(super) fn count(q: &Query) -> StoreResult<Sql> {
    filtered("SELECT VALUE COUNT(1) FROM c", q)
}

/// `SELECT VALUE 1 FROM c WHERE …`: one small value per match, for counting where `COUNT`
/// cannot run (across partitions).
pub(super) fn ones(q: &Query) -> StoreResult<Sql> {
    filtered("SELECT VALUE 1 FROM c", q)
}

fn filtered(head: &str, q: &Query) -> StoreResult<Sql> {
    let mut text = head.to_string();
    let mut params = Vec::with_capacity(q.filters.len());
    for (i, f) in q.filters.iter().enumerate() {
        check_field(&f.field)?;
        let name = format!("@p{i}");
        text.push_str(if i == 0 { " WHERE " } else { " AND " });
        let prop = property(&f.field);
        match f.cmp {
            Cmp::Eq => text.push_str(&format!("{prop} = {name}")),
            Cmp::Ne => text.push_str(&format!("{prop} != {name}")),
            Cmp::In => text.push_str(&format!("ARRAY_CONTAINS({name}, {prop})")),
            // `c.x != true` would drop items without `x` (undefined compares as undefined).
            Cmp::NotTrue => {
                text.push_str(&format!("(NOT IS_DEFINED({prop}) OR {prop} != true)"));
                continue;
            }
        }
        params.push((name, f.value.clone()));
    }
    Ok(Sql { text, params })
}

/// `c.field`, or `c["field"]` for a name that is a keyword of the query language (`c.value`
/// would not parse). Dot notation otherwise: the SDK's in-memory emulator does not evaluate
/// bracket notation in filters.
fn property(field: &str) -> String {
    if KEYWORDS.iter().any(|k| k.eq_ignore_ascii_case(field)) {
        format!("c[\"{field}\"]")
    } else {
        format!("c.{field}")
    }
}

/// The reserved words of the Cosmos DB for NoSQL query language.
const KEYWORDS: &[&str] = &[
    "and",
    "array",
    "as",
    "asc",
    "between",
    "by",
    "case",
    "cast",
    "convert",
    "cross",
    "desc",
    "distinct",
    "else",
    "end",
    "escape",
    "exists",
    "false",
    "for",
    "from",
    "group",
    "having",
    "in",
    "inner",
    "insert",
    "into",
    "is",
    "join",
    "left",
    "like",
    "limit",
    "not",
    "null",
    "offset",
    "on",
    "or",
    "order",
    "outer",
    "over",
    "right",
    "select",
    "set",
    "then",
    "top",
    "true",
    "udf",
    "undefined",
    "update",
    "value",
    "when",
    "where",
    "with",
];

/// Top-level property names only, as plain identifiers (they go into the query text).
fn check_field(field: &str) -> StoreResult<()> {
    let mut chars = field.chars();
    let ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(StoreError::BadRequest(format!(
            "bad filter field `{field}`"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Kind;
    use serde_json::json;

    #[test]
    fn cosmos_select_builds_parameterized_partition_queries() {
        let q = Query::partition("u1")
            .of_kind(Kind::Post)
            .ne("userUsername", "ann")
            .order_by_creation(Order::Desc)
            .limit(20);
        let sql = select(&q).unwrap();
        assert_eq!(
            sql.text,
            "SELECT * FROM c WHERE c.type = @p0 AND c.userUsername != @p1 \
             ORDER BY c.creationDate DESC"
        );
        assert_eq!(
            sql.params,
            vec![("@p0".into(), json!("post")), ("@p1".into(), json!("ann"))]
        );
        let asc = select(&Query::partition("p").order_by_creation(Order::Asc)).unwrap();
        assert_eq!(asc.text, "SELECT * FROM c ORDER BY c.creationDate ASC");
    }

    #[test]
    fn cosmos_count_ignores_order_and_paging() {
        let q = Query::partition("p1")
            .of_kind(Kind::Like)
            .order_by_creation(Order::Asc)
            .limit(7);
        let sql = count(&q).unwrap();
        assert_eq!(sql.text, "SELECT VALUE COUNT(1) FROM c WHERE c.type = @p0");
        assert_eq!(sql.params, vec![("@p0".into(), json!("like"))]);
    }

    #[test]
    fn cosmos_filter_fields_must_be_identifiers() {
        for bad in ["", "a.b", "a\"]", "1x", "type OR 1=1", "a-b"] {
            assert!(
                matches!(
                    select(&Query::partition("p").eq(bad, 1)),
                    Err(StoreError::BadRequest(_))
                ),
                "{bad}"
            );
        }
        assert!(select(&Query::partition("p").eq("_ts", 1)).is_ok());
    }

    #[test]
    fn cosmos_keyword_fields_use_bracket_notation() {
        let sql = select(&Query::partition("p").eq("value", 1).eq("Order", 2)).unwrap();
        assert_eq!(
            sql.text,
            "SELECT * FROM c WHERE c[\"value\"] = @p0 AND c[\"Order\"] = @p1"
        );
    }

    #[test]
    fn cosmos_live_keeps_items_without_the_marker() {
        let sql = count(&Query::partition("p1").of_kind(Kind::Comment).live()).unwrap();
        assert_eq!(
            sql.text,
            "SELECT VALUE COUNT(1) FROM c WHERE c.type = @p0 \
             AND (NOT IS_DEFINED(c.deleted) OR c.deleted != true)"
        );
        assert_eq!(sql.params, vec![("@p0".into(), json!("comment"))]);
    }
}
