//! `BLOG_AUTH=local`: accounts registered through the Conduit API write to the native API with
//! the token it gave them, written once and run on each store (`identity_local_suite!`).

use blog::auth::local::TokenKey;
use blog::auth::Auth;
use blog::settings::{AuthMode, AuthSettings};
use serde_json::{json, Value};

use crate::helpers::{id, Fixture, TestApp};

#[macro_export]
macro_rules! identity_local_suite {
    ($fixture:path) => {
        $crate::identity_local_suite!(@tests $fixture;
            local_accounts_write_natively_with_their_token,
            local_refuses_forged_tokens_and_anonymous_writes_with_401,
            local_writes_act_only_as_the_account);
    };
    (@tests $fixture:path; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                $crate::identity::local::$name($fixture().await).await;
            }
        )*
    };
}

/// The app with `BLOG_AUTH=local` (and, as always here, the Conduit API).
async fn local_app(fixture: Fixture) -> TestApp {
    let auth = Auth::new(&AuthSettings {
        mode: AuthMode::Local,
        ..AuthSettings::default()
    });
    TestApp::spawn_with_auth(fixture, false, auth).await
}

/// Register `name` through the Conduit API: its token.
async fn register(app: &TestApp, name: &str) -> String {
    let r = app
        .post(
            "/api/conduit/api/users",
            json!({"user": {"username": name, "email": format!("{name}@example.com"),
                "password": "password123"}}),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    r.body["user"]["token"].as_str().unwrap().to_string()
}

/// A request with `Authorization: <scheme> <token>`.
async fn with_scheme(
    app: &TestApp,
    method: &str,
    path: &str,
    scheme: &str,
    token: &str,
    body: Value,
) -> crate::helpers::Resp {
    let req = app
        .client
        .request(method.parse().unwrap(), app.url(path))
        .header("Authorization", format!("{scheme} {token}"));
    let req = if body.is_null() { req } else { req.json(&body) };
    app.send(req).await
}

pub async fn local_accounts_write_natively_with_their_token(fixture: Fixture) {
    let app = local_app(fixture).await;
    let cfg = app.get("/api/config").await;
    assert_eq!(
        cfg.body,
        json!({"auth": "local", "issuer": null, "clientId": null, "scopes": []})
    );
    let token = register(&app, "ana").await;

    // The account's user is the caller's own: `GET /api/me` answers it.
    let me = app.as_bearer("GET", "/api/me", &token, Value::Null).await;
    assert_eq!(me.status, 200, "{:?}", me.body);
    assert_eq!(me.body["username"], "ana");
    let ana_id = id(&me.body);

    // A native write with the token as `Bearer`, and as `Token` (what RealWorld clients send).
    let post = app
        .as_bearer(
            "POST",
            "/api/posts",
            &token,
            json!({"title": "native", "content": "written with a local account"}),
        )
        .await;
    assert_eq!(post.status, 201, "{:?}", post.body);
    assert_eq!(post.body["userId"], ana_id.as_str());
    assert_eq!(post.body["userUsername"], "ana");
    let p = id(&post.body);
    let like = with_scheme(
        &app,
        "POST",
        &format!("/api/posts/{p}/likes"),
        "Token",
        &token,
        json!({}),
    )
    .await;
    assert_eq!(like.status, 201, "{:?}", like.body);
    assert_eq!(like.body["userId"], ana_id.as_str());

    // Reads stay anonymous.
    let read = app.get(&format!("/api/posts/{p}")).await;
    assert_eq!(read.status, 200, "{:?}", read.body);
    assert_eq!(read.body["title"], "native");

    // Signing in again gives another token for the same account, which writes as the same user.
    let login = app
        .post(
            "/api/conduit/api/users/login",
            json!({"user": {"email": "ana@example.com", "password": "password123"}}),
        )
        .await;
    assert_eq!(login.status, 200, "{:?}", login.body);
    let again = login.body["user"]["token"].as_str().unwrap();
    let c = app
        .as_bearer(
            "POST",
            &format!("/api/posts/{p}/comments"),
            again,
            json!({"content": "hi"}),
        )
        .await;
    assert_eq!(c.status, 201, "{:?}", c.body);
    assert_eq!(c.body["userId"], ana_id.as_str());

    // The account already has its user: a native `POST /api/users` is a conflict naming it.
    let r = app
        .as_bearer("POST", "/api/users", &token, json!({"username": "other"}))
        .await;
    r.assert_problem(409);
    assert!(r.body["detail"].as_str().unwrap().contains(&ana_id));
}

pub async fn local_refuses_forged_tokens_and_anonymous_writes_with_401(fixture: Fixture) {
    let app = local_app(fixture).await;
    let token = register(&app, "bo").await;
    let before = app.get("/api/feed").await.items().len();

    // Anonymous: 401 asking for a bearer token, before anything is written.
    let r = app
        .post("/api/posts", json!({"title": "t", "content": "c"}))
        .await;
    r.assert_problem(401);
    assert_eq!(r.header("www-authenticate"), Some("Bearer"));
    assert!(
        r.body["detail"]
            .as_str()
            .unwrap()
            .contains("/api/conduit/api/users/login"),
        "{:?}",
        r.body
    );
    let r = app.get("/api/me").await;
    r.assert_problem(401);
    assert_eq!(r.header("www-authenticate"), Some("Bearer"));

    // A token another key signed (the same claims, for the same subject shape), a token whose
    // signature was cut off and garbage: 401 `invalid_token`, nothing written.
    let (other, _) = TokenKey::generate();
    let forged = other.issue("some-account");
    let unsigned = token.rsplit_once('.').unwrap().0.to_string() + ".";
    for bad in [forged.as_str(), unsigned.as_str(), "not-a-token"] {
        for scheme in ["Bearer", "Token"] {
            let r = with_scheme(
                &app,
                "POST",
                "/api/posts",
                scheme,
                bad,
                json!({"title": "forged", "content": "c"}),
            )
            .await;
            r.assert_problem(401);
            let challenge = r.header("www-authenticate").unwrap_or_default();
            assert!(
                challenge.starts_with("Bearer error=\"invalid_token\""),
                "{scheme} {bad}: {challenge}"
            );
        }
        app.as_bearer("GET", "/api/me", bad, Value::Null)
            .await
            .assert_problem(401);
    }
    // The right claims under another algorithm (HS256, as a forger knowing no key might try).
    let header = super::issuer::b64(br#"{"alg":"HS256","typ":"JWT"}"#);
    let claims = super::issuer::b64(
        json!({"iss": "blog:local", "aud": "blog", "sub": "x",
            "exp": super::issuer::now() + 600})
        .to_string()
        .as_bytes(),
    );
    let hs = format!("{header}.{claims}.c2ln");
    app.as_bearer("GET", "/api/me", &hs, Value::Null)
        .await
        .assert_problem(401);

    // Reads stay anonymous, and the refused writes wrote nothing.
    let feed = app.get("/api/feed").await;
    assert_eq!(feed.status, 200);
    assert_eq!(feed.items().len(), before);
    let me = app.as_bearer("GET", "/api/me", &token, Value::Null).await;
    assert_eq!(me.status, 200, "{:?}", me.body);
}

pub async fn local_writes_act_only_as_the_account(fixture: Fixture) {
    let app = local_app(fixture).await;
    let (ana, bob) = (register(&app, "ana").await, register(&app, "bob").await);
    let ana_id = id(&app
        .as_bearer("GET", "/api/me", &ana, Value::Null)
        .await
        .body);
    let bob_id = id(&app
        .as_bearer("GET", "/api/me", &bob, Value::Null)
        .await
        .body);
    assert_ne!(ana_id, bob_id);
    let post = app
        .as_bearer(
            "POST",
            "/api/posts",
            &ana,
            json!({"title": "t", "content": "c"}),
        )
        .await;
    assert_eq!(post.status, 201, "{:?}", post.body);
    let p = id(&post.body);
    // Another account's post, name or `userId`: 403.
    app.as_bearer(
        "PUT",
        &format!("/api/posts/{p}"),
        &bob,
        json!({"title": "defaced", "content": "x"}),
    )
    .await
    .assert_problem(403);
    app.as_bearer(
        "PUT",
        &format!("/api/users/{ana_id}"),
        &bob,
        json!({"username": "mallory"}),
    )
    .await
    .assert_problem(403);
    app.as_bearer(
        "POST",
        "/api/posts",
        &bob,
        json!({"userId": ana_id, "title": "as ana", "content": "c"}),
    )
    .await
    .assert_problem(403);
    assert_eq!(app.get(&format!("/api/posts/{p}")).await.body["title"], "t");
}
