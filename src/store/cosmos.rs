//! The Cosmos DB store: the [`Store`] trait on the `azure_data_cosmos` SDK.
//!
//! - [`connect`]: client, credentials, emulator switches, and the lazy connection (start-up never
//!   waits on Cosmos; calls answer `Unavailable` until it is reachable).
//! - [`bootstrap`]: the opt-in creation of the database and containers for development.
//! - [`sql`]: query text and parameters; [`paging`]: query pages and when a query is done;
//!   [`feed`]: the full-container change feed.
//! - [`errors`]: HTTP statuses to [`StoreError`]s.
//!
//! This file is the trait's implementation and is kept whole: one method per store operation,
//! each read on its own against what the [`Store`] trait promises, with the few helpers they all
//! share (metering, write options); everything that is not a store operation lives in the
//! modules above.
//!
//! Every call records itself once, with the request units it consumed (successful or not), in
//! the per-request [`metrics`]. Items are read as `serde_json::Value`, so an odd document in a
//! mixed container never fails a read or a page.

mod bootstrap;
mod connect;
mod errors;
mod feed;
mod paging;
mod partition_key;
mod sql;

pub use bootstrap::container_definitions;

use std::sync::Arc;

use async_trait::async_trait;
use azure_data_cosmos::diagnostics::DiagnosticsContext;
use azure_data_cosmos::feed::ContinuationToken;
use azure_data_cosmos::models::{
    ItemResponse, PatchInstructions, PatchOperation, TransactionalBatch,
};
use azure_data_cosmos::options::{
    BatchOptions, ContentResponseOnWrite, ItemWriteOptions, OperationOptions, PatchItemOptions,
    PatchStrategy, Precondition, QueryOptions,
};
use azure_data_cosmos::{ContainerClient, CosmosClient, CosmosError};
use futures::StreamExt;
use serde_json::Value;
use tokio::sync::Mutex;

use self::connect::{index, LazyConnection, Source};
use self::errors::{batch_operation_error, continuation_error, error_charge, store_error};
use self::paging::{first_page, page_size, scope};
use self::partition_key::pk;
use super::keys::{check_partition_key, item_id};
use super::{
    metrics, BatchOp, ChangePage, Container, Page, PatchOp, Query, Scope, Store, StoreError,
    StoreResult,
};
use crate::settings::CosmosSettings;

/// The Cosmos DB store. Cheap to share behind an `Arc`; connects on first use.
pub struct CosmosStore {
    conn: Arc<LazyConnection>,
    /// How full-text conditions are written: the service's functions, but for a test on the
    /// SDK's in-memory emulator ([`CosmosStore::with_emulated_full_text`]).
    full_text: sql::FullText,
    /// The live change feed iterators of each container, one per reader (see [`feed`]).
    feeds: [Mutex<feed::Cursors>; Container::ALL.len()],
}

impl CosmosStore {
    /// A store for the account in the settings. Does no I/O: the first call connects.
    pub fn new(settings: CosmosSettings) -> Self {
        Self::from_source(Source::Settings(settings))
    }

    /// A store over a client the caller built, on database `database`; with `create_containers`
    /// the first call creates the database and containers that are missing. Tests use it with a
    /// client on the SDK's in-memory emulator.
    pub fn with_client(
        client: CosmosClient,
        database: impl Into<String>,
        create_containers: bool,
    ) -> Self {
        Self::from_source(Source::Client {
            client,
            database: database.into(),
            create_containers,
        })
    }

    fn from_source(source: Source) -> Self {
        CosmosStore {
            conn: Arc::new(LazyConnection::new(source)),
            full_text: sql::FullText::Service,
            feeds: Default::default(),
        }
    }

    /// For a store on the SDK's in-memory emulator, which evaluates no full-text function:
    /// full-text conditions become case-insensitive substring tests (`CONTAINS(…, true)`), so
    /// that the tests run every other part of the search query on this store. Matching words is
    /// then looser than a real account's (`cat` finds `category`); the query a real account gets
    /// is pinned by a unit test in `sql.rs`. Never for a real account.
    pub fn with_emulated_full_text(self) -> Self {
        CosmosStore {
            full_text: sql::FullText::EmulatorSubstring,
            ..self
        }
    }

