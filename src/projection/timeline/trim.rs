//! Trimming a timeline to its newest entries (`docs/ARCHITECTURE.md`, "Trimming"), for the
//! copies and the backfills that add to it.

use crate::domain::follows::{MERGE, TIMELINE, TIMELINE_KEEP};
use crate::domain::Meta;
use crate::projection::engine::{sweep, Sweep, CONCURRENCY, PAGE};
use crate::projection::write::Write;
use crate::store::{Container, Order, Query, Store, StoreResult};

/// Delete the entries of `f`'s timeline beyond its [`TIMELINE_KEEP`] newest (merge markers are
/// not entries: the query leaves them out and they stay), a page at a time. Never deletes one of
/// the newest, whatever runs concurrently: an entry beyond the newest of what was read is beyond
/// the newest of the whole. Only `timelines` is trimmed: entries an earlier release left in
/// `users` are trimmed once moved. Returns how many.
pub async fn trim(store: &dyn Store, f: &str) -> StoreResult<usize> {
    let q = Query::partition(f)
        .eq("type", TIMELINE)
        .not_true(MERGE)
        .order_by_creation(Order::Desc)
        .limit(TIMELINE_KEEP as u32 + PAGE);
    let s = Sweep {
        container: Container::Timelines,
        query: q,
        keep: TIMELINE_KEEP,
        pages: usize::MAX,
        concurrency: CONCURRENCY,
        what: "trimmed",
    };
    let trimmed = sweep(store, s, |i| {
        Some(Write::delete(Container::Timelines, f, Meta::of(i).id?))
    })
    .await?;
    Ok(trimmed.0)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::domain::follows::{timeline_id, MergeMarker, MARKER_DATE, REF_USER};
    use crate::store::embedded::EmbeddedStore;

    /// A timeline following more authors over the fan-out limit than a trim reads at once still
    /// has its entries trimmed: the markers (newest first by their date) are not entries.
    #[tokio::test]
    async fn markers_filling_a_page_do_not_hide_the_entries_from_the_trim() {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(&dir.path().join("blog.db")).unwrap();
        let owner = "ana";
        for i in 0..TIMELINE_KEEP as u32 + PAGE {
            let marker = MergeMarker::new(owner, &format!("author{i}"));
            assert_eq!(marker.creation_date, MARKER_DATE);
            let marker = marker.to_item();
            store
                .create(Container::Timelines, owner, marker)
                .await
                .unwrap();
        }
        let entries = TIMELINE_KEEP + 10;
        for i in 0..entries {
            let entry = json!({
                "id": timeline_id(&format!("post{i:04}")),
                "type": TIMELINE,
                "userId": owner,
                REF_USER: "bob",
                "creationDate": format!("2026-01-01T00:{:02}:{:02}.000Z", i / 60, i % 60),
            });
            store
                .create(Container::Timelines, owner, entry)
                .await
                .unwrap();
        }
        assert_eq!(trim(&store, owner).await.unwrap(), entries - TIMELINE_KEEP);
        let left = Query::partition(owner).eq("type", TIMELINE).not_true(MERGE);
        assert_eq!(
            store.count(Container::Timelines, &left).await.unwrap(),
            TIMELINE_KEEP as u64
        );
    }
}
