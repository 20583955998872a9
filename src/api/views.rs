//! The API's answers: one typed view per kind of item, and the pages of them that lists answer.
//!
//! A view is what a client sees of an item. It is built from the domain type the stored item
//! reads as, by naming each field it keeps, so a property the service keeps for itself
//! (`type`, `renameVersion`, `propagatedVersion`, `timelineMerged`, a deletion's marks) or the
//! store adds (`_rid`, `_etag`, `_ts`, …) never reaches an answer unless a view names it. The
//! same types are what handlers serialize and what the OpenAPI document describes (through
//! `ToSchema`), so the document cannot drift from the answers; the patterns of ids, dates,
//! usernames and texts are added by property name (`openapi::property_pattern`), the lengths
//! here. Views also read back (`Deserialize`): the feed keeps its first pages encoded and pages
//! on from them.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::auth::ClientConfig;
use crate::domain::follows::{Edge, TimelineItem};
use crate::domain::{Comment, Like, Post, User};
use crate::error::{ApiError, ApiResult};

/// An answer built from one stored item.
pub trait View: Sized {
    /// What the item is called in the error when it does not read as its kind.
    const KIND: &'static str;

    /// The domain type the stored item reads as.
    type Stored: DeserializeOwned;

    fn from_domain(item: Self::Stored) -> Self;

    /// The view of a stored item (as the store returned it, system properties and all). An
    /// item that does not read as its kind was written by no version of this service: a defect,
    /// answered 500 and logged, never forwarded as it is.
    fn from_stored(item: Value) -> ApiResult<Self> {
        serde_json::from_value(item)
            .map(Self::from_domain)
            .map_err(|e| {
                ApiError::internal(format!("a stored {} does not read as one: {e}", Self::KIND))
            })
    }
}

/// A user.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = User)]
pub struct UserView {
    pub id: String,
    /// The same as `id`: the partition key of the user's items; posts, comments and likes name
    /// their author by it.
    pub user_id: String,
    /// Trimmed, 1 to 64 characters, no control characters. Not unique: a user is its id.
    #[schema(min_length = 1, max_length = 64)]
    pub username: String,
    /// How many users follow this one; kept by the change feed, so it may lag a follow by a
    /// moment. Not on the entries of follow lists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0, nullable = false)]
    pub follower_count: Option<u64>,
    /// How many users this one follows; kept like `followerCount`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0, nullable = false)]
    pub following_count: Option<u64>,
}

impl View for UserView {
    const KIND: &'static str = "user";
    type Stored = User;

    fn from_domain(u: User) -> Self {
        UserView {
            id: u.id,
            user_id: u.user_id,
            username: u.username,
            follower_count: Some(u.follower_count),
            following_count: Some(u.following_count),
        }
    }
}

impl UserView {
    /// What a follow list shows of a stored edge: [`UserView::from_edge`].
    pub fn of_edge(edge: &Value) -> ApiResult<Self> {
        Edge::deserialize(edge).map(Self::from_edge).map_err(|e| {
            ApiError::internal(format!("a stored follow edge does not read as one: {e}"))
        })
    }

    /// The user at the other end of an edge, by the name the edge carries, without counts.
    pub fn from_edge(edge: Edge) -> Self {
        UserView {
            user_id: edge.ref_user_id.clone(),
            id: edge.ref_user_id,
            username: edge.user_username,
            follower_count: None,
            following_count: None,
        }
    }
}

