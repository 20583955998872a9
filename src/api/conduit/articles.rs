//! Articles (posts) and their favorites (likes): create, read, update, delete, favorite.
//!
//! Slugs: `<title's words>-<post id>`. A slug resolves by the post id at its end (one point
//! read), so duplicate titles are allowed, no guard is needed, and a slug made from an earlier
//! title still resolves; a post written before slugs has one derived the same way.

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::body::{body_object, string_field};
use super::errors::{error, native, store_error, unprocessable, FromApi as _};
use super::profiles::{follows, profile_of};
use super::{Account, Result, Signed, Viewer};
use crate::api::{AppState, JsonBody, PathId, PathIds};
use crate::domain::{is_live, Id, Kind, Like, User};
use crate::store::Container;

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
pub(super) fn post_id_of(slug: &str) -> Option<Id> {
    let n = slug.len();
    if n > 36 && slug.is_char_boundary(n - 36) {
        let tail = &slug[n - 36..];
        if uuid::Uuid::parse_str(tail).is_ok() && slug[..n - 36].ends_with('-') {
            return Id::parse("slug", tail).ok();
        }
    }
    Id::parse("slug", slug).ok()
}

pub(super) fn not_found(what: &str) -> Response {
    error(StatusCode::NOT_FOUND, what, "not found")
}

pub(super) fn post_id(slug: &str) -> Result<Id> {
    post_id_of(slug).ok_or_else(|| not_found("article"))
}

/// A post as the native API answers it (full or short form).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Shown {
    pub(super) post_id: String,
    pub(super) user_id: String,
    pub(super) user_username: String,
    pub(super) title: String,
    #[serde(default)]
    pub(super) description: Option<String>,
    pub(super) content: String,
    #[serde(default)]
    pub(super) like_count: u64,
    pub(super) creation_date: String,
    #[serde(default)]
    pub(super) updated_at: Option<String>,
    #[serde(default)]
    pub(super) tags: Vec<String>,
}

pub(super) fn shown(v: &Value) -> Result<Shown> {
    Shown::deserialize(v).map_err(|e| {
        Response::from_api(
            crate::error::ApiError::internal(format!("a post does not read as one: {e}")),
            "article",
        )
    })
}

/// What the answers say of the viewer and of the authors they show, each read once a request.
pub(super) struct Context<'a> {
    s: &'a AppState,
    viewer: Option<Id>,
    authors: HashMap<String, Value>,
}

impl<'a> Context<'a> {
    pub(super) fn new(s: &'a AppState, viewer: Option<&Account>) -> Self {
        Context {
            s,
            viewer: viewer.map(Account::user_id),
            authors: HashMap::new(),
        }
    }

    /// The author's profile (their current name, bio, image; whether the viewer follows them).
    pub(super) async fn author(&mut self, p: &Shown) -> Result<Value> {
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
    pub(super) async fn article(&mut self, p: &Shown, full: bool) -> Result<Value> {
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
pub(super) async fn read_post(s: &AppState, id: &Id) -> Result<Shown> {
    let answer = crate::api::posts::get_post(State(s.clone()), PathId(id.clone()), None).await;
    let (_, v) = super::errors::native(answer, "article").await?;
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
pub(super) fn not_blank(m: &Map<String, Value>, field: &str) -> Result<Option<String>> {
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
    super::own_writes::wait(&s).await;
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
    super::own_writes::wait(&s).await;
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
    super::own_writes::wait(&s).await;
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
    super::own_writes::wait(&s).await;
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
    super::own_writes::wait(&s).await;
    article_answer(&s, Some(&account), &id, StatusCode::OK).await
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
