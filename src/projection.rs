//! Change-feed projections: the article's V2/V3 denormalizations (see "How it works" in
//! `docs/ARCHITECTURE.md`).
//!
//! Each change is treated as a *notification*: the projection re-reads the source of truth (the
//! post, the author, the post's pending counts, the feed) and writes what follows from it. A
//! repeated or stale batch therefore re-writes the current state and never an older one, and a
//! username that raced a new post, comment or like is corrected when that item is next seen.
//!
//! Each projection is one module that says what it watches, reads and writes (its
//! [`Unit`]); the lanes run them in the order of one table, [`UNITS`]:
//! - [`posts`]: counters, names, the post copies in `users` and the feed (posts feed);
//! - [`rename`]: a user's name carried to their posts and copies (users feed);
//! - [`cascade`]: what a deletion implies, shared with the requests that delete, and an
//!   account's erasure (users feed);
//! - [`follows`]: follow mirrors and counts (users feed);
//! - [`timeline`]: the personal timelines (both feeds), with the merged authors ([`over_limit`])
//!   and the move of timeline items an earlier release kept in `users` ([`upgrade`]);
//! - [`bookmarks`]: bookmarks' copies in the bookmarkers' partitions, and `bookmarkCount`.
//! - [`tags`]: each tag's copies of its posts and the tags' counts (posts feed).
//!
//! What they all do the same way is written once: [`engine`] (writes applied with retries,
//! reads never older than the change, paging sweeps, bounded steps in job items), [`write`]
//! (a planned write) and [`fanout`] (copies of a post kept in the partitions of the users
//! related to it).
//!
//! Two lanes over the same two feeds ([`Lane`]), each with its own followers and checkpoints
//! (standalone) or trigger functions and leases (under the Functions host), so that one never
//! waits on the other:
//! - [`Lane::Main`]: the article's projections (counters, the post copies in `users` and the
//!   feed, renames of a user's own items, erasure) and the follow mirrors and counts;
//! - [`Lane::Timeline`]: the personal timelines ([`timeline`]), whose fan-out grows with an
//!   author's audience and runs in bounded steps.
//!
//! [`project_lane`] is the one entry: the standalone pump and the Functions triggers both call
//! it, once per lane; [`project`] runs both lanes on one batch, one after the other.

pub mod bookmarks;
pub mod cascade;
pub mod change;
pub mod engine;
pub mod fanout;
pub mod follows;
pub mod over_limit;
pub mod posts;
pub mod rename;
pub mod tags;
pub mod timeline;
#[cfg(test)]
mod touched;
pub mod upgrade;
pub mod write;

use serde_json::Value;

pub use cascade::ERASED;
pub use change::recheck;
pub use posts::counters::INCREMENT_GRACE;
pub use posts::{plan_posts, posts_needs, PostsFacts};
pub use write::Write;

use crate::store::{Container, Store};
pub use engine::Unit;

/// A batch that could not be applied in full.
#[derive(Debug, thiserror::Error)]
#[error("{}{reason}; not applied: {}", unit_prefix(unit), not_applied.join(", "))]
pub struct ProjectionError {
    /// The unit that failed ([`Unit::name`]); empty when not one unit's.
    pub unit: &'static str,
    pub reason: String,
    /// The changed items (`container/pk/id`) whose consequences are not all written.
    pub not_applied: Vec<String>,
}

fn unit_prefix(unit: &str) -> String {
    if unit.is_empty() {
        String::new()
    } else {
        format!("unit `{unit}`: ")
    }
}

impl ProjectionError {
    /// The reason, after the unit that failed: `unit \`posts\`: …`.
    pub fn cause(&self) -> String {
        format!("{}{}", unit_prefix(self.unit), self.reason)
    }
}

/// What a projection did.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Report {
    pub changes: usize,
    pub writes: usize,
    /// Posts with a counter change on its way (a pending count younger than
    /// [`INCREMENT_GRACE`]): the driver projects [`recheck`] of each once that has passed. Should
    /// the change have been lost, that is when the counter is corrected.
    pub deferred: Vec<String>,
    /// Posts whose counters this batch found with nothing left to wait for: a recheck a driver
    /// holds for one of them is answered already and can be dropped.
    pub settled: Vec<String>,
}

/// A projection lane: which of a feed's consequences a follower of it writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lane {
    /// Counters, post copies, the feed, follow mirrors and counts, renames, erasure.
    Main,
    /// The personal timelines.
    Timeline,
}

impl Lane {
    pub const ALL: [Lane; 2] = [Lane::Main, Lane::Timeline];

    /// `main` or `timeline`.
    pub fn name(self) -> &'static str {
        match self {
            Lane::Main => "main",
            Lane::Timeline => "timeline",
        }
    }
}

/// Every projection, by lane, in the order each lane runs them on a batch of a feed.
pub const UNITS: &[(Lane, &Unit)] = &[
    (Lane::Main, &posts::UNIT),
    (Lane::Main, &rename::UNIT),
    (Lane::Main, &cascade::ACCOUNTS),
    (Lane::Main, &follows::UNIT),
    (Lane::Timeline, &timeline::POSTS),
    (Lane::Timeline, &timeline::USERS),
    (Lane::Main, &bookmarks::POSTS),
    (Lane::Main, &bookmarks::STEPS),
    (Lane::Main, &tags::UNIT),
];

/// Project a batch of changed documents from the change feed of `container` (`posts` or
/// `users`; any other container, `timelines` among them, has no projection) in `lane`: each of
/// the lane's [`UNITS`] following that feed, in turn. The first that fails fails the batch
/// (those before it wrote what they wrote: each is idempotent, so the batch is projected again
/// whole).
///
/// The batch is decoded once ([`change::decode`]); each unit is handed the changes of the kinds
/// it watches, and none when there are none. A change of a kind a unit watches that does not
/// decode fails the batch, and every failure names its unit.
pub async fn project_lane(
    store: &dyn Store,
    lane: Lane,
    container: Container,
    changes: &[Value],
) -> Result<Report, ProjectionError> {
    let decoded = change::decode(container, changes);
    project_decoded(store, lane, container, &decoded).await
}

async fn project_decoded(
    store: &dyn Store,
    lane: Lane,
    container: Container,
    decoded: &[Result<change::Change, change::Undecodable>],
) -> Result<Report, ProjectionError> {
    let mut report = Report {
        changes: decoded.len(),
        ..Report::default()
    };
    for (_, unit) in UNITS
        .iter()
        .filter(|(l, u)| *l == lane && u.feed == container)
    {
        let watched = unit.changes(decoded)?;
        if watched.is_empty() {
            continue;
        }
        let r = (unit.project)(store, &watched)
            .await
            .map_err(|e| ProjectionError {
                unit: unit.name,
                ..e
            })?;
        report.writes += r.writes;
        report.deferred.extend(r.deferred);
        report.settled.extend(r.settled);
    }
    Ok(report)
}

/// Both lanes on one batch, the main lane first (for tools and tests that drive the
/// projections by hand: the timeline lane's job items come back through the users feed).
pub async fn project(
    store: &dyn Store,
    container: Container,
    changes: &[Value],
) -> Result<Report, ProjectionError> {
    let decoded = change::decode(container, changes);
    let mut report = project_decoded(store, Lane::Main, container, &decoded).await?;
    let timeline = project_decoded(store, Lane::Timeline, container, &decoded).await?;
    report.writes += timeline.writes;
    Ok(report)
}
