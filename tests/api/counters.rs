//! `commentCount` and `likeCount`: what keeping them exact costs, and that they end exact after a
//! lost counter change, a redelivered batch, and a delete racing a like.
//!
//! The price of counter upkeep is measured with [`Priced`], a store wrapper that counts store
//! operations and prices each one with a request-unit model. The embedded store reports no
//! request units, and the Cosmos DB SDK's in-memory emulator charges a query page a flat 1 RU
//! however many items it reads, so neither shows what a real account charges a query for: the
//! items it reads. The model takes the emulator's rates for point operations and pages and adds
//! that: every item a query returns, and every item a count counts, costs what a point read of a
//! 1 KB item costs (1 RU). That prices a count higher than an account does (which reads index
//! entries, not items), but any charge that grows with the items read shows the same thing: a
//! `COUNT` over a post's likes costs in proportion to its likes.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use blog::domain::pending::{pending_count, PENDING_COUNT};
use blog::projection::{self, INCREMENT_GRACE};
use blog::store::{
    BatchOp, ChangePage, Container, Page, PatchOp, Query, Store, StoreError, StoreResult,
};
use futures::FutureExt as _;
use serde_json::{json, Value};
use tokio::sync::Notify;

use crate::helpers::{id, Fixture, TestApp};
use crate::hooks::Hooked;
use crate::projection::Follower;

/// Store operations and modeled request units (see the module's documentation).
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Price {
    pub operations: u32,
    pub request_units: f64,
}

/// `inner`, pricing every call while switched on.
pub struct Priced {
    inner: Arc<dyn Store>,
    on: AtomicBool,
    price: Mutex<Price>,
}

/// The emulator's size buckets: 1 KB, 2 KB, 4 KB, ... doubling.
fn buckets(item: &Value) -> f64 {
    let kb = (item.to_string().len() as f64 / 1024.0).ceil().max(1.0) as u64;
    kb.next_power_of_two() as f64
}

fn properties(item: &Value) -> f64 {
    item.as_object().map_or(0, |o| o.len()) as f64
}

fn create_ru(item: &Value) -> f64 {
    5.8 * buckets(item) + 0.3 * properties(item)
}

fn replace_ru(item: &Value) -> f64 {
    5.8 * 1.5 * buckets(item) + 0.3 * properties(item)
}

impl Priced {
    pub fn new(inner: Arc<dyn Store>) -> Arc<Self> {
        Arc::new(Priced {
            inner,
            on: AtomicBool::new(false),
            price: Mutex::default(),
        })
    }

    /// Price what follows, from zero.
    pub fn start(&self) {
        *self.price.lock().unwrap() = Price::default();
        self.on.store(true, Ordering::SeqCst);
    }

    /// Stop pricing; what was priced since [`Priced::start`].
    pub fn stop(&self) -> Price {
        self.on.store(false, Ordering::SeqCst);
        *self.price.lock().unwrap()
    }

    fn charge(&self, request_units: f64) {
        if self.on.load(Ordering::SeqCst) {
            let mut p = self.price.lock().unwrap();
            p.operations += 1;
            p.request_units += request_units;
        }
    }
}