    async fn container(&self, c: Container) -> StoreResult<&ContainerClient> {
        Ok(self.conn.get().await?.container(c))
    }
}

/// Records one store operation with the request units it consumed when dropped, so each call
/// records exactly once however it returns.
#[derive(Default)]
struct OpMeter(f64);

impl OpMeter {
    fn add(&mut self, d: &DiagnosticsContext) {
        self.0 += d.total_request_charge().value();
    }

    /// The charge of a failed call, and its error as a store error.
    fn fail(&mut self, e: &CosmosError) -> StoreError {
        self.0 += error_charge(e);
        store_error(e)
    }
}

impl Drop for OpMeter {
    fn drop(&mut self) {
        metrics::record(self.0);
    }
}

/// Options of every write: return the stored item (with its `_etag`), as the `Store` trait
/// promises; the SDK's default leaves write responses empty. Set per call rather than on the
/// client so that a client built elsewhere ([`CosmosStore::with_client`]) behaves the same.
fn with_content() -> OperationOptions {
    let mut o = OperationOptions::default();
    o.content_response_on_write = Some(ContentResponseOnWrite::Enabled);
    o
}

fn write_options() -> ItemWriteOptions {
    ItemWriteOptions::default().with_operation_options(with_content())
}

/// The stored item a write returned (an empty body falls back to what was sent).
fn written(resp: ItemResponse, sent: Value) -> StoreResult<Value> {
    let body = resp.into_body();
    if body.is_empty() {
        return Ok(sent);
    }
    body.into_single::<Value>()
        .map_err(|e| StoreError::Other(format!("unreadable item in a Cosmos DB response: {e}")))
}

