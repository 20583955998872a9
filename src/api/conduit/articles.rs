//! Articles (posts), their favorites (likes) and comments, the lists and the feed (the personal
//! timeline), and the tags.
//!
//! Slugs: `<title's words>-<post id>`. A slug resolves by the post id at its end (one point
//! read), so duplicate titles are allowed, no guard is needed, and a slug made from an earlier
//! title still resolves; a post written before slugs has one derived the same way.
//!
//! Store operations of a list page of `limit` articles (docs/conduit.md): the source's query
//! (one per 100 articles up to `offset + limit`), one count in the same partition, one point
//! read to find a user by username (`author`, `favorited`), and per article shown at most one
//! point read of the viewer's like (signed in) and, per author shown, one of the author and one
//! of the viewer's follow edge (signed in): at most 4 + 3 × `limit` for `limit` ≤ 100 and
//! `offset` < 100.

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::{Path, Query as QueryParams, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::users::{by_username, follows, profile_of};
use super::{
    body_object, error, invalid, native, own_writes, store_error, string_field, unprocessable,
    Account, FromApi as _, Result, Signed, Viewer,
};
use crate::api::{AppState, JsonBody, Paging, PathId, PathIds};
use crate::domain::favorites::FAVORITE;
use crate::domain::{is_live, tags, Comment, Id, Kind, Like, User};
use crate::store::{Container, Order, Query};

/// Lists read at most this deep (`offset + limit`): the native lists' page size, and the most
/// a personal timeline or the global list holds.
pub const MAX_DEPTH: usize = 100;
/// A post's comments answered at most (the oldest first).
pub const MAX_COMMENTS: usize = 500;

/// The slug of a post titled `title` with id `id`.
pub fn slug(title: &str, id: &str) -> String {
    let mut words = String::new();
    for c in title.chars().flat_map(char::to_lowercase) {
        if c.is_alphanumeric() {
            words.push(c);
        } else if !words.ends_with('-') && !words.is_empty() {
            words.push('-');
        }
        if words.chars().count() >= 60 {
            break;
        }
    }
    let words = words.trim_end_matches('-');
    if words.is_empty() {
        id.to_string()
    } else {
        format!("{words}-{id}")
    }
}

/// The post id a slug names: the id at its end (a 36-character UUID), or the whole slug (an
/// id without title words).
fn post_id_of(slug: &str) -> Option<Id> {
    let n = slug.len();
    if n > 36 && slug.is_char_boundary(n - 36) {
        let tail = &slug[n - 36..];
        if uuid::Uuid::parse_str(tail).is_ok() && slug[..n - 36].ends_with('-') {
            return Id::parse("slug", tail).ok();
        }
    }
    Id::parse("slug", slug).ok()
}

fn not_found(what: &str) -> Response {
    error(StatusCode::NOT_FOUND, what, "not found")
}

fn post_id(slug: &str) -> Result<Id> {
    post_id_of(slug).ok_or_else(|| not_found("article"))
}

/// A post as the native API answers it (full or short form).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Shown {
    post_id: String,
    user_id: String,
    user_username: String,
    title: String,
    #[serde(default)]
    description: Option<String>,
    content: String,
    #[serde(default)]
    like_count: u64,
    creation_date: String,
    #[serde(default)]
    updated_at: Option<String>,
    #[serde(default)]
    tags: Vec<String>,
}

fn shown(v: &Value) -> Result<Shown> {
    Shown::deserialize(v).map_err(|e| {
        Response::from_api(
            crate::error::ApiError::internal(format!("a post does not read as one: {e}")),
            "article",
        )
    })
}

/// What the answers say of the viewer and of the authors they show, each read once a request.
struct Context<'a> {
    s: &'a AppState,
    viewer: Option<Id>,
    authors: HashMap<String, Value>,
}

impl<'a> Context<'a> {
    fn new(s: &'a AppState, viewer: Option<&Account>) -> Self {
        Context {
            s,
            viewer: viewer.map(Account::user_id),
            authors: HashMap::new(),
        }
    }

