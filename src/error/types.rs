//! The kinds of problem the API answers: each its `type` URI, title and status (listed in
//! docs/api.md, "Errors").

/// What every problem `type` starts with: a `tag:` URI (RFC 4151), an identifier to compare as a
/// string, not an address to fetch.
pub const PROBLEM_TYPE_BASE: &str = "tag:blog-api,2026:problems/";

/// A kind of problem: its `type` is [`PROBLEM_TYPE_BASE`] followed by `slug`, its `title` the
/// same for every problem of the kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProblemType {
    pub slug: &'static str,
    pub title: &'static str,
    pub status: u16,
}

impl ProblemType {
    pub fn uri(&self) -> String {
        format!("{PROBLEM_TYPE_BASE}{}", self.slug)
    }
}

const fn kind(slug: &'static str, title: &'static str, status: u16) -> ProblemType {
    ProblemType {
        slug,
        title,
        status,
    }
}

pub const INVALID_INPUT: ProblemType = kind("invalid-input", "Invalid input", 400);
pub const MALFORMED_BODY: ProblemType = kind("malformed-body", "Malformed body", 400);
pub const BAD_REQUEST: ProblemType = kind("bad-request", "Bad request", 400);
pub const UNAUTHORIZED: ProblemType = kind("unauthorized", "Sign-in required", 401);
pub const FORBIDDEN: ProblemType = kind("forbidden", "Not allowed", 403);
pub const NOT_FOUND: ProblemType = kind("not-found", "Not found", 404);
pub const METHOD_NOT_ALLOWED: ProblemType = kind("method-not-allowed", "Method not allowed", 405);
pub const CONFLICT: ProblemType = kind("conflict", "Concurrent change", 409);
pub const USER_EXISTS: ProblemType = kind("user-exists", "User exists", 409);
pub const ERASING: ProblemType = kind("erasing", "Account being erased", 409);
pub const STALE_VERSION: ProblemType = kind("stale-version", "Stale version", 412);
pub const BODY_TOO_LARGE: ProblemType = kind("body-too-large", "Body too large", 413);
pub const NOT_JSON: ProblemType = kind("unsupported-media-type", "Body not JSON", 415);
pub const UNKNOWN_USER: ProblemType = kind("unknown-user", "Unknown user", 422);
pub const HEADERS_TOO_LARGE: ProblemType = kind("headers-too-large", "Headers too large", 431);
pub const TOO_MANY_WRITES: ProblemType = kind("too-many-writes", "Too many writes", 429);
pub const TOO_MANY_SEARCHES: ProblemType = kind("too-many-searches", "Too many searches", 429);
pub const TOO_MANY_STREAMS: ProblemType = kind("too-many-streams", "Too many streams", 429);
pub const STORE_BUSY: ProblemType = kind("store-busy", "Store busy", 429);
pub const STREAMS_FULL: ProblemType = kind("streams-full", "No stream free", 503);
pub const PUSH_UNAVAILABLE: ProblemType = kind("push-unavailable", "Push unavailable", 503);
pub const UNAVAILABLE: ProblemType = kind("unavailable", "Store unavailable", 503);
pub const IDENTITY_UNAVAILABLE: ProblemType =
    kind("identity-unavailable", "Identity provider unavailable", 503);
pub const TIMED_OUT: ProblemType = kind("timed-out", "Timed out", 503);
pub const INTERNAL: ProblemType = kind("internal", "Internal error", 500);

/// Every kind of problem the API answers.
pub const PROBLEM_TYPES: [ProblemType; 25] = [
    INVALID_INPUT,
    MALFORMED_BODY,
    BAD_REQUEST,
    UNAUTHORIZED,
    FORBIDDEN,
    NOT_FOUND,
    METHOD_NOT_ALLOWED,
    CONFLICT,
    USER_EXISTS,
    ERASING,
    STALE_VERSION,
    BODY_TOO_LARGE,
    NOT_JSON,
    UNKNOWN_USER,
    HEADERS_TOO_LARGE,
    TOO_MANY_WRITES,
    TOO_MANY_SEARCHES,
    TOO_MANY_STREAMS,
    STORE_BUSY,
    UNAVAILABLE,
    STREAMS_FULL,
    PUSH_UNAVAILABLE,
    IDENTITY_UNAVAILABLE,
    TIMED_OUT,
    INTERNAL,
];
