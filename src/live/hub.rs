//! The in-process hub: the caps on open streams, and one follower of the change feed while any
//! stream is open, publishing each batch once into a bounded ring every stream reads.
//!
//! - **Caps.** [`Limits::per_client`] streams per client address and [`Limits::total`] in the
//!   process; a [`Slot`] is held for a stream's life.
//! - **One follower, only while streams are open.** The first stream to join starts it: it
//!   reads both feeds from the pump's checkpoints (else from where it stood when it last
//!   stopped) to the present without publishing, says where it stands, then publishes each page of
//!   changes it reads. It waits for commits where the store signals them, else polls like the
//!   pump; when no stream is left it stops, so an idle process reads nothing for live updates.
//! - **A bounded ring.** Publishing never waits on a reader: a stream more than
//!   [`Limits::ring`] batches behind misses them and is told so (`broadcast`'s lag).
//! - **Shutdown.** [`Hub::close`] ends the follower and every stream at once.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{broadcast, watch, Notify};

use super::{Batch, Cursor, Publish, FEEDS};
use crate::projection::Lane;
use crate::settings::LiveStreams;
use crate::store::{metrics, ChangeNotifier, Store, StoreResult};

/// Changes read per page while following.
const PAGE: u32 = 100;
/// Changes read per page while reading to the present on start.
const START_PAGE: u32 = 1000;
const FIRST_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// What streams may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Streams one client address may hold (0: no cap).
    pub per_client: usize,
    /// Streams the process holds.
    pub total: usize,
    /// The most changes a resuming stream reads from its cursor before it is told `reset`.
    pub backlog: usize,
    /// Batches the ring holds for the slowest stream.
    pub ring: usize,
    /// How long a stream lasts; none: as long as its page.
    pub lifetime: Option<Duration>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits::streams(LiveStreams::default())
    }
}

impl Limits {
    /// The caps the settings give (`BLOG_LIVE_STREAMS`, `BLOG_LIVE_STREAMS_PER_CLIENT`), a
    /// backlog of 1,000 changes and a ring of 1,024 batches; streams as long as their pages.
    pub fn streams(caps: LiveStreams) -> Limits {
        Limits {
            per_client: caps.per_client,
            total: caps.total,
            backlog: 1000,
            ring: 1024,
            lifetime: None,
        }
    }

    /// The same under the Functions host, where each stream is an invocation: one the host
    /// times out (30 minutes by default on Flex Consumption) restarts the handler, so a stream
    /// ends well before, and its page resumes from where it stood.
    pub fn hosted(self) -> Limits {
        Limits {
            lifetime: Some(Duration::from_secs(10 * 60)),
            ..self
        }
    }
}

/// Why a stream was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Its client address holds [`Limits::per_client`] streams.
    Client,
    /// The process holds [`Limits::total`] streams.
    Full,
}

#[derive(Default)]
struct Admitted {
    total: usize,
    per_client: HashMap<IpAddr, usize>,
}

/// The follower while it runs, and where it stood when it last stopped.
#[derive(Default)]
struct Following {
    running: Option<Running>,
    last: Option<Cursor>,
}

struct Running {
    ring: broadcast::Sender<Arc<Batch>>,
    position: watch::Receiver<Option<Cursor>>,
    left: Arc<Notify>,
}

pub struct Hub {
    limits: Limits,
    admitted: Mutex<Admitted>,
    following: Mutex<Following>,
    /// Whether the follower runs, as [`Hub::following`] says, for whoever waits for it to stop.
    runs: watch::Sender<bool>,
    closing: watch::Sender<bool>,
    /// The store work of every follower this hub started.
    spent: metrics::Meter,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A stream's place under the caps, given back when dropped.
pub struct Slot {
    hub: Arc<Hub>,
    client: Option<IpAddr>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut a = lock(&self.hub.admitted);
        a.total -= 1;
        if let Some(client) = self.client {
            if let Some(n) = a.per_client.get_mut(&client) {
                *n -= 1;
                if *n == 0 {
                    a.per_client.remove(&client);
                }
            }
        }
    }
}

/// A stream's subscription to the follower's batches.
pub struct Joined {
    /// Taken when dropped, so that the follower, told, finds it gone.
    ring: Option<broadcast::Receiver<Arc<Batch>>>,
    /// Where the follower stands: `None` until it has read to the present.
    pub position: watch::Receiver<Option<Cursor>>,
    left: Arc<Notify>,
}

impl Joined {
    /// The next batch the follower published, or how many this stream missed.
    pub async fn recv(&mut self) -> Result<Arc<Batch>, broadcast::error::RecvError> {
        match &mut self.ring {
            Some(ring) => ring.recv().await,
            None => Err(broadcast::error::RecvError::Closed),
        }
    }
}

impl Drop for Joined {
    fn drop(&mut self) {
        // The follower looks whether any stream is left.
        drop(self.ring.take());
        self.left.notify_one();
    }
}

