//! Each unit of [`super::UNITS`] does what its row says: run over a store holding an item of
//! every kind it watches, through a store that records what it touched, it reads only the
//! containers it declares it reads ([`Unit::reads`]) and writes only those it declares it writes
//! ([`Unit::writes`]). The store holds a change of every [`ChangeKind`]: a kind added without
//! an item here fails the test, naming it.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::change::{decode, recheck, ChangeKind};
use super::{Unit, UNITS};
use crate::domain::jobs::{Job, Work};
use crate::domain::pending::recount_owed;
use crate::store::embedded::EmbeddedStore;
use crate::store::{
    BatchOp, ChangeNotifier, ChangePage, Container, Page, PatchOp, Query, Store, StoreResult,
};

/// A store that records which containers were read and which written.
struct Recording {
    inner: EmbeddedStore,
    reads: Mutex<BTreeSet<&'static str>>,
    writes: Mutex<BTreeSet<&'static str>>,
}

impl Recording {
    fn read_from(&self, c: Container) {
        self.reads.lock().unwrap().insert(c.name());
    }
    fn wrote_to(&self, c: Container) {
        self.writes.lock().unwrap().insert(c.name());
    }
    fn take(&self) -> (BTreeSet<&'static str>, BTreeSet<&'static str>) {
        (
            std::mem::take(&mut *self.reads.lock().unwrap()),
            std::mem::take(&mut *self.writes.lock().unwrap()),
        )
    }
}

#[async_trait]
impl Store for Recording {
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }
    fn idle_poll(&self) -> Duration {
        self.inner.idle_poll()
    }
    fn change_notifier(&self, c: Container) -> Option<ChangeNotifier> {
        self.inner.change_notifier(c)
    }
    async fn read(&self, c: Container, pk: &str, id: &str) -> StoreResult<Option<Value>> {
        self.read_from(c);
        self.inner.read(c, pk, id).await
    }
    async fn create(&self, c: Container, pk: &str, item: Value) -> StoreResult<Value> {
        self.wrote_to(c);
        self.inner.create(c, pk, item).await
    }
    async fn upsert(&self, c: Container, pk: &str, item: Value) -> StoreResult<Value> {
        self.wrote_to(c);
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
        self.wrote_to(c);
        self.inner.replace(c, pk, id, item, if_match).await
    }
    async fn delete(&self, c: Container, pk: &str, id: &str) -> StoreResult<()> {
        self.wrote_to(c);
        self.inner.delete(c, pk, id).await
    }
    async fn delete_if_match(
        &self,
        c: Container,
        pk: &str,
        id: &str,
        etag: &str,
    ) -> StoreResult<()> {
        self.wrote_to(c);
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
        self.wrote_to(c);
        self.inner.patch(c, pk, id, ops, if_match).await
    }
    async fn query(&self, c: Container, q: &Query) -> StoreResult<Page> {
        self.read_from(c);
        self.inner.query(c, q).await
    }
    async fn count(&self, c: Container, q: &Query) -> StoreResult<u64> {
        self.read_from(c);
        self.inner.count(c, q).await
    }
    async fn batch(&self, c: Container, pk: &str, ops: Vec<BatchOp>) -> StoreResult<Vec<Value>> {
        self.wrote_to(c);
        self.inner.batch(c, pk, ops).await
    }
    async fn changes(
        &self,
        c: Container,
        continuation: Option<&str>,
        max_items: u32,
    ) -> StoreResult<ChangePage> {
        self.read_from(c);
        self.inner.changes(c, continuation, max_items).await
    }
}

fn post(id: &str, author: &str, extra: Value) -> Value {
    let mut p = json!({"id": id, "type": "post", "postId": id, "userId": author,
        "userUsername": "ana", "title": "t", "content": "c", "commentCount": 0, "likeCount": 0,
        "creationDate": "2026-01-01T00:00:00.000Z", "tags": ["rust"]});
    p.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    p
}

/// One item of every kind a unit watches, in the containers they live in: ana (renamed, owed
/// the rename) and her tagged, bookmarked post p1 with a comment, a like, a doubted counter and
/// a bookmark; bo following her; cy erased, with a deleted post; ana's jobs.
async fn seeded(store: &EmbeddedStore) -> Vec<(Container, Value)> {
    let user = |id: &str, name: &str, extra: Value| {
        let mut u = json!({"id": id, "type": "user", "userId": id, "username": name,
            "renameVersion": 1, "propagatedVersion": 0});
        u.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        u
    };
    let edge = |kind: &str, id: &str, owner: &str, other: &str| {
        json!({"id": id, "type": kind, "userId": owner, "refUserId": other,
            "userUsername": "x", "creationDate": "2026-01-01T00:00:00.000Z"})
    };
    let entry = crate::domain::to_value(
        &serde_json::from_value::<crate::domain::Post>(post("p1", "ana", json!({})))
            .unwrap()
            .as_copied(),
    );
    let job = |work: Work| Job::new("ana", work, 0, false).to_item();
    let items = vec![
        (Container::Users, user("ana", "ana", json!({}))),
        (Container::Users, user("bo", "bo", json!({}))),
        (Container::Users, user("cy", "", json!({"deleted": true}))),
        (
            Container::Posts,
            post("p1", "ana", json!({"bookmarkCount": 1})),
        ),
        (Container::Posts, post("p3", "cy", json!({"deleted": true}))),
        (
            Container::Posts,
            json!({"id": "c1", "type": "comment", "postId": "p1", "userId": "bo",
                "userUsername": "old", "content": "c", "creationDate": "2026-01-01T00:00:00.000Z"}),
        ),
        (
            Container::Posts,
            json!({"id": "like-bo", "type": "like", "postId": "p1", "userId": "bo",
                "userUsername": "bo", "creationDate": "2026-01-01T00:00:00.000Z"}),
        ),
        (Container::Posts, recount_owed("p1")),
        (
            Container::Posts,
            json!({"id": "bookmark-bo", "type": "bookmark", "postId": "p1", "userId": "bo",
                "creationDate": "2026-01-01T00:00:00.000Z"}),
        ),
        (
            Container::Users,
            edge("following", "following-ana", "bo", "ana"),
        ),
        (
            Container::Users,
            edge("follower", "follower-bo", "ana", "bo"),
        ),
        (Container::Users, post("p1", "ana", json!({}))),
        (
            Container::Users,
            job(Work::Post {
                post_id: "p1".into(),
                entry: entry.clone(),
                cursor: None,
            }),
        ),
        (
            Container::Users,
            job(Work::Bookmarks {
                post_id: "p1".into(),
                entry,
                cursor: None,
            }),
        ),
    ];
    for (c, item) in &items {
        let pk = item[c.partition_key_field()].as_str().unwrap();
        store.upsert(*c, pk, item.clone()).await.unwrap();
    }
    items
}

