//! G1: a tag's page (`GET /api/tags/{tag}/posts`), one query of the tag's partition of `feed`.
//!
//! The dataset's posts carry no tags, so the row first writes `--feed-limit` posts tagged
//! [`TAG`] (and one other tag each) through the API, by users of the dataset, lets the change
//! feed copy them, then reads the tag's first page `--warmup` + `--samples` times. Run before
//! S2, after every row its posts could change.

use anyhow::bail;
use serde_json::json;

use crate::dataset;
use crate::measure::Req;
use crate::results::Row;
use crate::runner::Bench;

/// The tag the row's posts carry and its page reads.
pub const TAG: &str = "bench-tag";

impl Bench {
    /// G1: the tag's page, after `--feed-limit` posts tagged with it.
    pub async fn tag_page(&mut self) -> anyhow::Result<Row> {
        let limit = self.args.feed_limit;
        let authors = self.users(limit as usize);
        for (i, author) in authors.iter().enumerate() {
            let (title, content) = dataset::post_text(&mut self.rng);
            let body = json!({ "userId": author.id, "title": title, "content": content,
                               "tags": [TAG, format!("other-{}", i % 4)] });
            let a = self.client.send(&Req::post("/api/posts", body)).await?;
            if a.body.get("id").is_none() {
                bail!("a tagged post was not created: {}", a.body);
            }
        }
        self.settle().await?;
        let page = format!("/api/tags/{TAG}/posts?limit={limit}");
        let reqs = (0..self.n()).map(|_| Req::get(page.clone())).collect();
        let row = self.row_v3("G1", "A tag's posts", reqs).await?;
        let a = self.client.send(&Req::get(page.clone())).await?;
        let found = a.body["items"].as_array().map_or(0, Vec::len);
        if found != limit as usize {
            bail!("{page} answered {found} posts, not {limit}: {}", a.body);
        }
        Ok(row)
    }
}
