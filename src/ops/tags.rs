//! `handler verify`'s check of the tags projection (`crate::projection::tags`), and its repair.
//!
//! 1. Posts, page by page across partitions: each live tagged post's copy in each of its tags'
//!    partitions, and its record (`tagged`), point-read and compared with the post as a copy
//!    shows it (counts a copy of an earlier release holds are not compared: never shown).
//! 2. Tags, from the counts' partition: each tag's partition read page by page; a copy whose post
//!    is gone, deleted or no longer carries the tag is extra; the number of copies is the count
//!    the tag's item should hold.
//!
//! A change still on its way through the change feed is not drift. Each look runs inside a window
//! of the change feeds ([`part::judge`]), as the other parts' do: a finding is *lagging* at a look
//! when a change of its sources was in flight or made during the look (a post's copies and record:
//! a change of that post; a tag's count: a change of a post in the tag's partition, or of one
//! carrying the tag or copied under it). What a first look finds wrong is looked at again inside a
//! window (at once with `settle` zero, else `settle` later, up to [`part::LATER_LOOKS`] times), and
//! reported as drift at the first such look that finds it wrong and not lagging; still lagging at
//! the last look, it is counted as lag ([`Check::lagging`]) and a repair leaves it to the change
//! feed. Where the lanes' positions are not known (the Functions host), what is still wrong at the
//! next look is drift.
//! The repair writes through the projection's own functions: a post's copies and record as
//! `sync_post` writes them (its record removed first, so nothing is taken as written already),
//! an extra copy deleted once a fresh read confirms it, a count set from its partition.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::time::Duration;

use serde_json::Value;

use crate::domain::tags::{self, TagCount, COUNTS, TAGGED};
use crate::domain::{is_live, Kind, Meta, Post};
use crate::projection::engine::{apply_one, query_all};
use crate::projection::tags::{copied_of, post_of, set_tag_count, sync_post, wanted};
use crate::projection::Write;
use crate::store::{retry, Container, Query, Store, StoreResult};

use super::lag::Touched;
use super::part::{self, Finding, Found, Look, Mend, Part, Pass, Tally, EXAMPLES};
use super::TRAVERSAL_PAGE;

pub const PART: Part = Part {
    name: "tags",
    run: |store, pass| Box::pin(run(store, pass)),
};

async fn run(store: &dyn Store, pass: &Pass<'_>) -> anyhow::Result<Box<dyn Found>> {
    let outcome = verify_and_repair(store, pass.repair, pass.settle).await?;
    Ok(part::found(outcome))
}

/// What a repair does about a finding.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Fix {
    /// Write post `id`'s copies and record again.
    Post(String),
    /// Delete the copy of post `id` in `tag`'s partition, and count the tag again.
    Extra { tag: String, id: String },
    /// Set `tag`'s count from its partition.
    Count(String),
}

/// What one look found: each finding (by the item at fault, `feed/<partition>/<id>`) with
/// what differs and its fix.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Check {
    /// Copies, records and counts checked.
    pub checked: u64,
    pub findings: BTreeMap<String, (String, Fix)>,
    /// Items found wrong while a change of theirs was still on its way at every look: not drift.
    pub lagging: u64,
    /// Each count's copies as the look read them (post ids), for telling its lag.
    copies: BTreeMap<String, BTreeSet<String>>,
}

impl Check {
    pub fn is_clean(&self) -> bool {
        self.findings.is_empty()
    }

    pub fn render(&self) -> String {
        let mut out = format!(
            "tags: {} copies, records and counts checked, {} drifted, {} lagging\n",
            self.checked,
            self.findings.len(),
            self.lagging
        );
        for (target, (detail, _)) in self.findings.iter().take(EXAMPLES) {
            out.push_str(&format!("  {target}: {detail}\n"));
        }
        out
    }

    fn found(&mut self, place: &str, id: &str, detail: impl Into<String>, fix: Fix) {
        self.findings
            .insert(format!("feed/{place}/{id}"), (detail.into(), fix));
    }
}

/// What a repair did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Mended {
    pub written: u64,
    pub failed: Vec<String>,
}

/// A check, and with `--repair` the repair and the check after it.
pub type Outcome = part::Outcome<Check, Mended>;

impl Look for Check {
    fn tally(&self) -> Tally {
        Tally {
            checked: self.checked,
            drifted: self.findings.len() as u64,
            lagging: self.lagging,
            quarantined: 0,
        }
    }

    fn render(&self) -> String {
        Check::render(self)
    }

    fn findings(&self) -> Vec<Finding> {
        let found = self.findings.iter().take(EXAMPLES);
        found
            .map(|(target, (detail, fix))| Finding {
                kind: fix.kind(),
                target: target.clone(),
                detail: detail.clone(),
            })
            .collect()
    }
}

impl Fix {
    /// The kind of finding it mends, as the report names it.
    fn kind(&self) -> &'static str {
        match self {
            Fix::Post(_) => "tag copy or record",
            Fix::Extra { .. } => "tag copy extra",
            Fix::Count(_) => "tag count",
        }
    }
}

