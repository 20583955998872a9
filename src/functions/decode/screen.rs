//! Holding each decoded change-feed document to the rules the API holds its input to
//! ([`check_document`]): the change feed carries what the store holds, so a document that no
//! request could have written (an id too long or with forbidden characters, a date not in the
//! service's form, a timestamp or creation date in the future, a text over its size) is refused,
//! logged, and left out of the batch, and the rest of the batch is applied.

use serde_json::Value;
use time::OffsetDateTime;

use crate::domain::{Id, Kind, Text, Username};

/// A document left out of a batch: its `id` (at most [`REFUSED_ID_CHARS`] characters of it,
/// for the log) and the rule it breaks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub id: String,
    pub why: String,
}

/// How much of a refused document's id is logged.
pub const REFUSED_ID_CHARS: usize = 64;

/// The most characters of a document's own `id`: an id as the API takes it ([`Id::MAX_CHARS`])
/// after the longest prefix the service puts before one to derive another (`timeline-merge-`,
/// `following-`, `like-`), with room to spare.
pub const MAX_DOCUMENT_ID_CHARS: usize = Id::MAX_CHARS + 32;

/// How far ahead of this instance's clock a document's `_ts` or `creationDate` may be: the
/// store's clock and ours may differ by a little, never by more.
pub const CLOCK_SKEW_SECS: i64 = 60;

/// The properties holding another item's id, each held to the API's id rules.
const ID_REFERENCES: [&str; 3] = ["userId", "postId", "refUserId"];

/// Whether `doc` could have been written by this service: the rules the API holds its input to,
/// and the invariants of what it stores.
/// - `id`: a string of at most [`MAX_DOCUMENT_ID_CHARS`] characters an id may hold
///   ([`Id::check_chars`]); `userId`, `postId`, `refUserId`, where present, ids as the API takes
///   them ([`Id::parse`]); a user's `id` is its `userId`, a post's its `postId`.
/// - `username`, `userUsername`, `title`, `content`, where present: strings within the API's
///   sizes (a comment's content within a comment's); a deletion mark's blanked texts fit.
/// - `creationDate`, where present: the service's form (`YYYY-MM-DDTHH:MM:SS.mmmZ`, a real
///   instant), and for a user, post, comment or like not later than `now` (plus
///   [`CLOCK_SKEW_SECS`]); the timeline's merge markers carry a far-future date on purpose.
/// - `_ts`, where present: whole seconds, not later than `now` (plus [`CLOCK_SKEW_SECS`]): a
///   change stamped in the future would outrank the store's own current version of the item.
pub fn check_document(doc: &Value, now: OffsetDateTime) -> Result<(), String> {
    let id = match doc.get("id") {
        Some(Value::String(id)) => id,
        _ => return Err("`id` is missing or not a string".into()),
    };
    let id_chars = id.chars().count();
    if id_chars == 0 || id_chars > MAX_DOCUMENT_ID_CHARS {
        return Err(format!(
            "`id` has {id_chars} characters (1 to {MAX_DOCUMENT_ID_CHARS})"
        ));
    }
    Id::check_chars("id", id).map_err(|e| format!("`{}` {}", e.field, e.detail))?;
    for field in ID_REFERENCES {
        match doc.get(field) {
            None | Some(Value::Null) => {}
            Some(Value::String(v)) => {
                Id::parse(field, v).map_err(|e| format!("`{}` {}", e.field, e.detail))?;
            }
            Some(_) => return Err(format!("`{field}` is not a string")),
        }
    }
    let kind = Kind::of(doc);
    let own_id_field = match kind {
        Some(Kind::User) => Some("userId"),
        Some(Kind::Post) => Some("postId"),
        _ => None,
    };
    if let Some(field) = own_id_field {
        if doc.get(field).and_then(Value::as_str) != Some(id.as_str()) {
            return Err(format!(
                "a {} whose `id` is not its `{field}`",
                kind.unwrap()
            ));
        }
    }
    let content_max = match kind {
        Some(Kind::Comment) => Text::COMMENT_CONTENT_MAX_CHARS,
        _ => Text::POST_CONTENT_MAX_CHARS,
    };
    let texts = [
        ("username", Username::MAX_CHARS),
        ("userUsername", Username::MAX_CHARS),
        ("title", Text::TITLE_MAX_CHARS),
        ("content", content_max),
    ];
    for (field, max) in texts {
        match doc.get(field) {
            None | Some(Value::Null) => {}
            Some(Value::String(v)) => {
                let n = v.chars().count();
                if n > max {
                    return Err(format!("`{field}` has {n} characters (at most {max})"));
                }
            }
            Some(_) => return Err(format!("`{field}` is not a string")),
        }
    }
    let latest = now.unix_timestamp() + CLOCK_SKEW_SECS;
    match doc.get("creationDate") {
        None | Some(Value::Null) => {}
        Some(Value::String(date)) => {
            let at = service_time(date).ok_or_else(|| {
                format!("`creationDate` is not a date in the service's form: {date:.40}")
            })?;
            if kind.is_some() && at.unix_timestamp() > latest {
                return Err(format!("`creationDate` is in the future: {date}"));
            }
        }
        Some(_) => return Err("`creationDate` is not a string".into()),
    }
    match doc.get("_ts") {
        None => {}
        Some(ts) => match ts.as_i64() {
            Some(ts) if ts <= latest => {}
            Some(ts) => {
                return Err(format!(
                    "`_ts` {ts} is {} s in the future",
                    ts - now.unix_timestamp()
                ))
            }
            None => return Err("`_ts` is not whole seconds".into()),
        },
    }
    Ok(())
}

