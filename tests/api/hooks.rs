//! A store wrapper that runs a test's hooks before and after every call: to slow a call down, hold
//! it at a gate, fail it, panic in it, or write something of its own around it.

use std::sync::Arc;

use async_trait::async_trait;
use blog::store::{
    BatchOp, ChangePage, ConditionalRead, Container, Page, PatchOp, Query, Store, StoreResult,
};
use futures::future::BoxFuture;
use serde_json::Value;

/// One store call as the hook sees it.
#[derive(Debug, Clone)]
pub struct Call {
    pub op: &'static str,
    pub container: Container,
    /// The partition key, or `""` for calls on the whole container.
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
        }
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
    fn idle_poll(&self) -> std::time::Duration {
        self.inner.idle_poll()
    }
    async fn read_if_none_match(
        &self,
        c: Container,
        pk: &str,
        id: &str,
        etag: &str,
    ) -> StoreResult<ConditionalRead> {
        self.around(
            "read",
            c,
            pk,
            id,
            self.inner.read_if_none_match(c, pk, id, etag),
        )
        .await
    }
    fn change_notifier(&self, c: Container) -> Option<blog::store::ChangeNotifier> {
        self.inner.change_notifier(c)
    }
    async fn read(&self, c: Container, pk: &str, id: &str) -> StoreResult<Option<Value>> {
        self.around("read", c, pk, id, self.inner.read(c, pk, id))
            .await
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
        self.around("query", c, "", "", self.inner.query(c, q))
            .await
    }
    async fn count(&self, c: Container, q: &Query) -> StoreResult<u64> {
        self.around("count", c, "", "", self.inner.count(c, q))
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
