//! The Cosmos DB SQL text and parameters of a [`Query`]: values always travel as parameters,
//! never inside the text, and field names are checked to be plain identifiers.

use serde_json::Value;

use crate::store::{Cmp, Order, Query, StoreError, StoreResult, Words, SEARCHABLE_LISTS};

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

/// How a full-text condition ([`Words`]) is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FullText {
    /// The service's full-text search: `FullTextContains(c.title, @w0)`, a word of the field as
    /// the container's full-text policy analyzes it (the policy and index on `title` and
    /// `content` come from infra and `BLOG_CREATE_CONTAINERS`). Every real account.
    Service,
    /// `CONTAINS(c.title, @w0, true)`, a case-insensitive substring (for a list, `tags`:
    /// `ARRAY_CONTAINS(c.tags, @w0)`, one of its strings exactly): for the SDK's in-memory
    /// emulator only, which evaluates no full-text function, so that the tests run the rest of
    /// the search query (its filters, order, paging across partitions) on the Cosmos store.
    /// Nothing but a test selects it ([`super::CosmosStore::with_emulated_full_text`]).
    EmulatorSubstring,
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
pub(super) fn select(q: &Query, text: FullText) -> StoreResult<Sql> {
    let mut sql = filtered("SELECT * FROM c", q, text)?;
    if let Some(order) = q.order_by_creation {
        sql.text.push_str(match order {
            Order::Asc => " ORDER BY c.creationDate ASC",
            Order::Desc => " ORDER BY c.creationDate DESC",
        });
    }
    Ok(sql)
}

/// `SELECT VALUE COUNT(1) FROM c WHERE …` (order and page size do not apply).
pub(super) fn count(q: &Query, text: FullText) -> StoreResult<Sql> {
    filtered("SELECT VALUE COUNT(1) FROM c", q, text)
}

/// `SELECT VALUE 1 FROM c WHERE …`: one small value per match, for counting where `COUNT`
/// cannot run (across partitions).
pub(super) fn ones(q: &Query, text: FullText) -> StoreResult<Sql> {
    filtered("SELECT VALUE 1 FROM c", q, text)
}

fn filtered(head: &str, q: &Query, full_text: FullText) -> StoreResult<Sql> {
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
    if let Some(words) = &q.words {
        text.push_str(if q.filters.is_empty() {
            " WHERE "
        } else {
            " AND "
        });
        text.push_str(&words_condition(words, full_text, &mut params)?);
    }
    Ok(Sql { text, params })
}

