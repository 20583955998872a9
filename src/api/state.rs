//! The application's state: what every handler shares. `crate::app`, the composition root,
//! builds the router over it and `crate::startup` builds it, but it lives beside the routes: they
//! all name it, so in `app` it would make a cycle (the routes importing the module that imports
//! them). For the same reason each of its parts lives in a module that does not name it: the
//! snapshots (`feed_cache`, `counts_cache`), the budgets (`write_limit`, `search_limit`) and
//! where timeline items are while an earlier release's may remain (`upgrade::timelines::Place`).

use std::sync::Arc;
use std::time::Duration;

use super::counts_cache::CountsCache;
use super::feed_cache::{self, FeedCache};
use super::write_limit::Accounts;
use super::{search_limit, write_limit};
use crate::auth::Auth;
use crate::live::hub::{Hub, Limits};
use crate::live::webpubsub::WebPubSub;
use crate::store::Store;

/// What every handler shares ([`Shared`]), behind one reference count: a request's extractors
/// clone the state, and one count taken and given back costs the same whatever the state holds,
/// where a count per part costs one per part. Routes outside the API take a part of it (axum's
/// `FromRef`: the Functions triggers take the store).
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

impl axum::extract::FromRef<AppState> for Arc<dyn Store> {
    fn from_ref(s: &AppState) -> Self {
        s.store.clone()
    }
}

impl axum::extract::FromRef<AppState> for crate::live::Push {
    fn from_ref(s: &AppState) -> Self {
        crate::live::Push(
            s.webpubsub
                .clone()
                .map(|w| w as Arc<dyn crate::live::Publish>),
        )
    }
}

/// The parts of [`AppState`]: the store, behind the trait so either implementation fits, how
/// callers are identified, the snapshots of the feed's first pages and of posts' counts, and the
/// budgets callers spend.
#[derive(Clone)]
pub struct Shared {
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
    pub(super) timelines_left: Arc<crate::projection::upgrade::timelines::Place>,
    /// How far the change-feed pump is, where one runs in this process: what a RealWorld
    /// write waits on so that its caller's next read shows it.
    pub progress: Arc<crate::pump::Progress>,
    /// Local accounts' sign-in attempts' budgets.
    pub accounts: Arc<Accounts>,
    /// The live-update streams' caps and the change-feed follower they share.
    pub live: Arc<Hub>,
    /// Azure Web PubSub, where the change-feed triggers push live updates and
    /// `GET /api/events/negotiate` gets a client's URL (`BLOG_WEBPUBSUB_ENDPOINT`); `None`: not
    /// configured.
    pub webpubsub: Option<Arc<WebPubSub>>,
}

impl AppState {
    /// Over `store`, with `BLOG_AUTH=none` (see [`AppState::with_auth`]), the default feed
    /// snapshot age, no write rate limit (see [`AppState::with_write_limit`]; `handler`
    /// sets the one its settings give), no search budget and the default cap on searches in
    /// flight (see [`AppState::with_search_limit`]).
    pub fn new(store: Arc<dyn Store>) -> Self {
        let feed = Arc::new(FeedCache::new(&*store, feed_cache::DEFAULT_MAX_AGE));
        let counts = Arc::new(CountsCache::new(&*store, feed_cache::DEFAULT_MAX_AGE));
        AppState(Arc::new(Shared {
            store,
            auth: Arc::new(Auth::none()),
            feed,
            counts,
            writes: Arc::new(write_limit::WriteLimit::new(0)),
            searches: Arc::new(search_limit::SearchLimit::new(
                0,
                search_limit::DEFAULT_SEARCHES_IN_FLIGHT,
            )),
            timelines_left: Arc::default(),
            progress: Arc::default(),
            accounts: Arc::default(),
            live: Hub::new(Limits::default()),
            webpubsub: None,
        }))
    }

    /// The parts, to be changed in place (copied first while a clone of the state is alive).
    fn parts(&mut self) -> &mut Shared {
        Arc::make_mut(&mut self.0)
    }

    /// At most `per_minute` writes per caller, refilled evenly over the minute; 0: no limit.
    pub fn with_write_limit(mut self, per_minute: u32) -> Self {
        self.parts().writes = Arc::new(write_limit::WriteLimit::new(per_minute));
        self
    }

    /// At most `per_minute` searches per client address, refilled evenly over the minute (0: no
    /// budget), and at most `in_flight` searches at once.
    pub fn with_search_limit(mut self, per_minute: u32, in_flight: usize) -> Self {
        self.parts().searches = Arc::new(search_limit::SearchLimit::new(per_minute, in_flight));
        self
    }

    /// Live-update streams through `hub` (one with the default limits otherwise).
    pub fn with_live(mut self, hub: Arc<Hub>) -> Self {
        self.parts().live = hub;
        self
    }

    /// Live updates pushed to, and client URLs from, Azure Web PubSub.
    pub fn with_webpubsub(mut self, webpubsub: Arc<WebPubSub>) -> Self {
        self.parts().webpubsub = Some(webpubsub);
        self
    }

    pub fn with_auth(mut self, auth: Auth) -> Self {
        self.parts().auth = Arc::new(auth);
        self
    }

    /// `feed_max_age`: how long a feed snapshot, and a snapshot of a post's counts for the
    /// timeline, holds on a store that does not signal its commits (`BLOG_FEED_CACHE_MS`); 0
    /// turns snapshots off.
    pub fn with_feed_cache(mut self, feed_max_age: Duration) -> Self {
        let parts = self.parts();
        parts.feed = Arc::new(FeedCache::new(&*parts.store, feed_max_age));
        parts.counts = Arc::new(CountsCache::new(&*parts.store, feed_max_age));
        self
    }
}
