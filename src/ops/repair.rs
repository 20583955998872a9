//! `handler verify --repair`: mend what a verification found, safely while the service runs.
//!
//! Nothing here decides on its own what a derived value should be. Each post with drift (in its
//! own name or counters, a comment's or like's name, its copy in `users` or in `feed`) is handed
//! to the posts projection again, as the change feed would, with a pending count that asks for a
//! recount: the projection re-reads the post, the author and the counts, and writes what it
//! plans: patches of only the fields that differ (a counter conditioned on the post's `_etag`,
//! so a concurrent increment is never overwritten),
//! copies from the post as it is now, the feed trimmed to the newest. That is idempotent and
//! is what the service itself does with every change, so it is safe beside it.
//!
//! What the projection cannot reach is a copy whose post no longer exists; such a copy is
//! deleted after the post's absence is confirmed by a fresh read (a feed entry also when its post
//! is too old ever to rank among the newest again).

use futures::stream::{self, StreamExt};
use serde_json::Value;

use super::newest::{feed_key, FeedKey};
use super::progress::Progress;
use super::report::Report;
use super::PARTITIONS_IN_FLIGHT;
use crate::domain::{is_deleted, Authored, FEED_PK};
use crate::projection::{self, INCREMENT_GRACE};
use crate::store::{retry, Container, Store, StoreError, StoreResult};

/// What a repair did.
#[derive(Debug, Default, Clone)]
pub struct Repaired {
    /// Posts handed to the projection again.
    pub replayed: u64,
    /// Copies in `users` and entries in `feed` deleted.
    pub deleted_copies: u64,
    pub deleted_feed: u64,
    /// What could not be repaired (`container/pk/id: why`).
    pub failed: Vec<String>,
}

/// Write the fixes for what `report` found.
pub async fn repair(store: &dyn Store, report: &Report, progress: &Progress) -> Repaired {
    let mut done = Repaired::default();
    let todo = &report.todo;

    progress.stage("replaying posts");
    let mut results = stream::iter(&todo.replay)
        .map(|(post_id, docs)| async move { (post_id, replay(store, post_id, docs).await) })
        .buffer_unordered(PARTITIONS_IN_FLIGHT);
    while let Some((post_id, result)) = results.next().await {
        match result {
            Ok(()) => done.replayed += 1,
            Err(e) => done.failed.push(format!("posts/{post_id}/{post_id}: {e}")),
        }
        progress.inc(1);
    }

    progress.stage("deleting copies");
    for (user_id, post_id) in &todo.extra_copies {
        let target = format!("users/{user_id}/{post_id}");
        let result = async {
            let post = retry(|| store.read(Container::Posts, post_id, post_id)).await?;
            if post.as_ref().and_then(Authored::author_of).as_ref() == Some(user_id) {
                return Ok(false); // its post has appeared since: not extra any more
            }
            delete(store, Container::Users, user_id, post_id).await
        }
        .await;
        match result {
            Ok(deleted) => done.deleted_copies += u64::from(deleted),
            Err(e) => done.failed.push(format!("{target}: {e}")),
        }
        progress.inc(1);
    }

    for id in &todo.extra_feed {
        let result = async {
            let post = retry(|| store.read(Container::Posts, id, id))
                .await?
                .filter(|p| !is_deleted(p));
            if !too_old_for_the_feed(post.as_ref(), todo.oldest_newest.as_ref()) {
                return Ok(false);
            }
            delete(store, Container::Feed, FEED_PK, id).await
        }
        .await;
        match result {
            Ok(deleted) => done.deleted_feed += u64::from(deleted),
            Err(e) => done.failed.push(format!("feed/{FEED_PK}/{id}: {e}")),
        }
        progress.inc(1);
    }
    progress.finish();
    done
}

/// Documents handed to the projection at once: the size of a change-feed batch.
const REPLAY_BATCH: usize = 100;
/// How many times a counter left behind a young item is looked at again before the repair
/// leaves it to the service's own recheck.
const RECHECKS: u32 = 5;

/// Hand a post's documents to the posts projection, as its change feed would, in batches of
/// the size the change feed delivers. The projection recounts a post only when a pending count
/// asks it to, so one that asks for a recount at once is filed first. A counter the projection
/// defers (a change announced by a younger pending count may be on its way) is rechecked once
/// that grace has passed, as the service's drivers do.
async fn replay(
    store: &dyn Store,
    post_id: &str,
    docs: &[Value],
) -> Result<(), projection::ProjectionError> {
    let owed = crate::domain::pending::recount_owed(post_id);
    retry(|| store.upsert(Container::Posts, post_id, owed.clone()))
        .await
        .map_err(|e| projection::ProjectionError {
            unit: "",
            reason: e.to_string(),
            not_applied: vec![format!("posts/{post_id}/{post_id}")],
        })?;
    for batch in docs.chunks(REPLAY_BATCH) {
        let mut report = projection::project(store, Container::Posts, batch).await?;
        let mut rounds = 0;
        while !report.deferred.is_empty() && rounds < RECHECKS {
            tokio::time::sleep(INCREMENT_GRACE).await;
            let again: Vec<Value> = report
                .deferred
                .iter()
                .map(|p| projection::recheck(p))
                .collect();
            report = projection::project(store, Container::Posts, &again).await?;
            rounds += 1;
        }
    }
    // A counter set by the recount leaves the pending count for the next look, which finds the
    // counter right and deletes it.
    projection::project(store, Container::Posts, &[projection::recheck(post_id)]).await?;
    Ok(())
}

/// A feed entry can go when its post does not exist (or is deleted), or ranks at or below the oldest of the
/// newest posts as gathered (posts are never back-dated, so it cannot rank again).
fn too_old_for_the_feed(post: Option<&Value>, oldest_newest: Option<&FeedKey>) -> bool {
    match (post.and_then(feed_key), oldest_newest) {
        (None, _) => true,
        (Some(key), Some(oldest)) => key <= *oldest,
        (Some(_), None) => false,
    }
}

/// Delete an item; `false` when it was already gone.
async fn delete(store: &dyn Store, c: Container, pk: &str, id: &str) -> StoreResult<bool> {
    match retry(|| store.delete(c, pk, id)).await {
        Ok(()) => Ok(true),
        Err(StoreError::NotFound) => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_a_gone_or_outranked_post_loses_its_feed_entry() {
        let oldest = ("2026-01-01T00:00:10.000Z".to_string(), "p10".to_string());
        let post = |date: &str, id: &str| json!({"id": id, "creationDate": date});
        assert!(too_old_for_the_feed(None, Some(&oldest)));
        assert!(too_old_for_the_feed(None, None));
        assert!(too_old_for_the_feed(
            Some(&post("2026-01-01T00:00:09.000Z", "p9")),
            Some(&oldest)
        ));
        // Newer than the oldest of the newest: created since they were gathered.
        assert!(!too_old_for_the_feed(
            Some(&post("2026-01-01T00:00:11.000Z", "p11")),
            Some(&oldest)
        ));
        assert!(!too_old_for_the_feed(
            Some(&post("2026-01-01T00:00:11.000Z", "p11")),
            None
        ));
    }
}