/// A post, with its author's current username and its comment and like counts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = Post)]
pub struct PostView {
    pub id: String,
    /// The same as `id` (the post's partition key).
    pub post_id: String,
    pub user_id: String,
    #[schema(min_length = 1, max_length = 64)]
    pub user_username: String,
    #[schema(min_length = 1, max_length = 200)]
    pub title: String,
    /// A one-line summary, when the author gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false, min_length = 1, max_length = 1000)]
    pub description: Option<String>,
    #[schema(min_length = 1, max_length = 20000)]
    pub content: String,
    #[schema(minimum = 0)]
    pub comment_count: u64,
    #[schema(minimum = 0)]
    pub like_count: u64,
    #[schema(example = "2026-11-21T10:00:00.123Z")]
    pub creation_date: String,
    /// When the author last edited the post; absent on a post never edited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false, example = "2026-11-21T11:30:00.456Z")]
    pub updated_at: Option<String>,
    /// How many users bookmarked the post, kept by the change feed.
    #[schema(minimum = 0)]
    pub bookmark_count: u64,
    /// Its tags: lowercased, each once, at most 10 (empty when none).
    #[serde(default)]
    #[schema(max_items = 10, example = json!(["rust", "cosmos-db"]))]
    pub tags: Vec<String>,
}

impl View for PostView {
    const KIND: &'static str = "post";
    type Stored = Post;

    /// Every field is named (no `..`): a field added to [`Post`] is kept or left out here on
    /// purpose.
    fn from_domain(p: Post) -> Self {
        let Post {
            id,
            kind: _,
            post_id,
            user_id,
            user_username,
            title,
            description,
            content,
            comment_count,
            like_count,
            creation_date,
            updated_at,
            bookmark_count,
            tags,
        } = p;
        PostView {
            id,
            post_id,
            user_id,
            user_username,
            title,
            description,
            content,
            comment_count,
            like_count,
            creation_date,
            updated_at,
            bookmark_count,
            tags,
        }
    }
}

/// A post in short form (lists): `content` cut to at most 200 characters at a grapheme
/// boundary, ending in `…` when cut.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = PostSummary)]
pub struct PostSummaryView {
    pub id: String,
    pub post_id: String,
    pub user_id: String,
    #[schema(min_length = 1, max_length = 64)]
    pub user_username: String,
    #[schema(min_length = 1, max_length = 200)]
    pub title: String,
    /// A one-line summary, when the author gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false, min_length = 1, max_length = 1000)]
    pub description: Option<String>,
    #[schema(min_length = 1, max_length = 200)]
    pub content: String,
    #[schema(minimum = 0)]
    pub comment_count: u64,
    #[schema(minimum = 0)]
    pub like_count: u64,
    pub creation_date: String,
    /// Its tags: lowercased, each once, at most 10 (empty when none).
    #[serde(default)]
    #[schema(max_items = 10)]
    pub tags: Vec<String>,
}

/// A short form is read from a copy that holds it already (the author's post copies, the feed,
/// timeline entries); `from_domain` keeps the content as the copy has it.
impl View for PostSummaryView {
    const KIND: &'static str = "post";
    type Stored = Post;

    /// Every field is named (no `..`), as in [`PostView`]; no `updatedAt` or `bookmarkCount`.
    fn from_domain(p: Post) -> Self {
        let Post {
            id,
            kind: _,
            post_id,
            user_id,
            user_username,
            title,
            description,
            content,
            comment_count,
            like_count,
            creation_date,
            updated_at: _,
            bookmark_count: _,
            tags,
        } = p;
        PostSummaryView {
            id,
            post_id,
            user_id,
            user_username,
            title,
            description,
            content,
            comment_count,
            like_count,
            creation_date,
            tags,
        }
    }
}

impl PostSummaryView {
    /// What a timeline shows of a stored item of the reader's timeline: `Ok(None)` for a merge
    /// marker, else the entry's post before its counts are read from the post (an entry holds
    /// what changes rarely, and counts an older entry may still hold are not shown).
    pub fn of_timeline_item(item: &Value) -> ApiResult<Option<Self>> {
        match TimelineItem::read(item) {
            Ok(TimelineItem::Entry(e)) => Ok(Some(Self::from_domain(e.post))),
            Ok(TimelineItem::Marker(_)) => Ok(None),
            Err(e) => Err(ApiError::internal(format!(
                "a stored timeline item does not read as one: {e}"
            ))),
        }
    }

