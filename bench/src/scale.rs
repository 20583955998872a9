//! The scale rows: where the design tops out, measured at a scale the options choose
//! (`docs/scale.md` derives the ceilings from them). Every figure comes through the API and the
//! store's meters (the requests' `x-store-operations` / `x-request-charge`, the change feed's
//! `blog::store::metrics::projections`, the items written through the bench's store wrapper,
//! `measure::writes`), so that the rows measure whatever the product does behind them.
//!
//! - [`writes`] (W): store writes per like for authors of each `--audiences`, `--likes` likes
//!   at `--like-rate` and then in a burst.
//! - [`others`] (L): other users' feed and follow lag while an author of `--hot-followers`
//!   followers is liked, renames, deletes a post and crosses the fan-out limit.
//! - [`pages`] (T2, T3): a timeline page of an ordinary reader and of one following
//!   `--merged-authors` merged authors, and the memory of `--timeline-readers` such reads at once.
//! - [`price`] (P): a like on a post with `--price-likes` likes against one on a post with 10.

pub mod others;
pub mod pages;
pub mod price;
pub mod writes;

use anyhow::Context as _;
use blog::domain::follows::{follower_id, following_id, REF_USER};
use blog::store::{Container, PatchOp, Query, Store, StoreError};
use std::sync::Arc;

use serde_json::json;
use tokio::task::JoinSet;

use crate::args::ScaleRow;
use crate::dataset;
use crate::measure::Req;
use crate::runner::Bench;

/// The groups to run, each once, in a fixed order (`none` runs none).
pub fn chosen(rows: &[ScaleRow]) -> Vec<ScaleRow> {
    let mut out: Vec<ScaleRow> = rows
        .iter()
        .copied()
        .filter(|r| *r != ScaleRow::None)
        .collect();
    out.sort();
    out.dedup();
    out
}

/// A group's name in the report.
pub fn name(row: ScaleRow) -> &'static str {
    match row {
        ScaleRow::Writes => "writes",
        ScaleRow::Lag => "lag",
        ScaleRow::Timeline => "timeline",
        ScaleRow::Price => "price",
        ScaleRow::None => "none",
    }
}

impl Bench {
    /// `author` posts through the API (C2); the post's id.
    pub async fn create_post(&mut self, author: &str) -> anyhow::Result<String> {
        let (title, content) = dataset::post_text(&mut self.rng);
        let created = self
            .client
            .send(&Req::post(
                "/api/posts",
                json!({ "userId": author, "title": title, "content": content }),
            ))
            .await?;
        Ok(created.body["id"]
            .as_str()
            .context("the created post has no id")?
            .to_string())
    }

    /// Take every author written with their followers ([`Bench::write_followed_author`]) back
    /// to no followers, removing what was written for them the way it was written: straight
    /// from the store, beside the change feed (the followers' users and edges, the author's
    /// mirrors, the timeline items of the author in any timeline), then the author's counter
    /// set to 0 through a patch, whose change lets the projections see them with no followers
    /// (a merged author is copied again, which now reaches no one). So a later row setting
    /// its own fan-out limit sends no big author across it: a limit of 0 (T3) would otherwise
    /// write a marker for each of their followers.
    pub async fn retire_big_authors(&mut self) -> anyhow::Result<()> {
        let authors = std::mem::take(&mut self.big_authors);
        if authors.is_empty() {
            return Ok(());
        }
        let store = self.store.clone();
        for (author, followers) in &authors {
            let mut removals: Vec<(Container, String, String)> = Vec::new();
            for f in followers {
                removals.push((Container::Users, f.clone(), following_id(author)));
                removals.push((Container::Users, f.clone(), f.clone()));
                removals.push((Container::Users, author.clone(), follower_id(f)));
            }
            remove_all(&store, removals).await?;
            // Their entries and markers, in whichever timelines hold them.
            loop {
                let q = Query::cross_partition()
                    .eq(REF_USER, author.as_str())
                    .limit(1000);
                let page = store.query(Container::Timelines, &q).await?;
                if page.items.is_empty() && page.continuation.is_none() {
                    break;
                }
                let found: Vec<(Container, String, String)> = page
                    .items
                    .iter()
                    .filter_map(|i| {
                        let (pk, id) = (i["userId"].as_str()?, i["id"].as_str()?);
                        Some((Container::Timelines, pk.to_string(), id.to_string()))
                    })
                    .collect();
                if found.is_empty() {
                    break;
                }
                remove_all(&store, found).await?;
            }
            let none = [PatchOp::set("/followerCount", 0)];
            match store
                .patch(Container::Users, author, author, &none, None)
                .await
            {
                Ok(_) | Err(StoreError::NotFound) => {}
                Err(e) => return Err(e.into()),
            }
        }
        self.settle().await?;
        eprintln!(
            "bench: retired {} authors with followers ({} followers)",
            authors.len(),
            authors.iter().map(|(_, f)| f.len()).sum::<usize>()
        );
        Ok(())
    }
}

/// Delete each item (container, partition key, id), sixteen at a time; one already gone is
/// fine.
async fn remove_all(
    store: &Arc<dyn Store>,
    items: Vec<(Container, String, String)>,
) -> anyhow::Result<()> {
    for chunk in items.chunks(16) {
        let mut set = JoinSet::new();
        for (c, pk, id) in chunk.iter().cloned() {
            let store = store.clone();
            set.spawn(async move {
                match store.delete(c, &pk, &id).await {
                    Ok(()) | Err(StoreError::NotFound) => Ok(()),
                    Err(e) => Err(anyhow::Error::from(e)),
                }
            });
        }
        while let Some(done) = set.join_next().await {
            done??;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_run_once_each_in_order_and_none_runs_none() {
        use ScaleRow::*;
        assert_eq!(chosen(&[Price, Writes, Price]), [Writes, Price]);
        assert_eq!(chosen(&[None]), []);
        assert_eq!(
            chosen(&crate::args::ALL_SCALE_ROWS),
            [Writes, Lag, Timeline, Price]
        );
    }
}