/// Each word in one of the fields: `(FullTextContains(c.title, @w0) OR
/// FullTextContains(c.content, @w0) OR FullTextContains(c.tags, @w0)) AND (… @w1 …)`. Not `FullTextContainsAll`, which takes one
/// field: a post whose title holds one word and its content the other matches. Not ranked
/// (`ORDER BY RANK FullTextScore`): the SDK refuses ranked queries across partitions, and the
/// stores would rank differently; the caller orders by creation date.
fn words_condition(
    words: &Words,
    full_text: FullText,
    params: &mut Vec<(String, Value)>,
) -> StoreResult<String> {
    words.check()?;
    let mut each = Vec::with_capacity(words.words.len());
    for (i, word) in words.words.iter().enumerate() {
        let name = format!("@w{i}");
        let any_field: Vec<String> = words
            .fields
            .iter()
            .map(|f| match full_text {
                FullText::Service => format!("FullTextContains({}, {name})", property(f)),
                FullText::EmulatorSubstring if SEARCHABLE_LISTS.contains(&f.as_str()) => {
                    format!("ARRAY_CONTAINS({}, {name})", property(f))
                }
                FullText::EmulatorSubstring => format!("CONTAINS({}, {name}, true)", property(f)),
            })
            .collect();
        each.push(format!("({})", any_field.join(" OR ")));
        params.push((name, Value::String(word.clone())));
    }
    Ok(each.join(" AND "))
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
        let sql = select(&q, FullText::Service).unwrap();
        assert_eq!(
            sql.text,
            "SELECT * FROM c WHERE c.type = @p0 AND c.userUsername != @p1 \
             ORDER BY c.creationDate DESC"
        );
        assert_eq!(
            sql.params,
            vec![("@p0".into(), json!("post")), ("@p1".into(), json!("ann"))]
        );
        let asc = select(
            &Query::partition("p").order_by_creation(Order::Asc),
            FullText::Service,
        )
        .unwrap();
        assert_eq!(asc.text, "SELECT * FROM c ORDER BY c.creationDate ASC");
    }

    #[test]
    fn cosmos_count_ignores_order_and_paging() {
        let q = Query::partition("p1")
            .of_kind(Kind::Like)
            .order_by_creation(Order::Asc)
            .limit(7);
        let sql = count(&q, FullText::Service).unwrap();
        assert_eq!(sql.text, "SELECT VALUE COUNT(1) FROM c WHERE c.type = @p0");
        assert_eq!(sql.params, vec![("@p0".into(), json!("like"))]);
    }

    #[test]
    fn cosmos_filter_fields_must_be_identifiers() {
        for bad in ["", "a.b", "a\"]", "1x", "type OR 1=1", "a-b"] {
            assert!(
                matches!(
                    select(&Query::partition("p").eq(bad, 1), FullText::Service),
                    Err(StoreError::BadRequest(_))
                ),
                "{bad}"
            );
        }
        assert!(select(&Query::partition("p").eq("_ts", 1), FullText::Service).is_ok());
    }

    #[test]
    fn cosmos_keyword_fields_use_bracket_notation() {
        let sql = select(
            &Query::partition("p").eq("value", 1).eq("Order", 2),
            FullText::Service,
        )
        .unwrap();
        assert_eq!(
            sql.text,
            "SELECT * FROM c WHERE c[\"value\"] = @p0 AND c[\"Order\"] = @p1"
        );
    }

    #[test]
    fn cosmos_live_keeps_items_without_the_marker() {
        let sql = count(
            &Query::partition("p1").of_kind(Kind::Comment).live(),
            FullText::Service,
        )
        .unwrap();
        assert_eq!(
            sql.text,
            "SELECT VALUE COUNT(1) FROM c WHERE c.type = @p0 \
             AND (NOT IS_DEFINED(c.deleted) OR c.deleted != true)"
        );
        assert_eq!(sql.params, vec![("@p0".into(), json!("comment"))]);
    }

    /// The search query as a real account runs it, pinned word for word: the in-memory emulator
    /// cannot evaluate `FullTextContains`, so the suite runs this query with its substring
    /// stand-in, and this test holds the one difference to the function's name and arguments.
    #[test]
    fn cosmos_search_query_is_pinned() {
        let q = Query::cross_partition()
            .of_kind(Kind::Post)
            .live()
            .containing_words(
                &crate::store::SEARCHABLE,
                vec!["rust".into(), "cosmos".into()],
            )
            .order_by_creation(Order::Desc);
        let service = select(&q, FullText::Service).unwrap();
        assert_eq!(
            service.text,
            "SELECT * FROM c WHERE c.type = @p0 \
             AND (NOT IS_DEFINED(c.deleted) OR c.deleted != true) \
             AND (FullTextContains(c.title, @w0) OR FullTextContains(c.content, @w0) \
             OR FullTextContains(c.tags, @w0)) \
             AND (FullTextContains(c.title, @w1) OR FullTextContains(c.content, @w1) \
             OR FullTextContains(c.tags, @w1)) \
             ORDER BY c.creationDate DESC"
        );
        assert_eq!(
            service.params,
            vec![
                ("@p0".into(), json!("post")),
                ("@w0".into(), json!("rust")),
                ("@w1".into(), json!("cosmos"))
            ]
        );
        let emulated = select(&q, FullText::EmulatorSubstring).unwrap();
        assert_eq!(
            emulated.text,
            service
                .text
                .replace(
                    "FullTextContains(c.title, @w0)",
                    "CONTAINS(c.title, @w0, true)"
                )
                .replace(
                    "FullTextContains(c.content, @w0)",
                    "CONTAINS(c.content, @w0, true)"
                )
                .replace(
                    "FullTextContains(c.title, @w1)",
                    "CONTAINS(c.title, @w1, true)"
                )
                .replace(
                    "FullTextContains(c.content, @w1)",
                    "CONTAINS(c.content, @w1, true)"
                )
                .replace(
                    "FullTextContains(c.tags, @w0)",
                    "ARRAY_CONTAINS(c.tags, @w0)"
                )
                .replace(
                    "FullTextContains(c.tags, @w1)",
                    "ARRAY_CONTAINS(c.tags, @w1)"
                )
        );
        assert_eq!(emulated.params, service.params);
    }

    #[test]
    fn cosmos_search_takes_only_indexed_fields_and_some_words() {
        let words = |fields: &[&str], words: &[&str]| {
            select(
                &Query::cross_partition()
                    .containing_words(fields, words.iter().map(|w| w.to_string()).collect()),
                FullText::Service,
            )
        };
        assert!(words(&["title"], &["a"]).is_ok());
        for (fields, ws) in [
            (&["userUsername"][..], &["a"][..]),
            (&[][..], &["a"][..]),
            (&["title"][..], &[][..]),
            (&["title"][..], &[" "][..]),
        ] {
            assert!(
                matches!(words(fields, ws), Err(StoreError::BadRequest(_))),
                "{fields:?} {ws:?}"
            );
        }
    }
}
