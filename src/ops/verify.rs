//! `handler verify`: read the sources, check every derived value against [`super::expected`].
//!
//! Work is grouped by partition and paged, so memory stays bounded whatever the data:
//! 1. posts, page by page across partitions; for each post (a few at a time) its partition is
//!    read (the post, its comments and likes: names and counters) and its copy in `users` is
//!    point-read; the newest posts are kept for step 3;
//! 2. users, page by page; each user's partition is read for copies whose post is gone;
//! 3. the feed's one partition, against the newest posts.
//!
//! Only the drifted items' ids are kept (for `--repair`), with a few examples per kind for the
//! report; what drifted is looked at a second time before it is reported (see [`verify`]).
//! Read-only; every read retries transient errors like the projections do.
//!
//! The three steps are one walk over the data ([`verify`]), sharing its name cache, its newest
//! posts and the second look at what drifted; one post's check (step 1) is in `post`, what each
//! item should hold in [`super::expected`], and the report in [`super::report`].

mod post;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use futures::stream::{self, StreamExt, TryStreamExt};
use serde::Deserialize;

use super::expected::{self, Drift};
use super::lag::Window;
use super::newest::{self, Newest};
use super::part::LATER_LOOKS;
use super::progress::Progress;
use super::report::{post_of, Report};
use super::traversal::pages;
use super::{PARTITIONS_IN_FLIGHT, TRAVERSAL_PAGE};
use crate::domain::{is_deleted, Kind, Meta, User, FEED_PK};
use crate::store::{retry, Container, Query, Store, StoreResult};
use post::{check_posts, Names, PostCheck};