    /// The author's profile (their current name, bio, image; whether the viewer follows them).
    async fn author(&mut self, p: &Shown) -> Result<Value> {
        if let Some(a) = self.authors.get(&p.user_id) {
            return Ok(a.clone());
        }
        let store = &*self.s.store;
        let user = store
            .read(Container::Users, &p.user_id, &p.user_id)
            .await
            .map_err(|e| store_error(e, "article"))?
            .filter(|u| is_live(u, Kind::User))
            .and_then(|u| User::deserialize(&u).ok());
        let following = match &self.viewer {
            Some(v) => follows(self.s, v, &p.user_id).await?,
            None => false,
        };
        let profile = match user {
            Some(u) => profile_of(&u, following),
            None => json!({
                "username": p.user_username, "bio": null, "image": null, "following": following,
            }),
        };
        self.authors.insert(p.user_id.clone(), profile.clone());
        Ok(profile)
    }

    /// Whether the viewer likes the post (one point read of their like).
    async fn favorited(&self, post_id: &str) -> Result<bool> {
        let Some(v) = &self.viewer else {
            return Ok(false);
        };
        let like = self
            .s
            .store
            .read(Container::Posts, post_id, &Like::id_of(v.as_str()))
            .await
            .map_err(|e| store_error(e, "article"))?;
        Ok(like.is_some_and(|l| is_live(&l, Kind::Like)))
    }

    /// The article of a post; with its body when `full`.
    async fn article(&mut self, p: &Shown, full: bool) -> Result<Value> {
        let author = self.author(p).await?;
        let favorited = self.favorited(&p.post_id).await?;
        let description = p.description.clone().unwrap_or_else(|| {
            crate::domain::short_content(p.content.lines().next().unwrap_or_default())
        });
        let mut a = json!({
            "slug": slug(&p.title, &p.post_id),
            "title": p.title,
            "description": description,
            "tagList": p.tags,
            "createdAt": p.creation_date,
            "updatedAt": p.updated_at.clone().unwrap_or_else(|| p.creation_date.clone()),
            "favorited": favorited,
            "favoritesCount": p.like_count,
            "author": author,
        });
        if full {
            a["body"] = p.content.clone().into();
        }
        Ok(a)
    }
}

/// The post `id` as the native API answers it (404 `article` when there is none).
async fn read_post(s: &AppState, id: &Id) -> Result<Shown> {
    let answer = crate::api::posts::get_post(State(s.clone()), PathId(id.clone()), None).await;
    let (_, v) = super::native(answer, "article").await?;
    shown(&v)
}

async fn article_answer(
    s: &AppState,
    viewer: Option<&Account>,
    id: &Id,
    status: StatusCode,
) -> Result<Response> {
    let post = read_post(s, id).await?;
    let article = Context::new(s, viewer).article(&post, true).await?;
    Ok((status, Json(json!({ "article": article }))).into_response())
}

/// `tagList` of a body: absent, or a list of strings (null is refused when `null_refused`).
fn tag_list(m: &Map<String, Value>, null_refused: bool) -> Result<Option<Vec<String>>> {
    match m.get("tagList") {
        None => Ok(None),
        Some(Value::Null) if null_refused => Err(unprocessable("tagList", "can't be null")),
        Some(Value::Null) => Ok(None),
        Some(Value::Array(a)) => a
            .iter()
            .map(|t| {
                t.as_str()
                    .map(String::from)
                    .ok_or_else(|| unprocessable("tagList", "must be a list of strings"))
            })
            .collect::<Result<Vec<_>>>()
            .map(Some),
        Some(_) => Err(unprocessable("tagList", "must be a list of strings")),
    }
}

/// A text field that may not be blank when given.
fn not_blank(m: &Map<String, Value>, field: &str) -> Result<Option<String>> {
    match string_field(m, field, false)? {
        Some(t) if t.trim().is_empty() => Err(unprocessable(field, "can't be blank")),
        other => Ok(other),
    }
}

