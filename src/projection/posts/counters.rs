//! A post's counters (`commentCount`, `likeCount`), kept true by the posts projection
//! (`super`): a counter is trusted while no pending count (see [`crate::domain::pending`]) is in
//! its post's partition, and recounted once every pending count is older than
//! [`INCREMENT_GRACE`] (see [`counter_fix`]). Pure: the later looks at a deferred post are the
//! drivers' (`crate::rechecks`).

use std::time::Duration;

use super::{PostsFacts, PostsNeeds};
use crate::domain::{Kind, Post};
use crate::projection::write::Write;
use crate::store::Container;

/// How long a counter change announced by a pending count (see [`crate::domain::pending`]) may
/// take to land. A post is recounted only once every pending count in its partition is older
/// than this: until then the change it announces is taken to be on its way (a request between
/// its item's write and the counter's), and the post is looked at again later.
pub const INCREMENT_GRACE: Duration = Duration::from_secs(3);

/// Comments or likes: the two kinds of item a post counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Counted {
    Comments,
    Likes,
}

impl Counted {
    pub const BOTH: [Counted; 2] = [Counted::Comments, Counted::Likes];

    /// The kind of the items counted.
    pub fn kind(self) -> Kind {
        match self {
            Counted::Comments => Kind::Comment,
            Counted::Likes => Kind::Like,
        }
    }

    /// The post's property holding the count.
    pub fn path(self) -> &'static str {
        match self {
            Counted::Comments => "/commentCount",
            Counted::Likes => "/likeCount",
        }
    }

    /// The post's counter.
    pub fn of(self, post: &Post) -> u64 {
        match self {
            Counted::Comments => post.comment_count,
            Counted::Likes => post.like_count,
        }
    }

    pub(super) fn set(self, post: &mut Post, n: u64) {
        match self {
            Counted::Comments => post.comment_count = n,
            Counted::Likes => post.like_count = n,
        }
    }
}

/// A pending count as the projection sees it: its id, and when the change it announces began.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingCount {
    pub id: String,
    pub since: String,
}

/// What a recount does with a counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CounterFix {
    /// The counter is right, or it was not recounted.
    Keep,
    /// Set it to the number of items.
    Set(u64),
}

/// The counter rule. A post's counters are trusted while no pending count is in its partition:
/// every change of them was made by the write that announced it. A pending count younger than
/// [`INCREMENT_GRACE`] is a change on its way: the post is looked at again later
/// ([`deferred`]), and nothing is corrected meanwhile, in either direction (a correction made
/// while a change is on its way would count that change twice or not at all). Once every
/// pending count is older, their changes are taken as lost: the post is recounted, and a counter
/// that differs from its items is set to their number (conditional on the post's version read
/// before the count, so a change that lands meanwhile voids it).
pub fn counter_fix(facts: &PostsFacts, post: &Post, c: Counted) -> CounterFix {
    let key = (post.id.clone(), c);
    let Some(&n) = facts.counts.get(&key) else {
        return CounterFix::Keep;
    };
    let counter = facts
        .counters
        .get(&key)
        .copied()
        .unwrap_or(c.of(post) as i64);
    if counter == n as i64 {
        CounterFix::Keep
    } else {
        CounterFix::Set(n)
    }
}

/// Whether post `id` has a pending count younger than [`INCREMENT_GRACE`].
fn awaits_change(facts: &PostsFacts, id: &str) -> bool {
    facts
        .pending
        .get(id)
        .is_some_and(|p| p.iter().any(|p| p.since >= facts.settled_before))
}

/// Posts with a counter change on its way: project them again after [`INCREMENT_GRACE`].
pub fn deferred(needs: &PostsNeeds, facts: &PostsFacts) -> Vec<String> {
    needs
        .posts
        .iter()
        .filter(|id| facts.posts.contains_key(*id) && awaits_change(facts, id))
        .cloned()
        .collect()
}

/// Posts recounted and found right: their pending counts have served and go.
fn confirmed(facts: &PostsFacts, post: &Post) -> bool {
    Counted::BOTH.iter().all(|&c| {
        facts.counts.contains_key(&(post.id.clone(), c))
            && counter_fix(facts, post, c) == CounterFix::Keep
    })
}

/// Posts whose counters this batch found with nothing left to wait for or correct: no pending
/// count, or a recount that found them right. A recheck a driver holds for one is answered.
pub fn settled(needs: &PostsNeeds, facts: &PostsFacts) -> Vec<String> {
    needs
        .posts
        .iter()
        .filter(|id| {
            facts.posts.get(*id).is_some_and(|post| {
                facts.pending.get(*id).is_some_and(Vec::is_empty) || confirmed(facts, post)
            })
        })
        .cloned()
        .collect()
}

/// The pending counts a recount answered: those of the posts recounted and found right. A post
/// whose counter is set keeps them until the next look (the set comes back as a change of the
/// post) finds it right: whether a conditional set landed is not known here.
pub(super) fn answered(facts: &PostsFacts) -> Vec<Write> {
    let mut ids: Vec<&String> = facts.pending.keys().collect();
    ids.sort();
    ids.into_iter()
        .filter_map(|id| Some((id, facts.posts.get(id)?)))
        .filter(|(_, post)| confirmed(facts, post))
        .flat_map(|(id, _)| {
            facts.pending[id]
                .iter()
                .map(|p| Write::delete(Container::Posts, id.clone(), p.id.clone()))
        })
        .collect()
}
