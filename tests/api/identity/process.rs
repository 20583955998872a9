//! The real binary: how it starts in each mode, and that its logs carry the acting user's id but
//! never a token or a principal.

use std::io::Read as _;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::issuer::{Issuer, SigningKey, AUDIENCE};
use crate::helpers::free_port;

struct Handler {
    child: Child,
    base: String,
}

impl Handler {
    /// Start `handler` with only `envs` (and a scratch store), wait until it answers.
    async fn start(dir: &std::path::Path, envs: &[(&str, String)]) -> Handler {
        let port = free_port();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_handler"));
        cmd.env_clear()
            .env("BLOG_DB_PATH", dir.join("blog.db"))
            .env("RUST_LOG", "info,blog=trace")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let hosted = envs
            .iter()
            .any(|(k, _)| *k == "FUNCTIONS_CUSTOMHANDLER_PORT");
        if hosted {
            cmd.env("FUNCTIONS_CUSTOMHANDLER_PORT", port.to_string());
        } else {
            cmd.env("PORT", port.to_string());
        }
        for (k, v) in envs {
            if *k != "FUNCTIONS_CUSTOMHANDLER_PORT" {
                cmd.env(k, v);
            }
        }
        let handler = Handler {
            child: cmd.spawn().expect("the handler starts"),
            base: format!("http://127.0.0.1:{port}"),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while reqwest::get(format!("{}/", handler.base)).await.is_err() {
            assert!(Instant::now() < deadline, "the handler never answered");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        handler
    }

    /// Stop it; its stdout and stderr together.
    fn stop(mut self) -> String {
        self.child.kill().expect("kill the handler we started");
        self.child.wait().unwrap();
        let mut out = String::new();
        self.child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        self.child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        out
    }
}

impl Drop for Handler {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn easyauth_standalone_refuses_to_start_naming_the_setting() {
    let out = Command::new(env!("CARGO_BIN_EXE_handler"))
        .env_clear()
        .env("PORT", free_port().to_string())
        .env("BLOG_AUTH", "easyauth")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stderr) + String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("BLOG_AUTH"), "{text}");
}

#[tokio::test]
async fn none_on_an_address_others_can_reach_refuses_to_start_naming_the_fix() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_handler"))
        .env_clear()
        .env("PORT", free_port().to_string())
        .env("BLOG_BIND", "0.0.0.0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the handler starts");
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("`BLOG_AUTH=none` on 0.0.0.0 started and kept running");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(!status.success(), "{status:?}");
    let mut text = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut text)
        .unwrap();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut text)
        .unwrap();
    assert!(text.contains("BLOG_AUTH"), "{text}");
    assert!(text.contains("BLOG_INSECURE_OPEN_WRITES=true"), "{text}");
}

#[tokio::test]
async fn none_warns_at_start_and_loudly_on_an_address_others_can_reach() {
    let dir = tempfile::tempdir().unwrap();
    let out = Handler::start(dir.path(), &[]).await.stop();
    let line = out
        .lines()
        .find(|l| l.contains("BLOG_AUTH=none"))
        .unwrap_or_else(|| panic!("no warning: {out}"));
    assert!(line.contains("WARN"), "{line}");

    let out = Handler::start(
        dir.path(),
        &[
            ("BLOG_BIND", "0.0.0.0".into()),
            ("BLOG_INSECURE_OPEN_WRITES", "true".into()),
        ],
    )
    .await
    .stop();
    let line = out
        .lines()
        .find(|l| l.contains("BLOG_AUTH=none"))
        .unwrap_or_else(|| panic!("no warning: {out}"));
    assert!(line.contains("ERROR") && line.contains("ANYONE"), "{line}");
}