/// `POST /api/conduit/api/articles`.
pub async fn create(
    State(s): State<AppState>,
    Signed(account): Signed,
    body: Bytes,
) -> Result<Response> {
    let m = body_object(&body, "article")?;
    let required = |f: &str| -> Result<String> {
        not_blank(&m, f)?.ok_or_else(|| unprocessable(f, "can't be blank"))
    };
    let title = required("title")?;
    let description = required("description")?;
    let content = required("body")?;
    let tags = tag_list(&m, false)?;
    let body = crate::api::posts::PostBody {
        user_id: None,
        title,
        description: Some(description),
        content,
        tags,
    };
    let answer =
        crate::api::posts::create_post(State(s.clone()), account.caller(), JsonBody(body)).await;
    let (_, created) = native(answer, "article").await?;
    let post = shown(&created)?;
    own_writes(&s).await;
    let article = Context::new(&s, Some(&account))
        .article(&post, true)
        .await?;
    Ok((StatusCode::CREATED, Json(json!({ "article": article }))).into_response())
}

/// `GET /api/conduit/api/articles/{slug}`.
pub async fn get(
    State(s): State<AppState>,
    Viewer(viewer): Viewer,
    Path(slug): Path<String>,
) -> Result<Response> {
    let id = post_id(&slug)?;
    article_answer(&s, viewer.as_ref(), &id, StatusCode::OK).await
}

/// `PUT /api/conduit/api/articles/{slug}`: what is given changes; an absent `tagList` keeps the
/// tags, `[]` removes them, null is refused.
pub async fn update(
    State(s): State<AppState>,
    Signed(account): Signed,
    Path(slug): Path<String>,
    body: Bytes,
) -> Result<Response> {
    let id = post_id(&slug)?;
    let m = body_object(&body, "article")?;
    let title = not_blank(&m, "title")?;
    let description = not_blank(&m, "description")?;
    let content = not_blank(&m, "body")?;
    let tags = tag_list(&m, true)?;
    let now = read_post(&s, &id).await?;
    let body = crate::api::posts::PostBody {
        user_id: None,
        title: title.unwrap_or(now.title),
        description,
        content: content.unwrap_or(now.content),
        tags,
    };
    let answer = crate::api::posts::update_post(
        State(s.clone()),
        account.caller(),
        PathId(id.clone()),
        None,
        JsonBody(body),
    )
    .await;
    let (_, updated) = native(answer, "article").await?;
    let post = shown(&updated)?;
    own_writes(&s).await;
    let article = Context::new(&s, Some(&account))
        .article(&post, true)
        .await?;
    Ok(Json(json!({ "article": article })).into_response())
}

/// `DELETE /api/conduit/api/articles/{slug}`.
pub async fn remove(
    State(s): State<AppState>,
    Signed(account): Signed,
    Path(slug): Path<String>,
) -> Result<Response> {
    let id = post_id(&slug)?;
    let answer =
        crate::api::posts::delete_post(State(s.clone()), account.caller(), PathId(id)).await;
    native(answer, "article").await?;
    own_writes(&s).await;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `POST /api/conduit/api/articles/{slug}/favorite`.
pub async fn favorite(
    State(s): State<AppState>,
    Signed(account): Signed,
    Path(slug): Path<String>,
) -> Result<Response> {
    let id = post_id(&slug)?;
    let body = crate::api::likes::LikeBody { user_id: None };
    let answer = crate::api::likes::create_like(
        State(s.clone()),
        account.caller(),
        PathId(id.clone()),
        JsonBody(body),
    )
    .await;
    native(answer, "article").await?;
    own_writes(&s).await;
    article_answer(&s, Some(&account), &id, StatusCode::OK).await
}

/// `DELETE /api/conduit/api/articles/{slug}/favorite`.
pub async fn unfavorite(
    State(s): State<AppState>,
    Signed(account): Signed,
    Path(slug): Path<String>,
) -> Result<Response> {
    let id = post_id(&slug)?;
    read_post(&s, &id).await?;
    let answer = crate::api::likes::delete_like(
        State(s.clone()),
        account.caller(),
        PathIds(id.clone(), account.user_id()),
    )
    .await;
    native(answer, "article").await?;
    own_writes(&s).await;
    article_answer(&s, Some(&account), &id, StatusCode::OK).await
}

/// A comment as the native API answers it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ShownComment {
    id: String,
    user_id: String,
    user_username: String,
    content: String,
    creation_date: String,
}

