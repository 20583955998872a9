//! `handler verify [--repair]` for follows and timelines (`crate::domain::follows`).
//!
//! The source of truth is each user's live `following` edges; from them, the users and the post
//! copies in `users` follow (the timelines are in `timelines`, and, until the timeline lane has
//! moved them, `users` may still hold some an earlier release wrote: both are read then, and
//! of an item in both the one in `timelines` counts):
//! - each edge names a live user, by their current name, and has its mirror (`follower`, by the
//!   follower's current name) in the followee's partition; each mirror has its edge;
//! - `followerCount` / `followingCount` are the numbers of live mirrors / edges;
//! - a timeline holds the newest posts of the users followed (the [`TIMELINE_SIZE`] newest of
//!   their post copies together, by their current name; older ones may have been trimmed), and
//!   no entry whose post is gone or whose author is not followed; an entry holds the post's
//!   rarely-changing part (no counts: entries an earlier release wrote with counts are not
//!   drift); for a merged followee (as their `timelineJob-limit` item records), a merge marker
//!   instead, and no marker for anyone else;
//! - each user is on the side of the fan-out limit their follower count calls for, with
//!   hysteresis, by the limit recorded in the store (`settings.timeline` in `leases`; verify and
//!   repair never use the process's own setting over it). A crossing under way, and the
//!   timelines of its followers, is lag: it is not judged until it is done.
//!
//! - a merged author's [`TIMELINE_SIZE`] newest posts are in the shared partition (`feed`,
//!   partition `merged`), as their copies are, by their current name, and no post of an author
//!   who is not merged (`projection::over_limit`).
//!
//! The timeline lane's job items (`type: timelineJob`) are its own bookkeeping, not drift.
//!
//! Users are read a page at a time and each one's partition is checked on its own, so memory
//! stays bounded by the largest partition. Repair replays edges and users through the
//! projections (`crate::projection::timeline`), and writes what they do not rewrite: an edge's
//! name, a stale or extra entry, an extra mirror, each re-read right before it is written
//! (`fresh`), so a repair never writes from a stale read.
//!
//! The check of one user is in `check`, the repair in `repair`, what both read in `read`.
//!
//! [`TIMELINE_SIZE`]: crate::domain::follows::TIMELINE_SIZE

mod check;
mod read;
mod repair;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::Value;

use super::lag::{Touched, Window};
use super::part::{self, Finding, Found, Look, Mend, Part, Pass, Tally, EXAMPLES};
use super::TRAVERSAL_PAGE;
use crate::domain::Kind;
use crate::projection::write::Write;
use crate::projection::{self, upgrade};
use crate::store::{retry, Container, Query, Store, StoreResult};
use check::check_user;
use read::{live_user, Live};
pub use repair::{repair, Mended};

pub const PART: Part = Part {
    name: "follows and timelines",
    run: |store, pass| Box::pin(run(store, pass)),
};

async fn run(store: &dyn Store, pass: &Pass<'_>) -> anyhow::Result<Box<dyn Found>> {
    let outcome = verify_and_repair(store, pass.repair, pass.settle).await?;
    Ok(part::found(outcome))
}

/// What the check found.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Check {
    /// Users, edges, mirrors and timeline entries looked at.
    pub checked: u64,
    /// Drift by kind.
    pub drift: BTreeMap<&'static str, u64>,
    pub examples: BTreeMap<&'static str, Vec<String>>,
    /// `following` edges to project again (mirror or backfill missing, followee gone).
    replay_edges: Vec<Value>,
    /// Merged authors whose items in the shared partition are copied again: (author, name).
    merged_sync: Vec<(String, String)>,
    /// Users projected again through the timeline lane (a crossing of the limit owed).
    replay_users: Vec<Value>,
    /// Users whose counters are recounted.
    recount: BTreeSet<String>,
    /// Writes made as they are.
    writes: Vec<Write>,
    /// Findings left out as lag: the user's follows or timeline had a change in flight, or
    /// changing, at every look (`super::lag`); not drift, and not repaired.
    pub lagging: u64,
    /// Whether lag was judged by the lanes' positions (`super::lag`); without them, by time alone.
    pub lag_known: bool,
    /// Whether timeline items may still be in `users`, where an earlier release kept them (the
    /// store's layout record does not say they moved): `upgrade::timelines`.
    pub moving: bool,
    /// The users whose partitions (and posts) the check read: the user, whom they follow, who
    /// follows them.
    sources: BTreeSet<String>,
}

impl Check {
    pub fn is_clean(&self) -> bool {
        self.drift.is_empty()
    }

    /// Findings, one per drifted item.
    pub fn drifted(&self) -> u64 {
        self.drift.values().sum()
    }

    /// Take in the findings and repairs of another user's check.
    fn absorb(&mut self, other: Check) {
        for (kind, n) in other.drift {
            *self.drift.entry(kind).or_default() += n;
        }
        for (kind, examples) in other.examples {
            let ex = self.examples.entry(kind).or_default();
            let room = EXAMPLES.saturating_sub(ex.len());
            ex.extend(examples.into_iter().take(room));
        }
        self.replay_edges.extend(other.replay_edges);
        self.merged_sync.extend(other.merged_sync);
        self.replay_users.extend(other.replay_users);
        self.recount.extend(other.recount);
        self.writes.extend(other.writes);
    }

    fn found(&mut self, kind: &'static str, what: String) {
        *self.drift.entry(kind).or_default() += 1;
        let examples = self.examples.entry(kind).or_default();
        if examples.len() < EXAMPLES {
            examples.push(what);
        }
    }

