//! Applying planned writes through the store, retrying transient errors.

use futures::stream::{self, TryStreamExt};

use super::plan::Write;
use crate::store::{retry, Store, StoreError};

/// Apply one write. A patch or delete of an item that no longer exists is moot, and so is a
/// conditional patch of an item that changed since it was read (its newer change is projected
/// in turn).
pub async fn apply_one(store: &dyn Store, w: &Write) -> Result<(), StoreError> {
    let result = retry(|| async {
        match w {
            Write::Upsert {
                container,
                pk,
                item,
            } => store.upsert(*container, pk, item.clone()).await.map(drop),
            Write::Patch {
                container,
                pk,
                id,
                ops,
                if_match,
            } => match store
                .patch(*container, pk, id, ops, if_match.as_deref())
                .await
            {
                Err(StoreError::PreconditionFailed) if if_match.is_some() => Ok(()),
                other => other.map(drop),
            },
            Write::Delete { container, pk, id } => store.delete(*container, pk, id).await,
        }
    })
    .await;
    match result {
        Ok(()) | Err(StoreError::NotFound) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Apply planned writes in order; on failure, the index of the write that failed.
pub async fn apply(store: &dyn Store, writes: &[Write]) -> Result<(), (usize, StoreError)> {
    for (i, w) in writes.iter().enumerate() {
        apply_one(store, w).await.map_err(|e| (i, e))?;
    }
    Ok(())
}

/// Apply writes that do not depend on each other, at most `concurrency` at a time.
pub async fn apply_unordered(
    store: &dyn Store,
    writes: &[Write],
    concurrency: usize,
) -> Result<(), (usize, StoreError)> {
    stream::iter(writes.iter().enumerate().map(Ok))
        .try_for_each_concurrent(concurrency, |(i, w)| async move {
            apply_one(store, w).await.map_err(|e| (i, e))
        })
        .await
}
