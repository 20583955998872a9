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
use serde_json::json;

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
