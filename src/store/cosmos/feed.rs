//! The change feed of a whole container through the SDK's pull model.
//!
//! A full-container change feed is one SDK iterator polling the container's partition key ranges
//! round-robin, one range per page. The round-robin position is not part of the continuation
//! token, so an iterator rebuilt from a token always starts at the first range; rebuilt on every
//! call, it would read only that range for as long as it had changes (or none at all). So the
//! store keeps the live iterator of each container between calls and reuses it when the caller
//! resumes from the token the store handed out last; any other token (a retry from an older
//! checkpoint, a restart) rebuilds it from that token.
//!
//! Several readers may follow one container, each from its own continuation (the pump's lanes
//! each keep their own checkpoint): the store keeps an iterator per reader ([`Cursors`]), found
//! by the token it handed out last, so readers taking turns do not rebuild each other's
//! iterators, which would again read only the first range.
//!
//! One call polls until a page has changes or every range has been polled once, so an empty
//! result really means "nothing new for now".

use std::num::NonZeroU32;

use azure_data_cosmos::feed::{ChangeFeedPageIterator, ContinuationToken, FeedScope};
use azure_data_cosmos::models::ChangeFeedItem;
use azure_data_cosmos::options::{ChangeFeedOptions, ChangeFeedStartFrom, MaxItemCountHint};
use azure_data_cosmos::ContainerClient;
use futures::StreamExt;
use serde_json::Value;

use super::errors::{continuation_error, error_charge, store_error};
use crate::store::{ChangePage, StoreError, StoreResult};

/// Items are read as plain JSON values so that one odd document never fails a page.
type Pages = ChangeFeedPageIterator<ChangeFeedItem<Value>>;

/// The live iterators of one container's readers, the most recently used last.
#[derive(Default)]
pub(super) struct Cursors(Vec<FeedCursor>);

impl Cursors {
    /// Iterators kept per container: one per reader that follows it (the pump's lanes), with
    /// room to spare; beyond it the one used least recently goes (its reader rebuilds it).
    const KEPT: usize = 4;

    /// The iterator standing at `continuation`, taken out for one call, if any.
    pub(super) fn take(
        &mut self,
        continuation: Option<&str>,
        max_items: u32,
    ) -> Option<FeedCursor> {
        let at = self
            .0
            .iter()
            .position(|c| Some(c.token.as_str()) == continuation && c.max_items == max_items)?;
        Some(self.0.remove(at))
    }

    /// Keep `cursor` (as the call left it) for its reader's next call.
    pub(super) fn put(&mut self, cursor: Option<FeedCursor>) {
        if let Some(c) = cursor {
            if self.0.len() >= Self::KEPT {
                self.0.remove(0);
            }
            self.0.push(c);
        }
    }
}

/// A live change feed iterator and where it stands.
pub(super) struct FeedCursor {
    /// The token this iterator resumes from (the last one handed out).
    token: String,
    max_items: u32,
    /// How many partition key ranges the container had when the iterator was built: the
    /// number of polls that visit every range once.
    ranges: usize,
    pages: Pages,
}

/// Read the next changes of `container` from `continuation` (`None`: from the beginning), reusing
/// `cursor` when it stands at that continuation. Returns the page and the request charge.
pub(super) async fn next_changes(
    container: &ContainerClient,
    cursor: &mut Option<FeedCursor>,
    continuation: Option<&str>,
    max_items: u32,
) -> (StoreResult<ChangePage>, f64) {
    let mut charge = 0.0;
    let reusable = matches!(
        (&*cursor, continuation),
        (Some(c), Some(t)) if c.token == t && c.max_items == max_items
    );
    // A token the caller brings that the SDK or service rejects is a bad request.
    let callers_token = !reusable && continuation.is_some();
    if !reusable {
        *cursor = None;
        match open(container, continuation, max_items).await {
            Ok(c) => *cursor = Some(c),
            Err(e) => return (Err(e), charge),
        }
    }
    let Some(c) = cursor.as_mut() else {
        unreachable!("the cursor was just opened")
    };

    let mut items = Vec::new();
    for _ in 0..c.ranges.max(1) {
        match c.pages.next().await {
            Some(Ok(page)) => {
                charge += page.diagnostics().total_request_charge().value();
                // Deletes have no `current` in "latest version" mode; they are not delivered.
                items.extend(
                    page.into_items()
                        .into_iter()
                        .filter_map(|i| i.current().cloned()),
                );
                if !items.is_empty() {
                    break;
                }
            }
            Some(Err(e)) => {
                charge += error_charge(&e);
                // A failed iterator yields nothing more: rebuild from the last token next time.
                *cursor = None;
                let err = if callers_token {
                    feed_continuation_error(&e)
                } else {
                    store_error(&e)
                };
                return (Err(err), charge);
            }
            None => {
                *cursor = None;
                return (
                    Err(StoreError::Other(
                        "the change feed ended unexpectedly".into(),
                    )),
                    charge,
                );
            }
        }
    }
    match c.pages.to_continuation_token() {
        Ok(token) => {
            c.token = token.as_str().to_string();
            let page = ChangePage {
                items,
                continuation: c.token.clone(),
            };
            (Ok(page), charge)
        }
        Err(e) => {
            *cursor = None;
            (Err(store_error(&e)), charge)
        }
    }
}

/// Build the iterator for `continuation`, or from the beginning of the container.
async fn open(
    container: &ContainerClient,
    continuation: Option<&str>,
    max_items: u32,
) -> StoreResult<FeedCursor> {
    let mut options = ChangeFeedOptions::default().with_max_item_count(MaxItemCountHint::Limit(
        NonZeroU32::new(max_items.max(1)).expect("at least one"),
    ));
    if let Some(t) = continuation {
        options = options.with_continuation_token(ContinuationToken::from_string(t.to_string()));
    }
    let pages = container
        .query_change_feed::<Value>(
            FeedScope::full_container(),
            ChangeFeedStartFrom::Beginning,
            Some(options),
        )
        .await
        .map_err(|e| match continuation {
            Some(_) => feed_continuation_error(&e),
            None => store_error(&e),
        })?;
    let ranges = container
        .read_feed_ranges(None)
        .await
        .map_err(|e| store_error(&e))?
        .len();
    Ok(FeedCursor {
        token: continuation.unwrap_or_default().to_string(),
        max_items,
        ranges,
        pages,
    })
}

fn feed_continuation_error(e: &azure_data_cosmos::CosmosError) -> StoreError {
    match continuation_error(e) {
        StoreError::BadContinuation(m) => StoreError::BadContinuation(format!("change feed: {m}")),
        other => other,
    }
}
