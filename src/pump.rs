//! The in-process change-feed pump (standalone mode): follows the `posts` and `users` feeds once
//! per projection lane (four followers: the main lane's and the timeline lane's of each feed,
//! each with its own checkpoint, so a fan-out in the timeline lane never holds up the main
//! lane; where the store has one writer, the timeline lane's writes also wait behind the main
//! lane's, `store::WritePriority`), hands each batch to its lane's projections, then checkpoints in `leases` (at most every
//! [`CHECKPOINT_EVERY`] while its batches write, [`QUIET_CHECKPOINT_EVERY`] while they do not, and when it stops). It resumes from its checkpoint after a restart,
//! replaying what came after it (harmless: the projections write the present state); an
//! unapplied batch is retried, never skipped, until it has failed `quarantine::ATTEMPTS` times:
//! then what still fails of it is quarantined (`crate::quarantine`) and the follower moves on. Posts whose counter a projection deferred are
//! projected again once due, and are kept in the checkpoint so that a restart does not forget
//! them.
//!
//! Each follower runs under a supervisor: should it fail (a panic in a projection, say), the
//! supervisor logs it and starts it again from its checkpoint after a backoff. [`Pump::stop`]
//! lets each follower finish and checkpoint the batch in hand, then stops it.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt as _;
use serde_json::json;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use tokio::time::Instant;

mod checkpoint;
mod drain;
mod progress;

use crate::rechecks::Rechecks;
pub use checkpoint::{caught_up, checkpoint_at_end, positions, Position};
use checkpoint::{save_checkpoint, start_checkpoint};
pub use drain::drain;
pub use progress::Progress;

use crate::projection::Lane;
use crate::quarantine;
use crate::store::{metrics, with_write_priority, ChangeNotifier, Container, Store, WritePriority};

/// First pause after a failure (doubling up to `MAX_BACKOFF`).
const FIRST_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(5);
const BATCH: u32 = 100;
/// Batches are checkpointed at most this often (and when the follower stops): replaying one
/// after a crash writes the present state again, which the projections make harmless, and
/// defers its posts again; most batches (a comment's, the `users` feed's change of a post copy)
/// write nothing at all, so a checkpoint per batch was a store write per change.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(250);
/// A follower whose batches since its last checkpoint wrote nothing (most of them: a like's
/// change in the timeline lanes, the `users` feed's change of a post copy) checkpoints at most
/// this often instead: replaying what it applied writes nothing either, so a checkpoint there
/// buys only a shorter replay, at a store write each time.
const QUIET_CHECKPOINT_EVERY: Duration = Duration::from_secs(1);

/// How often a follower checkpoints, given whether its batches since the last checkpoint wrote
/// anything (or deferred a recheck, which the checkpoint keeps).
fn checkpoint_every(wrote: bool) -> Duration {
    if wrote {
        CHECKPOINT_EVERY
    } else {
        QUIET_CHECKPOINT_EVERY
    }
}

/// A follower that ran at least this long before failing is restarted at once (its backoff
/// starts over); one failing sooner waits twice as long as the time before, up to `MAX_BACKOFF`.
const HEALTHY_RUN: Duration = Duration::from_secs(60);

/// One follower: a lane's projections over a container's feed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Follower {
    lane: Lane,
    c: Container,
}

impl Follower {
    fn name(self) -> String {
        match self.lane {
            Lane::Main => self.c.name().to_string(),
            Lane::Timeline => format!("{}.{}", self.lane.name(), self.c.name()),
        }
    }
}

/// The running pump: one supervised follower per lane and watched container.
pub struct Pump {
    stop: watch::Sender<bool>,
    supervisors: Vec<JoinHandle<()>>,
}

/// Start one supervised follower per lane and watched container.
pub fn spawn(store: Arc<dyn Store>) -> Pump {
    spawn_after(store, std::future::ready(()))
}

/// [`spawn`], the followers starting once `start` resolves (or never, when stopped first).
pub fn spawn_after(
    store: Arc<dyn Store>,
    start: impl Future<Output = ()> + Send + 'static,
) -> Pump {
    spawn_replaying_every(store, start, quarantine::RETRY_EVERY)
}

/// [`spawn_after`], each follower replaying its lane's quarantined changes every `every` (rather
/// than [`quarantine::RETRY_EVERY`]: for tests).
pub fn spawn_replaying_every(
    store: Arc<dyn Store>,
    start: impl Future<Output = ()> + Send + 'static,
    every: Duration,
) -> Pump {
    spawn_reporting(store, start, every, Arc::default())
}

/// [`spawn_replaying_every`], the followers reporting how far they are to `progress` (what a
/// request that must see its own write projected waits on).
pub fn spawn_reporting(
    store: Arc<dyn Store>,
    start: impl Future<Output = ()> + Send + 'static,
    every: Duration,
    progress: Arc<Progress>,
) -> Pump {
    let (stop, stopped) = watch::channel(false);
    let start = start.shared();
    let supervisors = FOLLOWERS
        .into_iter()
        .map(|c| {
            let (store, start, stopped) = (store.clone(), start.clone(), stopped.clone());
            let mut waiting = stopped.clone();
            let reporter = Reporter {
                index: progress.join(),
                progress: progress.clone(),
            };
            tokio::spawn(async move {
                tokio::select! {
                    () = start => supervise(store, c, stopped, every, reporter).await,
                    () = async { drop(waiting.wait_for(|stop| *stop).await) } => {}
                }
            })
        })
        .collect();
    Pump { stop, supervisors }
}

