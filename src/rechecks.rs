//! The one scheduler of counter rechecks, for every driver of the projections: the pump's
//! followers, the drain, and the Functions triggers.
//!
//! A projection that finds a counter change on its way (a pending count younger than
//! [`INCREMENT_GRACE`]) reports the post as deferred ([`Report::deferred`]); the driver looks at
//! the post again once the grace has passed, by projecting a [`recheck`] of it in the lane that
//! deferred it, and again for as long as it stays deferred. [`Rechecks`] holds what is owed and
//! when, and runs what is due ([`Rechecks::run_due`]); a batch that finds a post's counters with
//! nothing left to wait for answers its recheck ([`Report::settled`]). The pump keeps what is
//! owed in its checkpoint across restarts; [`Background`] holds it in memory for a driver that
//! keeps nothing between batches (the Functions triggers), and runs it in one task of the
//! process's.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::projection::{self, recheck, Lane, ProjectionError, Report, INCREMENT_GRACE};
use crate::store::{metrics, Container, Store};

/// Posts whose counters are to be looked at again, each at its due time.
#[derive(Debug, Default)]
pub struct Rechecks(BTreeMap<String, Instant>);

impl Rechecks {
    /// Owe a recheck of each of `posts`, due [`INCREMENT_GRACE`] from now (one already owed
    /// keeps its time).
    pub fn defer(&mut self, posts: impl IntoIterator<Item = String>) {
        let due = Instant::now() + INCREMENT_GRACE;
        for p in posts {
            self.0.entry(p).or_insert(due);
        }
    }

    /// Drop the rechecks of posts a later batch recounted in full without deferring: that
    /// recount, taken after the deferral, already saw whether the awaited increment landed.
    pub fn settle(&mut self, posts: &[String]) {
        for p in posts {
            self.0.remove(p);
        }
    }

    /// What a batch's report says of the rechecks: those it answered, then those it owes.
    pub fn note(&mut self, report: &Report) {
        self.settle(&report.settled);
        self.defer(report.deferred.iter().cloned());
    }

    /// The rechecks due now, no longer owed.
    pub fn take_due(&mut self) -> Vec<String> {
        let now = Instant::now();
        let due: Vec<String> = self
            .0
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(p, _)| p.clone())
            .collect();
        for p in &due {
            self.0.remove(p);
        }
        due
    }

    /// When the next recheck falls due, if any is owed.
    pub fn next_due(&self) -> Option<Instant> {
        self.0.values().min().copied()
    }

    /// How long an idle driver may sleep before a recheck falls due (at most `idle`).
    pub fn idle(&self, idle: Duration) -> Duration {
        self.next_due().map_or(idle, |at| {
            idle.min(at.saturating_duration_since(Instant::now()))
        })
    }

    /// The posts owed a recheck (what a checkpoint keeps).
    pub fn posts(&self) -> Vec<&String> {
        self.0.keys().collect()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Project a recheck of each post due, in `lane` over `container`: those that stay deferred
    /// are owed again. `Ok(false)` when none was due. Should the projection fail, every one of
    /// them is owed again (from now) and the error returned.
    pub async fn run_due(
        &mut self,
        store: &dyn Store,
        lane: Lane,
        container: Container,
    ) -> Result<bool, ProjectionError> {
        let due = self.take_due();
        if due.is_empty() {
            return Ok(false);
        }
        let docs: Vec<Value> = due.iter().map(|p| recheck(p)).collect();
        match projection::project_lane(store, lane, container, &docs).await {
            Ok(report) => {
                self.defer(report.deferred);
                Ok(true)
            }
            Err(e) => {
                self.defer(due);
                Err(e)
            }
        }
    }
}

/// Rechecks held in memory, for a driver that keeps nothing between batches (the Functions
/// triggers): the deferrals of the main lane's posts feed, run by one task of the process's as
/// they fall due. Should the process stop first, the counter is corrected by the post's next
/// change (any change of the post looks at its pending counts again).
#[derive(Default)]
pub struct Background {
    owed: Mutex<Rechecks>,
    wake: Notify,
    task: OnceLock<()>,
}

