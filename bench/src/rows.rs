//! The article's rows, one function each: Q1–Q6 on the data as loaded, then C1–C4. Each
//! measures V3 over HTTP and V1 against the store on the same drawn inputs.

use anyhow::bail;
use blog::domain::{self, Comment, Id, Kind, Like, Post, User, Username};
use rand::RngExt;
use serde_json::{json, Value};

use crate::dataset;
use crate::measure::Req;
use crate::results::Row;
use crate::runner::Bench;
use crate::v1;

/// Q3–Q5 ask for this many items: every post of a user (≤ 50), comment (≤ 25) and like
/// (≤ 100) in one page, as the article lists them all.
const LIST_LIMIT: u32 = 100;

impl Bench {
    /// Q1–Q6, on the data as loaded.
    pub async fn reads(&mut self) -> anyhow::Result<[Row; 6]> {
        Ok([
            self.q1().await?,
            self.q2().await?,
            self.q3().await?,
            self.q4().await?,
            self.q5().await?,
            self.q6().await?,
        ])
    }

    /// C1–C4, letting the change feed settle after each row so that its work is not charged
    /// to the next. C4's likes are by the users C1 created, each version's by its own.
    /// Also returns V3's likes, for D1 to take back.
    pub async fn writes(&mut self) -> anyhow::Result<([Row; 4], Vec<Value>)> {
        let (c1, v1_users, v3_users) = self.c1().await?;
        let c2 = self.c2().await?;
        let c3 = self.c3().await?;
        let (c4, v3_likes) = self.c4(&v1_users, &v3_users).await?;
        Ok(([c1, c2, c3, c4], v3_likes))
    }

    /// D1–D4, V3 only (the article has no deletes): unlike (C4's likes), delete a comment,
    /// delete a post with its comments and likes, erase an account. What is deleted is made for
    /// the purpose first (not measured), so the loaded data the other measurements draw from
    /// stays as it was.
    pub async fn deletes(&mut self, likes: &[Value]) -> anyhow::Result<[Row; 4]> {
        let n = self.n();
        let str_of = |v: &Value, f: &str| v[f].as_str().unwrap_or_default().to_string();
        let reqs = likes
            .iter()
            .take(n)
            .map(|l| {
                Req::delete(format!(
                    "/api/posts/{}/likes/{}",
                    str_of(l, "postId"),
                    str_of(l, "userId")
                ))
            })
            .collect();
        let d1 = self.row_v3("D1", "Unlike a post", reqs).await?;

        let (posts, authors) = (self.posts(n), self.users(n));
        let mut reqs = Vec::with_capacity(n);
        for i in 0..n {
            let body = json!({ "userId": authors[i].id, "content": "to be deleted" });
            let c = self
                .client
                .send(&Req::post(
                    format!("/api/posts/{}/comments", posts[i]),
                    body,
                ))
                .await?
                .body;
            reqs.push(Req::delete(format!(
                "/api/posts/{}/comments/{}",
                posts[i],
                str_of(&c, "id")
            )));
        }
        self.settle().await?;
        let d2 = self.row_v3("D2", "Delete a comment", reqs).await?;

        // Posts like the article's average: a few comments and likes each.
        let (authors, fans) = (self.users(n), self.users(3 * n));
        let mut reqs = Vec::with_capacity(n);
        for i in 0..n {
            let body = json!({ "userId": authors[i].id, "title": "to be deleted", "content": "c" });
            let p = self.client.send(&Req::post("/api/posts", body)).await?.body;
            let p = str_of(&p, "id");
            for fan in &fans[3 * i..3 * i + 3] {
                let body = json!({ "userId": fan.id, "content": "c" });
                let path = format!("/api/posts/{p}/comments");
                self.client.send(&Req::post(path, body)).await?;
                let path = format!("/api/posts/{p}/likes");
                self.client
                    .send(&Req::post(path, json!({ "userId": fan.id })))
                    .await?;
            }
            reqs.push(Req::delete(format!("/api/posts/{p}")));
        }
        self.settle().await?;
        let d3 = self.row_v3("D3", "Delete a post", reqs).await?;

        // Accounts with two posts (each commented by another user) and three comments and a
        // like on other posts.
        let (others, targets) = (self.users(2 * n), self.posts(4 * n));
        let mut reqs = Vec::with_capacity(n);
        for i in 0..n {
            let body = json!({ "username": format!("leaving-{i}") });
            let u = self.client.send(&Req::post("/api/users", body)).await?.body;
            let u = str_of(&u, "id");
            for other in &others[2 * i..2 * i + 2] {
                let body = json!({ "userId": u, "title": "mine", "content": "c" });
                let p = self.client.send(&Req::post("/api/posts", body)).await?.body;
                let path = format!("/api/posts/{}/comments", str_of(&p, "id"));
                let body = json!({ "userId": other.id, "content": "c" });
                self.client.send(&Req::post(path, body)).await?;
            }
            for t in &targets[4 * i..4 * i + 3] {
                let body = json!({ "userId": u, "content": "c" });
                let path = format!("/api/posts/{t}/comments");
                self.client.send(&Req::post(path, body)).await?;
            }
            let path = format!("/api/posts/{}/likes", targets[4 * i + 3]);
            self.client
                .send(&Req::post(path, json!({ "userId": u })))
                .await?;
            reqs.push(Req::delete(format!("/api/users/{u}")));
        }
        self.settle().await?;
        let d4 = self.row_v3("D4", "Erase an account", reqs).await?;
        Ok([d1, d2, d3, d4])
    }