#[tokio::test]
async fn each_unit_touches_only_the_containers_it_declares() {
    let mut covered = BTreeSet::new();
    for (lane, unit) in UNITS {
        let dir = tempfile::tempdir().unwrap();
        let inner = EmbeddedStore::open(&dir.path().join("b.db")).unwrap();
        let mut docs: Vec<Value> = seeded(&inner)
            .await
            .into_iter()
            .filter(|(c, _)| *c == unit.feed)
            .map(|(_, item)| item)
            .collect();
        if unit.feed == Container::Posts {
            docs.push(recheck("p1"));
        }
        let store = Recording {
            inner,
            reads: Mutex::default(),
            writes: Mutex::default(),
        };
        let batch = decode(unit.feed, &docs);
        let watched = unit.changes(&batch).unwrap();
        let kinds: BTreeSet<ChangeKind> = watched.iter().filter_map(|c| c.item.kind()).collect();
        let missing: Vec<_> = unit.watches.iter().filter(|k| !kinds.contains(k)).collect();
        assert!(
            missing.is_empty(),
            "`{}`: no change of {missing:?} to run it over",
            unit.name
        );
        covered.extend(kinds);
        (unit.project)(&store, &watched)
            .await
            .unwrap_or_else(|e| panic!("`{}` ({}): {e}", unit.name, lane.name()));
        let (reads, writes) = store.take();
        assert!(!reads.is_empty(), "`{}` read nothing", unit.name);
        check(unit, "reads", &reads, unit.reads);
        check(unit, "writes", &writes, unit.writes);
    }
    let unwatched: Vec<_> = ChangeKind::ALL
        .iter()
        .filter(|k| !covered.contains(k))
        .collect();
    assert!(unwatched.is_empty(), "kinds no unit watches: {unwatched:?}");
}

fn check(unit: &Unit, what: &str, touched: &BTreeSet<&str>, declared: &[Container]) {
    let undeclared: Vec<&str> = touched
        .iter()
        .filter(|c| !declared.iter().any(|d| d.name() == **c))
        .copied()
        .collect();
    assert!(
        undeclared.is_empty(),
        "`{}` {what} {undeclared:?}, which its row does not declare",
        unit.name
    );
}

/// The check above fails for a unit that touches what it does not declare.
#[tokio::test]
async fn a_unit_touching_an_undeclared_container_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    let store = Recording {
        inner: EmbeddedStore::open(&dir.path().join("b.db")).unwrap(),
        reads: Mutex::default(),
        writes: Mutex::default(),
    };
    store.read(Container::Leases, "x", "x").await.unwrap();
    let (reads, _) = store.take();
    let unit = &super::tags::UNIT;
    let caught = std::panic::catch_unwind(|| check(unit, "reads", &reads, unit.reads));
    let message = caught.unwrap_err();
    let message = message.downcast_ref::<String>().unwrap();
    assert!(message.contains("`tags` reads [\"leases\"]"), "{message}");
}

/// A change of a kind a unit watches that does not decode fails the batch, naming the kind, the
/// item and the unit; one of a kind no unit watches is passed over.
#[tokio::test]
async fn a_change_that_does_not_decode_fails_naming_its_kind_and_unit() {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedStore::open(&dir.path().join("b.db")).unwrap();
    let broken = json!({"id": "following-x", "type": "following", "userId": "f"});
    let e = super::project_lane(&store, super::Lane::Main, Container::Users, &[broken])
        .await
        .unwrap_err();
    assert_eq!(e.unit, "follows");
    assert!(
        e.to_string()
            .starts_with("unit `follows`: a `following` change does not decode"),
        "{e}"
    );
    assert_eq!(e.not_applied, ["users/f/following-x"]);
    let unwatched = json!({"id": "x", "type": "filler", "userId": "f"});
    let report = super::project_lane(&store, super::Lane::Main, Container::Users, &[unwatched])
        .await
        .unwrap();
    assert_eq!(report.writes, 0);
}