#[async_trait]
impl Store for Priced {
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }
    fn idle_poll(&self) -> Duration {
        self.inner.idle_poll()
    }
    fn change_notifier(&self, c: Container) -> Option<blog::store::ChangeNotifier> {
        self.inner.change_notifier(c)
    }
    async fn read(&self, c: Container, pk: &str, id: &str) -> StoreResult<Option<Value>> {
        let r = self.inner.read(c, pk, id).await;
        self.charge(match &r {
            Ok(Some(v)) => buckets(v),
            _ => 1.0,
        });
        r
    }
    async fn create(&self, c: Container, pk: &str, item: Value) -> StoreResult<Value> {
        self.charge(create_ru(&item));
        self.inner.create(c, pk, item).await
    }
    async fn upsert(&self, c: Container, pk: &str, item: Value) -> StoreResult<Value> {
        self.charge(create_ru(&item));
        self.inner.upsert(c, pk, item).await
    }
    async fn replace(
        &self,
        c: Container,
        pk: &str,
        id: &str,
        item: Value,
        if_match: Option<&str>,
    ) -> StoreResult<Value> {
        self.charge(replace_ru(&item));
        self.inner.replace(c, pk, id, item, if_match).await
    }
    async fn delete(&self, c: Container, pk: &str, id: &str) -> StoreResult<()> {
        self.charge(replace_ru(&json!({})));
        self.inner.delete(c, pk, id).await
    }
    async fn delete_if_match(
        &self,
        c: Container,
        pk: &str,
        id: &str,
        etag: &str,
    ) -> StoreResult<()> {
        self.charge(replace_ru(&json!({})));
        self.inner.delete_if_match(c, pk, id, etag).await
    }
    async fn patch(
        &self,
        c: Container,
        pk: &str,
        id: &str,
        ops: &[PatchOp],
        if_match: Option<&str>,
    ) -> StoreResult<Value> {
        let r = self.inner.patch(c, pk, id, ops, if_match).await;
        let size = r.as_ref().map_or(1.0, buckets);
        self.charge(5.8 * 1.5 * size + 0.3 * ops.len() as f64);
        r
    }
    async fn query(&self, c: Container, q: &Query) -> StoreResult<Page> {
        let r = self.inner.query(c, q).await;
        let read: f64 = r
            .as_ref()
            .map_or(0.0, |p| p.items.iter().map(buckets).sum());
        self.charge(1.0 + read);
        r
    }
    async fn count(&self, c: Container, q: &Query) -> StoreResult<u64> {
        let r = self.inner.count(c, q).await;
        self.charge(1.0 + *r.as_ref().unwrap_or(&0) as f64);
        r
    }
    async fn batch(&self, c: Container, pk: &str, ops: Vec<BatchOp>) -> StoreResult<Vec<Value>> {
        let ru: f64 = ops
            .iter()
            .map(|op| match op {
                BatchOp::Read { .. } => 1.0,
                BatchOp::Create { item } => create_ru(item),
            })
            .sum();
        self.charge(ru);
        self.inner.batch(c, pk, ops).await
    }
    async fn changes(
        &self,
        c: Container,
        continuation: Option<&str>,
        max_items: u32,
    ) -> StoreResult<ChangePage> {
        let r = self.inner.changes(c, continuation, max_items).await;
        let read: f64 = r
            .as_ref()
            .map_or(0.0, |p| p.items.iter().map(buckets).sum());
        self.charge(1.0 + read);
        r
    }
}

/// Put `n` likes on post `p` straight into the store, with the counter they make.
async fn seed_likes(store: &dyn Store, p: &str, n: usize) {
    let likes: Vec<Value> = (0..n)
        .map(|i| {
            json!({ "id": format!("like-seed{i}"), "type": "like", "postId": p,
                    "userId": format!("seed{i}"), "userUsername": "seed",
                    "creationDate": blog::domain::now() })
        })
        .collect();
    for chunk in likes.chunks(100) {
        let ops = chunk
            .iter()
            .map(|item| BatchOp::Create { item: item.clone() })
            .collect();
        store.batch(Container::Posts, p, ops).await.unwrap();
    }
    store
        .patch(
            Container::Posts,
            p,
            p,
            &[PatchOp::set("/likeCount", n as u64)],
            None,
        )
        .await
        .unwrap();
}

/// The full price of one like on a post that holds `likes` likes already: the request, then the
/// change-feed work it sets off (projected by a follower, as the pump would).
async fn price_of_a_like(fixture: Fixture, likes: usize) -> Price {
    let inner = fixture.store.clone();
    let priced = Priced::new(inner.clone());
    let app = TestApp::spawn(fixture.wrapped(|_| priced.clone() as Arc<dyn Store>), false).await;
    let mut posts = Follower::new(Container::Posts);
    let author = id(&app.create_user("ana").await);
    let liker = id(&app.create_user("bo").await);
    let p = id(&app.create_post(&author, "t", "c").await);
    seed_likes(&*inner, &p, likes).await;
    posts.drain(&*app.store).await;

    priced.start();
    assert_eq!(app.like(&p, &liker).await.status, 201);
    let reports = posts.drain(&*app.store).await;
    let price = priced.stop();
    assert!(reports.iter().all(|r| r.deferred.is_empty()), "{reports:?}");
    let post = app.get(&format!("/api/posts/{p}")).await;
    assert_eq!(post.body["likeCount"], likes as u64 + 1);
    price
}

