//! Domain types: validated inputs (`parse` or a clear error) and the item shapes documented in
//! `docs/api.md`.

use serde::{Deserialize, Serialize};

pub mod accounts;
pub mod bookmarks;
pub mod chars;
mod clock;
mod deletion;
pub mod favorites;
pub mod follows;
mod items;
pub mod jobs;
mod patch;
pub mod pending;
pub mod tags;
mod value;

pub use clock::{format_time, now};
pub use deletion::{is_deleted, is_live, tombstone_ops, DELETED, TOMBSTONE_TTL_SECS};
pub use items::{short_content, Authored, Comment, Kind, Like, Meta, Post, User};
pub use patch::PatchOp;
pub use value::to_value;

/// The feed shows this many posts.
pub const FEED_SIZE: usize = 100;
/// The feed container keeps this many, so that deleting a few of the newest posts does not
/// shrink the feed below [`FEED_SIZE`] (the next-newest are already there).
pub const FEED_KEEP: usize = FEED_SIZE + 20;

/// The partition key of every item in `feed` (partitioned by `/type`: all of them are posts,
/// so it is [`Kind::Post`]'s name).
pub const FEED_PK: &str = "post";
/// Short-form content is at most this many characters (including the ellipsis).
pub const SHORT_CONTENT_CHARS: usize = 200;

/// Why an input was rejected: the field at fault and what is wrong with it (a sentence naming
/// the field); becomes a 400 naming the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{detail}")]
pub struct Invalid {
    pub field: String,
    pub detail: String,
}

impl Invalid {
    pub fn new(field: &str, detail: impl Into<String>) -> Self {
        Invalid {
            field: field.to_string(),
            detail: detail.into(),
        }
    }
}

fn count_chars(s: &str) -> usize {
    s.chars().count()
}

fn check_length(field: &str, value: &str, max: usize) -> Result<(), Invalid> {
    let n = count_chars(value);
    if n == 0 {
        return Err(Invalid::new(field, format!("`{field}` must not be empty")));
    }
    if n > max {
        return Err(Invalid::new(
            field,
            format!("`{field}` must be at most {max} characters (got {n})"),
        ));
    }
    Ok(())
}

/// An item id: opaque, 1..=128 characters, none of `/ \ ? #` (Cosmos forbids them in ids), no
/// control characters, and not made only of dots (`.` and `..` are path segments to a URL: the
/// Cosmos SDK would turn `…/docs/..` into the container's own path).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Id(String);

impl Id {
    pub const MAX_CHARS: usize = 128;

    pub fn parse(field: &str, s: &str) -> Result<Self, Invalid> {
        check_length(field, s, Self::MAX_CHARS)?;
        Self::check_chars(field, s)?;
        Ok(Id(s.to_string()))
    }

    /// The characters an id may hold (whatever its length): none of `/ \ ? #`, no control
    /// characters, not only dots.
    pub fn check_chars(field: &str, s: &str) -> Result<(), Invalid> {
        if s.chars()
            .any(|c| matches!(c, '/' | '\\' | '?' | '#') || c.is_control())
        {
            return Err(Invalid::new(
                field,
                format!("`{field}` must not contain `/`, `\\`, `?`, `#` or control characters"),
            ));
        }
        if s.chars().all(|c| c == '.') {
            return Err(Invalid::new(
                field,
                format!("`{field}` must not be made only of dots"),
            ));
        }
        Ok(())
    }