impl Hub {
    pub fn new(limits: Limits) -> Arc<Hub> {
        Arc::new(Hub {
            limits,
            admitted: Mutex::default(),
            following: Mutex::default(),
            runs: watch::Sender::new(false),
            closing: watch::Sender::new(false),
            spent: metrics::Meter::default(),
        })
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// A slot for one more stream from `client` (its address, as the connection caps count it;
    /// `None`: unknown, counted in the total only).
    pub fn admit(self: &Arc<Self>, client: Option<IpAddr>) -> Result<Slot, Refused> {
        let mut a = lock(&self.admitted);
        if a.total >= self.limits.total {
            return Err(Refused::Full);
        }
        let client = client.filter(|_| self.limits.per_client > 0);
        if let Some(c) = client {
            let held = a.per_client.entry(c).or_insert(0);
            if *held >= self.limits.per_client {
                return Err(Refused::Client);
            }
            *held += 1;
        }
        a.total += 1;
        Ok(Slot {
            hub: self.clone(),
            client,
        })
    }

    /// The streams open now.
    pub fn open_streams(&self) -> usize {
        lock(&self.admitted).total
    }

    /// Subscribe to the follower's batches, starting it if it does not run.
    pub fn join(self: &Arc<Self>, store: &Arc<dyn Store>) -> Joined {
        let mut f = lock(&self.following);
        if f.running.is_none() {
            let (ring, _) = broadcast::channel(self.limits.ring.max(1));
            let (position_tx, position) = watch::channel(None);
            let left = Arc::new(Notify::new());
            let task = Task {
                hub: self.clone(),
                store: store.clone(),
                ring: ring.clone(),
                position: position_tx,
                left: left.clone(),
            };
            let (hub, mine, last) = (self.clone(), ring.clone(), f.last.clone());
            let spent = self.spent.clone();
            tokio::spawn(async move {
                use futures::FutureExt as _;
                let run = std::panic::AssertUnwindSafe(metrics::metered(spent, task.run(last)));
                if run.catch_unwind().await.is_err() {
                    // Its streams end (no sender is left) and their pages reconnect to a new one.
                    tracing::error!("live updates: the change-feed follower panicked");
                    hub.forget(&mine);
                }
            });
            f.running = Some(Running {
                ring,
                position,
                left,
            });
            self.runs.send_replace(true);
        }
        let running = f.running.as_ref().expect("running");
        Joined {
            ring: Some(running.ring.subscribe()),
            position: running.position.clone(),
            left: running.left.clone(),
        }
    }

    /// The batches the ring holds now (at most [`Limits::ring`], however slow a stream).
    pub fn held(&self) -> usize {
        lock(&self.following)
            .running
            .as_ref()
            .map_or(0, |r| r.ring.len())
    }

    /// The store operations and request units the followers of this hub have spent so far
    /// (what live updates cost the store besides the streams' own reads).
    pub fn spent(&self) -> metrics::Usage {
        self.spent.usage()
    }

    /// Whether the follower runs now.
    pub fn following(&self) -> bool {
        lock(&self.following).running.is_some()
    }

    /// Once the follower does not run: at once if it does not, else when it stops (it stops
    /// after the last stream has given back its slot).
    pub async fn stopped(&self) {
        let mut runs = self.runs.subscribe();
        let _ = runs.wait_for(|runs| !*runs).await;
    }

    /// End the follower and every stream at once (the server shuts down).
    pub fn close(&self) {
        self.closing.send_replace(true);
    }

    /// What a stream watches to end at shutdown.
    pub fn closing(&self) -> watch::Receiver<bool> {
        self.closing.subscribe()
    }

    /// The follower publishing into `ring` is gone: the next stream starts another.
    fn forget(&self, ring: &broadcast::Sender<Arc<Batch>>) {
        let mut f = lock(&self.following);
        if f.running
            .as_ref()
            .is_some_and(|r| r.ring.same_channel(ring))
        {
            f.running = None;
            self.runs.send_replace(false);
        }
    }

    /// The follower stops if no stream is left (decided under the lock streams join under, so
    /// none joins a follower that is stopping): whether it stops.
    fn stop_if_alone(&self, ring: &broadcast::Sender<Arc<Batch>>, at: &Cursor) -> bool {
        let mut f = lock(&self.following);
        if ring.receiver_count() > 0 && !*self.closing.borrow() {
            return false;
        }
        f.running = None;
        self.runs.send_replace(false);
        f.last = Some(at.clone());
        true
    }
}

/// The hub as a publisher: each batch once into the ring every open stream reads, never
/// waiting on a reader (a stream that falls a whole ring behind is told so when it reads).
impl Publish for Hub {
    fn publish(&self, batch: Arc<Batch>) {
        if let Some(running) = &lock(&self.following).running {
            // No stream left: nobody to tell.
            let _ = running.ring.send(batch);
        }
    }
}

/// The follower of the change feed.
struct Task {
    hub: Arc<Hub>,
    store: Arc<dyn Store>,
    ring: broadcast::Sender<Arc<Batch>>,
    position: watch::Sender<Option<Cursor>>,
    left: Arc<Notify>,
}

impl Task {
    async fn run(self, last: Option<Cursor>) {
        let mut closing = self.hub.closing();
        let mut backoff = FIRST_BACKOFF;
        // Where the pump stands is near the present however long this follower was stopped;
        // where it stood itself, else the beginning, where the pump has not checkpointed.
        let from = match pump_positions(&*self.store).await {
            Some(pump) => pump,
            None => last.unwrap_or_default(),
        };
        let mut at = loop {
            match read_to_present(&*self.store, from.clone()).await {
                Ok(at) => break at,
                Err(e) => {
                    tracing::warn!(error = %e, "live updates: cannot read the change feed; retrying");
                    if self.hub.stop_if_alone(&self.ring, &from) {
                        return;
                    }
                    tokio::select! {
                        () = tokio::time::sleep(backoff) => {}
                        _ = closing.wait_for(|c| *c) => {}
                    }
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        };
        self.position.send_replace(Some(at.clone()));
        let mut wakes: Vec<Option<ChangeNotifier>> = FEEDS
            .iter()
            .map(|c| self.store.change_notifier(*c))
            .collect();
        loop {
            if self.hub.stop_if_alone(&self.ring, &at) {
                return;
            }
            for w in wakes.iter_mut().flatten() {
                w.borrow_and_update();
            }
            let mut read_any = false;
            let mut failed = false;
            for c in FEEDS {
                match self.store.changes(c, at.at(c), PAGE).await {
                    Ok(page) => {
                        let next = at.with(c, page.continuation);
                        if !page.items.is_empty() {
                            read_any = true;
                            // Where it stands first: a stream joining now and taking this
                            // position may get the batch as well (at least once), never miss it.
                            self.position.send_replace(Some(next.clone()));
                            let batch = Batch::of(c, &page.items, next.clone());
                            self.hub.publish(Arc::new(batch));
                        }
                        at = next;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, container = c.name(), "live updates: change feed read failed; retrying");
                        failed = true;
                    }
                }
            }
            if read_any {
                backoff = FIRST_BACKOFF;
                continue;
            }
            let idle = if failed {
                backoff = (backoff * 2).min(MAX_BACKOFF);
                backoff
            } else {
                self.store.idle_poll()
            };
            let [a, b] = &mut wakes[..] else {
                unreachable!("two feeds")
            };
            tokio::select! {
                () = changed(a) => {}
                () = changed(b) => {}
                () = tokio::time::sleep(idle) => {}
                () = self.left.notified() => {}
                _ = closing.wait_for(|c| *c) => {}
            }
        }
    }
}

/// Resolves once `w` signals a commit; never where the store signals none (or no longer does).
async fn changed(w: &mut Option<ChangeNotifier>) {
    match w {
        Some(rx) => {
            if rx.changed().await.is_err() {
                *w = None;
                std::future::pending::<()>().await;
            }
        }
        None => std::future::pending().await,
    }
}

/// Where the pump's main lane stands in each feed, a near-present place to start from; `None`
/// unless it has checkpointed in both.
async fn pump_positions(store: &dyn Store) -> Option<Cursor> {
    let positions = crate::pump::positions(store).await.ok().flatten()?;
    let mut at = Cursor::default();
    for p in positions {
        if p.lane == Lane::Main {
            if let Some(cp) = p.continuation {
                at = at.with(p.container, cp);
            }
        }
    }
    at.0.iter().all(Option::is_some).then_some(at)
}

/// Read each feed from `from` to its present end, passing over what it holds.
pub async fn read_to_present(store: &dyn Store, from: Cursor) -> StoreResult<Cursor> {
    let mut at = from;
    for c in FEEDS {
        loop {
            let page = store.changes(c, at.at(c), START_PAGE).await?;
            let done = page.items.is_empty();
            at = at.with(c, page.continuation);
            if done {
                break;
            }
        }
    }
    Ok(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn caps_hold_per_client_and_in_total_and_slots_come_back() {
        let hub = Hub::new(Limits {
            per_client: 2,
            total: 3,
            ..Limits::default()
        });
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let first = hub.admit(Some(a)).unwrap();
        let _second = hub.admit(Some(a)).unwrap();
        assert_eq!(hub.admit(Some(a)).err(), Some(Refused::Client));
        let _third = hub.admit(Some(b)).unwrap();
        assert_eq!(hub.admit(Some(b)).err(), Some(Refused::Full));
        drop(first);
        assert_eq!(hub.open_streams(), 2);
        assert!(hub.admit(Some(a)).is_ok());
    }
}
