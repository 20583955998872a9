//! Turns at the embedded store's one writer connection, by [`WritePriority`].
//!
//! Requests and the main projection lane write at [`WritePriority::First`]; the timeline lane,
//! whose fan-out queues several writes at once, at [`WritePriority::Background`]. The writer
//! serves a waiting first-class write before any waiting background write, so a new post's feed
//! entry does not wait behind a fan-out of timeline items that started just before it. So that
//! steady first-class writes (a hot post's comments) cannot hold the background off for good, a
//! waiting background write goes next once [`FIRST_AHEAD`] first-class writes have gone ahead of
//! it.

use std::sync::{Condvar, Mutex, MutexGuard};

use crate::store::WritePriority;

/// First-class writes that may go ahead of a waiting background write before it is served.
pub(super) const FIRST_AHEAD: usize = 16;

#[derive(Debug, Default)]
struct Queue {
    /// A write holds the turn.
    busy: bool,
    first_waiting: usize,
    background_waiting: usize,
    /// First-class turns taken since a background write last had one, while one was waiting.
    ahead: usize,
}

impl Queue {
    fn may_go(&self, p: WritePriority) -> bool {
        if self.busy {
            return false;
        }
        let background_due = self.background_waiting > 0 && self.ahead >= FIRST_AHEAD;
        match p {
            WritePriority::First => !background_due,
            WritePriority::Background => self.first_waiting == 0 || background_due,
        }
    }
}

/// The queue for the writer: one turn at a time, first-class writes ahead.
#[derive(Debug, Default)]
pub(super) struct Turns {
    queue: Mutex<Queue>,
    changed: Condvar,
}

/// A turn at the writer, given back when dropped.
pub(super) struct Turn<'t>(&'t Turns);

impl Turns {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        // The queue's counts are updated without a panic in between: a poisoned lock's state is
        // still whole.
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wait for a turn at priority `p`.
    pub(super) fn take(&self, p: WritePriority) -> Turn<'_> {
        let mut q = self.lock();
        match p {
            WritePriority::First => q.first_waiting += 1,
            WritePriority::Background => q.background_waiting += 1,
        }
        while !q.may_go(p) {
            q = self.changed.wait(q).unwrap_or_else(|e| e.into_inner());
        }
        match p {
            WritePriority::First => {
                q.first_waiting -= 1;
                if q.background_waiting > 0 {
                    q.ahead += 1;
                }
            }
            WritePriority::Background => {
                q.background_waiting -= 1;
                q.ahead = 0;
            }
        }
        q.busy = true;
        Turn(self)
    }

    /// The writes waiting for a turn: first-class, background.
    #[cfg(test)]
    fn waiting(&self) -> (usize, usize) {
        let q = self.lock();
        (q.first_waiting, q.background_waiting)
    }

    /// Wait (yielding, not timing) until `want` writes wait for a turn: first-class, background.
    #[cfg(test)]
    pub(super) fn until_waiting(&self, want: (usize, usize)) {
        while self.waiting() != want {
            std::thread::yield_now();
        }
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.0.lock().busy = false;
        self.0.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// With the turn held, writes of both priorities queue; given back, the order the turns are
    /// served in.
    fn served(queued: &[WritePriority]) -> Vec<usize> {
        let turns = Arc::new(Turns::default());
        let order = Arc::new(Mutex::new(Vec::new()));
        let held = turns.take(WritePriority::First);
        let mut threads = Vec::new();
        let mut want = (0, 0);
        for (i, p) in queued.iter().copied().enumerate() {
            let (turns2, order) = (turns.clone(), order.clone());
            threads.push(std::thread::spawn(move || {
                let _turn = turns2.take(p);
                order.lock().unwrap().push(i);
            }));
            match p {
                WritePriority::First => want.0 += 1,
                WritePriority::Background => want.1 += 1,
            }
            turns.until_waiting(want);
        }
        drop(held);
        for t in threads {
            t.join().unwrap();
        }
        Arc::try_unwrap(order).unwrap().into_inner().unwrap()
    }

    #[test]
    fn a_first_class_write_is_served_before_background_writes_queued_ahead_of_it() {
        use WritePriority::{Background, First};
        let order = served(&[Background, Background, Background, First]);
        assert_eq!(order[0], 3, "served in the order {order:?}");
        assert_eq!(order.len(), 4);
    }

    #[test]
    fn a_background_write_waits_behind_at_most_its_share_of_first_class_writes() {
        use WritePriority::{Background, First};
        let mut queued = vec![Background];
        queued.extend(std::iter::repeat_n(First, FIRST_AHEAD + 4));
        let order = served(&queued);
        let at = order.iter().position(|i| *i == 0).unwrap();
        assert_eq!(at, FIRST_AHEAD, "served in the order {order:?}");
    }

    /// At the store: with the writer busy, a request's write queued after two of the timeline
    /// lane's is committed first (it comes first in the change feed).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_requests_write_commits_before_timeline_writes_queued_ahead_of_it() {
        use crate::store::{with_write_priority, Container, Store};
        use serde_json::json;
        let dir = tempfile::tempdir().unwrap();
        let store = super::super::EmbeddedStore::open(&dir.path().join("blog.db")).unwrap();
        let user = |id: &str| json!({"id": id, "userId": id, "type": "user", "username": id});
        let held = store.inner.turns.take(WritePriority::First);
        let mut writes = Vec::new();
        for (i, id) in ["timeline-1", "timeline-2"].into_iter().enumerate() {
            let (s, item) = (store.clone(), user(id));
            writes.push(tokio::spawn(with_write_priority(
                WritePriority::Background,
                async move { s.upsert(Container::Users, id, item).await },
            )));
            tokio::task::block_in_place(|| store.inner.turns.until_waiting((0, i + 1)));
        }
        let (s, item) = (store.clone(), user("request"));
        writes.push(tokio::spawn(async move {
            s.upsert(Container::Users, "request", item).await
        }));
        tokio::task::block_in_place(|| store.inner.turns.until_waiting((1, 2)));
        drop(held);
        for w in writes {
            w.await.unwrap().unwrap();
        }
        let page = store.changes(Container::Users, None, 10).await.unwrap();
        let ids: Vec<&str> = page.items.iter().filter_map(|i| i["id"].as_str()).collect();
        assert_eq!(ids.len(), 3, "{ids:?}");
        assert_eq!(ids[0], "request", "committed in the order {ids:?}");
    }
}