async fn comment_answer(ctx: &mut Context<'_>, c: &ShownComment) -> Result<Value> {
    let as_post = Shown {
        post_id: String::new(),
        user_id: c.user_id.clone(),
        user_username: c.user_username.clone(),
        title: String::new(),
        description: None,
        content: String::new(),
        like_count: 0,
        creation_date: c.creation_date.clone(),
        updated_at: None,
        tags: Vec::new(),
    };
    Ok(json!({
        "id": Comment::number_of(&c.id),
        "createdAt": c.creation_date,
        "updatedAt": c.creation_date,
        "body": c.content,
        "author": ctx.author(&as_post).await?,
    }))
}

/// A post's live comments, oldest first, at most [`MAX_COMMENTS`].
async fn post_comments(s: &AppState, id: &Id) -> Result<Vec<ShownComment>> {
    let mut out = Vec::new();
    let mut continuation = None;
    while out.len() < MAX_COMMENTS {
        let paging = Paging {
            limit: Paging::MAX_LIMIT,
            continuation: continuation.take(),
        };
        let answer =
            crate::api::comments::list_comments(State(s.clone()), PathId(id.clone()), paging).await;
        let (_, page) = native(answer, "comment").await?;
        for item in page["items"].as_array().into_iter().flatten() {
            if let Ok(c) = ShownComment::deserialize(item) {
                out.push(c);
            }
        }
        match page["continuationToken"].as_str() {
            Some(t) => continuation = Some(t.to_string()),
            None => break,
        }
    }
    out.truncate(MAX_COMMENTS);
    Ok(out)
}

/// `GET /api/conduit/api/articles/{slug}/comments`.
pub async fn comments(
    State(s): State<AppState>,
    Viewer(viewer): Viewer,
    Path(slug): Path<String>,
) -> Result<Response> {
    let id = post_id(&slug)?;
    read_post(&s, &id).await?;
    let list = post_comments(&s, &id).await?;
    let mut ctx = Context::new(&s, viewer.as_ref());
    let mut out = Vec::with_capacity(list.len());
    for c in &list {
        out.push(comment_answer(&mut ctx, c).await?);
    }
    Ok(Json(json!({ "comments": out })).into_response())
}

/// `POST /api/conduit/api/articles/{slug}/comments`.
pub async fn comment(
    State(s): State<AppState>,
    Signed(account): Signed,
    Path(slug): Path<String>,
    body: Bytes,
) -> Result<Response> {
    let id = post_id(&slug)?;
    let m = body_object(&body, "comment")?;
    let content = not_blank(&m, "body")?.ok_or_else(|| unprocessable("body", "can't be blank"))?;
    let body = crate::api::comments::CommentBody {
        user_id: None,
        content,
    };
    let answer = crate::api::comments::create_comment(
        State(s.clone()),
        account.caller(),
        PathId(id),
        JsonBody(body),
    )
    .await;
    let (_, created) = native(answer, "article").await?;
    let c = ShownComment::deserialize(&created).map_err(|e| {
        Response::from_api(crate::error::ApiError::internal(e.to_string()), "comment")
    })?;
    let mut ctx = Context::new(&s, Some(&account));
    let answer = comment_answer(&mut ctx, &c).await?;
    Ok((StatusCode::CREATED, Json(json!({ "comment": answer }))).into_response())
}

