//! Posts in the timeline lane: each change of an author's copy of a post (in `users`, written
//! by the main lane) copies the post's entry into their followers' timelines, a page of
//! followers a step ([`super::super::fanout`]), unless the post's job item
//! (`timelineJob-post-<P>`) records this very entry content; a deleted post's entries are
//! deleted wherever they are, a page a step.

use futures::future::BoxFuture;
use serde_json::Value;

use super::limit::limit_state;
use super::trim::trim;
use crate::domain::follows::{
    entry_content, following_id, timeline_id, trims, TimelineEntry, FOLLOWER, REF_USER, TIMELINE,
};
use crate::domain::jobs::{delete_job_id, post_job_id, Job, Work};
use crate::domain::{is_deleted, Kind, Post};
use crate::projection::engine::PAGE;
use crate::projection::engine::{delete_item, delete_matching, live_user, read_job, save_job};
use crate::projection::fanout::{self, Audience, Copies, Owners, Paged};
use crate::projection::over_limit;
use crate::store::{retry, Container, Query, Store, StoreResult};

/// One page of deleted post `post_id`'s entries deleted; the job item records that more may be
/// left (its change brings the next step), or goes with the post's own job item once none is.
pub(super) async fn delete_step(
    store: &dyn Store,
    places: &[Container],
    author: &str,
    post_id: &str,
    job: Option<&Job>,
) -> StoreResult<usize> {
    let q = Query::cross_partition()
        .eq("type", TIMELINE)
        .eq("postId", post_id);
    let (mut written, mut more) = (0, false);
    for &c in places {
        let (n, m) = delete_matching(store, c, q.clone(), 1).await?;
        written += n;
        more |= m;
    }
    if more {
        let steps = job.map_or(0, |j| j.steps) + 1;
        let work = Work::Delete {
            post_id: post_id.into(),
        };
        save_job(store, job, Job::new(author, work, steps, false)).await?;
        return Ok(written + 1);
    }
    written += delete_item(store, Container::Users, author, &post_job_id(post_id)).await?;
    if job.is_some() {
        written += delete_item(store, Container::Users, author, &delete_job_id(post_id)).await?;
    }
    Ok(written)
}

/// The author's copy of post `post_id` changed: unless its job item records this entry content,
/// the post's fan-out starts over with it (its first page now; [`fanout::start`], which looks
/// again should the job item change while this runs).
pub(super) async fn copy_changed(
    store: &dyn Store,
    author: &str,
    post_id: &str,
) -> StoreResult<usize> {
    let copy = retry(|| store.read(Container::Users, author, post_id)).await?;
    let Some(post) = copy
        .filter(|c| !is_deleted(c))
        .and_then(|c| serde_json::from_value::<Post>(c).ok())
        .filter(|p| p.user_id == author && p.kind == Kind::Post)
    else {
        return Ok(0);
    };
    let content = entry_content(&post);
    let job = read_job(store, author, &post_job_id(post_id)).await?;
    if job
        .as_ref()
        .is_some_and(|j| j.work.entry() == Some(&content))
    {
        // This content reached every follower, or its fan-out is under way.
        return Ok(0);
    }
    let Some(user) = live_user(store, author).await? else {
        return Ok(0);
    };
    let followers = Followers {
        started: Some((&user, &post)),
    };
    fanout::start(store, &followers, author, post_id, &content).await
}

/// A post's entries in its author's followers' timelines; the job item
/// `timelineJob-post-<P>` records the entry content.
pub(super) struct Followers<'a> {
    /// For a fan-out starting: the author (live) and their copy of the post.
    pub started: Option<(&'a serde_json::Value, &'a Post)>,
}

impl Audience for Followers<'_> {
    fn job_id(&self, post_id: &str) -> String {
        post_job_id(post_id)
    }

    fn work(&self, post_id: &str, entry: Value, cursor: Option<String>) -> Work {
        Work::Post {
            post_id: post_id.into(),
            entry,
            cursor,
        }
    }

    fn page<'a>(
        &'a self,
        store: &'a dyn Store,
        author: &'a str,
        entry: &'a Value,
        cursor: Option<&'a str>,
    ) -> BoxFuture<'a, StoreResult<Paged>> {
        Box::pin(copy_to_followers(store, author, entry, cursor))
    }

    /// A merged author's post goes to the shared partition (whenever a marker may send a reader
    /// there) instead of every timeline; else the first page of followers.
    fn first<'a>(
        &'a self,
        store: &'a dyn Store,
        author: &'a str,
        entry: &'a Value,
    ) -> BoxFuture<'a, StoreResult<Paged>> {
        Box::pin(async move {
            let Some((user, post)) = self.started else {
                return copy_to_followers(store, author, entry, None).await;
            };
            let state = limit_state(store, author, Some(user)).await?;
            // A marker makes a reader look in the shared partition: while any may be there, the
            // post is kept there too.
            let mut written = if state.marks() {
                over_limit::upsert_post(store, post).await?
            } else {
                0
            };
            if state.merged {
                return Ok((written, None));
            }
            let (n, cursor) = copy_to_followers(store, author, entry, None).await?;
            written += n;
            Ok((written, cursor))
        })
    }
}

/// Write the entry holding `content` into the timelines of one page of the author's followers
/// (from `cursor`), take back those whose follower left or whose post went meanwhile
/// ([`fanout::step`]), and trim about one timeline in
/// [`crate::domain::follows::TRIM_EVERY`]. Returns the writes made and where the next page
/// starts (`None`: this was the last).
async fn copy_to_followers(
    store: &dyn Store,
    author: &str,
    content: &Value,
    cursor: Option<&str>,
) -> StoreResult<Paged> {
    // A recorded content that does not read as an entry's has nothing to copy.
    let Some(shown) = TimelineEntry::of_content("", content).map(|e| e.post) else {
        return Ok((0, None));
    };
    let post_id = shown.post_id.clone();
    let item = |f: &str, _: &Value| TimelineEntry::new(f, &shown).to_item();
    let copies = Copies {
        post_id: &post_id,
        container: Container::Timelines,
        id: timeline_id(&post_id),
        item: &item,
    };
    // An unfollow's projection in this lane removes the followee's entries once the edge is
    // marked: an entry written after that would stay. A live edge means the removal is still to
    // come (and finds the entry) or the follow was made again (its backfill owns the entry).
    let edge = following_id(author);
    let still = |fs: &[&str]| {
        Query::cross_partition()
            .eq("id", edge.clone())
            .any_of("userId", fs.iter().map(|f| f.to_string()))
    };
    let followers = Owners {
        container: Container::Users,
        query: Query::partition(author)
            .eq("type", FOLLOWER)
            .live()
            .limit(PAGE),
        owner: REF_USER,
        still: &still,
        still_owner: "userId",
    };
    let step = fanout::step(store, &copies, &followers, cursor).await?;
    let mut written = step.written;
    for f in step.owners.iter().filter(|f| trims(f, &post_id)) {
        written += trim(store, f).await?;
    }
    Ok((written, step.next))
}

/// The next step of post job `job`: the next page of followers ([`fanout::next`]).
pub(super) async fn post_step(store: &dyn Store, job: &Job) -> StoreResult<usize> {
    fanout::next(store, &Followers { started: None }, job).await
}