    /// Q1: retrieve a user.
    async fn q1(&mut self) -> anyhow::Result<Row> {
        let store = self.store.clone();
        let users = self.users(self.n());
        let reqs = users
            .iter()
            .map(|u| Req::get(format!("/api/users/{}", u.id)))
            .collect();
        let (row, _, _) = self
            .row("Q1", "Retrieve a user", reqs, |i| {
                let (store, id) = (store.clone(), users[i].id.clone());
                async move { v1::get_user(&*store, &id).await }
            })
            .await?;
        Ok(row)
    }

    /// Q2: retrieve a post.
    async fn q2(&mut self) -> anyhow::Result<Row> {
        let store = self.store.clone();
        let posts = self.posts(self.n());
        let reqs = posts
            .iter()
            .map(|p| Req::get(format!("/api/posts/{p}")))
            .collect();
        let (row, _, _) = self
            .row("Q2", "Retrieve a post", reqs, |i| {
                let (store, id) = (store.clone(), posts[i].clone());
                async move { v1::get_post(&*store, &id).await }
            })
            .await?;
        Ok(row)
    }

    /// Q3: list a user's posts in short form.
    async fn q3(&mut self) -> anyhow::Result<Row> {
        let store = self.store.clone();
        let limit = LIST_LIMIT;
        let users = self.users(self.n());
        let reqs = users
            .iter()
            .map(|u| Req::get(format!("/api/users/{}/posts?limit={limit}", u.id)))
            .collect();
        let (row, _, _) = self
            .row("Q3", "List a user's posts in short form", reqs, |i| {
                let (store, id) = (store.clone(), users[i].id.clone());
                async move { v1::user_posts(&*store, &id, limit).await }
            })
            .await?;
        Ok(row)
    }

    /// Q4: list a post's comments.
    async fn q4(&mut self) -> anyhow::Result<Row> {
        let store = self.store.clone();
        let limit = LIST_LIMIT;
        let posts = self.posts(self.n());
        let reqs = posts
            .iter()
            .map(|p| Req::get(format!("/api/posts/{p}/comments?limit={limit}")))
            .collect();
        let (row, _, _) = self
            .row("Q4", "List a post's comments", reqs, |i| {
                let (store, id) = (store.clone(), posts[i].clone());
                async move { v1::comments(&*store, &id, limit).await }
            })
            .await?;
        Ok(row)
    }

    /// Q5: list a post's likes.
    async fn q5(&mut self) -> anyhow::Result<Row> {
        let store = self.store.clone();
        let limit = LIST_LIMIT;
        let posts = self.posts(self.n());
        let reqs = posts
            .iter()
            .map(|p| Req::get(format!("/api/posts/{p}/likes?limit={limit}")))
            .collect();
        let (row, _, _) = self
            .row("Q5", "List a post's likes", reqs, |i| {
                let (store, id) = (store.clone(), posts[i].clone());
                async move { v1::likes(&*store, &id, limit).await }
            })
            .await?;
        Ok(row)
    }

    /// Q6: list the newest posts in short form (the feed).
    async fn q6(&mut self) -> anyhow::Result<Row> {
        let store = self.store.clone();
        let feed_limit = self.args.feed_limit;
        let reqs = (0..self.n())
            .map(|_| Req::get(format!("/api/feed?limit={feed_limit}")))
            .collect();
        let (row, _, _) = self
            .row(
                "Q6",
                "List the x most recent posts in short form (feed)",
                reqs,
                |_| {
                    let store = store.clone();
                    async move { v1::feed(&*store, feed_limit).await }
                },
            )
            .await?;
        Ok(row)
    }