/// Verify the whole database. `progress` reports how far it got (a bar on a terminal).
///
/// On a live service a change still on its way through the change feed (a new comment's count,
/// an edited post's copies) is not drift. Each look runs inside a [`Window`] that tells which
/// posts had a change in flight or changed while the look read them (`super::lag`): such a post
/// is *lagging* at that look. Whatever is wrong at the first look is looked at again, `settle`
/// later, up to [`LATER_LOOKS`] times. A post is reported as drift only once it is still wrong
/// at a look that found it not lagging, *and* its sources (the post, its live comments and
/// likes, its author's name) are exactly as they were at the look before. A post that is clean
/// at a look is dropped; one still wrong and lagging at the last look is counted as lagging
/// ([`Report::lagging`]), not as drift, and a repair leaves it to the change feed. Where the
/// lanes' positions are not known (the Functions host), unchanged sources over `settle` are the
/// whole rule. `settle` zero reports the first look as it is, lagging posts apart.
pub async fn verify(
    store: &dyn Store,
    progress: &Progress,
    settle: Duration,
) -> StoreResult<Report> {
    let mut first = Report::default();
    let mut newest = Newest::default();
    // The sources and the author of each post that drifted at the first look.
    let mut first_sources = HashMap::new();
    let mut authors: HashMap<String, Vec<String>> = HashMap::new();
    let names = Names::new(store);
    let window = Window::open(store).await?;

    // 1. Posts, a few partitions at a time.
    progress.stage("posts");
    let posts = pages(
        store,
        Container::Posts,
        Query::cross_partition()
            .of_kind(Kind::Post)
            .live()
            .limit(TRAVERSAL_PAGE),
    );
    futures::pin_mut!(posts);
    while let Some(page) = posts.try_next().await? {
        let checks = check_posts(store, &names, page).await?;
        progress.inc(checks.len() as u64);
        for c in checks.iter().filter(|c| !c.findings.is_empty()) {
            if let Some(p) = c.expected.as_ref() {
                authors.insert(p.id.clone(), c.users.clone());
                first_sources.insert(p.id.clone(), c.sources);
            }
        }
        absorb(&mut first, &mut newest, checks, true);
    }

    // 2. Users: copies whose post is gone.
    progress.stage("users");
    let users = pages(
        store,
        Container::Users,
        Query::cross_partition()
            .of_kind(Kind::User)
            .live()
            .limit(TRAVERSAL_PAGE),
    );
    futures::pin_mut!(users);
    while let Some(page) = users.try_next().await? {
        let user_ids: Vec<String> = page
            .iter()
            .filter_map(|u| User::deserialize(u).ok().map(|u| u.user_id))
            .collect();
        let extras: Vec<Vec<Drift>> = stream::iter(user_ids)
            .map(|u| extra_copies(store, u))
            .buffered(PARTITIONS_IN_FLIGHT)
            .try_collect()
            .await?;
        progress.inc(extras.len() as u64);
        for found in extras {
            // Every other copy was counted with its post.
            first.checked("post copies", found.len() as u64);
            record_extra_copies(&mut first, found);
        }
    }

    // 3. The feed against the newest posts.
    progress.stage("feed");
    check_feed(store, &mut first, &newest, true, &no_lag()).await?;
    let touched = window.close(store).await?;
    first.lag_known = touched.known();
    if first.is_clean() {
        progress.finish();
        return Ok(first);
    }
    if settle.is_zero() {
        progress.finish();
        return Ok(first.without_lagging(|d| {
            touched.post_lagging(post_of(d), &users_of(&authors, &newest, d))
        }));
    }

    // Later looks at what drifted, with names read afresh each time.
    progress.stage("second look");
    let mut report = Report {
        checked: first.checked.clone(),
        lag_known: first.lag_known,
        ..Report::default()
    };
    let mut suspects: HashMap<String, Option<u64>> = first
        .todo
        .replay
        .keys()
        .map(|id| (id.clone(), first_sources.get(id).copied()))
        .collect();
    for _ in 0..LATER_LOOKS {
        if suspects.is_empty() {
            break;
        }
        tokio::time::sleep(settle).await;
        let names = Names::new(store);
        let ids: Vec<String> = suspects.keys().cloned().collect();
        let mut moving = HashMap::new();
        let window = Window::open(store).await?;
        let mut looked = Vec::new();
        for ids in ids.chunks(TRAVERSAL_PAGE as usize) {
            let mut page = Vec::new();
            for id in ids {
                let post = retry(|| store.read(Container::Posts, id, id)).await?;
                page.extend(post.filter(|p| !is_deleted(p)));
            }
            looked.extend(check_posts(store, &names, page).await?);
        }
        let touched = window.close(store).await?;
        let mut confirmed = Vec::new();
        for check in looked {
            let Some(expected) = &check.expected else {
                continue;
            };
            newest.offer(expected);
            let id = expected.id.clone();
            if check.findings.is_empty() {
                continue;
            }
            let lagging = touched.post_lagging(&id, &check.users);
            if !lagging && suspects.get(&id) == Some(&Some(check.sources)) {
                confirmed.push(check);
            } else {
                moving.insert(id, Some(check.sources));
            }
        }
        progress.inc(confirmed.len() as u64);
        absorb(&mut report, &mut newest, confirmed, false);
        suspects = moving;
    }
    let lagging: HashSet<String> = suspects.into_keys().collect();
    // The copies whose post is gone, and the feed, in a window of their own.
    let window = Window::open(store).await?;
    let mut found = Vec::new();
    for (user_id, id) in &first.todo.extra_copies {
        let post = retry(|| store.read(Container::Posts, id, id)).await?;
        let post = post.filter(|p| !is_deleted(p));
        found.extend(expected::extra_copy(user_id, id, post.as_ref()));
    }
    let mut last = Report::default();
    record_extra_copies(&mut last, found);
    check_feed(store, &mut last, &newest, false, &lagging).await?;
    let touched = window.close(store).await?;
    let last = last.without_lagging(|d| {
        lagging.contains(post_of(d))
            || touched.post_lagging(post_of(d), &users_of(&authors, &newest, d))
    });
    report.lagging = lagging.len() as u64;
    report.merge(last);
    progress.finish();
    Ok(report)
}

