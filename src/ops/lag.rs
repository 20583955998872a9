//! Lag, told from drift: which items' changes a projection lane has not applied yet.
//!
//! A derived item that is wrong is *drift* only if the lane that writes it had applied every
//! change of its sources when it was read; otherwise it is *lagging*: the change feed is still on
//! its way and will write it. Every look of `handler verify` runs inside a [`Window`]: opened
//! before the look, it reads where each lane stands (its checkpoint) and the changes beyond it
//! (in flight), and notes where each feed ends; closed after the look, it adds the changes
//! made during the look (beyond that end). An item whose sources appear in either set
//! ([`Touched`]) is lagging at that look; one whose sources appear in neither was read after
//! the lane had applied their current state, so what is wrong with it is drift.
//!
//! The lanes' positions are the pump's checkpoints (both stores, standalone). A store whose
//! feeds are followed by the Functions host's triggers keeps no such checkpoint (the host's
//! leases are its own): there lag is judged by time alone, as [`super::verify`] and
//! [`super::timeline`] describe, and the report says so.

use std::collections::HashSet;

use serde_json::Value;

use crate::domain::{Kind, Meta};
use crate::projection::write::str_field;
use crate::projection::Lane;
use crate::pump;
use crate::store::{retry, Container, Store, StoreResult};

/// Changes read from one position at most; a lane further behind counts as behind on every
/// item of its feed (all of it lagging), so memory stays bounded.
const MAX_SCAN: usize = 100_000;
/// Changes per read of a change feed in the scans.
const CHANGES_PER_READ: u32 = 1000;

/// What changed beyond one follower's checkpoint, or during a look, in one feed.
#[derive(Debug, Default, Clone)]
struct Changed {
    /// Partition keys of the changed items (post ids in `posts`, user ids in `users`).
    partitions: HashSet<String>,
    /// `posts`: the authors (`userId`) of the changed posts. `users`: the user items changed.
    owners: HashSet<String>,
    /// More than [`MAX_SCAN`] changes: every item counts as changed.
    everything: bool,
}

impl Changed {
    fn add(&mut self, c: Container, item: &Value) {
        let pk = str_field(item, c.partition_key_field()).unwrap_or_default();
        self.partitions.insert(pk.to_string());
        match c {
            Container::Posts => {
                if Kind::of(item) == Some(Kind::Post) {
                    if let Some(author) = Meta::of(item).user_id {
                        self.owners.insert(author.to_string());
                    }
                }
            }
            _ => {
                if Kind::of(item) == Some(Kind::User) {
                    self.owners.insert(pk.to_string());
                }
            }
        }
    }
}

/// Read `c`'s change feed from `from` to its end: what changed, and where the end is.
async fn scan(
    store: &dyn Store,
    c: Container,
    from: Option<String>,
) -> StoreResult<(Changed, String)> {
    let mut changed = Changed::default();
    let mut at = from;
    let mut seen = 0;
    loop {
        let page = retry(|| store.changes(c, at.as_deref(), CHANGES_PER_READ)).await?;
        let done = page.items.is_empty();
        seen += page.items.len();
        for item in &page.items {
            changed.add(c, item);
        }
        at = Some(page.continuation);
        if done {
            break;
        }
        if seen > MAX_SCAN {
            changed = Changed {
                everything: true,
                ..Changed::default()
            };
            // The end is still needed for the changes during the look: read on, keeping nothing.
            loop {
                let page = retry(|| store.changes(c, at.as_deref(), CHANGES_PER_READ)).await?;
                let done = page.items.is_empty();
                at = Some(page.continuation);
                if done {
                    break;
                }
            }
            break;
        }
    }
    Ok((changed, at.unwrap_or_default()))
}

/// One follower's part of a window.
#[derive(Debug, Clone)]
struct Lanefeed {
    lane: Lane,
    c: Container,
    changed: Changed,
    /// Where the feed ended when the window opened.
    end: String,
}

/// A look's window: opened before the look, closed after it ([`Window::close`]).
#[derive(Debug)]
pub struct Window(Option<Vec<Lanefeed>>);

