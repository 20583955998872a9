//! A part of `handler verify`: the copies one projection keeps, checked against what they should
//! be and, with `--repair`, mended and checked again. [`super::PARTS`] lists the parts in the
//! order they run; the report, its summary line and the exit code are made from every part
//! alike, through what each part returns ([`Found`]), so a part is one module and one row.
//!
//! Each part tells lag from drift in its own looks (`super::lag`): what a first look finds is
//! looked at again inside a window of the change feeds, `settle` apart, and a finding whose
//! sources had a change in flight, or changing, at every look is lag, not drift, and left to
//! the change feed by the repair.

use std::any::Any;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::time::Duration;

use futures::future::LocalBoxFuture;

use super::lag::{Touched, Window};
use super::progress::Progress;
use crate::store::{Store, StoreResult};

/// Looks after the first at what drifted, each `settle` after the one before.
pub const LATER_LOOKS: usize = 3;
/// Examples the report shows per kind of drift.
pub const EXAMPLES: usize = 5;

/// One part of verify: a row of [`super::PARTS`].
pub struct Part {
    /// What the report calls it; unique in the table.
    pub name: &'static str,
    /// Look, and with [`Pass::repair`] mend what drifted and look again.
    pub run: Run,
}

/// How a [`Part`] runs (on the thread that runs verify: nothing needs its future to be `Send`).
pub type Run =
    for<'a> fn(&'a dyn Store, &'a Pass<'a>) -> LocalBoxFuture<'a, anyhow::Result<Box<dyn Found>>>;

/// What a run of verify asks of every part.
pub struct Pass<'a> {
    /// Mend what drifted, then look again.
    pub repair: bool,
    /// The wait between looks (zero: the first look is judged alone).
    pub settle: Duration,
    /// Makes the progress display of one look or repair.
    pub progress: &'a dyn Fn() -> Progress,
}

/// A part's figures on the report's summary line (after the repair, if any); summed over every
/// part, the summary itself.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    /// Derived items checked.
    pub checked: u64,
    /// Items found wrong whose sources the change feed had applied.
    pub drifted: u64,
    /// Items (for posts and bookmarks: posts) found wrong while a change of theirs was still
    /// on its way: not drift.
    pub lagging: u64,
    /// Changes a projection lane could not apply, kept for replay.
    pub quarantined: u64,
}

impl Tally {
    /// Nothing drifted and nothing is quarantined (lag is not a fault).
    pub fn is_clean(&self) -> bool {
        self.drifted == 0 && self.quarantined == 0
    }
}

impl std::iter::Sum for Tally {
    fn sum<I: Iterator<Item = Tally>>(tallies: I) -> Tally {
        tallies.fold(Tally::default(), |a, b| Tally {
            checked: a.checked + b.checked,
            drifted: a.drifted + b.drifted,
            lagging: a.lagging + b.lagging,
            quarantined: a.quarantined + b.quarantined,
        })
    }
}

/// One finding as the report shows it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Finding {
    /// Its kind, as the report names it (`like count`, `bookmark copy`, …).
    pub kind: &'static str,
    /// The item at fault: `container/pk/id`.
    pub target: String,
    /// What differs.
    pub detail: String,
}

/// What one part found and did, as the report shows it.
pub trait Found: Debug + Send + Sync + Any {
    /// Its figures, after the repair if any.
    fn tally(&self) -> Tally;
    /// Its lines of the report.
    fn render(&self) -> String;
    /// The findings of its first look that the report shows (a few per kind).
    fn findings(&self) -> Vec<Finding>;
    /// Whether lag was judged by the lanes' positions (else by time alone).
    fn lag_known(&self) -> bool {
        true
    }
}

/// What one look of a part found (the part's own type), for [`Outcome`].
pub trait Look: Debug + Send + Sync + 'static {
    fn tally(&self) -> Tally;
    fn render(&self) -> String;
    fn findings(&self) -> Vec<Finding>;
    fn lag_known(&self) -> bool {
        true
    }
}

