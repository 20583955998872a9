//! One stored item by its id (its own partition key), as the routes read and update it: read
//! unless deleted, and patched only while its view still has the tag `If-Match` names.

use serde::Serialize;
use serde_json::Value;

use super::answer::view_tag;
use super::views::View;
use crate::domain::Id;
use crate::error::{ApiError, ApiResult};
use crate::store::{Container, Store, StoreResult};

/// Read the item `id` (its own partition key) in one store operation: `None` when there is
/// none or it is deleted (a deleted item is no item whatever the request's conditions name).
pub(super) async fn read_item(
    store: &dyn Store,
    c: Container,
    id: &Id,
) -> StoreResult<Option<Value>> {
    let id = id.as_str();
    Ok(store
        .read(c, id, id)
        .await?
        .filter(|item| !crate::domain::is_deleted(item)))
}

/// Times an `If-Match` update re-reads an item whose store version moved without a change to
/// its view (the change feed's bookkeeping) before it gives up with 412.
const IF_MATCH_ATTEMPTS: usize = 4;

/// Patch the item `id` (its own partition key) with `ops` while its view `V` still has the tag
/// `if_match` names: `item` is the item as last read. The tag is compared with the view of the
/// item read, and the patch is conditional on the store version of that read, so a change made
/// in between is never overwritten; when that version has moved but the view is the same, the
/// item is read again and the patch retried. 412 when the view differs, 404 when the item is
/// gone.
pub(super) async fn patch_if_match<V: View + Serialize>(
    store: &dyn Store,
    c: Container,
    id: &Id,
    mut item: Value,
    if_match: &str,
    ops: &[crate::store::PatchOp],
) -> ApiResult<Value> {
    for _ in 0..IF_MATCH_ATTEMPTS {
        if view_tag::<V>(&item)? != if_match {
            return Err(crate::store::StoreError::PreconditionFailed.into());
        }
        let etag = item.get("_etag").and_then(Value::as_str);
        match store.patch(c, id.as_str(), id.as_str(), ops, etag).await {
            Ok(written) => return Ok(written),
            Err(crate::store::StoreError::PreconditionFailed) => {
                item = read_item(store, c, id)
                    .await?
                    .ok_or_else(|| ApiError::not_found(V::KIND, id.as_str()))?;
            }
            Err(crate::store::StoreError::NotFound) => {
                return Err(ApiError::not_found(V::KIND, id.as_str()))
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(crate::store::StoreError::PreconditionFailed.into())
}
