//! The application's state: what every handler shares. `crate::app`, the composition root,
//! builds the router over it and `crate::startup` builds it, but it lives beside the routes: they
//! all name it, so in `app` it would make a cycle (the routes importing the module that imports
//! them). For the same reason each of its parts lives in a module that does not name it: the
//! snapshots (`feed_cache`, `counts_cache`), the budgets (`write_limit`, `search_limit`) and
//! where timeline items are (`timeline_place`).

use std::sync::Arc;
use std::time::Duration;

use super::counts_cache::CountsCache;
use super::feed_cache::{self, FeedCache};
use super::timeline_place::TimelinePlace;
use super::write_limit::Accounts;
use super::{search_limit, write_limit};
use crate::auth::Auth;
use crate::store::Store;

/// What every handler shares: the store, behind the trait so either implementation fits, and
/// how callers are identified, and the snapshot of the feed's first pages. Routes outside the
/// API take a part of it (axum's `FromRef`: the Functions triggers take the store).
#[derive(Clone, axum::extract::FromRef)]
pub struct AppState {
    pub store: Arc<dyn Store>,
    pub auth: Arc<Auth>,
    pub feed: Arc<FeedCache>,
    /// The snapshot of posts' counts a timeline page shows.
    pub counts: Arc<CountsCache>,
    /// Each caller's write budget (`BLOG_WRITES_PER_MINUTE`).
    pub writes: Arc<write_limit::WriteLimit>,
    /// Each client's search budget (`BLOG_SEARCHES_PER_MINUTE`) and the searches in flight.
    pub searches: Arc<search_limit::SearchLimit>,
    /// Whether timeline items may still be where an earlier release kept them.
    pub(super) timelines: Arc<TimelinePlace>,
    /// How far the change-feed pump is, where one runs in this process: what a RealWorld
    /// write waits on so that its caller's next read shows it.
    pub progress: Arc<crate::pump::Progress>,
    /// Local accounts' sign-in attempts' budgets.
    pub accounts: Arc<Accounts>,
}

impl AppState {
    /// Over `store`, with `BLOG_AUTH=none` (see [`AppState::with_auth`]), the default feed
    /// snapshot age, no write rate limit (see [`AppState::with_write_limit`]; `handler`
    /// sets the one its settings give), no search budget and the default cap on searches in
    /// flight (see [`AppState::with_search_limit`]).
    pub fn new(store: Arc<dyn Store>) -> Self {
        let feed = Arc::new(FeedCache::new(&*store, feed_cache::DEFAULT_MAX_AGE));
        let counts = Arc::new(CountsCache::new(&*store, feed_cache::DEFAULT_MAX_AGE));
        AppState {
            store,
            auth: Arc::new(Auth::none()),
            feed,
            counts,
            writes: Arc::new(write_limit::WriteLimit::new(0)),
            searches: Arc::new(search_limit::SearchLimit::new(
                0,
                search_limit::DEFAULT_SEARCHES_IN_FLIGHT,
            )),
            timelines: Arc::default(),
            progress: Arc::default(),
            accounts: Arc::default(),
        }
    }

    /// At most `per_minute` writes per caller, refilled evenly over the minute; 0: no limit.
    pub fn with_write_limit(self, per_minute: u32) -> Self {
        AppState {
            writes: Arc::new(write_limit::WriteLimit::new(per_minute)),
            ..self
        }
    }

    /// At most `per_minute` searches per client address, refilled evenly over the minute (0: no
    /// budget), and at most `in_flight` searches at once.
    pub fn with_search_limit(self, per_minute: u32, in_flight: usize) -> Self {
        AppState {
            searches: Arc::new(search_limit::SearchLimit::new(per_minute, in_flight)),
            ..self
        }
    }

    pub fn with_auth(self, auth: Auth) -> Self {
        AppState {
            auth: Arc::new(auth),
            ..self
        }
    }

    /// `feed_max_age`: how long a feed snapshot, and a snapshot of a post's counts for the
    /// timeline, holds on a store that does not signal its commits (`BLOG_FEED_CACHE_MS`); 0
    /// turns snapshots off.
    pub fn with_feed_cache(self, feed_max_age: Duration) -> Self {
        AppState {
            feed: Arc::new(FeedCache::new(&*self.store, feed_max_age)),
            counts: Arc::new(CountsCache::new(&*self.store, feed_max_age)),
            ..self
        }
    }
}
