//! The fan-out limit (`BLOG_TIMELINE_FANOUT_LIMIT`), on the real binary: the limit is a setting
//! of the process, so it is tested on a process of its own.

use std::process::Child;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::helpers::{id, next_millisecond};
use crate::process::spawn_handler;

struct Handler {
    child: Child,
    base: String,
    client: reqwest::Client,
}

impl Drop for Handler {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Handler {
    async fn start(db: &std::path::Path, fanout_limit: &str) -> Handler {
        let settings = [("BLOG_TIMELINE_FANOUT_LIMIT", fanout_limit)];
        let (child, base) = spawn_handler(db, &settings).await;
        Handler {
            child,
            base,
            client: crate::helpers::client(),
        }
    }

    async fn send(&self, method: &str, path: &str, body: Option<Value>) -> (u16, u32, Value) {
        let mut req = self
            .client
            .request(method.parse().unwrap(), format!("{}{path}", self.base));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let r = req.send().await.unwrap();
        let status = r.status().as_u16();
        let ops = r
            .headers()
            .get("x-store-operations")
            .and_then(|v| v.to_str().ok()?.parse().ok())
            .unwrap_or(u32::MAX);
        let text = r.text().await.unwrap();
        (
            status,
            ops,
            serde_json::from_str(&text).unwrap_or(Value::Null),
        )
    }

    async fn user(&self, name: &str) -> String {
        let (status, _, body) = self
            .send("POST", "/api/users", Some(json!({ "username": name })))
            .await;
        assert_eq!(status, 201);
        id(&body)
    }

    async fn post(&self, user: &str, title: &str) -> String {
        let body = json!({ "userId": user, "title": title, "content": "c" });
        let (status, _, body) = self.send("POST", "/api/posts", Some(body)).await;
        assert_eq!(status, 201);
        id(&body)
    }

    async fn follow(&self, user: &str, followee: &str, method: &str) {
        let path = format!("/api/users/{user}/following/{followee}");
        assert_eq!(self.send(method, &path, None).await.0, 204);
    }

    /// The timeline's post ids and the store operations its read used.
    async fn timeline(&self, user: &str) -> (Vec<String>, u32) {
        let (status, ops, body) = self
            .send("GET", &format!("/api/users/{user}/timeline"), None)
            .await;
        assert_eq!(status, 200);
        let ids = body["items"].as_array().unwrap().iter().map(id).collect();
        (ids, ops)
    }

    async fn until(&self, what: &str, user: &str, want: (Vec<String>, u32)) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let got = self.timeline(user).await;
            if got == want {
                return;
            }
            assert!(Instant::now() < deadline, "{what}: {got:?}, not {want:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authors_over_the_fanout_limit_are_merged_when_read() {
    let dir = tempfile::tempdir().unwrap();
    let app = Handler::start(&dir.path().join("blog.db"), "2").await;
    let (ana, bob, cy, dee) = (
        app.user("ana").await,
        app.user("bob").await,
        app.user("cy").await,
        app.user("dee").await,
    );
    let c1 = app.post(&cy, "by cy").await;
    next_millisecond().await;
    let a1 = app.post(&ana, "by ana").await;

    // cy: two followers, at the limit: copied, one operation.
    app.follow(&ana, &cy, "PUT").await;
    app.follow(&dee, &cy, "PUT").await;
    app.until("copied", &ana, (vec![c1.clone()], 1)).await;
    // A third follower takes cy over the limit: the timelines merge cy's posts in, one more
    // operation each; ana (one follower) is still copied into bob's.
    app.follow(&bob, &cy, "PUT").await;
    app.follow(&bob, &ana, "PUT").await;
    app.until("merged for ana", &ana, (vec![c1.clone()], 2))
        .await;
    app.until("merged for bob", &bob, (vec![a1.clone(), c1.clone()], 2))
        .await;
    // A post by a merged author is read where it is.
    next_millisecond().await;
    let c2 = app.post(&cy, "again by cy").await;
    app.until("new post merged", &ana, (vec![c2.clone(), c1.clone()], 2))
        .await;
    // Back to two followers, the limit: not below 80% of it, so still merged.
    app.follow(&bob, &cy, "DELETE").await;
    app.until("bob unfollowed cy", &bob, (vec![a1.clone()], 1))
        .await;
    app.until("still merged", &ana, (vec![c2.clone(), c1.clone()], 2))
        .await;
    // One follower, below 80% of the limit: copied again, one operation.
    app.follow(&dee, &cy, "DELETE").await;
    app.until("copied again", &ana, (vec![c2.clone(), c1.clone()], 1))
        .await;
}