/// A time in the service's form (`crate::domain::format_time`: `YYYY-MM-DDTHH:MM:SS.mmmZ`,
/// fixed width so it sorts as text), if `s` is one and a real instant.
fn service_time(s: &str) -> Option<OffsetDateTime> {
    let b = s.as_bytes();
    let shape = b.len() == 24
        && b.iter().enumerate().all(|(i, &c)| match i {
            4 | 7 => c == b'-',
            10 => c == b'T',
            13 | 16 => c == b':',
            19 => c == b'.',
            23 => c == b'Z',
            _ => c.is_ascii_digit(),
        });
    if !shape {
        return None;
    }
    let n = |from: usize, to: usize| s[from..to].parse::<u16>().ok();
    let month = time::Month::try_from(u8::try_from(n(5, 7)?).ok()?).ok()?;
    let date =
        time::Date::from_calendar_date(i32::from(n(0, 4)?), month, u8::try_from(n(8, 10)?).ok()?)
            .ok()?;
    let time = time::Time::from_hms_milli(
        u8::try_from(n(11, 13)?).ok()?,
        u8::try_from(n(14, 16)?).ok()?,
        u8::try_from(n(17, 19)?).ok()?,
        n(20, 23)?,
    )
    .ok()?;
    Some(date.with_time(time).assume_utc())
}

