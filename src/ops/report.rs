//! What a verification found ([`Report`]), what a repair would need ([`Todo`]), and how the
//! report is printed.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use serde_json::{json, Value};

use super::expected::{Drift, DriftKind};
use super::newest::FeedKey;
use super::part::EXAMPLES;
use crate::domain::{Kind, Post};
/// The kinds of derived items counted in [`Report::checked`], in report order.
pub const ITEM_KINDS: [&str; 5] = ["posts", "comments", "likes", "post copies", "feed entries"];

/// What a verification found.
#[derive(Debug, Default, Clone)]
pub struct Report {
    /// Derived items checked, per kind of item (`posts`, `comments`, `likes`, `post copies`,
    /// `feed entries`).
    pub checked: BTreeMap<&'static str, u64>,
    /// Findings per kind of drift.
    pub drift: BTreeMap<DriftKind, u64>,
    /// The first few findings of each kind.
    pub examples: BTreeMap<DriftKind, Vec<Drift>>,
    /// Distinct items with at least one finding.
    pub drifted_items: u64,
    /// Posts (with their comments, likes, copies and feed entries) found wrong while a change of
    /// theirs was still on its way through the change feed at every look (`super::lag`): lag,
    /// not drift, and left out of the repair.
    pub lagging: u64,
    /// Whether lag was judged by the lanes' positions (`super::lag`); without them, by time alone.
    pub lag_known: bool,
    /// What `--repair` works from.
    pub(super) todo: Todo,
    /// Every finding recorded, for judging lag after a look ([`Report::without_lagging`]).
    pub(super) found: Vec<Drift>,
}

/// The ids a repair needs, kept for drifted items only.
#[derive(Debug, Default, Clone)]
pub(super) struct Todo {
    /// Per post: the changed documents to hand to the posts projection again (the post itself
    /// as a notification, and drifted comments and likes).
    pub replay: BTreeMap<String, Vec<Value>>,
    /// Copies in `users` (`userId`, `postId`) whose post is gone.
    pub extra_copies: Vec<(String, String)>,
    /// Feed entries that are not among the newest posts.
    pub extra_feed: Vec<String>,
    /// The oldest of the newest posts as gathered; an extra feed entry at or below it can
    /// never rank again.
    pub oldest_newest: Option<FeedKey>,
}

impl Todo {
    fn docs(&mut self, post: &Post) -> &mut Vec<Value> {
        self.replay.entry(post.post_id.clone()).or_default()
    }

    /// Replay the post itself (its counters, name and copies are planned from it).
    pub fn replay_post(&mut self, post: &Post) {
        let docs = self.docs(post);
        if !docs.iter().any(|d| Kind::of(d) == Some(Kind::Post)) {
            docs.insert(0, notification(post));
        }
    }

    /// Replay these documents of the post's partition.
    pub(super) fn replay_items(&mut self, post: &Post, items: Vec<Value>) {
        if !items.is_empty() {
            self.docs(post).extend(items);
        }
    }
}

impl Report {
    pub fn total_checked(&self) -> u64 {
        self.checked.values().sum()
    }

    pub fn is_clean(&self) -> bool {
        self.drifted_items == 0
    }

    pub(super) fn checked(&mut self, what: &'static str, n: u64) {
        *self.checked.entry(what).or_default() += n;
    }

    /// Record the findings of one group of items (no item appears in two groups).
    pub(super) fn record(&mut self, findings: Vec<Drift>) {
        let items: BTreeSet<String> = findings.iter().map(Drift::target).collect();
        self.drifted_items += items.len() as u64;
        self.found.extend(findings.iter().cloned());
        for d in findings {
            *self.drift.entry(d.kind).or_default() += 1;
            let ex = self.examples.entry(d.kind).or_default();
            if ex.len() < EXAMPLES {
                ex.push(d);
            }
        }
    }

    /// The report without the findings whose post `lagging` says is lagging (`post id`), nor
    /// what a repair would write for them; those posts are counted in [`Report::lagging`].
    pub(super) fn without_lagging(&self, lagging: impl Fn(&Drift) -> bool) -> Report {
        let mut out = Report {
            checked: self.checked.clone(),
            lag_known: self.lag_known,
            ..Report::default()
        };
        let (late, kept): (Vec<&Drift>, Vec<&Drift>) = self.found.iter().partition(|d| lagging(d));
        let late: BTreeSet<&str> = late.iter().map(|d| post_of(d)).collect();
        out.record(kept.into_iter().cloned().collect());
        out.lagging = self.lagging + late.len() as u64;
        let mut todo = self.todo.clone();
        todo.replay.retain(|id, _| !late.contains(id.as_str()));
        todo.extra_copies
            .retain(|(_, id)| !late.contains(id.as_str()));
        todo.extra_feed.retain(|id| !late.contains(id.as_str()));
        out.todo = todo;
        out
    }

    /// Take in the findings of `other` (about other items), its lagging posts and its repairs.
    pub(super) fn merge(&mut self, other: Report) {
        self.drifted_items += other.drifted_items;
        self.lagging += other.lagging;
        for (kind, n) in other.drift {
            *self.drift.entry(kind).or_default() += n;
        }
        for (kind, examples) in other.examples {
            let ex = self.examples.entry(kind).or_default();
            let room = EXAMPLES.saturating_sub(ex.len());
            ex.extend(examples.into_iter().take(room));
        }
        self.found.extend(other.found);
        self.todo.replay.extend(other.todo.replay);
        self.todo.extra_copies.extend(other.todo.extra_copies);
        self.todo.extra_feed.extend(other.todo.extra_feed);
        if other.todo.oldest_newest.is_some() {
            self.todo.oldest_newest = other.todo.oldest_newest;
        }
    }

    /// Every example, in report order.
    pub fn findings(&self) -> impl Iterator<Item = &Drift> {
        self.examples.values().flatten()
    }
}

/// The post a finding is about: each derived item belongs to one (a comment or like by its
/// partition, a copy or a feed entry by its id).
pub fn post_of(d: &Drift) -> &str {
    match d.container {
        crate::store::Container::Posts => &d.pk,
        _ => &d.id,
    }
}

/// A post as a change notification: the projections read everything else themselves.
pub(super) fn notification(post: &Post) -> Value {
    json!({
        "id": post.id,
        "type": Kind::Post,
        "postId": post.post_id,
        "userId": post.user_id,
    })
}

/// The findings as printed: items checked, then each kind of drift with its examples.
pub fn render(r: &Report) -> String {
    let mut out = String::new();
    let checked: Vec<String> = ITEM_KINDS
        .iter()
        .map(|k| format!("{} {k}", r.checked.get(k).copied().unwrap_or(0)))
        .collect();
    let _ = writeln!(out, "checked: {}", checked.join(", "));
    if r.is_clean() {
        out.push_str("drift: none\n");
    }
    if r.lagging > 0 {
        let _ = writeln!(
            out,
            "lagging: {} posts with a change still on its way through the change feed at every \
             look (not drift; verify again when the service is quiet)",
            r.lagging
        );
    }
    for (kind, n) in &r.drift {
        let _ = writeln!(out, "drift: {}: {n}", kind.name());
        for d in r.examples.get(kind).into_iter().flatten() {
            let _ = writeln!(out, "  {}: {}", d.target(), d.detail);
        }
        if *n as usize > EXAMPLES {
            let _ = writeln!(out, "  …");
        }
    }
    out
}