impl Mend for Mended {
    fn summary(&self) -> String {
        format!("{} tag copies, records and counts written", self.written)
    }

    fn failed(&self) -> &[String] {
        &self.failed
    }
}

/// Check, and with `repair` mend and check again.
pub async fn verify_and_repair(
    store: &dyn Store,
    repair: bool,
    settle: Duration,
) -> StoreResult<Outcome> {
    let look = async || verify(store, settle).await;
    Outcome::of(repair, look, async |found: &Check| {
        self::repair(store, found).await
    })
    .await
}

/// Check every tag copy, record and count, telling lag from drift (see the module's
/// documentation). A first look that finds nothing is the answer (no window is needed to tell
/// the lag of nothing); what it finds is looked at again inside windows: at once with `settle`
/// zero, else `settle` after each look up to [`part::LATER_LOOKS`] times.
pub async fn verify(store: &dyn Store, settle: Duration) -> StoreResult<Check> {
    let first = look(store).await?;
    if first.is_clean() {
        return Ok(first);
    }
    // Each look's copies, for telling the lag of the counts it found.
    let copies = RefCell::new(BTreeMap::new());
    let judged = part::judge(
        store,
        settle,
        first.findings,
        async |_| {
            let again = look(store).await?;
            copies.replace(again.copies);
            Ok(again.findings)
        },
        async |touched, found| {
            let copies = copies.take();
            let lagging = Lagging::of(store, touched, found, &copies).await?;
            Ok(found
                .iter()
                .filter(|(_, (_, fix))| lagging.covers(fix))
                .map(|(k, _)| k.clone())
                .collect())
        },
    )
    .await?;
    Ok(Check {
        checked: first.checked,
        findings: judged.drift,
        lagging: judged.lagging.len() as u64,
        ..Check::default()
    })
}

/// What a window saw, as the tags projection's sources: the posts changed, and the tags those
/// posts carry or were copied under. `None`: everything counts as changed.
struct Lagging(Option<(HashSet<String>, HashSet<String>)>);

impl Lagging {
    /// Read what each changed post carries and was copied under (two point reads a post), only
    /// when a count was found wrong.
    async fn of(
        store: &dyn Store,
        touched: &Touched,
        found: &BTreeMap<String, (String, Fix)>,
        copies: &BTreeMap<String, BTreeSet<String>>,
    ) -> StoreResult<Lagging> {
        if !touched.known() {
            return Ok(Lagging(Some(Default::default())));
        }
        let Some(posts) = touched.posts_changed() else {
            return Ok(Lagging(None));
        };
        let posts: HashSet<String> = posts.into_iter().map(String::from).collect();
        let mut tags = HashSet::new();
        let counts_found = found.values().any(|(_, fix)| matches!(fix, Fix::Count(_)));
        if counts_found {
            for id in &posts {
                let record = retry(|| store.read(Container::Feed, TAGGED, id)).await?;
                let post = retry(|| store.read(Container::Posts, id, id)).await?;
                for p in [
                    record.as_ref().and_then(post_of),
                    post.as_ref().and_then(post_of),
                ]
                .into_iter()
                .flatten()
                {
                    tags.extend(p.tags);
                }
            }
        }
        let copied = |tag: &str| copies.get(tag).into_iter().flatten();
        for (_, fix) in found.values() {
            if let Fix::Count(tag) = fix {
                if copied(tag).any(|id| posts.contains(id)) {
                    tags.insert(tag.clone());
                }
            }
        }
        Ok(Lagging(Some((posts, tags))))
    }

    /// Whether what `fix` would mend had a change of its sources in flight or made meanwhile.
    fn covers(&self, fix: &Fix) -> bool {
        let Some((posts, tags)) = &self.0 else {
            return true;
        };
        match fix {
            Fix::Post(id) | Fix::Extra { id, .. } => posts.contains(id),
            Fix::Count(tag) => tags.contains(tag),
        }
    }
}

/// One look at every tag copy, record and count.
async fn look(store: &dyn Store) -> StoreResult<Check> {
    let mut check = Check::default();
    let mut q = Query::cross_partition()
        .of_kind(Kind::Post)
        .live()
        .limit(TRAVERSAL_PAGE);
    loop {
        let page = retry(|| store.query(Container::Posts, &q)).await?;
        for stored in &page.items {
            check_post(store, stored, &mut check).await?;
        }
        match page.continuation {
            Some(t) => q.continuation = Some(t),
            None => break,
        }
    }
    let counts = query_all(
        store,
        Container::Feed,
        Query::partition(COUNTS).limit(TRAVERSAL_PAGE),
    )
    .await?;
    for counted in counts {
        match TagCount::read(&counted) {
            Ok(c) => check_tag(store, &c, &mut check).await?,
            // Its id is its tag: counted again, it is written whole.
            Err(e) => {
                let tag = Meta::of(&counted).id.unwrap_or_default();
                check.found(COUNTS, tag, e, Fix::Count(tag.into()));
            }
        }
    }
    Ok(check)
}