    /// What a timeline shows of a merged author's post in the shared partition, before its
    /// counts are read from the post.
    pub fn of_merged(item: &Value) -> ApiResult<Self> {
        crate::domain::follows::MergedPost::deserialize(item)
            .map(|m| Self::from_domain(m.post))
            .map_err(|e| {
                ApiError::internal(format!("a stored merged post does not read as one: {e}"))
            })
    }
}

/// A comment on a post.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = Comment)]
pub struct CommentView {
    pub id: String,
    pub post_id: String,
    pub user_id: String,
    #[schema(min_length = 1, max_length = 64)]
    pub user_username: String,
    #[schema(min_length = 1, max_length = 2000)]
    pub content: String,
    pub creation_date: String,
}

impl View for CommentView {
    const KIND: &'static str = "comment";
    type Stored = Comment;

    fn from_domain(c: Comment) -> Self {
        CommentView {
            id: c.id,
            post_id: c.post_id,
            user_id: c.user_id,
            user_username: c.user_username,
            content: c.content,
            creation_date: c.creation_date,
        }
    }
}

/// A like of a post: one per user and post (its id is derived from the user).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = Like)]
pub struct LikeView {
    pub id: String,
    pub post_id: String,
    pub user_id: String,
    #[schema(min_length = 1, max_length = 64)]
    pub user_username: String,
    pub creation_date: String,
}

impl View for LikeView {
    const KIND: &'static str = "like";
    type Stored = Like;

    fn from_domain(l: Like) -> Self {
        LikeView {
            id: l.id,
            post_id: l.post_id,
            user_id: l.user_id,
            user_username: l.user_username,
            creation_date: l.creation_date,
        }
    }
}

/// A page of a list: its items and the token of the next page.
pub trait PageView: Serialize + Sized {
    type Item;

    fn new(items: Vec<Self::Item>, continuation_token: Option<String>) -> Self;

    /// The page of the stored items a query found, each read as its view.
    fn from_stored(page: crate::store::Page) -> ApiResult<Self>
    where
        Self::Item: View,
    {
        let items = page
            .items
            .into_iter()
            .map(Self::Item::from_stored)
            .collect::<ApiResult<_>>()?;
        Ok(Self::new(items, page.continuation))
    }
}

/// One page type per kind of item, each its own schema in the document (`continuationToken` is
/// always there: `null` when there is no next page).
macro_rules! page {
    ($(#[$doc:meta])* $name:ident of $item:ty) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
        #[serde(rename_all = "camelCase")]
        pub struct $name {
            pub items: Vec<$item>,
            #[schema(required = true)]
            pub continuation_token: Option<String>,
        }

        impl PageView for $name {
            type Item = $item;

            fn new(items: Vec<$item>, continuation_token: Option<String>) -> Self {
                $name {
                    items,
                    continuation_token,
                }
            }
        }
    };
}

page!(
    /// One page of users (a follow list), newest follow first.
    UserPage of UserView
);
page!(
    /// One page of posts in short form; pass `continuationToken` back for the next page (`null`:
    /// no more).
    PostSummaryPage of PostSummaryView
);
page!(
    /// One page of comments, oldest first.
    CommentPage of CommentView
);
page!(
    /// One page of likes, oldest first.
    LikePage of LikeView
);

/// A tag with the number of posts carrying it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = Tag)]
pub struct TagView {
    #[schema(min_length = 1, max_length = 32, example = "rust")]
    pub tag: String,
    #[schema(minimum = 1)]
    pub post_count: u64,
}

page!(
    /// One page of tags, the most used first.
    TagPage of TagView
);

/// Where live updates are pushed (`GET /api/events/negotiate`).
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = Negotiated)]
pub struct NegotiatedView {
    /// The WebSocket URL to open (`wss://…/client/hubs/<hub>?access_token=…`), within an hour.
    pub url: String,
}

