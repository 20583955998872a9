//! Queries as the store trait takes them: partition-scoped (or, for the few sweeps by author,
//! cross-partition) filters, ordered by creation date, paged by opaque continuation tokens.

use serde_json::Value;

/// Comparison in a query filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmp {
    Eq,
    Ne,
    /// The property is anything but `true`, missing included (the filter's value is ignored).
    /// Unlike `Ne`, it matches items without the property: in Cosmos DB a comparison with a
    /// missing property is undefined, which no filter matches.
    NotTrue,
    /// The property equals one of the filter's values (a JSON array of them).
    In,
}

/// `c.<field> <cmp> <value>`; fields are top-level property names.
#[derive(Debug, Clone, PartialEq)]
pub struct Filter {
    pub field: String,
    pub cmp: Cmp,
    pub value: Value,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    Asc,
    Desc,
}

/// Which partitions a query reads.
#[derive(Debug, Clone, PartialEq)]
pub enum Scope {
    /// One partition: the only kind the request path uses.
    Partition(String),
    /// Every partition: only the change feed's work uses this (the username fan-out, and the
    /// names of a batch's authors, read at once).
    CrossPartition,
}

/// A full-text condition: every one of `words` is a word of at least one of `fields` (a word may
/// be in one field and the next word in another), words as the store's full-text analyzer reads
/// them (case and English word endings do not matter; docs/api.md's search section says where
/// the stores differ). Only the fields a store indexes for full text may be named: the posts'
/// `title`, `content` and `tags` ([`SEARCHABLE`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Words {
    pub fields: Vec<String>,
    pub words: Vec<String>,
}

impl Words {
    /// What every store refuses: no field, a field not indexed for full text, no word, or an
    /// empty one.
    pub fn check(&self) -> super::StoreResult<()> {
        if self.fields.is_empty()
            || self
                .fields
                .iter()
                .any(|f| !SEARCHABLE.contains(&f.as_str()))
        {
            return Err(super::StoreError::BadRequest(format!(
                "only the posts' {SEARCHABLE:?} are indexed for full text"
            )));
        }
        if self.words.is_empty() || self.words.iter().any(|w| w.trim().is_empty()) {
            return Err(super::StoreError::BadRequest(
                "a full-text condition needs at least one word".into(),
            ));
        }
        Ok(())
    }
}

/// The fields of a post indexed for full text, in `posts` (the Cosmos DB container's full-text
/// policy and the embedded store's FTS5 table hold the same list). A field joins by being
/// added here, to the full-text paths and indexes (`cosmos/bootstrap.rs` follows this list;
/// `infra/modules/cosmos.bicep` names them), and as a column of the FTS5 table, which a schema
/// migration rebuilds and refills from the posts (`embedded/schema.rs`).
pub const SEARCHABLE: [&str; 3] = ["title", "content", "tags"];

/// The fields of [`SEARCHABLE`] that hold a list of strings (a post's `tags`), not one.
pub const SEARCHABLE_LISTS: [&str; 1] = ["tags"];

/// A query on one container: `SELECT * FROM c WHERE <filters, ANDed> [AND <words>]
/// [ORDER BY c.creationDate <order>, c.id <order>] LIMIT limit`, paged by an
/// opaque continuation token. `count_only` turns it into `SELECT VALUE COUNT(1)`.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    pub scope: Scope,
    pub filters: Vec<Filter>,
    /// A full-text condition ANDed with the filters.
    pub words: Option<Words>,
    /// Order by `creationDate` (ties broken by `id`); `None` means store order.
    pub order_by_creation: Option<Order>,
    /// Page size.
    pub limit: u32,
    pub continuation: Option<String>,
}

impl Query {
    pub fn partition(pk: impl Into<String>) -> Self {
        Query {
            scope: Scope::Partition(pk.into()),
            filters: Vec::new(),
            words: None,
            order_by_creation: None,
            limit: 100,
            continuation: None,
        }
    }

    pub fn cross_partition() -> Self {
        Query {
            scope: Scope::CrossPartition,
            ..Query::partition("")
        }
    }

    pub fn eq(mut self, field: &str, value: impl Into<Value>) -> Self {
        self.filters.push(Filter {
            field: field.into(),
            cmp: Cmp::Eq,
            value: value.into(),
        });
        self
    }

    pub fn ne(mut self, field: &str, value: impl Into<Value>) -> Self {
        self.filters.push(Filter {
            field: field.into(),
            cmp: Cmp::Ne,
            value: value.into(),
        });
        self
    }

    /// `c.<field>` is one of `values`.
    pub fn any_of(mut self, field: &str, values: impl IntoIterator<Item = String>) -> Self {
        self.filters.push(Filter {
            field: field.into(),
            cmp: Cmp::In,
            value: Value::Array(values.into_iter().map(Value::String).collect()),
        });
        self
    }

    /// Only items of this kind (`c.type = kind`).
    pub fn of_kind(self, kind: crate::domain::Kind) -> Self {
        self.eq(crate::domain::Kind::FIELD, kind.as_str())
    }

    /// Only items that are not soft-deleted (no `deleted: true`, see [`crate::domain::DELETED`]):
    /// every read hides deleted items in the same query that finds the others.
    pub fn live(self) -> Self {
        self.not_true(crate::domain::DELETED)
    }

    /// Only items whose `field` is anything but `true`, those without it included.
    pub fn not_true(mut self, field: &str) -> Self {
        self.filters.push(Filter {
            field: field.into(),
            cmp: Cmp::NotTrue,
            value: Value::Bool(true),
        });
        self
    }

    /// Only items where each of `words` is a word of one of `fields` (see [`Words`]).
    pub fn containing_words(mut self, fields: &[&str], words: Vec<String>) -> Self {
        self.words = Some(Words {
            fields: fields.iter().map(|f| f.to_string()).collect(),
            words,
        });
        self
    }

    pub fn order_by_creation(mut self, order: Order) -> Self {
        self.order_by_creation = Some(order);
        self
    }

    pub fn limit(mut self, limit: u32) -> Self {
        self.limit = limit;
        self
    }

    pub fn continuation(mut self, token: Option<String>) -> Self {
        self.continuation = token;
        self
    }
}

/// One page of query results.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    pub items: Vec<Value>,
    /// `Some` when more items may follow.
    pub continuation: Option<String>,
}
