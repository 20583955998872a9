//! The one store wrapper of the tests: it delegates every call to the real store and runs a test's
//! hooks before and after each one (to slow a call down, hold it at a gate, fail it, panic in it,
//! count it, or write something of its own around it). It can also answer point reads of chosen
//! items with an older version (a read through a lagging session) and report another idle poll.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use blog::store::{
    BatchOp, ChangePage, Container, Page, PatchOp, Query, Scope, Store, StoreResult,
};
use futures::future::BoxFuture;
use serde_json::Value;

/// One store call as the hook sees it.
#[derive(Debug, Clone)]
pub struct Call {
    pub op: &'static str,
    pub container: Container,
    /// The partition key (a query's or count's partition), or `""` for calls on the whole
    /// container.
    pub pk: String,
    /// The item's id, or `""` for calls on more than one item.
    pub id: String,
}

pub type Hook = Arc<dyn Fn(Call) -> BoxFuture<'static, StoreResult<()>> + Send + Sync>;

pub struct Hooked {
    pub inner: Arc<dyn Store>,
    /// Runs before the call; an error is the call's answer and the store is not called.
    pub before: Hook,
    /// Runs after the store answered (whatever the answer); an error replaces the answer.
    pub after: Hook,
    /// Point reads of these items (container name, id) answer this version.
    stale: Mutex<HashMap<(&'static str, String), Value>>,
    idle_poll: Option<Duration>,
}

/// The partition a query reads, or `""` for one across partitions.
fn scope_of(q: &Query) -> &str {
    match &q.scope {
        Scope::Partition(pk) => pk,
        Scope::CrossPartition => "",
    }
}

fn no_hook() -> Hook {
    Arc::new(|_| Box::pin(async { Ok(()) }))
}

impl Hooked {
    /// `inner` with no hooks yet.
    pub fn new(inner: Arc<dyn Store>) -> Self {
        Hooked {
            inner,
            before: no_hook(),
            after: no_hook(),
            stale: Mutex::new(HashMap::new()),
            idle_poll: None,
        }
    }

    /// The store's idle poll reported as `every` instead of the inner store's.
    pub fn polling_every(mut self, every: Duration) -> Self {
        self.idle_poll = Some(every);
        self
    }

    /// Point reads of this item answer `old` from now on.
    pub fn serve_stale(&self, c: Container, id: &str, old: Value) {
        self.stale
            .lock()
            .unwrap()
            .insert((c.name(), id.to_string()), old);
    }

    pub fn before(
        mut self,
        hook: impl Fn(Call) -> BoxFuture<'static, StoreResult<()>> + Send + Sync + 'static,
    ) -> Self {
        self.before = Arc::new(hook);
        self
    }

    pub fn after(
        mut self,
        hook: impl Fn(Call) -> BoxFuture<'static, StoreResult<()>> + Send + Sync + 'static,
    ) -> Self {
        self.after = Arc::new(hook);
        self
    }

    /// A wrapper that runs `hook` before every call.
    pub fn wrap(
        hook: impl Fn(Call) -> BoxFuture<'static, StoreResult<()>> + Send + Sync + 'static,
    ) -> impl FnOnce(Arc<dyn Store>) -> Arc<dyn Store> {
        move |inner| Arc::new(Hooked::new(inner).before(hook))
    }

    /// Runs the call `f` on the inner store between the two hooks.
    async fn around<T>(
        &self,
        op: &'static str,
        container: Container,
        pk: &str,
        id: &str,
        f: impl std::future::Future<Output = StoreResult<T>>,
    ) -> StoreResult<T> {
        let call = Call {
            op,
            container,
            pk: pk.to_string(),
            id: id.to_string(),
        };
        (self.before)(call.clone()).await?;
        let answer = f.await;
        (self.after)(call).await?;
        answer
    }
}

#[async_trait]
impl Store for Hooked {
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }
    fn idle_poll(&self) -> Duration {
        self.idle_poll.unwrap_or_else(|| self.inner.idle_poll())
    }
    fn change_notifier(&self, c: Container) -> Option<blog::store::ChangeNotifier> {
        self.inner.change_notifier(c)
    }
    async fn read(&self, c: Container, pk: &str, id: &str) -> StoreResult<Option<Value>> {
        let stale = self
            .stale
            .lock()
            .unwrap()
            .get(&(c.name(), id.to_string()))
            .cloned();
        let read = async {
            match stale {
                Some(old) => Ok(Some(old)),
                None => self.inner.read(c, pk, id).await,
            }
        };
        self.around("read", c, pk, id, read).await
    }
    async fn create(&self, c: Container, pk: &str, item: Value) -> StoreResult<Value> {
        let id = item["id"].as_str().unwrap_or_default().to_string();
        self.around("create", c, pk, &id, self.inner.create(c, pk, item))
            .await
    }
    async fn upsert(&self, c: Container, pk: &str, item: Value) -> StoreResult<Value> {
        let id = item["id"].as_str().unwrap_or_default().to_string();
        self.around("upsert", c, pk, &id, self.inner.upsert(c, pk, item))
            .await
    }
    async fn replace(
        &self,
        c: Container,
        pk: &str,
        id: &str,
        item: Value,
        if_match: Option<&str>,
    ) -> StoreResult<Value> {
        self.around(
            "replace",
            c,
            pk,
            id,
            self.inner.replace(c, pk, id, item, if_match),
        )
        .await
    }
    async fn delete(&self, c: Container, pk: &str, id: &str) -> StoreResult<()> {
        self.around("delete", c, pk, id, self.inner.delete(c, pk, id))
            .await
    }
    async fn delete_if_match(
        &self,
        c: Container,
        pk: &str,
        id: &str,
        etag: &str,
    ) -> StoreResult<()> {
        let deleted = self.inner.delete_if_match(c, pk, id, etag);
        self.around("delete", c, pk, id, deleted).await
    }
    async fn patch(
        &self,
        c: Container,
        pk: &str,
        id: &str,
        ops: &[PatchOp],
        if_match: Option<&str>,
    ) -> StoreResult<Value> {
        self.around(
            "patch",
            c,
            pk,
            id,
            self.inner.patch(c, pk, id, ops, if_match),
        )
        .await
    }
    async fn query(&self, c: Container, q: &Query) -> StoreResult<Page> {
        self.around("query", c, scope_of(q), "", self.inner.query(c, q))
            .await
    }
    async fn count(&self, c: Container, q: &Query) -> StoreResult<u64> {
        self.around("count", c, scope_of(q), "", self.inner.count(c, q))
            .await
    }
    async fn batch(&self, c: Container, pk: &str, ops: Vec<BatchOp>) -> StoreResult<Vec<Value>> {
        self.around("batch", c, pk, "", self.inner.batch(c, pk, ops))
            .await
    }
    async fn changes(
        &self,
        c: Container,
        continuation: Option<&str>,
        max_items: u32,
    ) -> StoreResult<ChangePage> {
        self.around(
            "changes",
            c,
            "",
            "",
            self.inner.changes(c, continuation, max_items),
        )
        .await
    }
}
