//! What the OpenAPI document says of the API's parameters, and the patterns `openapi` sets by
//! property name on every schema at once (`openapi::property_pattern`): the limits the domain
//! enforces on input. The answers describe themselves (`views`). The API suite checks real
//! answers against the document, and the conformance fuzzer (`.ci/schemathesis.sh`) checks both
//! directions.

use utoipa::IntoParams;

use crate::domain::chars;

/// An item id: 1 to 128 characters, none of `/ \ ? #`, no control characters, not only dots.
pub const ID_PATTERN: &str = r"^(?!\.+$)[^/\\?#\u0000-\u001F\u007F-\u009F]{1,128}$";

/// White space (Unicode `White_Space`, what trimming removes).
macro_rules! ws {
    () => {
        r"\t\n\u000B\u000C\r \u0085\u00A0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000"
    };
}
/// Control characters.
macro_rules! cc {
    () => {
        r"\u0000-\u001F\u007F-\u009F"
    };
}
/// Bidirectional overrides and isolates.
macro_rules! bidi {
    () => {
        r"\u202A-\u202E\u2066-\u2069"
    };
}
/// Default-ignorable characters of the Basic Multilingual Plane (the few outside it cannot be
/// written portably in a pattern).
macro_rules! ignorable {
    () => {
        r"\u00AD\u034F\u061C\u115F\u1160\u17B4\u17B5\u180B-\u180F\u200B-\u200F\u202A-\u202E\u2060-\u206F\u3164\uFE00-\uFE0F\uFEFF\uFFA0\uFFF0-\uFFF8"
    };
}

/// A username as sent: surrounding white space (trimmed away), then 1 to 64 characters without
/// control characters, line breaks or bidirectional overrides, neither starting nor ending with
/// white space, at least one of them visible: one of the Basic Multilingual Plane's that
/// [`chars::is_visible`] accepts, or any character beyond it (which a portable pattern cannot
/// name one by one: an emoji is visible, a lone tag character is not, and only the server tells).
pub fn username_pattern() -> String {
    let invisible = bmp_ranges(|c| !chars::is_visible(c));
    let ws = ws!();
    let cc = cc!();
    let bidi = bidi!();
    let breaks = r"\u2028\u2029";
    format!(
        "^[{ws}]*(?=.*[^{invisible}])[^{ws}{cc}{bidi}](?:[^{cc}{bidi}{breaks}]{{0,62}}[^{ws}{cc}{bidi}])?[{ws}]*$"
    )
}

/// The characters of the Basic Multilingual Plane (surrogates aside) for which `pick` holds, as
/// the inside of a pattern's character class (`\u0300-\u036F…`).
fn bmp_ranges(pick: impl Fn(char) -> bool) -> String {
    let mut out = String::new();
    let mut start: Option<u32> = None;
    let flush = |from: u32, to: u32, out: &mut String| {
        out.push_str(&format!("\\u{from:04X}"));
        if to > from {
            out.push_str(&format!("-\\u{to:04X}"));
        }
    };
    for cp in 0..=0x1_0000u32 {
        let picked = char::from_u32(cp).is_some_and(|c| cp < 0x1_0000 && pick(c));
        match (picked, start) {
            (true, None) => start = Some(cp),
            (false, Some(from)) => {
                flush(from, cp - 1, &mut out);
                start = None;
            }
            _ => {}
        }
    }
    out
}

/// A title or content: no control characters but line breaks and tabs, and at least one
/// visible character.
pub const TEXT_PATTERN: &str = concat!(
    r"^[^\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F-\u009F]*",
    "[^",
    ws!(),
    cc!(),
    ignorable!(),
    "]",
    r"[^\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F-\u009F]*$",
);

/// `creationDate`: RFC 3339 UTC with milliseconds, fixed width, so it sorts as text.
pub const DATE_PATTERN: &str = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$";

/// Paging of the lists.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // read by the `Paging` extractor; this type only describes it
pub struct PagingParams {
    /// Page size, 1 to 100.
    #[param(minimum = 1, maximum = 100, default = 20)]
    limit: Option<u32>,
    /// The `continuationToken` of the previous page, as it was given (URL-encoded).
    #[param(rename = "continuationToken", min_length = 1, max_length = 4096)]
    continuation_token: Option<String>,
}
