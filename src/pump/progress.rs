//! How far the pump's followers are, for a request that must see its own write in the lists the
//! change feed keeps (`Progress::passed`): each follower reports when a read of its feed that
//! began at some instant came back empty, which means that every change committed before that
//! instant has been applied. A request that wants its write projected waits until every
//! follower has reported such a read begun after the write, then (the projections' own writes
//! feed the other followers) once more, at most [`ROUNDS`] times, within a deadline. A waiting
//! request wakes the followers that poll (a store that does not signal its commits) at once
//! rather than after their idle pause.

use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

/// Rounds of "every follower has read past this instant": a post, then the copies its
/// projection writes, then what those changes set off (a rename's items, a follow's backfill).
pub const ROUNDS: usize = 3;

/// The followers' reports. Shared by the pump that writes them and the requests that wait.
#[derive(Debug)]
pub struct Progress {
    /// Per follower: when its latest read that came back empty began (`None`: none yet).
    idle_since: watch::Sender<Vec<Option<Instant>>>,
    /// Bumped to wake the followers that are waiting out an idle pause (a follower marks it
    /// seen before each read, so a bump during the read wakes its next wait).
    poke: watch::Sender<u64>,
    /// How many followers report here (0: no pump runs in this process).
    followers: Mutex<usize>,
}

impl Default for Progress {
    fn default() -> Self {
        Progress {
            idle_since: watch::channel(Vec::new()).0,
            poke: watch::channel(0).0,
            followers: Mutex::new(0),
        }
    }
}

impl Progress {
    /// A follower joins; its index for [`Progress::caught_up`].
    pub(super) fn join(&self) -> usize {
        let mut n = self.followers.lock().expect("not poisoned");
        let index = *n;
        *n += 1;
        self.idle_since.send_modify(|v| v.push(None));
        index
    }

    /// Follower `index` read its feed from `began` and found nothing new.
    pub(super) fn caught_up(&self, index: usize, began: Instant) {
        self.idle_since.send_modify(|v| {
            if let Some(slot) = v.get_mut(index) {
                *slot = Some(began);
            }
        });
    }

    /// What a follower watches for a request asking it to read now.
    pub(super) fn pokes(&self) -> watch::Receiver<u64> {
        self.poke.subscribe()
    }

    /// Whether a pump reports here.
    pub fn running(&self) -> bool {
        *self.followers.lock().expect("not poisoned") > 0
    }

    /// Wait until what was committed before now, and what its projection wrote in turn, has
    /// been applied by every follower ([`ROUNDS`] rounds), or `within` has passed: whether it
    /// was. At once `true` where no pump runs.
    pub async fn passed(&self, within: Duration) -> bool {
        if !self.running() {
            return true;
        }
        let deadline = Instant::now() + within;
        for _ in 0..ROUNDS {
            let since = Instant::now();
            self.poke.send_modify(|n| *n += 1);
            let mut rx = self.idle_since.subscribe();
            let all_past =
                |v: &Vec<Option<Instant>>| v.iter().all(|t| t.is_some_and(|t| t >= since));
            let waited = tokio::time::timeout_at(deadline, rx.wait_for(all_past)).await;
            match waited {
                Ok(Ok(_)) => {}
                // The pump stopped, or time is up: answer without waiting longer.
                _ => return false,
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_wait_ends_once_every_follower_has_read_past_it() {
        let p = std::sync::Arc::new(Progress::default());
        assert!(
            p.passed(Duration::ZERO).await,
            "no pump: nothing to wait for"
        );
        let (a, b) = (p.join(), p.join());
        // Only one follower reads: the wait times out.
        let began = Instant::now();
        p.caught_up(a, began + Duration::from_secs(60));
        assert!(!p.passed(Duration::from_millis(20)).await);
        // Both followers answer every poke with an empty read begun after it.
        let follower = {
            let p = p.clone();
            let mut pokes = p.pokes();
            tokio::spawn(async move {
                loop {
                    if pokes.changed().await.is_err() {
                        return;
                    }
                    let now = Instant::now();
                    p.caught_up(a, now);
                    p.caught_up(b, now);
                }
            })
        };
        tokio::task::yield_now().await;
        assert!(p.passed(Duration::from_secs(5)).await);
        follower.abort();
    }
}