/// A live post's copies and record against what the projection writes of it ([`wanted`]).
async fn check_post(store: &dyn Store, stored: &Value, check: &mut Check) -> StoreResult<()> {
    let Some(want) = wanted(Some(stored)) else {
        return Ok(());
    };
    let id = want.id.as_str();
    for t in &want.tags {
        let place = tags::partition(t);
        check.checked += 1;
        let copy = retry(|| store.read(Container::Feed, &place, id)).await?;
        match copy.as_ref().and_then(copied_of) {
            None => check.found(&place, id, "missing", Fix::Post(id.into())),
            Some(p) if p != want => check.found(
                &place,
                id,
                "differs from the post's short form",
                Fix::Post(id.into()),
            ),
            Some(_) => {}
        }
    }
    check.checked += 1;
    let record = retry(|| store.read(Container::Feed, TAGGED, id)).await?;
    if record.as_ref().and_then(copied_of).as_ref() != Some(&want) {
        check.found(
            TAGGED,
            id,
            "the record differs from the post's short form",
            Fix::Post(id.into()),
        );
    }
    Ok(())
}

/// A tag's copies (each one's post read) and its count.
async fn check_tag(store: &dyn Store, counted: &TagCount, check: &mut Check) -> StoreResult<()> {
    let tag = counted.tag.as_str();
    let place = tags::partition(tag);
    let copies = query_all(
        store,
        Container::Feed,
        Query::partition(&place).limit(TRAVERSAL_PAGE),
    )
    .await?;
    for copy in &copies {
        let Some(id) = Meta::of(copy).id else {
            continue;
        };
        if !carries(store, id, tag).await? {
            let fix = Fix::Extra {
                tag: tag.into(),
                id: id.into(),
            };
            check.found(&place, id, "its post does not carry the tag", fix);
        }
    }
    check.checked += 1;
    let n = copies.len() as u64;
    let stored = counted.post_count;
    // A tag no post carries has no count item (the projection deletes it).
    let detail = match (stored, n) {
        (_, 0) => Some("a count item for a tag no post carries".to_string()),
        (stored, n) if stored != n => Some(format!("postCount: {stored}, expected {n}")),
        _ => None,
    };
    if let Some(detail) = detail {
        check.found(COUNTS, tag, detail, Fix::Count(tag.into()));
        // Which posts it counted, kept for wrong counts only, for telling their lag.
        let ids = copies
            .iter()
            .filter_map(|c| Meta::of(c).id.map(String::from));
        check.copies.insert(tag.into(), ids.collect());
    }
    Ok(())
}

/// Whether post `id` exists, is live and carries `tag` (one point read).
async fn carries(store: &dyn Store, id: &str, tag: &str) -> StoreResult<bool> {
    let post = retry(|| store.read(Container::Posts, id, id)).await?;
    Ok(post
        .filter(|p| is_live(p, Kind::Post))
        .and_then(|p| serde_json::from_value::<Post>(p).ok())
        .is_some_and(|p| p.tags.iter().any(|t| t == tag)))
}

/// Write the fixes for what `check` found.
pub async fn repair(store: &dyn Store, check: &Check) -> Mended {
    let mut done = Mended::default();
    let mut fixes: Vec<&Fix> = check.findings.values().map(|(_, f)| f).collect();
    fixes.sort();
    fixes.dedup();
    for fix in fixes {
        let result = match fix {
            Fix::Post(id) => mend_post(store, id).await,
            Fix::Extra { tag, id } => {
                async {
                    if carries(store, id, tag).await? {
                        return Ok(0); // it carries the tag again: not extra any more
                    }
                    apply_one(
                        store,
                        &Write::delete(Container::Feed, tags::partition(tag), id),
                    )
                    .await?;
                    Ok(1 + set_tag_count(store, tag).await?)
                }
                .await
            }
            Fix::Count(tag) => set_tag_count(store, tag).await,
        };
        match result {
            Ok(n) => done.written += n as u64,
            Err(e) => done.failed.push(format!("{fix:?}: {e}")),
        }
    }
    done
}

/// Post `id`'s copies and record written again from the post as it is now.
async fn mend_post(store: &dyn Store, id: &str) -> StoreResult<usize> {
    let post = retry(|| store.read(Container::Posts, id, id)).await?;
    apply_one(store, &Write::delete(Container::Feed, TAGGED, id)).await?;
    sync_post(store, id, post.as_ref()).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finding_names_the_item_at_fault() {
        let mut c = Check::default();
        c.found("tag:rust", "p1", "missing", Fix::Post("p1".into()));
        assert_eq!(
            c.render(),
            "tags: 0 copies, records and counts checked, 1 drifted, 0 lagging\n  feed/tag:rust/p1: missing\n"
        );
    }
}
