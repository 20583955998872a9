//! The feed as it should be: the short forms of the [`FEED_KEEP`] newest posts, gathered while
//! the posts stream by, in bounded memory, and compared with the feed as stored.
//!
//! The feed may hold fewer than [`FEED_KEEP`] after deletions: it must then hold a prefix of the
//! newest, and at least the [`FEED_SIZE`] it shows (or every post, when there are fewer).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::expected::{copy_drift, short_form, show, Drift, DriftKind};
use crate::domain::{Post, FEED_KEEP, FEED_SIZE};
use crate::store::Container;

/// Where a post ranks in the feed: newest first by `creationDate`, then `id`.
pub type FeedKey = (String, String);

/// What ranks a stored post or feed entry.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Ranked {
    id: String,
    #[serde(default)]
    creation_date: Option<String>,
}

/// Where a stored post or feed entry ranks, if it reads as one.
pub fn feed_key(item: &Value) -> Option<FeedKey> {
    let r = Ranked::deserialize(item).ok()?;
    Some((r.creation_date?, r.id))
}

/// Where `post` ranks.
pub fn key_of(post: &Post) -> FeedKey {
    (post.creation_date.clone(), post.id.clone())
}

/// The [`FEED_KEEP`] newest posts seen so far, with the short forms the feed should hold.
/// Memory stays bounded however many posts pass through.
#[derive(Debug, Default, Clone)]
pub struct Newest {
    posts: BTreeMap<FeedKey, Post>,
}

impl Newest {
    /// Offer a post as it should be (see [`super::expected::expected_post`]).
    pub fn offer(&mut self, expected: &Post) {
        let key = key_of(expected);
        if let Some(seen) = self.posts.get_mut(&key) {
            *seen = short_form(expected);
            return;
        }
        if self.posts.len() == FEED_KEEP {
            match self.posts.keys().next() {
                Some(oldest) if *oldest < key => {
                    let oldest = oldest.clone();
                    self.posts.remove(&oldest);
                }
                _ => return,
            }
        }
        self.posts.insert(key, short_form(expected));
    }

    pub fn contains(&self, id: &str) -> bool {
        self.get(id).is_some()
    }

    /// The short form the feed should hold for post `id`, if it is among the newest.
    pub fn get(&self, id: &str) -> Option<&Post> {
        self.posts
            .iter()
            .find_map(|((_, i), v)| (i == id).then_some(v))
    }

    /// The oldest of the newest posts.
    pub fn oldest(&self) -> Option<FeedKey> {
        self.posts.keys().next().cloned()
    }

    /// Whether a post with this key belongs among the newest seen (the set is not full, or
    /// it is newer than the oldest of them).
    pub fn would_rank(&self, key: &FeedKey) -> bool {
        self.posts.len() < FEED_KEEP || self.posts.keys().next().is_some_and(|o| o < key)
    }

    pub fn len(&self) -> usize {
        self.posts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.posts.is_empty()
    }

