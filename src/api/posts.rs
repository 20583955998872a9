//! C2 and Q2: posts (in `posts`, partition `postId`, with their comments and likes).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::conditional::{IfMatch, IfMatchParam, IfNoneMatch, IfNoneMatchParam};
use super::deletion::no_content;
use super::views::PostView;
use super::{AppState, JsonBody, PathId};
use crate::auth::Caller;
use crate::domain::{is_live, tags, to_value, Authored, Id, Kind, Post, Text};
use crate::error::Problem;
use crate::error::{ApiError, ApiResult};
use crate::projection::cascade;
use crate::store::{Container, PatchOp, Store, StoreError};

/// A new post, or a post's new title and content (and tags).
#[derive(Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PostBody {
    /// The author: the caller's own user. Optional when signed in; with `BLOG_AUTH=none` it
    /// says who acts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) user_id: Option<String>,
    /// 1 to 200 characters, not only white space.
    #[schema(min_length = 1, max_length = 200)]
    pub(super) title: String,
    /// A one-line summary of the post, 1 to 1,000 characters, not only white space. On a new
    /// post, absent means none; on an edit, absent leaves it as it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1, max_length = 1000)]
    pub(super) description: Option<String>,
    /// 1 to 20,000 characters, not only white space.
    #[schema(min_length = 1, max_length = 20000)]
    pub(super) content: String,
    /// The post's tags: at most 10, each 1 to 32 letters and digits of one script, `-` or `_`;
    /// stored lowercased, each once. On a new post, absent means none; on an edit, absent leaves
    /// them as they are and `[]` removes them all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_items = 10, example = json!(["rust", "cosmos-db"]))]
    pub(super) tags: Option<Vec<String>>,
}