    /// The lines of the report.
    pub fn render(&self) -> String {
        let mut out = format!("follows and timelines: {} items checked", self.checked);
        out.push_str(upgrade::timelines::verify_note(self.moving));
        if self.lagging > 0 {
            out.push_str(&format!(
                ", {} lagging (a change still on its way through the change feed at every look; \
                 not drift)",
                self.lagging
            ));
        }
        if self.is_clean() {
            out.push_str(", no drift\n");
            return out;
        }
        out.push('\n');
        for (kind, n) in &self.drift {
            out.push_str(&format!("  {kind}: {n}\n"));
            for e in &self.examples[kind] {
                out.push_str(&format!("    {e}\n"));
            }
        }
        out
    }
}

/// Check every user's follows and timeline. Each look runs inside a [`Window`] (`super::lag`):
/// a user whose check read a partition (theirs, a followee's, a follower's) or an author with a
/// change in flight or made during the look is lagging at that look. What is wrong is looked at
/// again ([`part::judge`]), `settle` later, up to [`part::LATER_LOOKS`] times, and reported as
/// drift at the first look that finds it wrong and not lagging; still lagging at the last look,
/// it is counted as lag ([`Check::lagging`]), and a repair leaves it to the change feed. Where
/// the lanes' positions are not known (the Functions host), what is still wrong `settle` later
/// is drift. `settle` zero judges the first look alone.
pub async fn verify(store: &dyn Store, settle: Duration) -> StoreResult<Check> {
    let window = Window::open(store).await?;
    let (mut check, suspects) = check_all(store).await?;
    let touched = window.close(store).await?;
    check.lag_known = touched.known();
    let mut pending = BTreeMap::new();
    for (user, one) in suspects {
        if !settle.is_zero() {
            pending.insert(user, one);
        } else if lagging(&touched, &user, &one) {
            check.lagging += one.drifted();
        } else {
            check.absorb(one);
        }
    }
    let judged = part::judge(
        store,
        settle,
        pending,
        async |pending| {
            let limit = projection::timeline::limit_in_force(store).await?;
            let moving = upgrade::timelines::moving(store).await?;
            let mut looked = BTreeMap::new();
            for user in pending.keys() {
                let Some(user) = live_user(store, user).await? else {
                    continue;
                };
                let mut one = Check::default();
                check_user(store, &user, limit, moving, &mut one).await?;
                if !one.is_clean() {
                    looked.insert(user.user.user_id, one);
                }
            }
            Ok(looked)
        },
        async |touched, found| {
            Ok(found
                .iter()
                .filter(|(user, one)| lagging(touched, user, one))
                .map(|(user, _)| user.clone())
                .collect())
        },
    )
    .await?;
    for one in judged.drift.into_values() {
        check.absorb(one);
    }
    check.lagging += judged.lagging.values().map(Check::drifted).sum::<u64>();
    Ok(check)
}

fn lagging(touched: &Touched, user: &str, one: &Check) -> bool {
    let users = std::iter::once(user).chain(one.sources.iter().map(String::as_str));
    touched.users_lagging(users)
}

/// Every user's check: the counts of all, and each user whose check found something (their id
/// and check).
async fn check_all(store: &dyn Store) -> StoreResult<(Check, Vec<(String, Check)>)> {
    let limit = projection::timeline::limit_in_force(store).await?;
    let moving = upgrade::timelines::moving(store).await?;
    let mut check = Check {
        moving,
        ..Check::default()
    };
    let mut suspects = Vec::new();
    let mut q = Query::cross_partition()
        .of_kind(Kind::User)
        .live()
        .limit(TRAVERSAL_PAGE);
    loop {
        let page = retry(|| store.query(Container::Users, &q)).await?;
        for item in &page.items {
            let Some(user) = Live::read(item) else {
                continue;
            };
            let mut one = Check::default();
            check_user(store, &user, limit, moving, &mut one).await?;
            check.checked += one.checked;
            if !one.is_clean() {
                suspects.push((user.user.user_id, one));
            }
        }
        match page.continuation {
            Some(t) => q.continuation = Some(t),
            None => return Ok((check, suspects)),
        }
    }
}

/// A check, and with `--repair` the repair and the check after it.
pub type Outcome = part::Outcome<Check, Mended>;

impl Look for Check {
    fn tally(&self) -> Tally {
        Tally {
            checked: self.checked,
            drifted: self.drifted(),
            lagging: self.lagging,
            quarantined: 0,
        }
    }

    fn render(&self) -> String {
        Check::render(self)
    }

    /// An example is its item, then (for some kinds) what is wrong with it.
    fn findings(&self) -> Vec<Finding> {
        let examples = self.examples.iter();
        let each = examples.flat_map(|(kind, e)| e.iter().map(move |e| (*kind, e)));
        each.map(|(kind, e)| {
            let (target, detail) = e.split_once(' ').unwrap_or((e, ""));
            Finding {
                kind,
                target: target.to_string(),
                detail: detail.to_string(),
            }
        })
        .collect()
    }

    fn lag_known(&self) -> bool {
        self.lag_known
    }
}

impl Mend for Mended {
    fn summary(&self) -> String {
        format!(
            "{} follow edges replayed through the projections, {} items written",
            self.replayed, self.written
        )
    }

    fn failed(&self) -> &[String] {
        &self.failed
    }
}

/// Check, and with `repair` mend and check again.
pub async fn verify_and_repair(
    store: &dyn Store,
    repair: bool,
    settle: Duration,
) -> StoreResult<Outcome> {
    let look = async || verify(store, settle).await;
    Outcome::of(repair, look, async |found: &Check| {
        self::repair(store, found).await
    })
    .await
}
