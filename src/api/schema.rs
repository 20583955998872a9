//! What the OpenAPI document says of the API's parameters, and the patterns `openapi` sets by
//! property name on every schema at once (`openapi::property_pattern`): the limits the domain
//! enforces on input. The answers describe themselves (`views`). The API suite checks real
//! answers against the document, and the conformance fuzzer (`.ci/schemathesis.sh`) checks both
//! directions.

use utoipa::IntoParams;

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
/// control characters or bidirectional overrides, neither starting nor ending with white space,
/// at least one of them visible.
pub const USERNAME_PATTERN: &str = concat!(
    "^[",
    ws!(),
    "]*",
    "(?=.*[^",
    ws!(),
    cc!(),
    ignorable!(),
    "])",
    "[^",
    ws!(),
    cc!(),
    bidi!(),
    "]",
    "(?:[^",
    cc!(),
    bidi!(),
    "]{0,62}",
    "[^",
    ws!(),
    cc!(),
    bidi!(),
    "])?",
    "[",
    ws!(),
    "]*$",
);

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