/// The price of one like, request and change feed, on a post with 5,000 likes is within 1.2×
/// that on a post with 10, in store operations and in request units: keeping the counter exact
/// reads nothing that grows with the count.
pub async fn a_likes_price_does_not_grow_with_the_posts_likes(small: Fixture, large: Fixture) {
    let few = price_of_a_like(small, 10).await;
    let many = price_of_a_like(large, 5_000).await;
    eprintln!("the price of a like: {few:?} at 10 likes, {many:?} at 5,000");
    assert!(
        f64::from(many.operations) <= 1.2 * f64::from(few.operations),
        "operations: {few:?} at 10 likes, {many:?} at 5,000"
    );
    assert!(
        many.request_units <= 1.2 * few.request_units,
        "request units: {few:?} at 10 likes, {many:?} at 5,000"
    );
}

/// The pending counts in post `p`'s partition.
async fn pending_in(store: &dyn Store, p: &str) -> Vec<Value> {
    let q = Query::partition(p).eq("type", PENDING_COUNT).limit(100);
    store.query(Container::Posts, &q).await.unwrap().items
}

async fn post_of(app: &TestApp, p: &str) -> Value {
    app.get(&format!("/api/posts/{p}")).await.body
}

/// A store whose first patch of item `id` fails (the process that made it died first).
fn losing_first_patch_of(inner: Arc<dyn Store>, id: String) -> Arc<dyn Store> {
    let armed = Arc::new(AtomicBool::new(true));
    Arc::new(Hooked::new(inner).before(move |call| {
        let fail = call.op == "patch" && call.id == id && armed.swap(false, Ordering::SeqCst);
        async move {
            if fail {
                Err(StoreError::Unavailable("the process died".into()))
            } else {
                Ok(())
            }
        }
        .boxed()
    }))
}

/// A like whose increment is lost (the process died after storing the like): the like is
/// listed at once, and the projections count it once the grace is past; the pending count the
/// request left goes.
pub async fn a_lost_increment_is_counted_after_the_grace(fixture: Fixture) {
    let setup = TestApp::spawn(fixture, false).await;
    let ana = id(&setup.create_user("ana").await);
    let bo = id(&setup.create_user("bo").await);
    let p = id(&setup.create_post(&ana, "t", "c").await);
    let store = setup.store.clone();
    let dir = setup.stop().await;
    let app = TestApp::spawn(
        Fixture { store, dir }.wrapped(|s| losing_first_patch_of(s, p.clone())),
        false,
    )
    .await;
    assert_eq!(app.like(&p, &bo).await.status, 201);
    assert_eq!(
        post_of(&app, &p).await["likeCount"],
        0,
        "the increment was lost"
    );
    assert_eq!(pending_in(&*app.store, &p).await.len(), 1);
    // The projections defer the post, look again once the grace is past, recount it.
    app.settle().await;
    assert_eq!(
        post_of(&app, &p).await["likeCount"],
        1,
        "the lost increment is made good"
    );
    assert!(
        pending_in(&*app.store, &p).await.is_empty(),
        "the pending count goes"
    );
}

/// A like whose increment landed but whose pending count was never deleted (the process died
/// in between): the recount finds the counter right, leaves it, and deletes the pending count.
/// Nothing is counted twice.
pub async fn a_landed_change_left_pending_is_not_counted_twice(fixture: Fixture) {
    let app = TestApp::spawn(fixture, false).await;
    let mut posts = Follower::new(Container::Posts);
    let ana = id(&app.create_user("ana").await);
    let p = id(&app.create_post(&ana, "t", "c").await);
    // What the request wrote before dying: the like with its pending count, and the increment.
    let like = json!({ "id": format!("like-{ana}"), "type": "like", "postId": p,
                       "userId": ana, "userUsername": "ana",
                       "creationDate": blog::domain::now() });
    let pending = pending_count(&p, &blog::domain::now());
    app.store
        .batch(
            Container::Posts,
            &p,
            vec![
                BatchOp::Create { item: like },
                BatchOp::Create { item: pending },
            ],
        )
        .await
        .unwrap();
    app.store
        .patch(
            Container::Posts,
            &p,
            &p,
            &[PatchOp::incr("/likeCount", 1)],
            None,
        )
        .await
        .unwrap();
    let reports = posts.drain(&*app.store).await;
    assert!(reports.iter().any(|r| r.deferred == vec![p.clone()]));
    tokio::time::sleep(INCREMENT_GRACE).await;
    projection::project(&*app.store, Container::Posts, &[projection::recheck(&p)])
        .await
        .unwrap();
    assert!(pending_in(&*app.store, &p).await.is_empty());
    assert_eq!(post_of(&app, &p).await["likeCount"], 1);
    posts.drain(&*app.store).await;
    assert_eq!(post_of(&app, &p).await["likeCount"], 1);
}

