//! Renames (main lane, `users` feed): a user's current name carried to every item of theirs
//! that holds another one, their posts in `posts` and their post copies in `users` (the edges
//! and timeline entries naming them are the timeline lane's, `super::timeline`), then the
//! rename version it stands for recorded on the user (`propagatedVersion`).
//!
//! Watches the `users` feed (users); reads the user and their items carrying another name;
//! writes name patches to `posts` and `users`, and the user's record of the rename.

use std::collections::BTreeSet;

use serde_json::Value;

use super::change::{Change, ChangeKind, Item};
use super::engine::{apply_one, apply_unordered, user, wrote, Unit, PAGE};
use super::write::{str_field, Write};
use super::ProjectionError;
use crate::domain::{Kind, Meta, User};
use crate::store::{Container, PatchOp, Query, Store, StoreError};

/// Renames, main lane.
pub const UNIT: Unit = Unit {
    name: "rename",
    feed: Container::Users,
    watches: &[ChangeKind::User],
    reads: &[Container::Users, Container::Posts],
    writes: &[Container::Posts, Container::Users],
    project: |store, changes| Box::pin(async move { project(store, changes).await.map(wrote) }),
};

/// Patches of one page of a rename in flight at once: a limit of its own, below the other
/// projections' writes in flight ([`CONCURRENCY`](super::engine::CONCURRENCY)).
pub const PATCHES_IN_FLIGHT: usize = 4;
/// Passes over a user's items before a rename gives up (and its batch is retried).
const MAX_PASSES: u32 = 8;

/// The `users` feed: carry each changed user's current name to every item of theirs that
/// carries another one, then record the rename version that stands for. Returns the writes
/// made; a user whose items could not all be renamed fails the batch, naming the user.
pub async fn project(store: &dyn Store, changes: &[&Change]) -> Result<usize, ProjectionError> {
    let mut total = 0;
    for user_id in users_changed(changes) {
        total += carry_name(store, changes, &user_id)
            .await
            .map_err(|e| ProjectionError {
                unit: "",
                reason: e.to_string(),
                not_applied: vec![format!("users/{user_id}/{user_id}")],
            })?;
    }
    Ok(total)
}

/// Carry user `user_id`'s name (live, and owed a rename: [`owed`]) to their items.
async fn carry_name(
    store: &dyn Store,
    changes: &[&Change],
    user_id: &str,
) -> Result<usize, StoreError> {
    let Some(user) = user(store, changes, user_id).await? else {
        return Ok(0);
    };
    // An erased user's items go instead (`super::cascade`).
    if crate::domain::is_deleted(&user) {
        return Ok(0);
    }
    let typed = super::engine::as_user(&user)?;
    let Some(owed) = owed(&typed) else {
        return Ok(0);
    };
    let targets = [
        (
            Container::Posts,
            Query::cross_partition().eq("userId", user_id),
        ),
        (
            Container::Users,
            Query::partition(user_id).of_kind(Kind::Post),
        ),
    ];
    let mut written = 0;
    for (container, q) in targets {
        let q = q.ne("userUsername", owed.username).live().limit(PAGE);
        // Page by page, patching each page before reading the next. Patched items stop matching,
        // which may shift what a continuation token points at, so passes repeat until one finds
        // nothing left to patch.
        let mut pass = 0;
        loop {
            if pass > 0 && renamed_since(store, user_id, owed.version).await? {
                // A newer rename's (or the erasure's) own change fans out in turn; this one's name
                // is stale, and racing it (and the copies it writes) would never settle.
                return Ok(written);
            }
            let mut patched = 0;
            let mut page_q = q.clone();
            loop {
                let page = crate::store::retry(|| store.query(container, &page_q)).await?;
                let writes = plan_rename(container, owed.username, &page.items);
                apply_unordered(store, &writes, PATCHES_IN_FLIGHT)
                    .await
                    .map_err(|(_, e)| e)?;
                patched += writes.len();
                match page.continuation {
                    Some(t) => page_q.continuation = Some(t),
                    None => break,
                }
            }
            written += patched;
            pass += 1;
            if patched == 0 {
                break;
            }
            if pass >= MAX_PASSES {
                return Err(StoreError::Other(format!(
                    "items in `{}` still carry another name after {pass} passes",
                    container.name()
                )));
            }
        }
    }
    let etag = Meta::of(&user).etag;
    apply_one(store, &record_propagated(user_id, owed.version, etag)).await?;
    Ok(written)
}