impl Window {
    /// Where each lane stands and what it has yet to apply. Without pump checkpoints in the store
    /// the window knows nothing (see the module's documentation).
    pub async fn open(store: &dyn Store) -> StoreResult<Window> {
        let Some(positions) = pump::positions(store).await? else {
            return Ok(Window(None));
        };
        let mut feeds = Vec::new();
        for p in positions {
            let (mut changed, end) = scan(store, p.container, p.continuation).await?;
            // A post whose counter awaits a recheck is still on its way.
            changed.partitions.extend(p.deferred);
            feeds.push(Lanefeed {
                lane: p.lane,
                c: p.container,
                changed,
                end,
            });
        }
        Ok(Window(Some(feeds)))
    }

    /// What was in flight when the window opened, and what changed since.
    pub async fn close(self, store: &dyn Store) -> StoreResult<Touched> {
        let Some(feeds) = self.0 else {
            return Ok(Touched(None));
        };
        let mut out = Vec::new();
        for mut f in feeds {
            let (since, _) = scan(store, f.c, Some(f.end.clone())).await?;
            f.changed.partitions.extend(since.partitions);
            f.changed.owners.extend(since.owners);
            f.changed.everything |= since.everything;
            out.push(f);
        }
        Ok(Touched(Some(out)))
    }
}

/// What a window saw: the items whose sources a lane had not applied, or that changed, while
/// the look read them. `None` inside: the lanes' positions are not known.
#[derive(Debug, Clone)]
pub struct Touched(Option<Vec<Lanefeed>>);

impl Touched {
    /// A window that knows nothing: every item is judged by time alone.
    pub fn unknown() -> Self {
        Touched(None)
    }

    /// Whether the lanes' positions were known.
    pub fn known(&self) -> bool {
        self.0.is_some()
    }

    fn feeds(&self, lanes: &[Lane], c: Container) -> impl Iterator<Item = &Changed> {
        let lanes = lanes.to_vec();
        self.0
            .iter()
            .flatten()
            .filter(move |f| f.c == c && lanes.contains(&f.lane))
            .map(|f| &f.changed)
    }

    /// Post `post_id`, its comments and likes, its copies and its feed entry (the main lane's
    /// work), judged by the names of `users` (its author, the authors of comments and likes found
    /// with a stale name): lagging while a change of its partition, or of one of those users'
    /// items (a rename), is in flight or happened during the look.
    pub fn post_lagging(&self, post_id: &str, users: &[String]) -> bool {
        let posts = self
            .feeds(&[Lane::Main], Container::Posts)
            .any(|f| f.everything || f.partitions.contains(post_id));
        let renamed = self
            .feeds(&[Lane::Main], Container::Users)
            .any(|f| f.everything || users.iter().any(|u| f.owners.contains(u)));
        posts || renamed
    }

    /// The posts (ids) with a change in flight in the main lane, or made during the look; `None`
    /// when there were too many to list, and every post counts as changed.
    pub fn posts_changed(&self) -> Option<HashSet<&str>> {
        let mut out = HashSet::new();
        for f in self.feeds(&[Lane::Main], Container::Posts) {
            if f.everything {
                return None;
            }
            out.extend(f.partitions.iter().map(String::as_str));
        }
        Some(out)
    }

    /// The follows and timeline of a user whose check read the partitions of `users` (the
    /// user, whom they follow, who follows them): lagging while, in either lane, a change of one
    /// of those partitions or of a post by one of them is in flight or happened during the look.
    pub fn users_lagging<'a>(&self, users: impl IntoIterator<Item = &'a str> + Clone) -> bool {
        let both = [Lane::Main, Lane::Timeline];
        let partitions = self
            .feeds(&both, Container::Users)
            .any(|f| f.everything || users.clone().into_iter().any(|u| f.partitions.contains(u)));
        let posts = self
            .feeds(&both, Container::Posts)
            .any(|f| f.everything || users.clone().into_iter().any(|u| f.owners.contains(u)));
        partitions || posts
    }
}
