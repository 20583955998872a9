//! A store wrapper that runs a test's hook before every call: to slow a call down, hold it at a
//! gate, fail it, or panic in it.

use std::sync::Arc;

use async_trait::async_trait;
use blog::store::{BatchOp, ChangePage, Container, Page, PatchOp, Query, Store, StoreResult};
use futures::future::BoxFuture;
use serde_json::Value;

/// One store call as the hook sees it.
#[derive(Debug, Clone)]
pub struct Call {
    pub op: &'static str,
    pub container: Container,
    /// The partition key, or `""` for calls on the whole container.
    pub pk: String,
}

pub type Hook = Arc<dyn Fn(Call) -> BoxFuture<'static, StoreResult<()>> + Send + Sync>;

pub struct Hooked {
    pub inner: Arc<dyn Store>,
    pub hook: Hook,
}

impl Hooked {
    pub fn wrap(
        hook: impl Fn(Call) -> BoxFuture<'static, StoreResult<()>> + Send + Sync + 'static,
    ) -> impl FnOnce(Arc<dyn Store>) -> Arc<dyn Store> {
        move |inner| {
            Arc::new(Hooked {
                inner,
                hook: Arc::new(hook),
            })
        }
    }

    async fn before(&self, op: &'static str, container: Container, pk: &str) -> StoreResult<()> {
        (self.hook)(Call {
            op,
            container,
            pk: pk.to_string(),
        })
        .await
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
    fn change_notifier(&self, c: Container) -> Option<blog::store::ChangeNotifier> {
        self.inner.change_notifier(c)
    }
    async fn read(&self, c: Container, pk: &str, id: &str) -> StoreResult<Option<Value>> {
        self.before("read", c, pk).await?;
        self.inner.read(c, pk, id).await
    }
    async fn create(&self, c: Container, pk: &str, item: Value) -> StoreResult<Value> {
        self.before("create", c, pk).await?;
        self.inner.create(c, pk, item).await
    }
    async fn upsert(&self, c: Container, pk: &str, item: Value) -> StoreResult<Value> {
        self.before("upsert", c, pk).await?;
        self.inner.upsert(c, pk, item).await
    }
    async fn replace(
        &self,
        c: Container,
        pk: &str,
        id: &str,
        item: Value,
        if_match: Option<&str>,
    ) -> StoreResult<Value> {
        self.before("replace", c, pk).await?;
        self.inner.replace(c, pk, id, item, if_match).await
    }
    async fn delete(&self, c: Container, pk: &str, id: &str) -> StoreResult<()> {
        self.before("delete", c, pk).await?;
        self.inner.delete(c, pk, id).await
    }
    async fn patch(
        &self,
        c: Container,
        pk: &str,
        id: &str,
        ops: &[PatchOp],
        if_match: Option<&str>,
    ) -> StoreResult<Value> {
        self.before("patch", c, pk).await?;
        self.inner.patch(c, pk, id, ops, if_match).await
    }
    async fn query(&self, c: Container, q: &Query) -> StoreResult<Page> {
        self.before("query", c, "").await?;
        self.inner.query(c, q).await
    }
    async fn count(&self, c: Container, q: &Query) -> StoreResult<u64> {
        self.before("count", c, "").await?;
        self.inner.count(c, q).await
    }
    async fn batch(&self, c: Container, pk: &str, ops: Vec<BatchOp>) -> StoreResult<Vec<Value>> {
        self.before("batch", c, pk).await?;
        self.inner.batch(c, pk, ops).await
    }
    async fn changes(
        &self,
        c: Container,
        continuation: Option<&str>,
        max_items: u32,
    ) -> StoreResult<ChangePage> {
        self.before("changes", c, "").await?;
        self.inner.changes(c, continuation, max_items).await
    }
}