/// `DELETE /api/conduit/api/articles/{slug}/comments/{id}`: by its author or the article's.
pub async fn uncomment(
    State(s): State<AppState>,
    Signed(account): Signed,
    Path((slug, number)): Path<(String, String)>,
) -> Result<Response> {
    let id = post_id(&slug)?;
    read_post(&s, &id).await?;
    let number: u64 = number.parse().map_err(|_| not_found("comment"))?;
    // A numbered comment is one point read away; one stored before numbers is found by its
    // number among the post's comments.
    let numbered = Comment::id_of_number(number);
    let stored = s
        .store
        .read(Container::Posts, id.as_str(), &numbered)
        .await
        .map_err(|e| store_error(e, "comment"))?
        .filter(|c| is_live(c, Kind::Comment));
    let comment_id = match stored {
        Some(_) => numbered,
        None => post_comments(&s, &id)
            .await?
            .into_iter()
            .find(|c| Comment::number_of(&c.id) == number)
            .map(|c| c.id)
            .ok_or_else(|| not_found("comment"))?,
    };
    let comment_id = Id::parse("comment", &comment_id).map_err(invalid)?;
    let answer = crate::api::comments::delete_comment(
        State(s.clone()),
        account.caller(),
        PathIds(id, comment_id),
    )
    .await;
    native(answer, "comment").await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `GET /api/conduit/api/tags`: the tags carried by at least one post, the newest used first.
pub async fn tags(State(s): State<AppState>) -> Result<Response> {
    let paging = Paging {
        limit: Paging::MAX_LIMIT,
        continuation: None,
    };
    let answer = crate::api::tags::list_tags(State(s.clone()), paging).await;
    let (_, page) = native(answer, "tags").await?;
    let names: Vec<Value> = page["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["tag"].as_str().map(Value::from))
        .collect();
    Ok(Json(json!({ "tags": names })).into_response())
}

/// The list parameters.
#[derive(Debug, Default, Deserialize)]
pub struct ListParams {
    tag: Option<String>,
    author: Option<String>,
    favorited: Option<String>,
    limit: Option<String>,
    offset: Option<String>,
}

/// `limit` (1 to 100, 20 when absent) and `offset` (0 or more).
fn window(p: &ListParams) -> Result<(usize, usize)> {
    let limit = match &p.limit {
        None => 20,
        Some(l) => l
            .parse::<usize>()
            .ok()
            .filter(|l| (1..=MAX_DEPTH).contains(l))
            .ok_or_else(|| unprocessable("limit", "must be a whole number from 1 to 100"))?,
    };
    let offset = match &p.offset {
        None => 0,
        Some(o) => o
            .parse::<usize>()
            .map_err(|_| unprocessable("offset", "must be a whole number, 0 or more"))?,
    };
    Ok((limit, offset))
}

/// Posts a native list answers, page after page, until `want` are read or it ends.
async fn read_list<F, Fut>(want: usize, mut page: F) -> Result<Vec<Shown>>
where
    F: FnMut(Paging) -> Fut,
    Fut: std::future::Future<Output = crate::error::ApiResult<Response>>,
{
    let mut out = Vec::new();
    let mut continuation = None;
    while out.len() < want {
        let paging = Paging {
            limit: (want - out.len()).min(MAX_DEPTH) as u32,
            continuation: continuation.take(),
        };
        let (_, v) = native(page(paging).await, "articles").await?;
        for item in v["items"].as_array().into_iter().flatten() {
            out.push(shown(item)?);
        }
        match v["continuationToken"].as_str() {
            Some(t) => continuation = Some(t.to_string()),
            None => break,
        }
    }
    Ok(out)
}

async fn count(s: &AppState, c: Container, q: &Query) -> Result<u64> {
    s.store
        .count(c, q)
        .await
        .map_err(|e| store_error(e, "articles"))
}

/// The page `[offset, offset + limit)` of `posts` as articles, with the count.
async fn list_answer(
    s: &AppState,
    viewer: Option<&Account>,
    posts: Vec<Shown>,
    offset: usize,
    limit: usize,
    total: u64,
) -> Result<Response> {
    let mut ctx = Context::new(s, viewer);
    let mut articles = Vec::new();
    for p in posts.iter().skip(offset).take(limit) {
        articles.push(ctx.article(p, false).await?);
    }
    Ok(Json(json!({ "articles": articles, "articlesCount": total })).into_response())
}

/// `GET /api/conduit/api/articles`: newest first, by `author`, `favorited` (a username) or
/// `tag`, or all of the newest posts.
pub async fn list(
    State(s): State<AppState>,
    Viewer(viewer): Viewer,
    QueryParams(p): QueryParams<ListParams>,
) -> Result<Response> {
    let (limit, offset) = window(&p)?;
    let want = (offset + limit).min(MAX_DEPTH);
    let empty = || Json(json!({ "articles": [], "articlesCount": 0 })).into_response();
    let (mut posts, total) = if let Some(author) = &p.author {
        let Some(user) = by_username(&*s.store, author).await? else {
            return Ok(empty());
        };
        let id = Id::parse("author", &user.user_id).map_err(invalid)?;
        let posts = read_list(want, |paging| {
            crate::api::users::list_user_posts(State(s.clone()), PathId(id.clone()), paging)
        })
        .await?;
        let q = Query::partition(id.as_str()).of_kind(Kind::Post);
        (posts, count(&s, Container::Users, &q).await?)
    } else if let Some(fan) = &p.favorited {
        let Some(user) = by_username(&*s.store, fan).await? else {
            return Ok(empty());
        };
        let q = Query::partition(user.user_id.as_str()).eq(Kind::FIELD, FAVORITE);
        let total = count(&s, Container::Users, &q).await?;
        let edges = s
            .store
            .query(
                Container::Users,
                &q.order_by_creation(Order::Desc).limit(want as u32),
            )
            .await
            .map_err(|e| store_error(e, "articles"))?;
        let mut posts = Vec::new();
        for edge in &edges.items {
            let Some(pid) = edge["postId"]
                .as_str()
                .and_then(|p| Id::parse("post", p).ok())
            else {
                continue;
            };
            match read_post(&s, &pid).await {
                Ok(post) => posts.push(post),
                // A post deleted since: its like went with it.
                Err(resp) if resp.status() == StatusCode::NOT_FOUND => {}
                Err(resp) => return Err(resp),
            }
        }
        (posts, total)
    } else if let Some(tag) = &p.tag {
        let Ok(tag) = tags::parse_tag("tag", tag) else {
            return Ok(empty());
        };
        let posts = read_list(want, |paging| {
            crate::api::tags::list_tag_posts(
                State(s.clone()),
                crate::api::tags::PathTag(tag.clone()),
                paging,
            )
        })
        .await?;
        let q = Query::partition(tags::partition(&tag));
        (posts, count(&s, Container::Feed, &q).await?)
    } else {
        let posts = read_list(want, |paging| {
            crate::api::feed::get_feed(State(s.clone()), HeaderMap::new(), paging)
        })
        .await?;
        let q = Query::partition(Kind::Post.as_str()).of_kind(Kind::Post);
        (posts, count(&s, Container::Feed, &q).await?)
    };
    // More than one filter: the first one's list, narrowed by the others.
    if p.author.is_some() || p.favorited.is_some() {
        if let Some(tag) = &p.tag {
            let tag = tag.to_lowercase();
            posts.retain(|post| post.tags.contains(&tag));
        }
    }
    if p.favorited.is_some() {
        if let Some(author) = &p.author {
            posts.retain(|post| post.user_username.eq_ignore_ascii_case(author));
        }
    }
    list_answer(&s, viewer.as_ref(), posts, offset, limit, total).await
}

/// `GET /api/conduit/api/articles/feed`: the newest articles of the authors the caller follows.
pub async fn feed(
    State(s): State<AppState>,
    Signed(account): Signed,
    QueryParams(p): QueryParams<ListParams>,
) -> Result<Response> {
    let (limit, offset) = window(&p)?;
    let me = account.user_id();
    let posts = read_list(MAX_DEPTH, |paging| {
        crate::api::timeline::get_timeline(State(s.clone()), PathId(me.clone()), paging)
    })
    .await?;
    let total = posts.len() as u64;
    list_answer(&s, Some(&account), posts, offset, limit, total).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slug_resolves_by_its_id_whatever_its_words() {
        let id = Id::new();
        let s = slug("Hello, World! Ça va?", id.as_str());
        assert_eq!(s, format!("hello-world-ça-va-{id}"));
        assert_eq!(post_id_of(&s), Some(id.clone()));
        assert_eq!(post_id_of(&format!("other-words-{id}")), Some(id.clone()));
        assert_eq!(post_id_of(id.as_str()), Some(id.clone()));
        assert_eq!(slug("!!!", id.as_str()), id.to_string());
        assert_eq!(
            post_id_of("unknown-slug-123"),
            Id::parse("s", "unknown-slug-123").ok()
        );
        assert_eq!(post_id_of("a/b"), None);
    }
}
