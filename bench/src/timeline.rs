//! T1: a personal timeline read, V3 only (the article has no follows). Each reader follows
//! [`FOLLOWS`] authors drawn from the loaded users first (not measured); the change feed copies
//! their newest posts into the reader's timeline; then the reads are measured like Q6's, which
//! reads the one global feed the same way.

use reqwest::Method;

use crate::measure::Req;
use crate::results::Row;
use crate::runner::Bench;

/// Authors each reader follows.
const FOLLOWS: usize = 10;

impl Bench {
    pub async fn timeline(&mut self) -> anyhow::Result<Row> {
        let readers = self.users(self.n());
        for reader in &readers {
            for author in self.users(FOLLOWS) {
                if author.id == reader.id {
                    continue;
                }
                let follow = Req {
                    method: Method::PUT,
                    path: format!("/api/users/{}/following/{}", reader.id, author.id),
                    body: None,
                };
                self.client.send(&follow).await?;
            }
        }
        self.settle().await?;
        let limit = self.args.feed_limit;
        let reqs = readers
            .iter()
            .map(|r| Req::get(format!("/api/users/{}/timeline?limit={limit}", r.id)))
            .collect();
        self.row_v3(
            "T1",
            "List the x most recent posts of the users a user follows (timeline)",
            reqs,
        )
        .await
    }
}