/// Every batch delivered again, after a lost increment was made good: the counters stay as
/// they are (nothing counts an item's change twice), and no pending count is left.
pub async fn a_redelivered_feed_changes_no_counter(fixture: Fixture) {
    let setup = TestApp::spawn(fixture, false).await;
    let ana = id(&setup.create_user("ana").await);
    let bo = id(&setup.create_user("bo").await);
    let p = id(&setup.create_post(&ana, "t", "c").await);
    let store = setup.store.clone();
    let dir = setup.stop().await;
    let app = TestApp::spawn(
        Fixture { store, dir }.wrapped(|s| losing_first_patch_of(s, p.clone())),
        false,
    )
    .await;
    let store = &*app.store;
    // A comment whose increment is lost, then a like and a comment made in full, and an unlike.
    assert_eq!(app.comment(&p, &bo, "lost").await.status, 201);
    assert_eq!(app.like(&p, &bo).await.status, 201);
    assert_eq!(app.like(&p, &ana).await.status, 201);
    assert_eq!(app.comment(&p, &ana, "kept").await.status, 201);
    assert_eq!(
        app.delete(&format!("/api/posts/{p}/likes/{ana}"))
            .await
            .status,
        204
    );
    let mut posts = Follower::new(Container::Posts);
    posts.drain(store).await;
    tokio::time::sleep(INCREMENT_GRACE).await;
    projection::project(store, Container::Posts, &[projection::recheck(&p)])
        .await
        .unwrap();
    posts.drain(store).await;
    let post = post_of(&app, &p).await;
    assert_eq!(
        (post["commentCount"].clone(), post["likeCount"].clone()),
        (json!(2), json!(1))
    );
    assert!(pending_in(store, &p).await.is_empty());

    // The whole feed again, from its start, twice.
    for _ in 0..2 {
        Follower::new(Container::Posts).drain(store).await;
        let post = post_of(&app, &p).await;
        assert_eq!(
            (post["commentCount"].clone(), post["likeCount"].clone()),
            (json!(2), json!(1))
        );
    }
    tokio::time::sleep(INCREMENT_GRACE).await;
    projection::project(store, Container::Posts, &[projection::recheck(&p)])
        .await
        .unwrap();
    let post = post_of(&app, &p).await;
    assert_eq!(
        (post["commentCount"].clone(), post["likeCount"].clone()),
        (json!(2), json!(1))
    );
}

/// An unlike that runs while the like's increment is still on its way: its decrement lands
/// first, the post stays readable (the counter reads 0, not below), and once the increment
/// lands the count is exact, with nothing left to recount.
pub async fn a_delete_racing_a_like_leaves_the_count_exact(fixture: Fixture) {
    let Gated {
        app,
        p,
        bo,
        reached,
        release,
        liking,
    } = like_with_its_increment_gated(fixture, true).await;
    reached.notified().await;
    assert_eq!(
        app.delete(&format!("/api/posts/{p}/likes/{bo}"))
            .await
            .status,
        204
    );
    let during = app.get(&format!("/api/posts/{p}")).await;
    assert_eq!(during.status, 200, "{:?}", during.body);
    assert_eq!(during.body["likeCount"], 0);
    release.notify_one();
    assert_eq!(liking.await.unwrap(), 201);
    assert_eq!(post_of(&app, &p).await["likeCount"], 0);
    assert!(pending_in(&*app.store, &p).await.is_empty());
    assert!(app
        .get(&format!("/api/posts/{p}/likes"))
        .await
        .items()
        .is_empty());
    // Past the grace, the pump has nothing to correct.
    tokio::time::sleep(INCREMENT_GRACE + Duration::from_millis(500)).await;
    assert_eq!(post_of(&app, &p).await["likeCount"], 0);
    let raw = app
        .store
        .read(Container::Posts, &p, &p)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(raw["likeCount"], 0);
}