/// What a part's repair did: its summary line, and what it could not mend.
pub trait Mend: Debug + Send + Sync + 'static {
    fn summary(&self) -> String;
    fn failed(&self) -> &[String];
}

/// A part's look, and with `--repair` its repair and the look after it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcome<C, M> {
    pub before: C,
    pub repair: Option<(M, C)>,
}

impl<C: Look, M: Mend> Outcome<C, M> {
    /// A part's `look`, and with `repair` and something found, its `mend` of what was found and
    /// a second look.
    pub async fn of<E>(
        repair: bool,
        look: impl AsyncFn() -> Result<C, E>,
        mend: impl AsyncFnOnce(&C) -> M,
    ) -> Result<Self, E> {
        let before = look().await?;
        let repair = if repair && before.tally().drifted > 0 {
            let done = mend(&before).await;
            Some((done, look().await?))
        } else {
            None
        };
        Ok(Outcome { before, repair })
    }

    /// The state the database was left in.
    pub fn last(&self) -> &C {
        self.repair.as_ref().map_or(&self.before, |(_, c)| c)
    }
}

impl<C: Look, M: Mend> Found for Outcome<C, M> {
    fn tally(&self) -> Tally {
        self.last().tally()
    }

    fn render(&self) -> String {
        let mut out = self.before.render();
        if let Some((done, after)) = &self.repair {
            out.push_str(&format!("repair: {}\n", done.summary()));
            for f in done.failed() {
                out.push_str(&format!("  not repaired: {f}\n"));
            }
            out.push_str("after repair: ");
            out.push_str(&after.render());
        }
        out
    }

    fn findings(&self) -> Vec<Finding> {
        self.before.findings()
    }

    fn lag_known(&self) -> bool {
        self.before.lag_known()
    }
}

/// Box a part's outcome for the table.
pub fn found<F: Found>(outcome: F) -> Box<dyn Found> {
    Box::new(outcome)
}

/// What later looks made of a first look's findings.
#[derive(Debug)]
pub struct Judged<K, F> {
    /// Found wrong at a look that saw none of their sources changing: drift.
    pub drift: BTreeMap<K, F>,
    /// Still wrong and still lagging at the last look: left to the change feed.
    pub lagging: BTreeMap<K, F>,
}

/// Tell lag from drift among `pending`, what a first look found wrong: look again inside a
/// [`Window`], `settle` after the look before (at once and once with `settle` zero), up to
/// [`LATER_LOOKS`] times. `look` finds again what is wrong (it may look at `pending` only, or at
/// everything: only what was pending counts); `lagging` names, among what it found, what the
/// window saw changing. A finding not found again has caught up; found again and not lagging,
/// or where the window cannot tell (the lanes' positions unknown), it is drift; lagging, it is
/// looked at again, and still lagging after the last look it is lag.
pub async fn judge<K: Ord + Clone, F>(
    store: &dyn Store,
    settle: Duration,
    mut pending: BTreeMap<K, F>,
    mut look: impl AsyncFnMut(&BTreeMap<K, F>) -> StoreResult<BTreeMap<K, F>>,
    mut lagging: impl AsyncFnMut(&Touched, &BTreeMap<K, F>) -> StoreResult<BTreeSet<K>>,
) -> StoreResult<Judged<K, F>> {
    let mut drift = BTreeMap::new();
    let looks = if settle.is_zero() { 1 } else { LATER_LOOKS };
    for _ in 0..looks {
        if pending.is_empty() {
            break;
        }
        tokio::time::sleep(settle).await;
        let window = Window::open(store).await?;
        let mut again = look(&pending).await?;
        let touched = window.close(store).await?;
        again.retain(|k, _| pending.contains_key(k));
        let moving = if touched.known() {
            lagging(&touched, &again).await?
        } else {
            BTreeSet::new()
        };
        pending = BTreeMap::new();
        for (k, f) in again {
            if moving.contains(&k) {
                pending.insert(k, f);
            } else {
                drift.insert(k, f);
            }
        }
    }
    Ok(Judged {
        drift,
        lagging: pending,
    })
}
