//! Running the pump's followers inline, until nothing is left to do: what a test or a tool that
//! drives the projections without a running pump calls.

use super::checkpoint::{save_checkpoint, start_checkpoint};
use super::{BATCH, FOLLOWERS};
use crate::projection;
use crate::rechecks::Rechecks;
use crate::store::{metrics, Store};

/// The most rounds [`drain`] runs before it takes the projections for never going quiet. A
/// round drains each follower in turn to the end of its feed (a fan-out's next step, whose job
/// item comes back through the same feed, runs within it); another round is needed when one
/// follower's writes land in a feed an earlier one follows (a rename's patches of posts, an
/// erasure's marks) or when a recheck falls due. A handful is the rule.
const DRAIN_ROUNDS: usize = 1_000;

/// Run every follower inline, from its checkpoint, until nothing is left to do: no change beyond
/// any follower's checkpoint and no counter recheck owed. The projections' own writes count as
/// changes, so this runs round after round over the four followers until one finds nothing; a
/// recheck is projected once it falls due ([`projection::INCREMENT_GRACE`] after it was
/// deferred), the drain waiting for it. Checkpoints are saved as the pump saves them, so a pump
/// started later resumes after what was drained. For tests and tools that drive the
/// projections without a running pump, never beside one (both would apply the same changes).
/// Fails with the first batch that cannot be applied, which stays unapplied: nothing is
/// quarantined. The number of batches projected.
pub async fn drain(store: &dyn Store) -> anyhow::Result<usize> {
    metrics::projecting(drain_rounds(store)).await
}

async fn drain_rounds(store: &dyn Store) -> anyhow::Result<usize> {
    let mut followers = Vec::new();
    for f in FOLLOWERS {
        let checkpoint = start_checkpoint(store, f).await?;
        let mut rechecks = Rechecks::default();
        rechecks.defer(checkpoint.deferred);
        followers.push((f, checkpoint.continuation, rechecks));
    }
    let mut batches = 0;
    for _ in 0..DRAIN_ROUNDS {
        let mut moved = false;
        for (f, continuation, rechecks) in &mut followers {
            let before = batches;
            if rechecks.run_due(store, f.lane, f.c).await? {
                batches += 1;
            }
            loop {
                let page = store.changes(f.c, continuation.as_deref(), BATCH).await?;
                if page.items.is_empty() {
                    break;
                }
                let report = projection::project_lane(store, f.lane, f.c, &page.items).await?;
                rechecks.note(&report);
                *continuation = Some(page.continuation);
                batches += 1;
            }
            if batches > before {
                moved = true;
                if let Some(cp) = continuation {
                    save_checkpoint(store, *f, cp, rechecks).await?;
                }
            }
        }
        if !moved {
            let next = followers.iter().filter_map(|(_, _, r)| r.next_due()).min();
            match next {
                None => return Ok(batches),
                Some(at) => tokio::time::sleep_until(at).await,
            }
        }
    }
    anyhow::bail!("the projections never went quiet in {DRAIN_ROUNDS} rounds")
}
