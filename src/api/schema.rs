//! The shapes of the API's answers and parameters as the OpenAPI document describes them.
//! Patterns are set by property name for every schema at once (see `openapi::patterns`).
//!
//! Handlers answer with stored items stripped of system and internal properties
//! ([`crate::domain::public`]); these types say what that leaves, with the limits the domain
//! enforces on input. The API suite checks real answers against them, and the conformance
//! fuzzer (`.ci/schemathesis.sh`) checks both directions.

use serde::Serialize;
use utoipa::{IntoParams, ToSchema};

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

/// A user.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = User)]
pub struct UserSchema {
    pub id: String,
    /// The same as `id`: the partition key of the user's items; posts, comments and likes name
    /// their author by it.
    pub user_id: String,
    /// Trimmed, 1 to 64 characters, no control characters. Not unique: a user is its id.
    #[schema(min_length = 1, max_length = 64)]
    pub username: String,
    /// How many users follow this one; kept by the change feed, so it may lag a follow by a
    /// moment. Not on the entries of follow lists.
    #[schema(minimum = 0)]
    pub follower_count: Option<u64>,
    /// How many users this one follows; kept like `followerCount`.
    #[schema(minimum = 0)]
    pub following_count: Option<u64>,
}

/// One page of users (a follow list), newest follow first.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = UserPage)]
pub struct UserPage {
    pub items: Vec<UserSchema>,
    #[schema(required = true)]
    pub continuation_token: Option<String>,
}

/// A post, with its author's current username and its comment and like counts.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = Post)]
pub struct PostSchema {
    pub id: String,
    /// The same as `id` (the post's partition key).
    pub post_id: String,
    pub user_id: String,
    #[schema(min_length = 1, max_length = 64)]
    pub user_username: String,
    #[schema(min_length = 1, max_length = 200)]
    pub title: String,
    #[schema(min_length = 1, max_length = 20000)]
    pub content: String,
    #[schema(minimum = 0)]
    pub comment_count: u64,
    #[schema(minimum = 0)]
    pub like_count: u64,
    #[schema(example = "2026-11-21T10:00:00.123Z")]
    pub creation_date: String,
}

/// A post in short form (lists): `content` cut to at most 200 characters at a grapheme
/// boundary, ending in `…` when cut.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = PostSummary)]
pub struct PostSummarySchema {
    pub id: String,
    pub post_id: String,
    pub user_id: String,
    #[schema(min_length = 1, max_length = 64)]
    pub user_username: String,
    #[schema(min_length = 1, max_length = 200)]
    pub title: String,
    #[schema(min_length = 1, max_length = 200)]
    pub content: String,
    #[schema(minimum = 0)]
    pub comment_count: u64,
    #[schema(minimum = 0)]
    pub like_count: u64,
    pub creation_date: String,
}

/// A comment on a post.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = Comment)]
pub struct CommentSchema {
    pub id: String,
    pub post_id: String,
    pub user_id: String,
    #[schema(min_length = 1, max_length = 64)]
    pub user_username: String,
    #[schema(min_length = 1, max_length = 2000)]
    pub content: String,
    pub creation_date: String,
}

/// A like of a post: one per user and post (its id is derived from the user).
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = Like)]
pub struct LikeSchema {
    pub id: String,
    pub post_id: String,
    pub user_id: String,
    #[schema(min_length = 1, max_length = 64)]
    pub user_username: String,
    pub creation_date: String,
}

/// One page of posts in short form; pass `continuationToken` back for the next page (`null`:
/// no more).
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = PostSummaryPage)]
pub struct PostSummaryPage {
    pub items: Vec<PostSummarySchema>,
    #[schema(required = true)]
    pub continuation_token: Option<String>,
}

/// One page of comments, oldest first.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = CommentPage)]
pub struct CommentPage {
    pub items: Vec<CommentSchema>,
    #[schema(required = true)]
    pub continuation_token: Option<String>,
}

/// One page of likes, oldest first.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = LikePage)]
pub struct LikePage {
    pub items: Vec<LikeSchema>,
    #[schema(required = true)]
    pub continuation_token: Option<String>,
}

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

/// How callers sign in (`GET /api/config`): public values only.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = ClientConfig)]
pub struct ClientConfigSchema {
    /// `none` (writes act as the body's `userId`), `jwt` (a bearer token from `issuer`) or
    /// `easyauth` (App Service authentication).
    #[schema(pattern = "^(none|jwt|easyauth)$")]
    pub auth: String,
    /// The OpenID Connect issuer (`jwt`).
    #[schema(required = true)]
    pub issuer: Option<String>,
    /// The client (application) id to sign in with, when configured.
    #[schema(required = true)]
    pub client_id: Option<String>,
    /// The scopes to ask for when signing in.
    pub scopes: Vec<String>,
}