#[tokio::test]
async fn jwt_logs_the_acting_user_but_never_the_token_or_subject() {
    let issuer = Issuer::start().await;
    let key = SigningKey::ec("ec-1");
    issuer.publish(&[&key]);
    let dir = tempfile::tempdir().unwrap();
    let h = Handler::start(
        dir.path(),
        &[
            ("BLOG_AUTH", "jwt".into()),
            ("BLOG_AUTH_ISSUER", issuer.issuer.clone()),
            ("BLOG_AUTH_AUDIENCE", AUDIENCE.into()),
        ],
    )
    .await;
    let subject = "subject-7f3e9a";
    let oid = "object-51c2d8";
    let token = key.sign(&issuer.claims(subject, json!({"oid": oid})));
    let client = reqwest::Client::new();
    let r = client
        .post(format!("{}/api/users", h.base))
        .bearer_auth(&token)
        .json(&json!({"username": "ana"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let user: Value = r.json().await.unwrap();
    // A refused one too: a tampered signature.
    let tampered = format!("{}AAAA", &token[..token.len() - 4]);
    let r = client
        .post(format!("{}/api/posts", h.base))
        .bearer_auth(&tampered)
        .json(&json!({"title": "t", "content": "c"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let out = h.stop();

    let user_id = user["id"].as_str().unwrap();
    assert!(
        out.lines()
            .any(|l| l.contains("request") && l.contains(user_id)),
        "the request line names the user: {out}"
    );
    let signature = token.rsplit('.').next().unwrap();
    for secret in [token.as_str(), tampered.as_str(), signature, subject, oid] {
        assert!(!out.contains(secret), "`{secret}` is in the logs: {out}");
    }
}

#[tokio::test]
async fn easyauth_under_the_host_logs_the_acting_user_but_never_the_principal() {
    let dir = tempfile::tempdir().unwrap();
    // Under the host Easy Auth is the default.
    let h = Handler::start(
        dir.path(),
        &[
            ("FUNCTIONS_CUSTOMHANDLER_PORT", String::new()),
            ("BLOG_STORE", "embedded".into()),
        ],
    )
    .await;
    let pid = "principal-90ab12";
    let principal = base64::Engine::encode(
        &base64::engine::general_purpose::STANDARD,
        json!({"auth_typ": "aad", "claims": [{"typ": "name", "val": "Ana Secret-Name"}]})
            .to_string(),
    );
    let client = reqwest::Client::new();
    let anonymous = client
        .post(format!("{}/api/users", h.base))
        .json(&json!({"username": "ana"}))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
    let r = client
        .post(format!("{}/api/users", h.base))
        .header("X-MS-CLIENT-PRINCIPAL-IDP", "aad")
        .header("X-MS-CLIENT-PRINCIPAL-ID", pid)
        .header("X-MS-CLIENT-PRINCIPAL", &principal)
        .json(&json!({"username": "ana"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let user: Value = r.json().await.unwrap();
    let out = h.stop();

    let user_id = user["id"].as_str().unwrap();
    assert!(
        out.lines()
            .any(|l| l.contains("request") && l.contains(user_id)),
        "{out}"
    );
    for secret in [pid, principal.as_str(), "Secret-Name"] {
        assert!(!out.contains(secret), "`{secret}` is in the logs: {out}");
    }
}

/// Register `name` through the Conduit API at `base`: its token.
async fn register(client: &reqwest::Client, base: &str, name: &str) -> String {
    let r = client
        .post(format!("{base}/api/conduit/api/users"))
        .json(
            &json!({"user": {"username": name, "email": format!("{name}@example.com"),
            "password": "password-5e1f"}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let body: Value = r.json().await.unwrap();
    body["user"]["token"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn local_starts_on_any_address_keeps_its_key_and_logs_no_token() {
    let dir = tempfile::tempdir().unwrap();
    let envs = [
        ("BLOG_AUTH", "local".to_string()),
        ("BLOG_BIND", "0.0.0.0".to_string()),
    ];
    let h = Handler::start(dir.path(), &envs).await;
    let client = reqwest::Client::new();
    let token = register(&client, &h.base, "ana").await;
    let r = client
        .post(format!("{}/api/posts", h.base))
        .bearer_auth(&token)
        .json(&json!({"title": "t", "content": "c"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let post: Value = r.json().await.unwrap();
    let out = h.stop();
    let user_id = post["userId"].as_str().unwrap();
    assert!(
        out.lines()
            .any(|l| l.contains("request") && l.contains(user_id)),
        "the request line names the user: {out}"
    );
    for secret in [token.as_str(), "password-5e1f"] {
        assert!(!out.contains(secret), "`{secret}` is in the logs: {out}");
    }
    assert!(!out.contains("ANYONE"), "{out}");

    // The key is kept beside the database, so the token outlives the process.
    let h = Handler::start(dir.path(), &envs).await;
    let me = client
        .get(format!("{}/api/me", h.base))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(me.status(), 200);
    let me: Value = me.json().await.unwrap();
    assert_eq!(me["id"], user_id);
    h.stop();
}

#[tokio::test]
async fn local_under_the_host_checks_tokens_with_blog_token_key() {
    let dir = tempfile::tempdir().unwrap();
    let (key, der) = blog::auth::local::TokenKey::generate();
    let text = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, der);
    let h = Handler::start(
        dir.path(),
        &[
            ("FUNCTIONS_CUSTOMHANDLER_PORT", String::new()),
            ("BLOG_STORE", "embedded".into()),
            ("BLOG_AUTH", "local".into()),
            ("BLOG_TOKEN_KEY", text.clone()),
        ],
    )
    .await;
    let client = reqwest::Client::new();
    let config: Value = client
        .get(format!("{}/api/config", h.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(config["auth"], "local");
    let token = register(&client, &h.base, "bo").await;
    let r = client
        .post(format!("{}/api/posts", h.base))
        .header("Authorization", format!("Token {token}"))
        .json(&json!({"title": "t", "content": "c"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    // A token the configured key signed proves its account (which has no user yet: 404); one
    // signed by any other key proves nothing (401).
    let me = |t: String| {
        let client = client.clone();
        let url = format!("{}/api/me", h.base);
        async move { client.get(url).bearer_auth(t).send().await.unwrap() }
    };
    assert_eq!(me(key.issue("no-user-yet")).await.status(), 404);
    let (other, _) = blog::auth::local::TokenKey::generate();
    let refused = me(other.issue("no-user-yet")).await;
    assert_eq!(refused.status(), 401);
    assert!(refused.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .starts_with("Bearer error=\"invalid_token\""));
    let out = h.stop();
    assert!(!out.contains(&text), "the key is in the logs");
}
