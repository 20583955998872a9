//! Query pages: how many items a page asks for, which partitions a query reads, and when a
//! query is done. The SDK's continuation token says so, in a form read here; a page of a
//! cross-partition query may be empty while later partitions still hold items, so empty pages
//! are read past rather than handed to the caller.

use std::num::NonZeroU32;

use azure_data_cosmos::feed::{FeedScope, QueryPageIterator};
use azure_data_cosmos::options::MaxItemCountHint;
use azure_data_cosmos::CosmosError;
use base64::Engine as _;
use futures::StreamExt;
use serde_json::Value;

use super::errors::{error_charge, store_error};
use super::partition_key::pk;
use super::OpMeter;
use crate::store::{Page, Scope, StoreError, StoreResult};

pub(super) fn page_size(limit: u32) -> MaxItemCountHint {
    MaxItemCountHint::Limit(NonZeroU32::new(limit.max(1)).expect("at least one"))
}

pub(super) fn scope(s: &Scope) -> FeedScope {
    match s {
        Scope::Partition(key) => FeedScope::partition(pk(key)),
        Scope::CrossPartition => FeedScope::full_container(),
    }
}

/// Whether an SDK query continuation token says the query has no more results: `None` when the
/// token is not in the form this SDK version writes (`c1.` + base64url JSON whose `root` node
/// is `{"kind": "drained"}` once every partition is read).
fn query_drained(token: &str) -> Option<bool> {
    let payload = token.strip_prefix("c1.")?;
    let json = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .ok()?;
    let state: Value = serde_json::from_slice(&json).ok()?;
    let kind = state.get("root")?.get("kind")?.as_str()?;
    Some(kind == "drained")
}

/// Read pages until one has items or the query is done; the continuation is `None` when done.
pub(super) async fn first_page(
    pages: &mut QueryPageIterator<Value>,
    meter: &mut OpMeter,
    map_err: impl Fn(&CosmosError) -> StoreError,
) -> StoreResult<Page> {
    loop {
        let page = match pages.next().await {
            None => {
                return Ok(Page {
                    items: Vec::new(),
                    continuation: None,
                })
            }
            Some(Err(e)) => {
                meter.0 += error_charge(&e);
                return Err(map_err(&e));
            }
            Some(Ok(page)) => page,
        };
        meter.add(&page.diagnostics());
        let items = page.into_items();
        let token = pages.to_continuation_token().map_err(|e| store_error(&e))?;
        let token = token.as_str().to_string();
        let more = match query_drained(&token) {
            Some(drained) => !drained,
            // A token of an unknown shape: trust it while pages have items, so a client gets
            // at most one empty page at the end rather than paging forever.
            None => !items.is_empty(),
        };
        // A cross-partition query reads partition after partition: an empty page from one of
        // them says nothing about the others.
        if items.is_empty() && more {
            continue;
        }
        return Ok(Page {
            items,
            continuation: more.then_some(token),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(json: &str) -> String {
        format!(
            "c1.{}",
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json)
        )
    }

    #[test]
    fn cosmos_query_tokens_tell_when_the_query_is_done() {
        let done = token(r#"{"op":"Query","rid":"x","root":{"kind":"drained"}}"#);
        assert_eq!(query_drained(&done), Some(true));
        let more = token(r#"{"op":"Query","rid":"x","root":{"kind":"request","c":"abc"}}"#);
        assert_eq!(query_drained(&more), Some(false));
        assert_eq!(query_drained("opaque-server-token"), None);
        assert_eq!(query_drained("c1.%%%"), None);
    }
}
