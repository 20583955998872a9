//! The posts part of `handler verify`: posts' names and counters, their copies in `users` and
//! the feed, checked by [`super::verify`] against [`super::expected`], mended by
//! [`super::repair`] and reported by [`super::report`].

use std::fmt::Write as _;

use super::part::{Finding, Found, Part, Pass, Tally};
use super::repair::{self, Repaired};
use super::report::{self, Report};
use super::verify;
use crate::store::Store;

pub const PART: Part = Part {
    name: "posts",
    run: |store, pass| Box::pin(run(store, pass)),
};

/// The verification, and with `--repair` the repair and the verification after it.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub before: Report,
    pub repair: Option<(Repaired, Report)>,
}

impl Outcome {
    /// The state the database was left in.
    pub fn last(&self) -> &Report {
        self.repair.as_ref().map_or(&self.before, |(_, r)| r)
    }
}

async fn run(store: &dyn Store, pass: &Pass<'_>) -> anyhow::Result<Box<dyn Found>> {
    let before = verify::verify(store, &(pass.progress)(), pass.settle).await?;
    let repair = if pass.repair && !before.is_clean() {
        let done = repair::repair(store, &before, &(pass.progress)()).await;
        let after = verify::verify(store, &(pass.progress)(), pass.settle).await?;
        Some((done, after))
    } else {
        None
    };
    Ok(Box::new(Outcome { before, repair }))
}

impl Found for Outcome {
    fn tally(&self) -> Tally {
        let last = self.last();
        Tally {
            checked: last.total_checked(),
            drifted: last.drifted_items,
            lagging: last.lagging,
            quarantined: 0,
        }
    }

    fn render(&self) -> String {
        let mut out = report::render(&self.before);
        if let Some((done, after)) = &self.repair {
            let _ = writeln!(
                out,
                "before repair: {} items checked, {} drifted",
                self.before.total_checked(),
                self.before.drifted_items
            );
            let _ = writeln!(
                out,
                "repair: {} posts replayed through the projections, {} post copies and {} feed \
                 entries deleted",
                done.replayed, done.deleted_copies, done.deleted_feed
            );
            for f in &done.failed {
                let _ = writeln!(out, "  not repaired: {f}");
            }
            out.push_str("after repair:\n");
            out.push_str(&report::render(after));
        }
        out
    }

    fn findings(&self) -> Vec<Finding> {
        self.before
            .findings()
            .map(|d| Finding {
                kind: d.kind.name(),
                target: d.target(),
                detail: d.detail.clone(),
            })
            .collect()
    }

    fn lag_known(&self) -> bool {
        self.before.lag_known
    }
}