impl Background {
    /// Owe a recheck of each of `posts`; the first call starts the task that runs them.
    pub fn defer(&'static self, store: &Arc<dyn Store>, posts: Vec<String>) {
        if posts.is_empty() {
            return;
        }
        self.lock().defer(posts);
        self.wake.notify_one();
        self.task.get_or_init(|| {
            let store = store.clone();
            tokio::spawn(async move { self.run(store).await });
        });
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Rechecks> {
        self.owed.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn run(&self, store: Arc<dyn Store>) {
        loop {
            let next = self.lock().next_due();
            match next {
                Some(at) => {
                    tokio::select! {
                        _ = tokio::time::sleep_until(at) => {}
                        _ = self.wake.notified() => continue,
                    }
                }
                None => {
                    self.wake.notified().await;
                    continue;
                }
            }
            // Taken out to run: a batch deferring one of them meanwhile owes it again.
            let mut due = Rechecks::default();
            due.defer(self.lock().take_due());
            due.0.values_mut().for_each(|at| *at = Instant::now());
            let ran = metrics::projecting(due.run_due(&*store, Lane::Main, Container::Posts));
            if let Err(e) = ran.await {
                tracing::warn!(error = %e, "counter recheck failed; it will be retried");
            }
            let again: Vec<String> = due.0.into_keys().collect();
            self.lock().defer(again);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_recheck_falls_due_after_the_grace_once_and_a_settled_one_not_at_all() {
        let mut r = Rechecks::default();
        let before = Instant::now();
        r.defer(["p1".to_string(), "p2".to_string()]);
        r.defer(["p1".to_string()]);
        assert!(r.take_due().is_empty());
        assert!(r.next_due().unwrap() >= before + INCREMENT_GRACE);
        assert!(r.idle(Duration::from_secs(60)) <= INCREMENT_GRACE);
        r.settle(&["p2".to_string()]);
        assert_eq!(r.posts(), ["p1"]);
        // The grace passed.
        r.0.values_mut().for_each(|at| *at = Instant::now());
        assert_eq!(r.take_due(), ["p1"]);
        assert!(r.is_empty() && r.take_due().is_empty());
    }

    /// A driver that keeps nothing between batches: the post deferred is rechecked once the
    /// grace has passed, in a task of the process's, which recounts a counter owed a recount.
    #[tokio::test]
    async fn the_background_rechecks_a_deferred_post_once_it_falls_due() {
        use crate::store::embedded::EmbeddedStore;
        use serde_json::json;
        static BACKGROUND: std::sync::LazyLock<Background> =
            std::sync::LazyLock::new(Default::default);
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> =
            Arc::new(EmbeddedStore::open(&dir.path().join("b.db")).unwrap());
        let post = json!({"id": "p1", "type": "post", "postId": "p1", "userId": "u1",
            "userUsername": "ana", "title": "t", "content": "c", "commentCount": 0,
            "likeCount": 5, "creationDate": "2026-01-01T00:00:00.000Z"});
        store.create(Container::Posts, "p1", post).await.unwrap();
        let owed = crate::domain::pending::recount_owed("p1");
        store.create(Container::Posts, "p1", owed).await.unwrap();
        BACKGROUND.defer(&store, vec!["p1".into()]);
        let likes = || async {
            let p = store.read(Container::Posts, "p1", "p1").await.unwrap();
            p.unwrap()["likeCount"].as_i64()
        };
        assert_eq!(likes().await, Some(5), "not before the grace");
        let deadline = Instant::now() + INCREMENT_GRACE * 10;
        while likes().await != Some(0) {
            assert!(Instant::now() < deadline, "never rechecked");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(BACKGROUND.lock().is_empty());
    }
}