    /// A fresh random id.
    pub fn new() -> Self {
        Id(uuid::Uuid::new_v4().to_string())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for Id {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Display for Id {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A username: trimmed, 1..=64 characters, no control characters, no bidirectional overrides or
/// isolates, and at least one visible character (see [`chars`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Username(String);

impl Username {
    pub const MAX_CHARS: usize = 64;

    pub fn parse(s: &str) -> Result<Self, Invalid> {
        let s = s.trim();
        check_length("username", s, Self::MAX_CHARS)?;
        if s.chars()
            .any(|c| c.is_control() || chars::is_line_separator(c))
        {
            return Err(Invalid::new(
                "username",
                "`username` must not contain control characters or line breaks",
            ));
        }
        if s.chars().any(chars::is_bidi_control) {
            return Err(Invalid::new(
                "username",
                "`username` must not contain bidirectional overrides or isolates (U+202A–U+202E, U+2066–U+2069)",
            ));
        }
        if !s.chars().any(chars::is_visible) {
            return Err(Invalid::new(
                "username",
                "`username` must contain at least one visible character",
            ));
        }
        Ok(Username(s.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Text with a length limit (titles, contents). Kept as given, but never empty or blank, and
/// without control characters other than `\n`, `\r`, `\t` (see [`chars`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Text(String);

impl Text {
    pub fn parse(field: &str, s: &str, max: usize) -> Result<Self, Invalid> {
        check_length(field, s, max)?;
        if let Some(c) = s.chars().find(|&c| chars::is_forbidden_in_text(c)) {
            return Err(Invalid::new(
                field,
                format!(
                    "`{field}` must not contain control characters other than line breaks and tabs (found U+{:04X})",
                    c as u32
                ),
            ));
        }
        if !s.chars().any(chars::is_visible) {
            return Err(Invalid::new(field, format!("`{field}` must not be blank")));
        }
        Ok(Text(s.to_string()))
    }

    pub const TITLE_MAX_CHARS: usize = 200;
    pub const POST_CONTENT_MAX_CHARS: usize = 20_000;
    pub const COMMENT_CONTENT_MAX_CHARS: usize = 2_000;
    pub const DESCRIPTION_MAX_CHARS: usize = 1_000;

    pub fn title(s: &str) -> Result<Self, Invalid> {
        Self::parse("title", s, Self::TITLE_MAX_CHARS)
    }

    pub fn post_content(s: &str) -> Result<Self, Invalid> {
        Self::parse("content", s, Self::POST_CONTENT_MAX_CHARS)
    }

    /// A post's description: 1 to 1,000 characters.
    pub fn description(s: &str) -> Result<Self, Invalid> {
        Self::parse("description", s, Self::DESCRIPTION_MAX_CHARS)
    }

    pub fn comment_content(s: &str) -> Result<Self, Invalid> {
        Self::parse("content", s, Self::COMMENT_CONTENT_MAX_CHARS)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use unicode_segmentation::UnicodeSegmentation;

    #[test]
    fn ids_reject_reserved_characters_and_length() {
        assert!(Id::parse("id", "abc-123").is_ok());
        for bad in ["", "a/b", "a\\b", "a?b", "a#b", "a\nb"] {
            assert!(Id::parse("id", bad).is_err(), "{bad:?} accepted");
        }
        assert!(Id::parse("id", &"x".repeat(128)).is_ok());
        assert!(Id::parse("id", &"x".repeat(129)).is_err());
        assert!(
            Id::parse("id", &"é".repeat(128)).is_ok(),
            "limit counts characters"
        );
    }

    #[test]
    fn usernames_are_trimmed_and_limited() {
        assert_eq!(Username::parse("  ana ").unwrap().as_str(), "ana");
        assert!(Username::parse("   ").is_err());
        assert!(Username::parse("a\u{7}b").is_err());
        assert!(Username::parse(&"ж".repeat(64)).is_ok());
        assert!(Username::parse(&"ж".repeat(65)).is_err());
    }

    #[test]
    fn text_limits_count_characters() {
        assert!(Text::title(&"標".repeat(200)).is_ok());
        assert!(Text::title(&"標".repeat(201)).is_err());
        assert!(Text::comment_content(&"a".repeat(2000)).is_ok());
        assert!(Text::comment_content(&"a".repeat(2001)).is_err());
        assert!(Text::post_content(&"a".repeat(20_000)).is_ok());
        assert!(Text::post_content(&"a".repeat(20_001)).is_err());
        assert!(Text::post_content(" \n ").is_err());
    }

    #[test]
    fn short_content_keeps_short_text_whole() {
        let s = "x".repeat(200);
        assert_eq!(short_content(&s), s);
        assert_eq!(short_content("héllo"), "héllo");
    }

    #[test]
    fn short_content_cuts_at_200_characters_with_ellipsis() {
        let cut = short_content(&"a".repeat(201));
        assert_eq!(cut.chars().count(), 200);
        assert!(cut.ends_with('…'));
        assert_eq!(&cut[..199], "a".repeat(199));
    }

    #[test]
    fn short_content_never_splits_a_character_in_any_script() {
        for unit in ["я", "漢", "ع", "ह", "😀", "👩‍👩‍👧", "é", "🇵🇱"] {
            let text = unit.repeat(300);
            let cut = short_content(&text);
            assert!(cut.chars().count() <= 200, "{unit}: too long");
            let body = cut.strip_suffix('…').expect("ellipsis");
            // Only whole graphemes of the source remain.
            assert!(
                body.graphemes(true).all(|g| g == unit),
                "{unit}: a grapheme was split"
            );
            assert!(text.starts_with(body));
        }
    }

    #[test]
    fn time_is_fixed_width_utc() {
        let t = time::macros::datetime!(2026-11-21 10:00:00.123 UTC);
        assert_eq!(format_time(t), "2026-11-21T10:00:00.123Z");
        let t = time::macros::datetime!(2026-01-02 03:04:05.006 +02:00);
        assert_eq!(format_time(t), "2026-01-02T01:04:05.006Z");
        assert_eq!(now().len(), 24);
    }
}