    /// The feed's drift, given its entries as stored: missing, stale, and extra entries. An
    /// extra entry is returned with its `creationDate`, for the caller to tell a post created
    /// after the newest were gathered from a real extra.
    pub fn feed_drift(&self, feed: &[Value]) -> (Vec<Drift>, Vec<Drift>) {
        let by_id: BTreeMap<String, (&Value, Option<String>)> = feed
            .iter()
            .filter_map(|v| {
                let r = Ranked::deserialize(v).ok()?;
                Some((r.id, (v, r.creation_date)))
            })
            .collect();
        let mut drift = Vec::new();
        // Missing entries are drift above the feed's own length (a gap) or among the shown.
        let present = self
            .posts
            .values()
            .filter(|e| by_id.contains_key(&e.id))
            .count();
        let required = present.max(FEED_SIZE);
        for (rank, expected) in self.posts.values().rev().enumerate() {
            let found = by_id.get(&expected.id).map(|(v, _)| *v);
            if found.is_none() && rank >= required {
                continue;
            }
            drift.extend(copy_drift(Container::Feed, found, expected));
        }
        let extra = by_id
            .into_iter()
            .filter(|(id, _)| !self.contains(id))
            .map(|(id, (_, date))| {
                Drift::new(
                    DriftKind::FeedExtra,
                    Container::Feed,
                    crate::domain::FEED_PK,
                    &id,
                    format!(
                        "not among the {FEED_KEEP} newest posts (creationDate {})",
                        show(date.map(Value::from).as_ref())
                    ),
                )
            })
            .collect();
        (drift, extra)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn post(id: &str, date: &str) -> Post {
        serde_json::from_value(
            json!({"id": id, "type": "post", "postId": id, "userId": "u1", "userUsername": "ana",
                   "title": "t", "content": "x".repeat(300), "commentCount": 0,
                   "likeCount": 0, "creationDate": date}),
        )
        .unwrap()
    }

    fn stored(p: Post) -> Value {
        crate::domain::to_value(&p)
    }

    fn date(i: usize) -> String {
        format!("2026-01-01T00:{:02}:{:02}.000Z", i / 60, i % 60)
    }

    #[test]
    fn the_feed_is_the_newest_hundred_and_twenty() {
        let mut newest = Newest::default();
        // Offered in any order; the oldest 20 of 140 fall out.
        for i in (0..140).map(|i| (i * 37) % 140) {
            newest.offer(&post(&format!("p{i:03}"), &date(i)));
        }
        assert_eq!(newest.len(), FEED_KEEP);
        assert!(newest.contains("p139") && newest.contains("p020"));
        assert!(!newest.contains("p019"));
        // Offered again (a second look), a post is updated in place and pushes nothing out.
        let mut again = post("p020", &date(20));
        again.like_count = 5;
        newest.offer(&again);
        assert_eq!(newest.len(), FEED_KEEP);
        assert_eq!(newest.get("p020").unwrap().like_count, 5);
        assert!(newest.contains("p139"));
        again.like_count = 0;
        newest.offer(&again);
        assert!(!newest.would_rank(&(date(5), "p005".into())));
        assert!(newest.would_rank(&(date(500), "new".into())));

        let mut feed: Vec<Value> = (20..140)
            .map(|i| stored(short_form(&post(&format!("p{i:03}"), &date(i)))))
            .collect();
        assert_eq!(newest.feed_drift(&feed), (vec![], vec![]));

        feed.retain(|v| v["id"] != "p050");
        feed.push(stored(short_form(&post("p003", &date(3)))));
        feed.iter_mut().find(|v| v["id"] == "p100").unwrap()["likeCount"] = json!(9);
        let (drift, extra) = newest.feed_drift(&feed);
        let got: Vec<_> = drift.iter().map(|d| (d.kind, d.id.as_str())).collect();
        assert_eq!(
            got,
            vec![
                (DriftKind::FeedStale, "p100"),
                (DriftKind::FeedMissing, "p050")
            ]
        );
        assert_eq!(extra.len(), 1);
        assert_eq!(
            (extra[0].kind, extra[0].id.as_str()),
            (DriftKind::FeedExtra, "p003")
        );
    }

    #[test]
    fn a_feed_shortened_by_deletes_is_right_while_it_shows_a_hundred() {
        let mut newest = Newest::default();
        for i in 0..140 {
            newest.offer(&post(&format!("p{i:03}"), &date(i)));
        }
        let prefix = |n: usize| -> Vec<Value> {
            (140 - n..140)
                .rev()
                .map(|i| stored(short_form(&post(&format!("p{i:03}"), &date(i)))))
                .collect()
        };
        assert_eq!(newest.feed_drift(&prefix(105)), (vec![], vec![]));
        // Fewer than it shows: the missing ones are drift (`--repair` brings them back).
        let (drift, extra) = newest.feed_drift(&prefix(97));
        let got: Vec<_> = drift.iter().map(|d| d.id.as_str()).collect();
        assert_eq!(got, vec!["p042", "p041", "p040"]);
        assert!(extra.is_empty());
    }

    #[test]
    fn feed_ties_on_creation_date_rank_by_id() {
        let mut newest = Newest::default();
        for i in 0..=FEED_KEEP {
            newest.offer(&post(&format!("p{i:03}"), &date(0)));
        }
        assert!(
            !newest.contains("p000"),
            "the smallest id of a tie falls out"
        );
        assert!(newest.contains(&format!("p{FEED_KEEP:03}")));
    }
}