/// Whether the rename of `version` is superseded: the user was renamed again after it, or erased
/// (one point read).
async fn renamed_since(store: &dyn Store, user_id: &str, version: u64) -> Result<bool, StoreError> {
    let user = crate::store::retry(|| store.read(Container::Users, user_id, user_id)).await?;
    Ok(match user {
        // Erased (or gone) meanwhile: the erasure's own change takes the user's items over, and
        // patching names it is changing would never settle.
        None => true,
        Some(u) if crate::domain::is_deleted(&u) => true,
        Some(u) => super::engine::as_user(&u)?.rename_version > version,
    })
}
/// Patches that set `username` on items still carrying another name.
pub fn plan_rename(container: Container, username: &str, stale: &[Value]) -> Vec<Write> {
    let pk_field = container.partition_key_field();
    stale
        .iter()
        .filter(|d| Meta::of(d).user_username.is_some_and(|n| n != username))
        .filter_map(|d| {
            Some(Write::patch(
                container,
                str_field(d, pk_field)?,
                Meta::of(d).id?,
                vec![PatchOp::set("/userUsername", username)],
            ))
        })
        .collect()
}

/// A rename a user item calls for: its name, and the rename version it stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owed<'a> {
    pub username: &'a str,
    pub version: u64,
}

/// The rename owed for this user item: while the version the last completed one recorded is
/// missing or below the item's rename version. Which intermediate names the users feed saw
/// does not matter: every rename bumps the version, so a rename back to an earlier name is owed
/// one too.
pub fn owed(user: &User) -> Option<Owed<'_>> {
    let version = user.rename_version;
    user.propagated_version
        .is_none_or(|done| done < version)
        .then_some(Owed {
            username: &user.username,
            version,
        })
}

/// The patch recording that the rename of `version` reached every item (`propagatedVersion`),
/// made only if the user item is still at the `_etag` read: after a newer rename, that
/// rename's own change is carried in turn.
pub fn record_propagated(user_id: &str, version: u64, etag: Option<&str>) -> Write {
    Write::patch(
        Container::Users,
        user_id,
        user_id,
        vec![PatchOp::set("/propagatedVersion", version)],
    )
    .if_match(etag)
}

/// Users whose change in the `users` feed may call for a rename (or an erasure).
pub fn users_changed(changes: &[&Change]) -> BTreeSet<String> {
    changes
        .iter()
        .filter_map(|c| match &c.item {
            Item::User(u) => Some(u.user_id.clone()),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rename_patches_only_items_with_another_name() {
        let stale = [
            json!({"id":"p1","postId":"p1","userUsername":"old"}),
            json!({"id":"c1","postId":"p1","userUsername":"new"}),
        ];
        assert_eq!(
            plan_rename(Container::Posts, "new", &stale),
            vec![Write::Patch {
                container: Container::Posts,
                pk: "p1".into(),
                id: "p1".into(),
                ops: vec![PatchOp::set("/userUsername", "new")],
                if_match: None,
            }]
        );
    }

    #[test]
    fn a_fan_out_is_owed_by_rename_version_not_by_name() {
        let new_user = crate::domain::User::new(
            &crate::domain::Id::parse("id", "u1").unwrap(),
            &crate::domain::Username::parse("ana").unwrap(),
        );
        let user = |v: Value| super::super::engine::as_user(&v).unwrap();
        assert_eq!(owed(&new_user), None, "a new user has no items yet");
        // Renamed away and back: the name equals the original, the version does not.
        let back = user(
            json!({"id":"u1","type":"user","userId":"u1","username":"ana",
            "renameVersion":2,"propagatedVersion":0}),
        );
        assert_eq!(
            owed(&back),
            Some(Owed {
                username: "ana",
                version: 2
            })
        );
        let done = user(
            json!({"id":"u1","type":"user","userId":"u1","username":"ana",
            "renameVersion":2,"propagatedVersion":2}),
        );
        assert_eq!(owed(&done), None);
        // Written before the version existed: fanned out once, then marked.
        let legacy = user(
            json!({"id":"u1","type":"user","userId":"u1","username":"bea",
            "propagatedUsername":"bea"}),
        );
        assert_eq!(
            owed(&legacy),
            Some(Owed {
                username: "bea",
                version: 0
            })
        );
    }

    #[test]
    fn only_users_start_a_rename_fan_out() {
        let changes = [
            json!({"id":"u1","type":"user","userId":"u1","username":"a"}),
            json!({"id":"p1","type":"post","userId":"u1","postId":"p1"}),
            json!({"id":"u2","type":"user","userId":"u2","username":"b"}),
        ];
        let changes = crate::projection::change::decoded(Container::Users, &changes).unwrap();
        let changes: Vec<&Change> = changes.iter().collect();
        assert_eq!(
            users_changed(&changes).into_iter().collect::<Vec<_>>(),
            vec!["u1", "u2"]
        );
    }
}
