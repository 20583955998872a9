//! Where a timeline read looks for timeline items while an earlier release's may remain in
//! `users`: process state the timeline read and the application's state share.

use crate::store::{timelines_moved, Container, Store};

/// How often a process not yet sure that timeline items have left `users` asks again.
const RECHECK_MOVE: std::time::Duration = std::time::Duration::from_secs(1);

/// Whether timeline items may still be in `users`, where an earlier release kept them, until
/// the timeline lane has moved them (`crate::projection::relocation`). The process asks the
/// store's layout record at its first timeline read, and again at most every [`RECHECK_MOVE`]
/// while the move is not done; once it is, never again. The asking runs in a task of its own:
/// process bookkeeping, one point read per process once the move is done, not a request's
/// operation (the first timeline read waits for the first answer; later ones go on with what is
/// known, and look in `users` too until the move is known done).
#[derive(Debug, Default)]
pub(crate) struct TimelinePlace {
    moved: std::sync::atomic::AtomicBool,
    /// When the record was last asked for.
    asked: std::sync::Mutex<Option<std::time::Instant>>,
    first: tokio::sync::OnceCell<()>,
}

impl TimelinePlace {
    pub(super) async fn moving(
        self: &std::sync::Arc<Self>,
        store: &std::sync::Arc<dyn Store>,
    ) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        if self.moved.load(Relaxed) {
            return false;
        }
        let ask = || {
            let (place, store) = (self.clone(), store.clone());
            *self.asked.lock().unwrap_or_else(|e| e.into_inner()) = Some(std::time::Instant::now());
            tokio::spawn(async move {
                let layout = store
                    .read(
                        Container::Leases,
                        crate::store::LAYOUT_ID,
                        crate::store::LAYOUT_ID,
                    )
                    .await;
                // Not known (the store failed to answer): still looked for in both places.
                if layout.is_ok_and(|l| timelines_moved(l.as_ref())) {
                    place.moved.store(true, Relaxed);
                }
            })
        };
        if !self.first.initialized() {
            self.first
                .get_or_init(|| async {
                    let _ = ask().await;
                })
                .await;
        } else {
            let due = self
                .asked
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .is_none_or(|t| t.elapsed() >= RECHECK_MOVE);
            if due {
                drop(ask());
            }
        }
        !self.moved.load(Relaxed)
    }
}