/// C2 `POST /api/posts`: read the author's name, then create the post (two operations).
#[utoipa::path(
    post,
    path = "/api/posts",
    tag = "posts",
    summary = "Create a post",
    request_body = PostBody,
    responses(
        (status = 201, description = "The new post: no comments or likes yet, the author's username set", body = PostView,
            headers(
                ("Location" = String, description = "`/api/posts/{id}`"),
                ("ETag" = String, description = "The post's version, for `If-None-Match` / `If-Match`"),
            ),
            links(
                ("GetPost" = (operation_id = "get_post", parameters(("postId" = "$response.body#/id")))),
                ("UpdatePost" = (operation_id = "update_post", parameters(("postId" = "$response.body#/id")))),
                ("ListComments" = (operation_id = "list_comments", parameters(("postId" = "$response.body#/id")))),
                ("CreateComment" = (operation_id = "create_comment", parameters(("postId" = "$response.body#/id")))),
                ("ListLikes" = (operation_id = "list_likes", parameters(("postId" = "$response.body#/id")))),
                ("CreateLike" = (operation_id = "create_like", parameters(("postId" = "$response.body#/id")))),
                ("DeletePost" = (operation_id = "delete_post", parameters(("postId" = "$response.body#/id")))),
            )),
        (status = 422, description = "`userId` names no user", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn create_post(
    State(s): State<AppState>,
    caller: Caller,
    JsonBody(body): JsonBody<PostBody>,
) -> ApiResult<Response> {
    let user_id = caller.acts_as(body.user_id.as_deref())?;
    let title = Text::title(&body.title)?;
    let content = Text::post_content(&body.content)?;
    let tags = tags::parse_tags(body.tags.as_deref().unwrap_or_default())?;
    let description = body
        .description
        .as_deref()
        .map(Text::description)
        .transpose()?;
    let username = caller.username(&*s.store, &user_id).await?;
    let mut post = Post::new(&user_id, username, &title, &content);
    post.tags = tags;
    post.description = description.map(|d| d.as_str().to_string());
    let id = &post.id;
    let stored = s
        .store
        .create(Container::Posts, id.as_str(), to_value(&post))
        .await?;
    let mut resp = super::answer::view_response::<PostView>(StatusCode::CREATED, stored)?;
    super::answer::set_location(&mut resp, &format!("/api/posts/{id}"));
    Ok(resp)
}

/// C2 `PUT /api/posts/{postId}`: read the post (its author), then patch title and content, so a
/// concurrent counter change is never overwritten (two operations). With `If-Match`, the patch
/// is made only while the post's answer has that tag and the post is still as read.
#[utoipa::path(
    put,
    path = "/api/posts/{postId}",
    tag = "posts",
    summary = "Edit a post (its author only)",
    description = "With `If-Match`, only while the post is still at that version. Who may edit is checked before the version, so someone else gets 403 whatever the tag.",
    params(("postId" = String, Path, description = "The post's id"), IfMatchParam),
    request_body = PostBody,
    responses(
        (status = 200, description = "The edited post", body = PostView,
            headers(("ETag" = String, description = "The post's new version"))),
        (status = 403, description = "`userId` is not the post's author (also when it names no user)", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such post", body = Problem, content_type = "application/problem+json"),
        (status = 412, description = "The post changed since the version `If-Match` names", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn update_post(
    State(s): State<AppState>,
    caller: Caller,
    PathId(id): PathId,
    if_match: Option<IfMatch>,
    JsonBody(body): JsonBody<PostBody>,
) -> ApiResult<Response> {
    let user_id = caller.acts_as(body.user_id.as_deref())?;
    let title = Text::title(&body.title)?;
    let content = Text::post_content(&body.content)?;
    let tags = body.tags.as_deref().map(tags::parse_tags).transpose()?;
    let description = body
        .description
        .as_deref()
        .map(Text::description)
        .transpose()?;
    let post = read_post(&*s.store, &id).await?;
    if Authored::author_of(&post).as_deref() != Some(user_id.as_str()) {
        return Err(ApiError::Forbidden(format!(
            "only the author may edit post `{id}`"
        )));
    }
    let mut ops = vec![
        PatchOp::set("/title", title.as_str()),
        PatchOp::set("/content", content.as_str()),
        PatchOp::set("/updatedAt", crate::domain::now()),
    ];
    if let Some(tags) = tags {
        ops.push(PatchOp::set("/tags", tags));
    }
    if let Some(description) = description {
        ops.push(PatchOp::set("/description", description.as_str()));
    }
    let store = &*s.store;
    let post = match if_match.as_ref().and_then(IfMatch::etag) {
        Some(tag) => {
            super::stored::patch_if_match::<PostView>(store, Container::Posts, &id, post, tag, &ops)
                .await?
        }
        None => match store
            .patch(Container::Posts, id.as_str(), id.as_str(), &ops, None)
            .await
        {
            Ok(post) => post,
            Err(StoreError::NotFound) => return Err(ApiError::not_found("post", id.as_str())),
            Err(e) => return Err(e.into()),
        },
    };
    super::deletion::refuse_if_deleted(store, Container::Posts, &id, &post, Kind::Post).await?;
    super::answer::view_response::<PostView>(StatusCode::OK, post)
}

async fn read_post(store: &dyn Store, id: &Id) -> ApiResult<Value> {
    match store
        .read(Container::Posts, id.as_str(), id.as_str())
        .await?
    {
        Some(post) if is_live(&post, Kind::Post) => Ok(post),
        _ => Err(ApiError::not_found("post", id.as_str())),
    }
}

/// Q2 `GET /api/posts/{postId}`: one point read (conditional on `If-None-Match`); name and
/// counters are on the post.
#[utoipa::path(
    get,
    path = "/api/posts/{postId}",
    tag = "posts",
    summary = "Read a post with its author's username and both counts",
    params(("postId" = String, Path, description = "The post's id"), IfNoneMatchParam),
    responses(
        (status = 200, description = "The post", body = PostView,
            headers(
                ("ETag" = String, description = "The post's version (it changes with the counts too)"),
                ("Cache-Control" = String, description = "`no-cache`: revalidate with `If-None-Match`"),
            )),
        (status = 304, description = "The version `If-None-Match` names is current (no body)",
            headers(("ETag" = String, description = "The post's version"))),
        (status = 404, description = "No such post", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn get_post(
    State(s): State<AppState>,
    PathId(id): PathId,
    if_none_match: Option<IfNoneMatch>,
) -> ApiResult<Response> {
    let read = super::stored::read_item(&*s.store, Container::Posts, &id).await?;
    super::answer::item_response::<PostView>(read, |post| is_live(post, Kind::Post), if_none_match)?
        .ok_or_else(|| ApiError::not_found("post", id.as_str()))
}

/// `DELETE /api/posts/{postId}`: by its author; its comments and likes go with it.
#[utoipa::path(
    delete,
    path = "/api/posts/{postId}",
    tag = "posts",
    summary = "Delete a post with its comments and likes (its author only)",
    description = "The post answers 404 at once and leaves its author's posts, the feed and its tags' pages. Its comments and likes leave their lists at once too, up to 200 of them; beyond that, a page at a time shortly after (the change feed marks the rest without holding up other posts).",
    params(("postId" = String, Path, description = "The post's id")),
    responses(
        (status = 204, description = "The post is deleted"),
        (status = 403, description = "The signed-in caller is not the post's author", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such post (or it is deleted already)", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn delete_post(
    State(s): State<AppState>,
    caller: Caller,
    PathId(post_id): PathId,
) -> ApiResult<Response> {
    let store = &*s.store;
    let post = store
        .read(Container::Posts, post_id.as_str(), post_id.as_str())
        .await?
        .filter(|p| is_live(p, Kind::Post))
        .ok_or_else(|| ApiError::not_found("post", post_id.as_str()))?;
    let author = Authored::author_of(&post).unwrap_or_default();
    let author = author.as_str();
    caller.may_act_for(&[author], || {
        format!("only the author may delete post `{post_id}`")
    })?;
    cascade::post(store, post_id.as_str(), author).await?;
    crate::projection::tags::remove_copies_now(store, &post).await?;
    s.feed.forget();
    s.counts.forget();
    Ok(no_content())
}
