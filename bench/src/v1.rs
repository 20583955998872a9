//! The article's first version (V1), answered on the same data: posts, comments and likes in
//! `posts` without any denormalized field, users in `users`, no copies. Whatever a response
//! needs beyond an item is aggregated at read time, exactly as the article's V1 section does:
//!
//! - C1–C4: one plain create each (no author lookup, no counter).
//! - Q1: a point read of the user.
//! - Q2: read the post, then three queries: the author's name in `users` and the counts of
//!   comments and of likes in the post's partition.
//! - Q3: a cross-partition query on `posts` for the user's posts, then per post the author's
//!   name and both counts.
//! - Q4 / Q5: the comments / likes in the post's partition, then per item its author's name.
//! - Q6: a cross-partition query on `posts` for the newest posts ordered by `creationDate`,
//!   then per post the author's name and both counts.
//!
//! Like the article, a name is looked up with a query (`SELECT * FROM u WHERE u.id = …`, one
//! partition), not a point read. The denormalized fields the data carries are ignored.

use anyhow::Context as _;
use blog::api::views::{CommentView, LikeView, PostSummaryView, PostView, UserView, View};
use blog::domain::{self, short_content, Comment, Kind, Like, Post, User};
use blog::store::{Container, Order, Query, Store};
use serde::Serialize;
use serde_json::{json, Value};

/// The V1 shape of an item: the V2/V3 denormalized fields removed.
fn v1_item(mut v: Value) -> Value {
    if let Some(o) = v.as_object_mut() {
        for f in ["userUsername", "commentCount", "likeCount"] {
            o.remove(f);
        }
    }
    v
}

/// A stored item, completed with what V1 aggregates, as the product answers it: its view.
fn answer<V: View + Serialize>(item: Value) -> anyhow::Result<Value> {
    Ok(serde_json::to_value(V::from_stored(item)?)?)
}

fn str_of<'a>(v: &'a Value, field: &str) -> &'a str {
    v.get(field).and_then(Value::as_str).unwrap_or_default()
}

/// C1: create the user.
pub async fn create_user(store: &dyn Store, user: &User) -> anyhow::Result<Value> {
    Ok(store
        .create(Container::Users, &user.user_id, domain::to_value(user))
        .await?)
}

/// Q1: read the user.
pub async fn get_user(store: &dyn Store, user_id: &str) -> anyhow::Result<Value> {
    let user = store
        .read(Container::Users, user_id, user_id)
        .await?
        .context("no such user")?;
    answer::<UserView>(user)
}

/// C2: create the post as is: no author lookup, no name, no counters.
pub async fn create_post(store: &dyn Store, post: &Post) -> anyhow::Result<Value> {
    Ok(store
        .create(
            Container::Posts,
            &post.post_id,
            v1_item(domain::to_value(post)),
        )
        .await?)
}

/// C3: create the comment as is.
pub async fn create_comment(store: &dyn Store, comment: &Comment) -> anyhow::Result<Value> {
    Ok(store
        .create(
            Container::Posts,
            &comment.post_id,
            v1_item(domain::to_value(comment)),
        )
        .await?)
}

/// C4: create the like as is.
pub async fn create_like(store: &dyn Store, like: &Like) -> anyhow::Result<Value> {
    Ok(store
        .create(
            Container::Posts,
            &like.post_id,
            v1_item(domain::to_value(like)),
        )
        .await?)
}

/// The user's name: a query in the user's partition of `users`.
async fn username(store: &dyn Store, user_id: &str) -> anyhow::Result<Value> {
    let q = Query::partition(user_id).eq("id", user_id).limit(1);
    let page = store.query(Container::Users, &q).await?;
    Ok(page
        .items
        .first()
        .and_then(|u| u.get("username"))
        .cloned()
        .unwrap_or(Value::Null))
}

async fn count(store: &dyn Store, post_id: &str, kind: Kind) -> anyhow::Result<u64> {
    let q = Query::partition(post_id).of_kind(kind);
    Ok(store.count(Container::Posts, &q).await?)
}

/// A post as V1 answers it: the stored item plus the aggregated name and counts.
async fn aggregate(store: &dyn Store, post: Value, short: bool) -> anyhow::Result<Value> {
    let post_id = str_of(&post, "postId").to_string();
    let name = username(store, str_of(&post, "userId")).await?;
    let comments = count(store, &post_id, Kind::Comment).await?;
    let likes = count(store, &post_id, Kind::Like).await?;
    let mut post = v1_item(post);
    if let Some(o) = post.as_object_mut() {
        if short {
            let content = short_content(o.get("content").and_then(Value::as_str).unwrap_or(""));
            o.insert("content".into(), content.into());
        }
        o.insert("userUsername".into(), name);
        o.insert("commentCount".into(), comments.into());
        o.insert("likeCount".into(), likes.into());
    }
    if short {
        answer::<PostSummaryView>(post)
    } else {
        answer::<PostView>(post)
    }
}

/// Q2: read the post, then its author's name and both counts.
pub async fn get_post(store: &dyn Store, post_id: &str) -> anyhow::Result<Value> {
    let post = store
        .read(Container::Posts, post_id, post_id)
        .await?
        .context("no such post")?;
    aggregate(store, post, false).await
}

async fn aggregate_all(store: &dyn Store, posts: Vec<Value>) -> anyhow::Result<Value> {
    let mut items = Vec::with_capacity(posts.len());
    for p in posts {
        items.push(aggregate(store, p, true).await?);
    }
    Ok(json!({ "items": items }))
}

/// Q3: the user's posts (a query across every partition of `posts`), each aggregated.
pub async fn user_posts(store: &dyn Store, user_id: &str, limit: u32) -> anyhow::Result<Value> {
    let q = Query::cross_partition()
        .of_kind(Kind::Post)
        .eq("userId", user_id)
        .order_by_creation(Order::Desc)
        .limit(limit);
    let page = store.query(Container::Posts, &q).await?;
    aggregate_all(store, page.items).await
}

/// Q4 / Q5: the post's comments or likes, oldest first, each with its author's name.
async fn in_post(
    store: &dyn Store,
    post_id: &str,
    kind: Kind,
    limit: u32,
) -> anyhow::Result<Value> {
    let q = Query::partition(post_id)
        .of_kind(kind)
        .order_by_creation(Order::Asc)
        .limit(limit);
    let page = store.query(Container::Posts, &q).await?;
    let mut items = Vec::with_capacity(page.items.len());
    for item in page.items {
        let name = username(store, str_of(&item, "userId")).await?;
        let mut item = v1_item(item);
        if let Some(o) = item.as_object_mut() {
            o.insert("userUsername".into(), name);
        }
        items.push(match kind {
            Kind::Like => answer::<LikeView>(item)?,
            _ => answer::<CommentView>(item)?,
        });
    }
    Ok(json!({ "items": items }))
}

pub async fn comments(store: &dyn Store, post_id: &str, limit: u32) -> anyhow::Result<Value> {
    in_post(store, post_id, Kind::Comment, limit).await
}

pub async fn likes(store: &dyn Store, post_id: &str, limit: u32) -> anyhow::Result<Value> {
    in_post(store, post_id, Kind::Like, limit).await
}

/// Q6: the newest posts (a query across every partition of `posts`, ordered by date), each
/// aggregated.
pub async fn feed(store: &dyn Store, limit: u32) -> anyhow::Result<Value> {
    let q = Query::cross_partition()
        .of_kind(Kind::Post)
        .order_by_creation(Order::Desc)
        .limit(limit);
    let page = store.query(Container::Posts, &q).await?;
    aggregate_all(store, page.items).await
}