/// How callers sign in (`GET /api/config`): public values only.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = ClientConfig)]
pub struct ClientConfigView {
    /// `none` (writes act as the body's `userId`), `jwt` (a bearer token from `issuer`),
    /// `easyauth` (App Service authentication) or `local` (a bearer token for a local account,
    /// from `POST /api/conduit/api/users` or `POST /api/conduit/api/users/login`).
    #[schema(pattern = "^(none|jwt|easyauth|local)$")]
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

impl From<ClientConfig> for ClientConfigView {
    fn from(c: ClientConfig) -> Self {
        ClientConfigView {
            auth: c.mode.as_str().to_string(),
            issuer: c.issuer,
            client_id: c.client_id,
            scopes: c.scopes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::follows::{FollowKind, MergedPost, TimelineEntry};
    use crate::domain::{to_value, Id, Text, Username};
    use axum::http::StatusCode;
    use serde_json::json;
    use std::collections::BTreeSet;

    /// What the service and the store add to an item besides what a client sees: each of
    /// them, and one no version writes yet, must stay out of every answer.
    fn with_internal_properties(mut item: Value) -> Value {
        let extra = json!({
            "renameVersion": 3,
            "propagatedVersion": 2,
            "propagatedUsername": "old",
            "timelineMerged": true,
            "sweeps": 1,
            "erased": false,
            "ttl": -1,
            "merge": false,
            "somethingNew": "kept for itself",
            "_rid": "rid==",
            "_self": "dbs/x/colls/y/docs/z/",
            "_etag": "\"0000-0000\"",
            "_ts": 1_700_000_000,
            "_lsn": 42,
            "_attachments": "attachments/",
        });
        let o = item.as_object_mut().unwrap();
        for (k, v) in extra.as_object().unwrap() {
            o.insert(k.clone(), v.clone());
        }
        item
    }

    fn keys(answer: &impl Serialize) -> BTreeSet<String> {
        let v = serde_json::to_value(answer).unwrap();
        v.as_object().unwrap().keys().cloned().collect()
    }

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    fn id(s: &str) -> Id {
        Id::parse("id", s).unwrap()
    }

    const POST_FIELDS: [&str; 10] = [
        "id",
        "postId",
        "userId",
        "userUsername",
        "title",
        "content",
        "commentCount",
        "likeCount",
        "creationDate",
        "tags",
    ];

    #[test]
    fn a_view_keeps_only_the_fields_it_names() {
        let user = to_value(&User::new(&id("u1"), &Username::parse("ana").unwrap()));
        let view = UserView::from_stored(with_internal_properties(user)).unwrap();
        assert_eq!(
            keys(&view),
            set(&[
                "id",
                "userId",
                "username",
                "followerCount",
                "followingCount"
            ])
        );
        assert_eq!(view.username, "ana");
        assert_eq!(view.follower_count, Some(0));

        let post = Post::new(
            &id("u1"),
            "ana".into(),
            &Text::title("t").unwrap(),
            &Text::post_content("c").unwrap(),
        );
        let stored = with_internal_properties(to_value(&post));
        let view = PostView::from_stored(stored.clone()).unwrap();
        let mut full = set(&POST_FIELDS);
        full.insert("bookmarkCount".into());
        assert_eq!(keys(&view), full);
        assert_eq!(
            (view.id.as_str(), view.title.as_str()),
            (post.id.as_str(), "t")
        );
        let summary = PostSummaryView::from_stored(stored).unwrap();
        assert_eq!(keys(&summary), set(&POST_FIELDS));

        let comment = Comment::new(
            &id("p1"),
            &id("u1"),
            "ana".into(),
            &Text::comment_content("hi").unwrap(),
        );
        let view = CommentView::from_stored(with_internal_properties(to_value(&comment))).unwrap();
        assert_eq!(
            keys(&view),
            set(&[
                "id",
                "postId",
                "userId",
                "userUsername",
                "content",
                "creationDate"
            ])
        );

        let like = Like::new(&id("p1"), &id("u1"), "ana".into());
        let view = LikeView::from_stored(with_internal_properties(to_value(&like))).unwrap();
        assert_eq!(
            keys(&view),
            set(&["id", "postId", "userId", "userUsername", "creationDate"])
        );
        assert_eq!(view.id, "like-u1");
    }

    #[test]
    fn a_page_holds_each_item_as_its_view_and_always_says_whether_more_follow() {
        let like = Like::new(&id("p1"), &id("u1"), "ana".into());
        let page = LikePage::from_stored(crate::store::Page {
            items: vec![with_internal_properties(to_value(&like))],
            continuation: None,
        })
        .unwrap();
        let v = serde_json::to_value(&page).unwrap();
        assert_eq!(keys(&page), set(&["items", "continuationToken"]));
        assert_eq!(v["continuationToken"], Value::Null);
        assert_eq!(
            v["items"][0],
            json!({
                "id": "like-u1",
                "postId": "p1",
                "userId": "u1",
                "userUsername": "ana",
                "creationDate": like.creation_date,
            })
        );
    }

    #[test]
    fn follow_lists_show_the_user_at_the_other_end_without_counts() {
        let e = with_internal_properties(
            Edge::new(FollowKind::Following, "f", "x", "xena", "d").to_item(),
        );
        let view = UserView::of_edge(&e).unwrap();
        assert_eq!(
            serde_json::to_value(&view).unwrap(),
            json!({ "id": "x", "userId": "x", "username": "xena" })
        );
    }

    #[test]
    fn a_timeline_shows_the_post_an_entry_copies_in_short_form() {
        let p = Post::new(
            &id("x"),
            "xena".into(),
            &Text::title("t").unwrap(),
            &Text::post_content(&"c".repeat(300)).unwrap(),
        );
        let mut entry = with_internal_properties(TimelineEntry::new("f", &p).to_item());
        // Counts an older entry still holds are not what a timeline shows.
        entry["likeCount"] = 7.into();
        let view = PostSummaryView::of_timeline_item(&entry).unwrap().unwrap();
        assert_eq!((view.like_count, view.comment_count), (0, 0));
        let merged = with_internal_properties(MergedPost::new(&p).to_item());
        assert_eq!(PostSummaryView::of_merged(&merged).unwrap(), view);
        let marker = crate::domain::follows::MergeMarker::new("f", "x").to_item();
        assert_eq!(PostSummaryView::of_timeline_item(&marker).unwrap(), None);
        assert_eq!(keys(&view), set(&POST_FIELDS));
        assert_eq!(
            (view.id.as_str(), view.post_id.as_str()),
            (p.id.as_str(), p.id.as_str())
        );
        assert_eq!(view.user_id, "x", "the author, not the timeline's owner");
        assert_eq!(view.content.chars().count(), 200);
    }

    #[test]
    fn a_stored_item_that_is_not_its_kind_is_a_server_error_not_an_answer() {
        let status = |e: ApiError| e.status();
        let no_title = json!({ "id": "p", "type": "post", "postId": "p", "userId": "u" });
        assert_eq!(
            status(PostView::from_stored(no_title).unwrap_err()),
            StatusCode::INTERNAL_SERVER_ERROR
        );
        let not_an_edge = json!({ "id": "following-x", "type": "following" });
        assert_eq!(
            status(UserView::of_edge(&not_an_edge).unwrap_err()),
            StatusCode::INTERNAL_SERVER_ERROR
        );
        assert!(PostSummaryView::of_timeline_item(&json!({ "id": "timeline-p" })).is_err());
        assert!(PostSummaryView::of_merged(&json!({ "id": "p", "type": "merged" })).is_err());
    }
}
