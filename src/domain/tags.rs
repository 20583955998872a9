//! A post's tags: what a tag may be, and where the copies of a tag's posts and the tags' counts
//! live (`feed`, whose partition key is `type`: each tag's posts in a partition of their own,
//! the counts in one more).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Invalid;

/// The most tags a post may carry.
pub const MAX_TAGS: usize = 10;
/// The longest tag, in characters.
pub const MAX_TAG_CHARS: usize = 32;

/// The `type` (and partition in `feed`) of tag `tag`'s copies of its posts: `tag:<tag>`.
pub fn partition(tag: &str) -> String {
    format!("{TAG_PREFIX}{tag}")
}

/// What every tag partition's name starts with.
pub const TAG_PREFIX: &str = "tag:";

/// The partition (and `type`) in `feed` of the tags' counts: one item per tag in use, its id
/// the tag.
pub const COUNTS: &str = "tagCount";

/// The item counting a tag's posts (in partition [`COUNTS`] of `feed`, its id the tag): the
/// number of copies in the tag's partition, and a date that orders the tags by it (the count,
/// zero-padded), so that the most used come first in one query.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TagCount {
    pub id: String,
    #[serde(rename = "type")]
    kind: String,
    pub tag: String,
    pub post_count: u64,
    creation_date: String,
    /// The version read, to set the count only if no one else did meanwhile.
    #[serde(rename = "_etag", default, skip_serializing)]
    pub etag: Option<String>,
}

impl TagCount {
    /// `tag` counted at `n` posts.
    pub fn new(tag: &str, n: u64) -> TagCount {
        TagCount {
            id: tag.into(),
            kind: COUNTS.into(),
            tag: tag.into(),
            post_count: n,
            creation_date: format!("{n:020}"),
            etag: None,
        }
    }

    /// A stored item as a tag's count, or why it does not read as one.
    pub fn read(item: &Value) -> Result<TagCount, String> {
        TagCount::deserialize(item).map_err(|e| format!("a tag's count does not read: {e}"))
    }

    pub fn to_item(&self) -> Value {
        super::value::to_value(self)
    }
}

/// The partition (and `type`) in `feed` of each tagged post's record of the tags it was copied
/// under and the short form it was copied as (the tags projection compares a post with it, so a
/// change that alters nothing a copy holds writes nothing, and an edit that drops a tag finds
/// that tag's copy).
pub const TAGGED: &str = "tagged";

/// One tag, as a client may give it: lowercased, then 1 to [`MAX_TAG_CHARS`] characters making
/// a word ([`super::chars::word_flaw`]: letters and digits of one script, `-` and `_`, with a
/// visible letter or digit; white space, around a tag too, is refused, as the API's schema
/// says). `field` names the property in the error.
pub fn parse_tag(field: &str, s: &str) -> Result<String, Invalid> {
    let tag = s.to_lowercase();
    let n = tag.chars().count();
    if n == 0 {
        return Err(Invalid::new(field, format!("`{field}` holds an empty tag")));
    }
    if n > MAX_TAG_CHARS {
        return Err(Invalid::new(
            field,
            format!("`{field}`: a tag is at most {MAX_TAG_CHARS} characters (`{s}` has {n})"),
        ));
    }
    match super::chars::word_flaw(&tag) {
        Some(why) => Err(Invalid::new(field, format!("`{field}`: a tag {why}"))),
        None => Ok(tag),
    }
}

/// A post's tags as given: at most [`MAX_TAGS`] (counted as given, so that what the API's
/// schema states holds), each checked and lowercased ([`parse_tag`]), repeats dropped (the first
/// kept, in order).
pub fn parse_tags(tags: &[String]) -> Result<Vec<String>, Invalid> {
    if tags.len() > MAX_TAGS {
        return Err(Invalid::new(
            "tags",
            format!("`tags` holds at most {MAX_TAGS} tags, not {}", tags.len()),
        ));
    }
    let mut out: Vec<String> = Vec::new();
    for t in tags {
        let tag = parse_tag("tags", t)?;
        if !out.contains(&tag) {
            out.push(tag);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(t: &[&str]) -> Result<Vec<String>, Invalid> {
        parse_tags(&t.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn tags_are_lowercased_and_each_kept_once() {
        assert_eq!(
            tags(&["Rust", "cosmos-DB", "rust", "Café", "2026"]).unwrap(),
            ["rust", "cosmos-db", "café", "2026"]
        );
        assert!(tags(&[]).unwrap().is_empty());
        assert_eq!(tags(&[&"é".repeat(32)]).unwrap().len(), 1);
    }

    #[test]
    fn a_bad_tag_names_tags() {
        for bad in [
            vec!["".to_string()],
            vec!["  ".into()],
            vec!["a b".into()],
            vec![" rust".into()],
            vec!["\u{a0}ù".into()],
            vec!["c++".into()],
            vec!["a/b".into()],
            vec!["x".repeat(33)],
            (0..11).map(|i| format!("t{i}")).collect(),
        ] {
            let e = parse_tags(&bad).unwrap_err();
            assert_eq!(e.field, "tags", "{bad:?}");
        }
        // Ten given, fewer once the repeats are dropped: fine; eleven given are too many, even
        // with a repeat among them.
        let mut ten: Vec<String> = (0..9).map(|i| format!("t{i}")).collect();
        ten.push("T0".into());
        assert_eq!(parse_tags(&ten).unwrap().len(), 9);
        ten.push("t9".into());
        assert_eq!(parse_tags(&ten).unwrap_err().field, "tags");
    }

    #[test]
    fn each_tag_has_a_partition_of_its_own() {
        assert_eq!(partition("rust"), "tag:rust");
        assert_ne!(partition("rust"), COUNTS);
        assert!(!COUNTS.starts_with(TAG_PREFIX) && !TAGGED.starts_with(TAG_PREFIX));
    }
}