/// The users whose names a finding's post was judged by, where known (see [`PostCheck::users`]).
fn users_of(authors: &HashMap<String, Vec<String>>, newest: &Newest, d: &Drift) -> Vec<String> {
    match (d.container, authors.get(post_of(d))) {
        (Container::Users, _) => vec![d.pk.clone()],
        (_, Some(users)) => users.clone(),
        (_, None) => newest
            .get(post_of(d))
            .map(|p| p.user_id.clone())
            .into_iter()
            .collect(),
    }
}

/// No post is taken as lagging (the first look judges after it is over).
fn no_lag() -> HashSet<String> {
    HashSet::new()
}

/// Take the checks of some posts into the report (and, on the first look, count them).
fn absorb(report: &mut Report, newest: &mut Newest, checks: Vec<PostCheck>, count: bool) {
    for c in checks {
        let Some(expected) = c.expected else { continue };
        if count {
            report.checked("posts", 1);
            report.checked("comments", c.comments);
            report.checked("likes", c.likes);
            report.checked("post copies", 1);
        }
        newest.offer(&expected);
        report.todo.replay_items(&expected, c.replay);
        report.record(c.findings);
    }
}

fn record_extra_copies(report: &mut Report, found: Vec<Drift>) {
    for d in &found {
        let extra = (d.pk.clone(), post_of(d).to_string());
        report.todo.extra_copies.push(extra);
    }
    report.record(found);
}

/// The feed as stored against the newest posts; the entries of the posts in `changing` are not
/// judged (their sources were still changing at the last look).
async fn check_feed(
    store: &dyn Store,
    report: &mut Report,
    newest: &Newest,
    count: bool,
    changing: &HashSet<String>,
) -> StoreResult<()> {
    let mut feed = Vec::new();
    let entries = pages(
        store,
        Container::Feed,
        Query::partition(FEED_PK)
            .of_kind(Kind::Post)
            .limit(TRAVERSAL_PAGE),
    );
    futures::pin_mut!(entries);
    while let Some(page) = entries.try_next().await? {
        feed.extend(page);
    }
    if count {
        report.checked("feed entries", newest.len() as u64);
    }
    let (mut drift, extra) = newest.feed_drift(&feed);
    drift.retain(|d| !changing.contains(&d.id));
    for d in &drift {
        if let Some(expected) = newest.get(&d.id) {
            report.todo.replay_post(expected);
        }
    }
    report.record(drift);
    let mut real_extra = Vec::new();
    for d in extra {
        if count {
            report.checked("feed entries", 1);
        }
        // A post created after the posts were read may rightly be in the feed.
        let post = retry(|| store.read(Container::Posts, &d.id, &d.id))
            .await?
            .filter(|p| !is_deleted(p));
        if post
            .as_ref()
            .and_then(newest::feed_key)
            .is_some_and(|k| newest.would_rank(&k))
        {
            continue;
        }
        report.todo.extra_feed.push(d.id.clone());
        real_extra.push(d);
    }
    report.record(real_extra);
    report.todo.oldest_newest = newest.oldest();
    Ok(())
}

/// The copies in a user's partition whose post is gone.
async fn extra_copies(store: &dyn Store, user_id: String) -> StoreResult<Vec<Drift>> {
    let mut found = Vec::new();
    let copies = pages(
        store,
        Container::Users,
        Query::partition(user_id.clone())
            .of_kind(Kind::Post)
            .limit(TRAVERSAL_PAGE),
    );
    futures::pin_mut!(copies);
    while let Some(page) = copies.try_next().await? {
        for copy in page {
            let Some(id) = Meta::of(&copy).id else {
                continue;
            };
            let post = retry(|| store.read(Container::Posts, id, id))
                .await?
                .filter(|p| !is_deleted(p));
            found.extend(expected::extra_copy(&user_id, id, post.as_ref()));
        }
    }
    Ok(found)
}
