//! Walking a container: every page of a query in turn, each read retried like the projections'.

use futures::stream;
use serde_json::Value;

use crate::store::{retry, Container, Query, Store, StoreResult};

/// Every page of a query, one after another.
pub fn pages<'s>(
    store: &'s dyn Store,
    c: Container,
    q: Query,
) -> impl futures::Stream<Item = StoreResult<Vec<Value>>> + 's {
    stream::try_unfold(Some(q), move |q| async move {
        let Some(q) = q else { return Ok(None) };
        let page = retry(|| store.query(c, &q)).await?;
        let next = page.continuation.map(|t| q.clone().continuation(Some(t)));
        Ok(Some((page.items, next)))
    })
}