#[async_trait]
impl Store for CosmosStore {
    fn kind(&self) -> &'static str {
        "cosmos"
    }

    fn idle_poll(&self) -> std::time::Duration {
        // Every poll of an idle feed reads each partition range and costs request units; once a
        // second keeps the views fresh at the order of the Functions trigger's default.
        std::time::Duration::from_secs(1)
    }

    fn change_notifier(&self, _: Container) -> Option<super::ChangeNotifier> {
        // Other instances and tools write to the account too: the change feed is polled.
        None
    }

    async fn read(&self, c: Container, key: &str, id: &str) -> StoreResult<Option<Value>> {
        let mut m = OpMeter::default();
        let container = self.container(c).await?;
        match container.read_item(pk(key), id, None).await {
            Ok(resp) => {
                m.add(&resp.diagnostics());
                resp.into_model::<Value>().map(Some).map_err(|e| {
                    StoreError::Other(format!("unreadable item in a Cosmos DB response: {e}"))
                })
            }
            Err(e) => match m.fail(&e) {
                StoreError::NotFound => Ok(None),
                other => Err(other),
            },
        }
    }

    async fn create(&self, c: Container, key: &str, item: Value) -> StoreResult<Value> {
        let mut m = OpMeter::default();
        check_partition_key(c, key, &item)?;
        let id = item_id(&item)?.to_string();
        let container = self.container(c).await?;
        match container
            .create_item(pk(key), &id, &item, Some(write_options()))
            .await
        {
            Ok(resp) => {
                m.add(&resp.diagnostics());
                written(resp, item)
            }
            Err(e) => Err(m.fail(&e)),
        }
    }

    async fn upsert(&self, c: Container, key: &str, item: Value) -> StoreResult<Value> {
        let mut m = OpMeter::default();
        check_partition_key(c, key, &item)?;
        let id = item_id(&item)?.to_string();
        let container = self.container(c).await?;
        match container
            .upsert_item(pk(key), &id, &item, Some(write_options()))
            .await
        {
            Ok(resp) => {
                m.add(&resp.diagnostics());
                written(resp, item)
            }
            Err(e) => Err(m.fail(&e)),
        }
    }

    async fn replace(
        &self,
        c: Container,
        key: &str,
        id: &str,
        item: Value,
        if_match: Option<&str>,
    ) -> StoreResult<Value> {
        let mut m = OpMeter::default();
        check_partition_key(c, key, &item)?;
        if item_id(&item)? != id {
            return Err(StoreError::BadRequest(
                "replace cannot change an item's id".into(),
            ));
        }
        let mut options = write_options();
        if let Some(etag) = if_match {
            options = options.with_precondition(Precondition::if_match(etag.to_string()));
        }
        let container = self.container(c).await?;
        match container
            .replace_item(pk(key), id, &item, Some(options))
            .await
        {
            Ok(resp) => {
                m.add(&resp.diagnostics());
                written(resp, item)
            }
            Err(e) => Err(m.fail(&e)),
        }
    }

    async fn delete(&self, c: Container, key: &str, id: &str) -> StoreResult<()> {
        let mut m = OpMeter::default();
        let container = self.container(c).await?;
        match container.delete_item(pk(key), id, None).await {
            Ok(resp) => {
                m.add(&resp.diagnostics());
                Ok(())
            }
            Err(e) => Err(m.fail(&e)),
        }
    }

    async fn delete_if_match(
        &self,
        c: Container,
        key: &str,
        id: &str,
        etag: &str,
    ) -> StoreResult<()> {
        let mut m = OpMeter::default();
        let options = write_options().with_precondition(Precondition::if_match(etag.to_string()));
        let container = self.container(c).await?;
        match container.delete_item(pk(key), id, Some(options)).await {
            Ok(resp) => {
                m.add(&resp.diagnostics());
                Ok(())
            }
            Err(e) => Err(m.fail(&e)),
        }
    }

    async fn patch(
        &self,
        c: Container,
        key: &str,
        id: &str,
        ops: &[PatchOp],
        if_match: Option<&str>,
    ) -> StoreResult<Value> {
        let mut m = OpMeter::default();
        let operations = ops
            .iter()
            .map(|op| match op {
                PatchOp::Set(path, value) => PatchOperation::set(path.clone(), value.clone()),
                PatchOp::Incr(path, by) => PatchOperation::increment(path.clone(), *by),
            })
            .collect::<Vec<_>>();
        // Server-side, always: the SDK's default turns an `incr` (not safe to repeat) into a
        // client-side read + replace, which can lose a concurrent change and leaves an
        // `_azsdkPatchTracking` property in the item. A server-side `incr` retried after an
        // ambiguous failure may count twice; the change feed's recount corrects that.
        let mut options = PatchItemOptions::default()
            .with_strategy(PatchStrategy::ServerSide)
            .with_operation_options(with_content());
        if let Some(etag) = if_match {
            options = options.with_precondition(Precondition::if_match(etag.to_string()));
        }
        let container = self.container(c).await?;
        match container
            .patch_item(
                pk(key),
                id,
                PatchInstructions::from(operations),
                Some(options),
            )
            .await
        {
            Ok(resp) => {
                m.add(&resp.diagnostics());
                resp.into_model::<Value>().map_err(|e| {
                    StoreError::Other(format!("unreadable item in a Cosmos DB response: {e}"))
                })
            }
            Err(e) => Err(m.fail(&e)),
        }
    }

    async fn query(&self, c: Container, q: &Query) -> StoreResult<Page> {
        let mut m = OpMeter::default();
        let container = self.container(c).await?;
        let sql = sql::select(q, self.full_text)?.into_query()?;
        let mut options = QueryOptions::default().with_max_item_count(page_size(q.limit));
        if let Some(t) = &q.continuation {
            options = options.with_continuation_token(ContinuationToken::from_string(t.clone()));
        }
        let map_err = |e: &CosmosError| match q.continuation {
            Some(_) => continuation_error(e),
            None => store_error(e),
        };
        let items = match container
            .query_items::<Value>(sql, scope(&q.scope), Some(options))
            .await
        {
            Ok(items) => items,
            Err(e) => {
                m.0 += error_charge(&e);
                return Err(map_err(&e));
            }
        };
        first_page(&mut items.into_pages(), &mut m, map_err).await
    }

    async fn count(&self, c: Container, q: &Query) -> StoreResult<u64> {
        let mut m = OpMeter::default();
        let container = self.container(c).await?;
        // The SDK (1.0) refuses aggregates in cross-partition queries (400/20113), even scoped
        // to one partition key range. Across partitions, count the matches client-side from a
        // `SELECT VALUE 1`; only a single-partition count is one cheap `COUNT(1)` (and that is
        // the only count the service performs).
        let (sql, summed) = match &q.scope {
            Scope::Partition(_) => (sql::count(q, self.full_text)?, true),
            Scope::CrossPartition => (sql::ones(q, self.full_text)?, false),
        };
        let options = QueryOptions::default().with_max_item_count(page_size(1000));
        let mut pages = match container
            .query_items::<Value>(sql.into_query()?, scope(&q.scope), Some(options))
            .await
        {
            Ok(items) => items.into_pages(),
            Err(e) => return Err(m.fail(&e)),
        };
        let mut total = 0;
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| m.fail(&e))?;
            m.add(&page.diagnostics());
            for v in page.into_items() {
                total += if summed {
                    v.as_u64().ok_or_else(|| {
                        StoreError::Other(format!("COUNT returned a non-number: {v}"))
                    })?
                } else {
                    1
                };
            }
        }
        Ok(total)
    }

    async fn batch(&self, c: Container, key: &str, ops: Vec<BatchOp>) -> StoreResult<Vec<Value>> {
        let mut m = OpMeter::default();
        if ops.is_empty() {
            return Ok(Vec::new());
        }
        let serialize = |index: usize, e: CosmosError| StoreError::BatchFailed {
            index,
            source: Box::new(StoreError::BadRequest(e.to_string())),
        };
        let mut batch = TransactionalBatch::new(pk(key));
        for (index, op) in ops.into_iter().enumerate() {
            if let BatchOp::Create { item } = &op {
                check_partition_key(c, key, item).map_err(|e| StoreError::BatchFailed {
                    index,
                    source: Box::new(e),
                })?;
            }
            batch = match op {
                BatchOp::Read { id } => batch.read_item(id, None),
                BatchOp::Create { item } => {
                    batch.create_item(item).map_err(|e| serialize(index, e))?
                }
            };
        }
        let container = self.container(c).await?;
        let resp = match container
            .execute_transactional_batch(
                batch,
                Some(BatchOptions::default().with_operation_options(with_content())),
            )
            .await
        {
            Ok(resp) => resp,
            Err(e) => return Err(m.fail(&e)),
        };
        m.add(&resp.diagnostics());
        let response = resp
            .into_model()
            .map_err(|e| StoreError::Other(format!("unreadable batch response: {e}")))?;
        let results = response.results();
        // A failed batch is not an error to the SDK: it answers 207 Multi-Status, with the
        // failing operation's own status and 424 (failed dependency) for all the others.
        if results.iter().any(|r| !r.is_success()) {
            let (index, failed) = results
                .iter()
                .enumerate()
                .find(|(_, r)| !r.is_success() && r.status_code() != 424)
                .or_else(|| results.iter().enumerate().find(|(_, r)| !r.is_success()))
                .expect("a failed result exists");
            return Err(StoreError::BatchFailed {
                index,
                source: Box::new(batch_operation_error(
                    failed.status_code(),
                    failed.retry_after(),
                )),
            });
        }
        results
            .iter()
            .map(|r| {
                r.into_model::<Value>()
                    .map(|v| v.unwrap_or(Value::Null))
                    .map_err(|e| StoreError::Other(format!("unreadable batch result: {e}")))
            })
            .collect()
    }

    async fn changes(
        &self,
        c: Container,
        continuation: Option<&str>,
        max_items: u32,
    ) -> StoreResult<ChangePage> {
        let mut m = OpMeter::default();
        let container = self.container(c).await?;
        let mut cursors = self.feeds[index(c)].lock().await;
        let mut cursor = cursors.take(continuation, max_items);
        let (result, charge) =
            feed::next_changes(container, &mut cursor, continuation, max_items).await;
        cursors.put(cursor);
        m.0 += charge;
        result
    }
}