    /// C1: create a user. Returns the row and the users each version created.
    async fn c1(&mut self) -> anyhow::Result<(Row, Vec<Value>, Vec<Value>)> {
        let store = self.store.clone();
        let names: Vec<String> = (0..self.n())
            .map(|i| format!("bench{}-{i}", self.rng.random_range(0..1000u32)))
            .collect();
        let reqs = names
            .iter()
            .map(|name| Req::post("/api/users", json!({ "username": name })))
            .collect();
        self.row("C1", "Create a user", reqs, |i| {
            let (store, name) = (store.clone(), names[i].clone());
            async move {
                let user = User::new(&Id::new(), &Username::parse(&name)?);
                v1::create_user(&*store, &user).await
            }
        })
        .await
    }

    /// C2: create a post.
    async fn c2(&mut self) -> anyhow::Result<Row> {
        let n = self.n();
        let store = self.store.clone();
        let authors = self.users(n);
        let texts: Vec<(String, String)> =
            (0..n).map(|_| dataset::post_text(&mut self.rng)).collect();
        let reqs = authors
            .iter()
            .zip(&texts)
            .map(|(u, (title, content))| {
                Req::post(
                    "/api/posts",
                    json!({ "userId": u.id, "title": title, "content": content }),
                )
            })
            .collect();
        let (row, _, _) = self
            .row("C2", "Create a post", reqs, |i| {
                let store = store.clone();
                let (author, (title, content)) = (authors[i].clone(), texts[i].clone());
                async move {
                    let id = Id::new();
                    let post = Post {
                        id: id.to_string(),
                        kind: Kind::Post,
                        post_id: id.to_string(),
                        user_id: author.id,
                        user_username: String::new(),
                        title,
                        description: None,
                        content,
                        comment_count: 0,
                        like_count: 0,
                        creation_date: domain::now(),
                        updated_at: None,
                        bookmark_count: 0,
                        tags: Vec::new(),
                    };
                    v1::create_post(&*store, &post).await
                }
            })
            .await?;
        Ok(row)
    }

    /// C3: create a comment.
    async fn c3(&mut self) -> anyhow::Result<Row> {
        let n = self.n();
        let store = self.store.clone();
        let (posts, authors) = (self.posts(n), self.users(n));
        let texts: Vec<String> = (0..n)
            .map(|_| dataset::comment_text(&mut self.rng))
            .collect();
        let reqs = (0..n)
            .map(|i| {
                Req::post(
                    format!("/api/posts/{}/comments", posts[i]),
                    json!({ "userId": authors[i].id, "content": texts[i] }),
                )
            })
            .collect();
        let (row, _, _) = self
            .row("C3", "Create a comment", reqs, |i| {
                let store = store.clone();
                let comment = Comment {
                    id: Id::new().to_string(),
                    kind: Kind::Comment,
                    post_id: posts[i].clone(),
                    user_id: authors[i].id.clone(),
                    user_username: String::new(),
                    content: texts[i].clone(),
                    creation_date: domain::now(),
                };
                async move { v1::create_comment(&*store, &comment).await }
            })
            .await?;
        Ok(row)
    }

    /// C4: like a post, by users no one has liked it with yet (each version's C1 users), so
    /// every like is a first like (201). Returns V3's likes too.
    async fn c4(
        &mut self,
        v1_users: &[Value],
        v3_users: &[Value],
    ) -> anyhow::Result<(Row, Vec<Value>)> {
        let n = self.n();
        let store = self.store.clone();
        let id_of = |v: &Value| v["id"].as_str().unwrap_or_default().to_string();
        let v3_likers: Vec<String> = v3_users.iter().map(id_of).collect();
        let v1_likers: Vec<String> = v1_users.iter().map(id_of).collect();
        let posts = self.posts(n);
        let reqs = (0..n)
            .map(|i| {
                Req::post(
                    format!("/api/posts/{}/likes", posts[i]),
                    json!({ "userId": v3_likers[i] }),
                )
            })
            .collect();
        let (row, _, v3_likes) = self
            .row("C4", "Like a post", reqs, |i| {
                let store = store.clone();
                let like = Like {
                    id: Like::id_of(&v1_likers[i]),
                    kind: Kind::Like,
                    post_id: posts[i].clone(),
                    user_id: v1_likers[i].clone(),
                    user_username: String::new(),
                    creation_date: domain::now(),
                };
                async move { v1::create_like(&*store, &like).await }
            })
            .await?;
        if v3_likes.iter().any(|l| l["userUsername"].is_null()) {
            bail!("a V3 like came back without its author's name");
        }
        Ok((row, v3_likes))
    }
}
