//! The store wrapper that notes what each operation touched: the partitions a request's
//! operations name (or the container, when a query fans out across partitions), and the items
//! every write stores, whoever makes it.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use blog::store::{
    BatchOp, ChangePage, Container, Page, PatchOp, Query, Scope, Store, StoreResult,
};
use serde_json::Value;

/// The partitions a piece of work touched.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Touched {
    /// `(container, partition key)` of every single-partition operation.
    pub partitions: BTreeSet<(&'static str, String)>,
    /// Containers queried across all their partitions.
    pub cross: BTreeSet<&'static str>,
}

tokio::task_local! {
    static TOUCHED: Arc<Mutex<Touched>>;
}

/// Run `fut`, noting the partitions its store operations touch. Only operations polled in the
/// same task count, which is what keeps the change-feed pump's work out of a request's tally.
pub async fn touched<F: Future>(fut: F) -> (F::Output, Touched) {
    let t = Arc::new(Mutex::new(Touched::default()));
    let out = TOUCHED.scope(t.clone(), fut).await;
    let touched = t.lock().expect("touched lock").clone();
    (out, touched)
}

fn note(c: Container, scope: Option<&str>) {
    let _ = TOUCHED.try_with(|t| {
        let mut t = t.lock().expect("touched lock");
        match scope {
            Some(pk) => {
                t.partitions.insert((c.name(), pk.to_string()));
            }
            None => {
                t.cross.insert(c.name());
            }
        }
    });
}

fn note_query(c: Container, q: &Query) {
    match &q.scope {
        Scope::Partition(pk) => note(c, Some(pk)),
        Scope::CrossPartition => note(c, None),
    }
}

/// Items written through the [`Tally`] store since the process started, by container: every
/// successful create, upsert, replace, patch and delete, and every write of a successful
/// transactional batch, by whoever made it (a request, any lane of the change feed, the bench's
/// own loading). A figure read around a run divides by its commands.
static WRITES: Mutex<BTreeMap<&'static str, u64>> = Mutex::new(BTreeMap::new());

/// The items written through [`Tally`] so far, by container.
pub fn writes() -> BTreeMap<&'static str, u64> {
    WRITES.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// The items written through [`Tally`] so far, all containers.
pub fn writes_total() -> u64 {
    writes().values().sum()
}

fn wrote<T>(c: Container, items: u64, result: &StoreResult<T>) {
    if result.is_ok() && items > 0 {
        *WRITES
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(c.name())
            .or_default() += items;
    }
}

/// A store that notes the partitions each operation touches and counts the items it writes
/// ([`writes`]), then delegates.
pub struct Tally(pub Arc<dyn Store>);

#[async_trait]
impl Store for Tally {
    fn kind(&self) -> &'static str {
        self.0.kind()
    }

    fn idle_poll(&self) -> std::time::Duration {
        self.0.idle_poll()
    }

    fn change_notifier(&self, c: Container) -> Option<blog::store::ChangeNotifier> {
        self.0.change_notifier(c)
    }

    async fn read(&self, c: Container, pk: &str, id: &str) -> StoreResult<Option<Value>> {
        note(c, Some(pk));
        self.0.read(c, pk, id).await
    }

    async fn create(&self, c: Container, pk: &str, item: Value) -> StoreResult<Value> {
        note(c, Some(pk));
        let r = self.0.create(c, pk, item).await;
        wrote(c, 1, &r);
        r
    }

    async fn upsert(&self, c: Container, pk: &str, item: Value) -> StoreResult<Value> {
        note(c, Some(pk));
        let r = self.0.upsert(c, pk, item).await;
        wrote(c, 1, &r);
        r
    }

    async fn replace(
        &self,
        c: Container,
        pk: &str,
        id: &str,
        item: Value,
        if_match: Option<&str>,
    ) -> StoreResult<Value> {
        note(c, Some(pk));
        let r = self.0.replace(c, pk, id, item, if_match).await;
        wrote(c, 1, &r);
        r
    }

    async fn delete(&self, c: Container, pk: &str, id: &str) -> StoreResult<()> {
        note(c, Some(pk));
        let r = self.0.delete(c, pk, id).await;
        wrote(c, 1, &r);
        r
    }

    async fn delete_if_match(
        &self,
        c: Container,
        pk: &str,
        id: &str,
        etag: &str,
    ) -> StoreResult<()> {
        note(c, Some(pk));
        let r = self.0.delete_if_match(c, pk, id, etag).await;
        wrote(c, 1, &r);
        r
    }

    async fn patch(
        &self,
        c: Container,
        pk: &str,
        id: &str,
        ops: &[PatchOp],
        if_match: Option<&str>,
    ) -> StoreResult<Value> {
        note(c, Some(pk));
        let r = self.0.patch(c, pk, id, ops, if_match).await;
        wrote(c, 1, &r);
        r
    }

    async fn query(&self, c: Container, q: &Query) -> StoreResult<Page> {
        note_query(c, q);
        self.0.query(c, q).await
    }

    async fn count(&self, c: Container, q: &Query) -> StoreResult<u64> {
        note_query(c, q);
        self.0.count(c, q).await
    }

    async fn batch(&self, c: Container, pk: &str, ops: Vec<BatchOp>) -> StoreResult<Vec<Value>> {
        note(c, Some(pk));
        let items = ops
            .iter()
            .filter(|op| !matches!(op, BatchOp::Read { .. }))
            .count() as u64;
        let r = self.0.batch(c, pk, ops).await;
        wrote(c, items, &r);
        r
    }

    async fn changes(
        &self,
        c: Container,
        continuation: Option<&str>,
        max_items: u32,
    ) -> StoreResult<ChangePage> {
        note(c, None);
        self.0.changes(c, continuation, max_items).await
    }
}