/// Split `documents` into those that pass [`check_document`] and those refused, logging each
/// refusal.
pub(super) fn screen(documents: Vec<Value>, now: OffsetDateTime) -> (Vec<Value>, Vec<Refused>) {
    let mut kept = Vec::with_capacity(documents.len());
    let mut refused = Vec::new();
    for doc in documents {
        match check_document(&doc, now) {
            Ok(()) => kept.push(doc),
            Err(why) => {
                let id: String = match doc.get("id") {
                    Some(Value::String(id)) => id.chars().take(REFUSED_ID_CHARS).collect(),
                    _ => String::new(),
                };
                tracing::warn!(
                    id = %id,
                    why = %why,
                    "change-feed document refused: no request could have written it; not applied"
                );
                refused.push(Refused { id, why });
            }
        }
    }
    (kept, refused)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// What the service writes passes; what no request could have written is refused, and the
    /// rest of the batch stays.
    #[test]
    fn documents_are_held_to_the_apis_rules() {
        let now = time::macros::datetime!(2026-11-26 06:00:00 UTC);
        let ts = now.unix_timestamp();
        let post = json!({"id": "p1", "postId": "p1", "type": "post", "userId": "u1",
            "userUsername": "ana", "title": "t", "content": "c", "commentCount": 0,
            "likeCount": 0, "creationDate": "2026-11-26T05:59:59.123Z", "_ts": ts});
        let with = |changes: Value| {
            let mut d = post.clone();
            for (k, v) in changes.as_object().unwrap() {
                d[k] = v.clone();
            }
            d
        };
        let fits = [
            post.clone(),
            // A deletion mark: texts blanked.
            with(
                json!({"deleted": true, "ttl": 604800, "title": "", "content": "",
                        "userUsername": ""}),
            ),
            with(json!({"_ts": ts + CLOCK_SKEW_SECS})),
            with(json!({"content": "c".repeat(Text::POST_CONTENT_MAX_CHARS)})),
            json!({"id": "u1", "userId": "u1", "type": "user", "username": "ana", "_ts": ts}),
            json!({"id": format!("like-{}", "u".repeat(Id::MAX_CHARS)), "postId": "p1",
                   "userId": "u".repeat(Id::MAX_CHARS), "type": "like",
                   "creationDate": "2026-11-26T05:00:00.000Z"}),
            // A timeline merge marker sorts first with its far-future date.
            json!({"id": "timeline-merge-u2", "type": "timeline", "userId": "u1",
                   "refUserId": "u2", "creationDate": "9999-12-31T23:59:59.999Z"}),
            // Without the store's stamps (as the tests deliver some).
            json!({"id": "c1", "postId": "p1", "type": "comment"}),
        ];
        for doc in &fits {
            assert_eq!(check_document(doc, now), Ok(()), "{doc}");
        }
        let refused = [
            (json!({"type": "post"}), "`id` is missing"),
            (
                with(json!({"id": "x".repeat(100_000), "postId": "x".repeat(100_000)})),
                "100000 characters",
            ),
            (
                with(json!({"id": "a/b", "postId": "a/b"})),
                "must not contain",
            ),
            (with(json!({"id": "..", "postId": ".."})), "only of dots"),
            (with(json!({"postId": "p2"})), "not its `postId`"),
            (
                with(json!({"userId": "u".repeat(Id::MAX_CHARS + 1)})),
                "at most 128",
            ),
            (with(json!({"userId": 7})), "`userId` is not a string"),
            (with(json!({"creationDate": "zzzz"})), "service's form"),
            (
                with(json!({"creationDate": "2026-02-30T00:00:00.000Z"})),
                "service's form",
            ),
            (
                with(json!({"creationDate": "2026-11-26T06:00:00Z"})),
                "service's form",
            ),
            (
                with(json!({"creationDate": "2026-11-26T07:00:00.000Z"})),
                "in the future",
            ),
            (with(json!({"_ts": ts + 3600})), "3600 s in the future"),
            (with(json!({"_ts": "soon"})), "whole seconds"),
            (
                with(json!({"title": "t".repeat(Text::TITLE_MAX_CHARS + 1)})),
                "`title`",
            ),
            (
                with(json!({"userUsername": "n".repeat(Username::MAX_CHARS + 1)})),
                "`userUsername`",
            ),
            (
                json!({"id": "c1", "postId": "p1", "type": "comment",
                    "content": "c".repeat(Text::COMMENT_CONTENT_MAX_CHARS + 1)}),
                "`content`",
            ),
        ];
        for (doc, expected) in &refused {
            let why = check_document(doc, now).unwrap_err();
            assert!(
                why.contains(expected),
                "{why:?} should mention {expected:?}"
            );
        }
        let mut all: Vec<Value> = refused.iter().map(|(d, _)| d.clone()).collect();
        all.extend(fits.iter().cloned());
        let (kept, left_out) = screen(all, now);
        assert_eq!(kept, fits);
        assert_eq!(left_out.len(), refused.len());
        assert!(left_out
            .iter()
            .all(|r| r.id.chars().count() <= REFUSED_ID_CHARS));
    }
}