impl Pump {
    /// Let every follower finish and checkpoint the batch it is applying, then stop it.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        for s in self.supervisors {
            let _ = s.await;
        }
        tracing::info!("change-feed pump stopped");
    }
}

/// Run `follow` for `c` until told to stop, restarting it (with backoff) whenever it fails.
async fn supervise(
    store: Arc<dyn Store>,
    c: Follower,
    stopped: watch::Receiver<bool>,
    every: Duration,
    reporter: Reporter,
) {
    let mut backoff = FIRST_BACKOFF;
    loop {
        let started = std::time::Instant::now();
        // The timeline lane's writes (a fan-out queues several at once) go after the main
        // lane's and the requests' where the store has one writer.
        let priority = match c.lane {
            Lane::Main => WritePriority::First,
            Lane::Timeline => WritePriority::Background,
        };
        let run = std::panic::AssertUnwindSafe(with_write_priority(
            priority,
            follow(store.clone(), c, stopped.clone(), every, &reporter),
        ))
        .catch_unwind()
        .await;
        if stopping(&stopped) {
            return;
        }
        let why = match run {
            Ok(()) => "returned".to_string(),
            Err(panic) => panic_message(&*panic),
        };
        if started.elapsed() >= HEALTHY_RUN {
            backoff = FIRST_BACKOFF;
        }
        tracing::error!(
            follower = c.name(),
            error = %why,
            restart_in_ms = backoff.as_millis() as u64,
            "change-feed follower failed; restarting it from its checkpoint"
        );
        let mut stop = stopped.clone();
        tokio::select! {
            () = tokio::time::sleep(backoff) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        format!("panicked: {s}")
    } else if let Some(s) = panic.downcast_ref::<String>() {
        format!("panicked: {s}")
    } else {
        "panicked".to_string()
    }
}

/// Whether the pump is told to stop (or was dropped without being stopped).
fn stopping(stopped: &watch::Receiver<bool>) -> bool {
    *stopped.borrow() || stopped.has_changed().is_err()
}

/// Sleep for `d`, or less when told to stop; whether to stop.
async fn pause(d: Duration, stopped: &mut watch::Receiver<bool>) -> bool {
    let timed_out = tokio::time::timeout(d, stopped.wait_for(|s| *s))
        .await
        .is_err();
    !timed_out || stopping(stopped)
}

/// Follow `c` from its checkpoint until told to stop; between batches only, so a batch being
/// applied is finished and checkpointed first.
async fn follow(
    store: Arc<dyn Store>,
    f: Follower,
    mut stopped: watch::Receiver<bool>,
    replay_every: Duration,
    reporter: &Reporter,
) {
    let c = f;
    let (lane, container) = (f.lane, f.c);
    let mut backoff = FIRST_BACKOFF;
    let idle = store.idle_poll();
    let checkpoint = loop {
        match start_checkpoint(&*store, c).await {
            Ok(cp) => break cp,
            Err(e) => {
                tracing::warn!(container = c.name(), error = %e, "cannot read the pump checkpoint; retrying");
                if pause(MAX_BACKOFF, &mut stopped).await {
                    return;
                }
            }
        }
    };
    let mut continuation = checkpoint.continuation;
    let mut rechecks = Rechecks::default();
    rechecks.defer(checkpoint.deferred);
    // The position applied but not yet checkpointed, and when the last checkpoint was saved.
    let mut unsaved: Option<String> = None;
    let mut saved_at = Instant::now();
    // Whether a batch applied since the last checkpoint wrote anything.
    let mut wrote = false;
    tracing::info!(container = c.name(), checkpoint = ?continuation, "change-feed pump started");
    // Where the store can tell, a commit wakes the follower; the idle poll is the fallback.
    let mut wake = store.change_notifier(container);
    let mut pokes = reporter.progress.pokes();
    let attempts = quarantine::Attempts::default();
    let mut quarantine_at = Instant::now() + replay_every;
    while !stopping(&stopped) {
        if Instant::now() >= quarantine_at {
            let deferred = metrics::projecting(quarantine::retry_lane(&*store, lane, container));
            rechecks.defer(deferred.await);
            quarantine_at = Instant::now() + replay_every;
        }
        let ran = metrics::projecting(rechecks.run_due(&*store, lane, container)).await;
        if let Err(e) = &ran {
            tracing::warn!(container = c.name(), error = %e, "counter recheck failed; it will be retried");
        }
        if !matches!(ran, Ok(false)) {
            metrics::projecting(async {
                if let Some(cp) = &continuation {
                    if let Err(e) = save_checkpoint(&*store, c, cp, &rechecks).await {
                        tracing::warn!(container = c.name(), error = %e, "checkpoint not saved");
                    } else {
                        (unsaved, saved_at) = (None, Instant::now());
                    }
                }
            })
            .await;
        }
        if let Some(w) = &mut wake {
            // Seen before reading: a commit from here on wakes the wait below.
            w.borrow_and_update();
        }
        pokes.borrow_and_update();
        let began = Instant::now();
        // An idle poll (nothing new) is the pump's own cost, not a change's: only a read that
        // brings changes is charged to the projections.
        let (read, read_usage) =
            metrics::scope(store.changes(container, continuation.as_deref(), BATCH)).await;
        let page = match read {
            Ok(page) => page,
            Err(e) => {
                tracing::warn!(container = c.name(), error = %e, "change feed read failed; retrying");
                if pause(backoff, &mut stopped).await {
                    flush(&*store, c, &mut unsaved, &rechecks).await;
                    return;
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
                continue;
            }
        };
        if page.items.is_empty() {
            reporter.progress.caught_up(reporter.index, began);
            continuation = Some(page.continuation);
            let due = checkpoint_every(wrote).saturating_sub(saved_at.elapsed());
            if unsaved.is_some() && due.is_zero() {
                flush(&*store, c, &mut unsaved, &rechecks).await;
                (saved_at, wrote) = (Instant::now(), false);
            }
            let wait = match unsaved {
                Some(_) => rechecks.idle(idle).min(due),
                None => rechecks.idle(idle),
            };
            if wait_for_changes(&mut wake, &mut pokes, wait, &mut stopped).await {
                flush(&*store, c, &mut unsaved, &rechecks).await;
                return;
            }
            continue;
        }
        metrics::charge_projections(read_usage);
        // A batch that keeps failing at this position is split and what fails is quarantined.
        let key = quarantine::batch_key(lane, container, &[json!({ "id": continuation })]);
        let tried = (key, &attempts);
        match metrics::projecting(quarantine::project(
            &*store,
            lane,
            container,
            &page.items,
            tried,
            0,
        ))
        .await
        {
            Ok(quarantine::Projected { report, .. }) => {
                wrote |= report.writes > 0 || !report.deferred.is_empty();
                rechecks.note(&report);
                tracing::debug!(
                    container = c.name(),
                    changes = report.changes,
                    writes = report.writes,
                    "batch projected"
                );
                unsaved = Some(page.continuation.clone());
                if saved_at.elapsed() >= checkpoint_every(wrote) {
                    flush(&*store, c, &mut unsaved, &rechecks).await;
                    (saved_at, wrote) = (Instant::now(), false);
                }
                continuation = Some(page.continuation);
                backoff = FIRST_BACKOFF;
            }
            Err(e) => {
                tracing::error!(container = c.name(), error = %e, "batch not applied; it will be retried");
                if pause(backoff, &mut stopped).await {
                    flush(&*store, c, &mut unsaved, &rechecks).await;
                    return;
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
    flush(&*store, c, &mut unsaved, &rechecks).await;
}

/// Checkpoint the applied position `unsaved`, if any, charged to the projections.
async fn flush(store: &dyn Store, c: Follower, unsaved: &mut Option<String>, rechecks: &Rechecks) {
    let Some(cp) = unsaved.take() else {
        return;
    };
    if let Err(e) = metrics::projecting(save_checkpoint(store, c, &cp, rechecks)).await {
        // The batch is applied; replaying it after a restart is harmless.
        tracing::warn!(container = c.name(), error = %e, "checkpoint not saved");
    }
}

/// Wait until the store signals a commit, a request asks for a read now, `idle` has passed or
/// the pump is told to stop, whichever comes first; `true` when it must stop.
async fn wait_for_changes(
    wake: &mut Option<ChangeNotifier>,
    pokes: &mut watch::Receiver<u64>,
    idle: Duration,
    stopped: &mut watch::Receiver<bool>,
) -> bool {
    let Some(w) = wake else {
        return tokio::select! {
            _ = pokes.changed() => stopping(stopped),
            stop = pause(idle, stopped) => stop,
        };
    };
    tokio::select! {
        _ = pokes.changed() => stopping(stopped),
        changed = w.changed() => {
            if changed.is_err() {
                // The store is gone: no more signals, poll from now on.
                *wake = None;
            }
            stopping(stopped)
        }
        stop = pause(idle, stopped) => stop,
    }
}

/// Where a follower reports how far it is.
struct Reporter {
    progress: Arc<Progress>,
    index: usize,
}

/// The followers the pump runs (those [`spawn`] starts): each lane over each feed.
const FOLLOWERS: [Follower; 4] = [
    Follower {
        lane: Lane::Main,
        c: Container::Posts,
    },
    Follower {
        lane: Lane::Main,
        c: Container::Users,
    },
    Follower {
        lane: Lane::Timeline,
        c: Container::Posts,
    },
    Follower {
        lane: Lane::Timeline,
        c: Container::Users,
    },
];
