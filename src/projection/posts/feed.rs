//! The feed (`GET /api/feed`): the newest posts in short form, in one partition of `feed`,
//! kept by the posts projection (`super`): the rule of which posts it holds.

use std::collections::BTreeMap;

use crate::domain::{Post, FEED_KEEP, FEED_PK, FEED_SIZE};
use crate::projection::write::Write;
use crate::store::Container;

/// A feed entry as far as ordering goes: newest first by `creationDate`, then `id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeedEntry {
    pub id: String,
    pub creation_date: String,
}

/// Insert the changed posts that belong among the [`FEED_KEEP`] newest; delete what falls beyond.
/// Never deletes a post that is among the newest, whatever else runs concurrently: anything
/// beyond the newest of a subset is beyond the newest of the whole.
///
/// A post older than every entry is inserted only while the feed holds fewer than
/// [`FEED_SIZE`]: with at least that many, posts older than the oldest entry were pushed out by
/// newer ones, and bringing one back would skip those between (deletions shrink the feed without
/// making it wrong, never by leaving a gap).
pub fn plan_feed<'a>(posts: impl Iterator<Item = &'a Post>, feed: &[FeedEntry]) -> Vec<Write> {
    let oldest = feed
        .iter()
        .map(|e| (e.creation_date.clone(), e.id.clone()))
        .min();
    let mut all: BTreeMap<(String, String), Option<&Post>> = feed
        .iter()
        .map(|e| ((e.creation_date.clone(), e.id.clone()), None))
        .collect();
    for p in posts {
        let key = (p.creation_date.clone(), p.id.clone());
        let in_feed = feed.iter().any(|e| e.id == p.id);
        let newer = oldest.as_ref().is_none_or(|o| key > *o);
        if in_feed || newer || feed.len() < FEED_SIZE {
            all.insert(key, Some(p));
        }
    }
    let mut writes = Vec::new();
    for (rank, ((_, id), post)) in all.iter().rev().enumerate() {
        match (rank < FEED_KEEP, post) {
            (true, Some(p)) => writes.push(Write::upsert(
                Container::Feed,
                FEED_PK,
                crate::domain::to_value(&p.summary()),
            )),
            (false, _) if feed.iter().any(|e| e.id == *id) => {
                writes.push(Write::delete(Container::Feed, FEED_PK, id.clone()))
            }
            _ => {}
        }
    }
    writes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::projection::posts::tests::{date, entries, post, upserts};

    #[test]
    fn the_feed_keeps_the_newest_hundred_and_a_margin() {
        // A full feed and a post newer than all of it: insert it, delete the oldest.
        let feed = entries(FEED_KEEP);
        let p = post("new", "u1", "ana", &date(500), 0, 0);
        let writes = plan_feed([&p].into_iter(), &feed);
        assert_eq!(writes.len(), 2);
        assert!(matches!(&writes[0], Write::Upsert { item, .. } if item["id"] == "new"));
        assert_eq!(
            writes[1],
            Write::Delete {
                container: Container::Feed,
                pk: "post".into(),
                id: "f0".into()
            }
        );
    }

    #[test]
    fn an_old_post_stays_out_of_a_full_feed() {
        let feed: Vec<FeedEntry> = entries(FEED_SIZE + 10)
            .into_iter()
            .take(FEED_SIZE)
            .collect();
        // Older than every entry.
        let p = post("old", "u1", "ana", &date(0), 0, 0);
        assert!(plan_feed([&p].into_iter(), &feed).is_empty());
    }

    #[test]
    fn an_overfull_feed_is_trimmed_and_a_feed_post_is_refreshed() {
        let feed = entries(FEED_KEEP + 3);
        let p = post("f122", "u1", "ana", &date(122), 0, 7);
        let writes = plan_feed([&p].into_iter(), &feed);
        assert!(matches!(&writes[0], Write::Upsert { item, .. } if item["likeCount"] == 7));
        let deleted: Vec<_> = writes
            .iter()
            .filter_map(|w| match w {
                Write::Delete { id, .. } => Some(id.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(deleted, vec!["f2", "f1", "f0"]);
    }

    #[test]
    fn an_old_post_fills_a_feed_only_while_it_shows_fewer_than_a_hundred() {
        // Fewer than a hundred entries: the blog has no more posts, so an older one belongs.
        let feed: Vec<FeedEntry> = entries(FEED_SIZE + 10).into_iter().take(5).collect();
        let p = post("old", "u1", "ana", &date(0), 0, 0);
        assert_eq!(
            upserts(&plan_feed([&p].into_iter(), &feed), Container::Feed).len(),
            1
        );
        // Between a hundred and the margin: still not, posts in between may be missing.
        let feed: Vec<FeedEntry> = entries(FEED_KEEP).into_iter().take(FEED_SIZE + 5).collect();
        assert!(plan_feed([&p].into_iter(), &feed).is_empty());
    }
}
