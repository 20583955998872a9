//! An article's comments: list, create, delete. A comment is addressed by its number (an
//! integer below 2^53): a numbered comment is one point read away, one stored before comments
//! were numbered is found by its number among the post's comments.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::articles::{not_blank, not_found, post_id, read_post, Context, Shown};
use super::body::body_object;
use super::errors::{invalid, native, store_error, unprocessable, FromApi as _};
use super::{Account, Result, Signed, Viewer};
use crate::api::{AppState, JsonBody, Paging, PathId, PathIds};
use crate::domain::{is_live, Comment, Id, Kind};
use crate::store::Container;

/// A post's comments answered at most (the oldest first).
pub const MAX_COMMENTS: usize = 500;

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

/// A post's live comments, oldest first, at most [`MAX_COMMENTS`], without those of the users
/// `reader` muted.
async fn post_comments(s: &AppState, id: &Id, reader: Option<Id>) -> Result<Vec<ShownComment>> {
    let mut out = Vec::new();
    let mut continuation = None;
    while out.len() < MAX_COMMENTS {
        let paging = Paging {
            limit: Paging::MAX_LIMIT,
            continuation: continuation.take(),
        };
        let answer = crate::api::comments::comments_read_by(
            State(s.clone()),
            PathId(id.clone()),
            reader.clone(),
            paging,
        )
        .await;
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
    let list = post_comments(&s, &id, viewer.as_ref().map(Account::user_id)).await?;
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
        None => post_comments(&s, &id, None)
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