/// A like whose increment lands only after a recount took it as lost (its request stalled past
/// the grace): the request finds its pending count gone and files another, and the next
/// recount takes the count back to the number of likes.
pub async fn an_increment_landing_after_the_recount_is_recounted(fixture: Fixture) {
    let Gated {
        app,
        p,
        bo: _,
        reached,
        release,
        liking,
    } = like_with_its_increment_gated(fixture, false).await;
    reached.notified().await;
    // The change feed, once the grace is past (settling waits for it), takes the increment as
    // lost and counts the like.
    app.settled("the recount counts the like", || async {
        post_of(&app, &p).await["likeCount"] == 1
    })
    .await;
    assert!(
        pending_in(&*app.store, &p).await.is_empty(),
        "the recount's pending count is answered"
    );
    release.notify_one();
    assert_eq!(liking.await.unwrap(), 201);
    app.settled("the late increment is recounted", || async {
        post_of(&app, &p).await["likeCount"] == 1 && pending_in(&*app.store, &p).await.is_empty()
    })
    .await;
    let raw = app
        .store
        .read(Container::Posts, &p, &p)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(raw["likeCount"], 1);
}

mod embedded {
    use crate::helpers::embedded_fixture;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_likes_price_does_not_grow_with_the_posts_likes() {
        super::a_likes_price_does_not_grow_with_the_posts_likes(
            embedded_fixture().await,
            embedded_fixture().await,
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lost_increment_is_counted_after_the_grace() {
        super::a_lost_increment_is_counted_after_the_grace(embedded_fixture().await).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_landed_change_left_pending_is_not_counted_twice() {
        super::a_landed_change_left_pending_is_not_counted_twice(embedded_fixture().await).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_redelivered_feed_changes_no_counter() {
        super::a_redelivered_feed_changes_no_counter(embedded_fixture().await).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_delete_racing_a_like_leaves_the_count_exact() {
        super::a_delete_racing_a_like_leaves_the_count_exact(embedded_fixture().await).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_increment_landing_after_the_recount_is_recounted() {
        super::an_increment_landing_after_the_recount_is_recounted(embedded_fixture().await).await;
    }
}

mod cosmos {
    use crate::cosmos::cosmos_fixture;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lost_increment_is_counted_after_the_grace() {
        super::a_lost_increment_is_counted_after_the_grace(cosmos_fixture().await).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_landed_change_left_pending_is_not_counted_twice() {
        super::a_landed_change_left_pending_is_not_counted_twice(cosmos_fixture().await).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_redelivered_feed_changes_no_counter() {
        super::a_redelivered_feed_changes_no_counter(cosmos_fixture().await).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_delete_racing_a_like_leaves_the_count_exact() {
        super::a_delete_racing_a_like_leaves_the_count_exact(cosmos_fixture().await).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_increment_landing_after_the_recount_is_recounted() {
        super::an_increment_landing_after_the_recount_is_recounted(cosmos_fixture().await).await;
    }
}

/// A post by ana that bo likes, the like's increment (the first patch of the post) held at a
/// gate: `reached` is notified when it arrives there, `release` lets it go on.
struct Gated {
    app: Arc<TestApp>,
    p: String,
    bo: String,
    reached: Arc<Notify>,
    release: Arc<Notify>,
    liking: tokio::task::JoinHandle<u16>,
}

/// [`Gated`], on an app with the change-feed pump running or not.
async fn like_with_its_increment_gated(fixture: Fixture, pump: bool) -> Gated {
    let setup = TestApp::spawn(fixture, false).await;
    let ana = id(&setup.create_user("ana").await);
    let bo = id(&setup.create_user("bo").await);
    let p = id(&setup.create_post(&ana, "t", "c").await);
    let store = setup.store.clone();
    let dir = setup.stop().await;
    let (reached, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let first = Arc::new(AtomicU32::new(0));
    let (r, g, post) = (reached.clone(), release.clone(), p.clone());
    let app = Arc::new(
        TestApp::spawn(
            Fixture { store, dir }.wrapped(move |inner| {
                Arc::new(Hooked::new(inner).before(move |call| {
                    let hold = call.op == "patch"
                        && call.id == post
                        && first.fetch_add(1, Ordering::SeqCst) == 0;
                    let (r, g) = (r.clone(), g.clone());
                    async move {
                        if hold {
                            r.notify_one();
                            g.notified().await;
                        }
                        Ok(())
                    }
                    .boxed()
                }))
            }),
            pump,
        )
        .await,
    );
    let liking = tokio::spawn({
        let (app, p, bo) = (app.clone(), p.clone(), bo.clone());
        async move { app.like(&p, &bo).await.status }
    });
    Gated {
        app,
        p,
        bo,
        reached,
        release,
        liking,
    }
}
