//! Identity as a client sees it, written once and run on each store (`identity_suite!`).

use blog::auth::Auth;
use blog::settings::{AuthMode, AuthSettings};
use serde_json::{json, Value};

use super::issuer::{b64, now, sign_hs256, Issuer, SigningKey, AUDIENCE};
use crate::helpers::{eventually, id, Fixture, Resp, TestApp};

#[macro_export]
macro_rules! identity_suite {
    ($fixture:path) => {
        $crate::identity_suite!(@tests $fixture;
            jwt_one_user_per_identity_and_me, jwt_writes_act_as_the_caller,
            jwt_writes_without_a_valid_identity_are_401_and_write_nothing,
            jwt_keys_are_fetched_lazily_and_again_when_they_rotate,
            jwt_issuer_down_refuses_writes_with_503_and_reads_still_work,
            easyauth_principals_act_as_themselves,
            easyauth_trusts_no_header_when_app_service_authentication_is_off,
            none_mode_is_as_before, jwt_deletes_are_the_owners_own,
            jwt_writes_are_limited_per_signed_in_caller,
            jwt_writes_need_the_write_scope_when_one_is_set,
            jwt_id_tokens_are_refused_even_for_the_audience,
            jwt_bookmarks_are_listed_only_to_their_owner);
    };
    (@tests $fixture:path; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                $crate::identity::suite::$name($fixture().await).await;
            }
        )*
    };
}

pub fn jwt_auth(issuer: &Issuer, jwks_url: Option<String>) -> Auth {
    Auth::new(&AuthSettings {
        jwks_url,
        ..jwt_settings(issuer)
    })
}

/// The settings of `BLOG_AUTH=jwt` trusting `issuer` (through discovery).
fn jwt_settings(issuer: &Issuer) -> AuthSettings {
    AuthSettings {
        mode: AuthMode::Jwt,
        issuer: Some(issuer.issuer.clone()),
        audience: Some(AUDIENCE.into()),
        client_id: Some("spa-client-id".into()),
        scopes: vec![format!("{AUDIENCE}/Blog.Write")],
        ..AuthSettings::default()
    }
}

/// An issuer publishing an RS256 and an ES256 key, and the app trusting it (through discovery).
async fn jwt_app(fixture: Fixture) -> (TestApp, Issuer, SigningKey, SigningKey) {
    let issuer = Issuer::start().await;
    let rsa = SigningKey::rsa("rsa-1");
    let ec = SigningKey::ec("ec-1");
    issuer.publish(&[&rsa, &ec]);
    let app = TestApp::spawn_with_auth(fixture, false, jwt_auth(&issuer, None)).await;
    (app, issuer, rsa, ec)
}

impl TestApp {
    /// A request with `Authorization: Bearer <token>`.
    pub async fn as_bearer(&self, method: &str, path: &str, token: &str, body: Value) -> Resp {
        let req = self
            .client
            .request(method.parse().unwrap(), self.url(path))
            .bearer_auth(token);
        let req = if body.is_null() { req } else { req.json(&body) };
        self.send(req).await
    }

    /// A request with the headers App Service authentication sets for `(idp, principal id)`.
    pub async fn as_principal(
        &self,
        method: &str,
        path: &str,
        principal: (&str, &str),
        body: Value,
    ) -> Resp {
        let (idp, pid) = principal;
        let claims = json!({"auth_typ": idp, "claims": [
            {"typ": "http://schemas.microsoft.com/identity/claims/objectidentifier", "val": pid},
            {"typ": "name", "val": "Someone"}]});
        let encoded = base64::Engine::encode(
            &base64::engine::general_purpose::STANDARD,
            claims.to_string(),
        );
        let req = self
            .client
            .request(method.parse().unwrap(), self.url(path))
            .header("X-MS-CLIENT-PRINCIPAL-IDP", idp)
            .header("X-MS-CLIENT-PRINCIPAL-ID", pid)
            .header("X-MS-CLIENT-PRINCIPAL", encoded);
        let req = if body.is_null() { req } else { req.json(&body) };
        self.send(req).await
    }
}

#[track_caller]
fn created(r: &Resp) -> String {
    assert_eq!(r.status, 201, "{:?}", r.body);
    id(&r.body)
}

pub async fn jwt_one_user_per_identity_and_me(fixture: Fixture) {
    let (app, issuer, rsa, ec) = jwt_app(fixture).await;
    let ana = issuer.token(&rsa, "ana-subject");

    let r = app.get("/api/me").await;
    r.assert_problem(401);
    assert_eq!(r.header("www-authenticate"), Some("Bearer"));
    app.as_bearer("GET", "/api/me", &ana, Value::Null)
        .await
        .assert_problem(404);

    let r = app
        .as_bearer("POST", "/api/users", &ana, json!({"username": "ana"}))
        .await;
    let ana_id = created(&r);
    assert_eq!(
        r.header("location"),
        Some(format!("/api/users/{ana_id}").as_str())
    );
    // A second user for the same identity: 409 naming the first, and nothing changes.
    let again = app
        .as_bearer("POST", "/api/users", &ana, json!({"username": "other"}))
        .await;
    again.assert_problem(409);
    assert!(
        again.body["detail"].as_str().unwrap().contains(&ana_id),
        "{:?}",
        again.body
    );
    let me = app.as_bearer("GET", "/api/me", &ana, Value::Null).await;
    assert_eq!(me.status, 200, "{:?}", me.body);
    assert_eq!(me.body["id"], ana_id.as_str());
    assert_eq!(me.body["username"], "ana");
    assert_eq!(me.store_operations(), 1, "one point read");

    // ES256 works the same; another subject is another user.
    let bob = issuer.token(&ec, "bob-subject");
    let bob_id = created(
        &app.as_bearer("POST", "/api/users", &bob, json!({"username": "bob"}))
            .await,
    );
    assert_ne!(bob_id, ana_id);
    let me = app.as_bearer("GET", "/api/me", &bob, Value::Null).await;
    assert_eq!(me.body["id"], bob_id.as_str());

    // `oid` wins over `sub` (Microsoft Entra ID's `sub` differs per application).
    let with_oid = |sub: &str| rsa.sign(&issuer.claims(sub, json!({"oid": "object-1"})));
    let first = created(
        &app.as_bearer(
            "POST",
            "/api/users",
            &with_oid("pairwise-a"),
            json!({"username": "cy"}),
        )
        .await,
    );
    let me = app
        .as_bearer("GET", "/api/me", &with_oid("pairwise-b"), Value::Null)
        .await;
    assert_eq!(me.body["id"], first.as_str());
}

pub async fn jwt_writes_act_as_the_caller(fixture: Fixture) {
    let (app, issuer, rsa, ec) = jwt_app(fixture).await;
    let ana = issuer.token(&rsa, "ana");
    let bob = issuer.token(&ec, "bob");
    let nobody = issuer.token(&rsa, "no-user-yet");
    let ana_id = created(
        &app.as_bearer("POST", "/api/users", &ana, json!({"username": "ana"}))
            .await,
    );
    let bob_id = created(
        &app.as_bearer("POST", "/api/users", &bob, json!({"username": "bob"}))
            .await,
    );

    // Without `userId` the caller acts; with their own it is the same; anyone else's: 403.
    let post = app
        .as_bearer(
            "POST",
            "/api/posts",
            &ana,
            json!({"title": "t", "content": "c"}),
        )
        .await;
    let p = created(&post);
    assert_eq!(post.body["userId"], ana_id.as_str());
    assert_eq!(post.body["userUsername"], "ana");
    assert_eq!(
        post.store_operations(),
        2,
        "identity costs no store operation"
    );
    created(
        &app.as_bearer(
            "POST",
            "/api/posts",
            &ana,
            json!({"userId": ana_id, "title": "t2", "content": "c"}),
        )
        .await,
    );
    app.as_bearer(
        "POST",
        "/api/posts",
        &ana,
        json!({"userId": bob_id, "title": "as bob", "content": "c"}),
    )
    .await
    .assert_problem(403);

    let c = app
        .as_bearer(
            "POST",
            &format!("/api/posts/{p}/comments"),
            &bob,
            json!({"content": "hi"}),
        )
        .await;
    created(&c);
    assert_eq!(c.body["userId"], bob_id.as_str());
    let l = app
        .as_bearer("POST", &format!("/api/posts/{p}/likes"), &bob, json!({}))
        .await;
    created(&l);
    assert_eq!(l.body["userId"], bob_id.as_str());
    for (path, body) in [
        (
            format!("/api/posts/{p}/comments"),
            json!({"userId": ana_id, "content": "as ana"}),
        ),
        (format!("/api/posts/{p}/likes"), json!({"userId": ana_id})),
    ] {
        app.as_bearer("POST", &path, &bob, body)
            .await
            .assert_problem(403);
    }

    // Another's post or name: 403. Their own: fine.
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
        &format!("/api/posts/{p}"),
        &bob,
        json!({"userId": ana_id, "title": "defaced", "content": "x"}),
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
    let edited = app
        .as_bearer(
            "PUT",
            &format!("/api/posts/{p}"),
            &ana,
            json!({"title": "edited", "content": "c2"}),
        )
        .await;
    assert_eq!(edited.status, 200, "{:?}", edited.body);
    let renamed = app
        .as_bearer(
            "PUT",
            &format!("/api/users/{bob_id}"),
            &bob,
            json!({"username": "bobby"}),
        )
        .await;
    assert_eq!(renamed.status, 200, "{:?}", renamed.body);

    // A caller without a user yet writes no post, comment or like.
    for (path, body) in [
        (
            "/api/posts".to_string(),
            json!({"title": "t", "content": "c"}),
        ),
        (format!("/api/posts/{p}/comments"), json!({"content": "hi"})),
        (format!("/api/posts/{p}/likes"), json!({})),
    ] {
        let r = app.as_bearer("POST", &path, &nobody, body).await;
        r.assert_problem(403);
        assert!(r.body["detail"]
            .as_str()
            .unwrap()
            .contains("POST /api/users"));
    }

    // Nothing refused was written.
    let post = app.get(&format!("/api/posts/{p}")).await.body;
    assert_eq!(post["title"], "edited");
    assert_eq!(
        (post["commentCount"].clone(), post["likeCount"].clone()),
        (json!(1), json!(1))
    );
    assert_eq!(
        app.get(&format!("/api/users/{ana_id}")).await.body["username"],
        "ana"
    );
    assert_eq!(
        app.get(&format!("/api/posts/{p}/comments"))
            .await
            .items()
            .len(),
        1
    );
    assert_eq!(
        app.get(&format!("/api/posts/{p}/likes"))
            .await
            .items()
            .len(),
        1
    );
    app.settled("both of ana's posts are in the feed", || async {
        app.get("/api/feed").await.items().len() == 2
    })
    .await;
    assert!(app
        .get(&format!("/api/users/{bob_id}/posts"))
        .await
        .items()
        .is_empty());
}

/// Every way a token can be wrong, each a 401 that writes nothing.
pub async fn jwt_writes_without_a_valid_identity_are_401_and_write_nothing(fixture: Fixture) {
    let (app, issuer, rsa, ec) = jwt_app(fixture).await;
    let ana = issuer.token(&rsa, "ana");
    let ana_id = created(
        &app.as_bearer("POST", "/api/users", &ana, json!({"username": "ana"}))
            .await,
    );
    let p = created(
        &app.as_bearer(
            "POST",
            "/api/posts",
            &ana,
            json!({"title": "t", "content": "c"}),
        )
        .await,
    );
    let writes = [
        ("POST", "/api/users".to_string(), json!({"username": "x"})),
        (
            "PUT",
            format!("/api/users/{ana_id}"),
            json!({"username": "x"}),
        ),
        (
            "POST",
            "/api/posts".to_string(),
            json!({"userId": ana_id, "title": "t", "content": "c"}),
        ),
        (
            "PUT",
            format!("/api/posts/{p}"),
            json!({"userId": ana_id, "title": "x", "content": "x"}),
        ),
        (
            "POST",
            format!("/api/posts/{p}/comments"),
            json!({"userId": ana_id, "content": "x"}),
        ),
        (
            "POST",
            format!("/api/posts/{p}/likes"),
            json!({"userId": ana_id}),
        ),
    ];
    // No identity at all, or only the other mode's headers: 401 with a bearer challenge.
    for (method, path, body) in &writes {
        let r = app
            .send(
                app.client
                    .request(method.parse().unwrap(), app.url(path))
                    .json(body),
            )
            .await;
        r.assert_problem(401);
        assert_eq!(
            r.header("www-authenticate"),
            Some("Bearer"),
            "{method} {path}"
        );
        let r = app
            .as_principal(method, path, ("aad", "object-1"), body.clone())
            .await;
        r.assert_problem(401);
    }

    let t = now();
    let claims = |extra: Value| issuer.claims("ana", extra);
    let stranger = SigningKey::rsa("rsa-1");
    let mut bad: Vec<(&str, String)> = vec![
        ("garbage", "not.a.token".into()),
        ("expired", rsa.sign(&claims(json!({"exp": t - 120})))),
        ("not yet valid", rsa.sign(&claims(json!({"nbf": t + 120})))),
        ("no exp", rsa.sign(&claims(json!({"exp": null})))),
        (
            "another issuer",
            rsa.sign(&claims(json!({"iss": "https://evil.example/v2.0"}))),
        ),
        (
            "issuer not exact",
            rsa.sign(&claims(json!({"iss": format!("{}/", issuer.issuer)}))),
        ),
        (
            "another audience",
            rsa.sign(&claims(json!({"aud": "api://other"}))),
        ),
        ("no subject", rsa.sign(&claims(json!({"sub": null})))),
        (
            "unknown kid",
            stranger.sign_with_header(&json!({"alg": "RS256", "kid": "rsa-9"}), &claims(json!({}))),
        ),
        ("signed by a stranger", stranger.sign(&claims(json!({})))),
        (
            "RS384",
            rsa.sign_with_header(&json!({"alg": "RS384", "kid": "rsa-1"}), &claims(json!({}))),
        ),
        (
            "RS256 naming the EC key",
            rsa.sign_with_header(&json!({"alg": "RS256", "kid": "ec-1"}), &claims(json!({}))),
        ),
        (
            "ES256 naming the RSA key",
            ec.sign_with_header(&json!({"alg": "ES256", "kid": "rsa-1"}), &claims(json!({}))),
        ),
    ];
    // alg none, with and without a signature part.
    let none_input =
        super::issuer::signing_input(&json!({"alg": "none", "typ": "JWT"}), &claims(json!({})));
    bad.push(("alg none", format!("{none_input}.")));
    bad.push(("alg none, signed", format!("{none_input}.{}", b64(b"x"))));
    // Key confusion: HS256 keyed with the public key (modulus, or the whole JWK text).
    for (what, secret) in [
        ("HS256 keyed with the modulus", rsa.public_bytes()),
        (
            "HS256 keyed with the JWK",
            rsa.jwk().to_string().into_bytes(),
        ),
    ] {
        bad.push((
            what,
            sign_hs256(
                &json!({"alg": "HS256", "kid": "rsa-1"}),
                &claims(json!({})),
                &secret,
            ),
        ));
    }
    for (what, token) in &bad {
        for (method, path, body) in &writes {
            let r = app.as_bearer(method, path, token, body.clone()).await;
            assert_eq!(r.status, 401, "{what}: {method} {path}: {:?}", r.body);
            r.assert_problem(401);
            let challenge = r.header("www-authenticate").unwrap_or("");
            assert!(
                challenge.starts_with("Bearer error=\"invalid_token\""),
                "{what}: {challenge}"
            );
            assert!(
                !r.body.to_string().contains(token.as_str()),
                "{what}: the token is echoed"
            );
        }
    }
    // Within the 60 s leeway a token still counts.
    for (what, extra) in [
        ("just expired", json!({"exp": t - 30})),
        ("nearly valid", json!({"nbf": t + 30})),
    ] {
        let r = app
            .as_bearer("GET", "/api/me", &rsa.sign(&claims(extra)), Value::Null)
            .await;
        assert_eq!(r.status, 200, "{what}: {:?}", r.body);
    }

    // Nothing was written by any refused request.
    let post = app.get(&format!("/api/posts/{p}")).await.body;
    assert_eq!(
        (
            post["title"].clone(),
            post["commentCount"].clone(),
            post["likeCount"].clone()
        ),
        (json!("t"), json!(0), json!(0))
    );
    assert_eq!(
        app.get(&format!("/api/users/{ana_id}")).await.body["username"],
        "ana"
    );
    assert!(app
        .get(&format!("/api/posts/{p}/comments"))
        .await
        .items()
        .is_empty());
    assert!(app
        .get(&format!("/api/posts/{p}/likes"))
        .await
        .items()
        .is_empty());
    app.settled("the one post reaches the feed", || async {
        app.get("/api/feed").await.items().len() == 1
    })
    .await;
    assert_eq!(
        app.get(&format!("/api/users/{ana_id}/posts"))
            .await
            .items()
            .len(),
        1
    );
}

pub async fn jwt_keys_are_fetched_lazily_and_again_when_they_rotate(fixture: Fixture) {
    let (app, issuer, rsa, _ec) = jwt_app(fixture).await;
    // Reads never ask the issuer.
    assert_eq!(app.get("/api/feed").await.status, 200);
    let cfg = app.get("/api/config").await;
    assert_eq!(
        cfg.body,
        json!({"auth": "jwt", "issuer": issuer.issuer, "clientId": "spa-client-id",
               "scopes": [format!("{AUDIENCE}/Blog.Write")]})
    );
    assert_eq!(
        issuer.jwks_fetches(),
        0,
        "keys are fetched on first use only"
    );

    let ana = issuer.token(&rsa, "ana");
    created(
        &app.as_bearer("POST", "/api/users", &ana, json!({"username": "ana"}))
            .await,
    );
    assert_eq!(issuer.jwks_fetches(), 1);
    let r = app
        .as_bearer(
            "POST",
            "/api/posts",
            &ana,
            json!({"title": "t", "content": "c"}),
        )
        .await;
    created(&r);
    assert_eq!(issuer.jwks_fetches(), 1, "cached");

    // A burst of tokens naming made-up keys fetches at most once more.
    let stranger = SigningKey::rsa("made-up");
    for i in 0..10 {
        let t = stranger.sign(&issuer.claims(&format!("s{i}"), json!({})));
        app.as_bearer("GET", "/api/me", &t, Value::Null)
            .await
            .assert_problem(401);
    }
    assert!(
        issuer.jwks_fetches() <= 2,
        "rate-limited: {}",
        issuer.jwks_fetches()
    );

    // Rotation: the issuer now signs with a new key and drops the old one.
    let rotated = SigningKey::rsa("rsa-2");
    issuer.publish(&[&rotated]);
    let new_token = issuer.token(&rotated, "ana");
    eventually("a token signed with the new key is accepted", || async {
        let r = app
            .as_bearer(
                "POST",
                "/api/posts",
                &new_token,
                json!({"title": "t2", "content": "c"}),
            )
            .await;
        assert!(r.status == 201 || r.status == 401, "{:?}", r.body);
        r.status == 201
    })
    .await;
    // The dropped key is no longer trusted.
    app.as_bearer("GET", "/api/me", &ana, Value::Null)
        .await
        .assert_problem(401);
    let me = app
        .as_bearer("GET", "/api/me", &new_token, Value::Null)
        .await;
    assert_eq!(me.body["username"], "ana");
}

pub async fn jwt_issuer_down_refuses_writes_with_503_and_reads_still_work(fixture: Fixture) {
    let issuer = Issuer::start().await;
    let rsa = SigningKey::rsa("rsa-1");
    issuer.publish(&[&rsa]);
    // Keys at an explicit URL (no discovery).
    let app = TestApp::spawn_with_auth(
        fixture,
        false,
        jwt_auth(&issuer, Some(issuer.jwks_url.clone())),
    )
    .await;
    let ana = issuer.token(&rsa, "ana");

    issuer.set_up(false);
    let r = app
        .as_bearer("POST", "/api/users", &ana, json!({"username": "ana"}))
        .await;
    r.assert_problem(503);
    let retry: u64 = r
        .header("retry-after")
        .expect("Retry-After")
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    // Reads are unaffected.
    assert_eq!(app.get("/api/feed").await.status, 200);
    app.get("/api/users/nobody").await.assert_problem(404);
    assert_eq!(app.get("/api/config").await.status, 200);

    // Back up: writes go through once the next fetch is due.
    issuer.set_up(true);
    eventually("writes succeed once the keys can be fetched", || async {
        let r = app
            .as_bearer("POST", "/api/users", &ana, json!({"username": "ana"}))
            .await;
        assert!(r.status == 201 || r.status == 503, "{:?}", r.body);
        r.status == 201
    })
    .await;

    // Down again: the cached key keeps working; a token needing a new key gets 503, not 401.
    issuer.set_up(false);
    created(
        &app.as_bearer(
            "POST",
            "/api/posts",
            &ana,
            json!({"title": "t", "content": "c"}),
        )
        .await,
    );
    let rotated = SigningKey::ec("ec-2");
    let new_token = issuer.token(&rotated, "ana");
    eventually(
        "a token with an uncached key answers 503 while the issuer is down",
        || async {
            let r = app
                .as_bearer(
                    "POST",
                    "/api/posts",
                    &new_token,
                    json!({"title": "t", "content": "c"}),
                )
                .await;
            assert!(r.status == 401 || r.status == 503, "{:?}", r.body);
            r.status == 503 && r.header("retry-after").is_some()
        },
    )
    .await;
    // Asked again at once (before the next fetch is due): still unavailable, not "invalid".
    let r = app
        .as_bearer("GET", "/api/me", &new_token, Value::Null)
        .await;
    r.assert_problem(503);
    assert_eq!(app.get("/api/feed").await.status, 200);
}

/// An issuer whose key set is over 1 MiB (a hostile or broken one): the write that needed the keys
/// answers 503 with `Retry-After`, whether the size is announced or only streamed, and nothing
/// is written; once the key set is of a sane size again, writes go through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jwt_an_oversized_key_set_is_refused_with_503() {
    let issuer = Issuer::start().await;
    let rsa = SigningKey::rsa("rsa-1");
    issuer.publish(&[&rsa]);
    issuer.pad(2 * 1024 * 1024, true);
    let fixture = crate::helpers::embedded_fixture().await;
    let auth = jwt_auth(&issuer, Some(issuer.jwks_url.clone()));
    let app = TestApp::spawn_with_auth(fixture, false, auth).await;
    let ana = issuer.token(&rsa, "ana");
    let create = || app.as_bearer("POST", "/api/users", &ana, json!({"username": "ana"}));

    let r = create().await;
    r.assert_problem(503);
    assert!(r.header("retry-after").is_some());
    assert_eq!(issuer.jwks_fetches(), 1);
    // Announced with a Content-Length this time, once the next fetch is due.
    issuer.pad(2 * 1024 * 1024, false);
    eventually("the key set is fetched again", || async {
        create().await.assert_problem(503);
        issuer.jwks_fetches() == 2
    })
    .await;
    app.as_bearer("GET", "/api/me", &ana, Value::Null)
        .await
        .assert_problem(503);

    issuer.pad(0, false);
    eventually("writes go through once the key set is sane", || async {
        let r = create().await;
        assert!(r.status == 201 || r.status == 503, "{:?}", r.body);
        r.status == 201
    })
    .await;
    assert_eq!(
        app.as_bearer("GET", "/api/me", &ana, Value::Null)
            .await
            .body["username"],
        "ana"
    );
}

/// Ten writes at once whose key is not cached yet, the issuer slow to answer its key set: they
/// share one fetch, none waits for a second, and each is answered (503 with `Retry-After`) while
/// that fetch is still held back by the issuer; the fetch goes on without them, and once it lands
/// the same writes go through with no further fetch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jwt_a_slow_issuer_is_asked_once_and_holds_up_no_write_for_long() {
    let issuer = Issuer::start().await;
    let rsa = SigningKey::rsa("rsa-1");
    issuer.publish(&[&rsa]);
    let fixture = crate::helpers::embedded_fixture().await;
    let auth = jwt_auth(&issuer, Some(issuer.jwks_url.clone()));
    let app = TestApp::spawn_with_auth(fixture, false, auth).await;
    let tokens: Vec<String> = (0..10)
        .map(|i| issuer.token(&rsa, &format!("writer-{i}")))
        .collect();
    let create_all = || {
        futures::future::join_all(tokens.iter().enumerate().map(|(i, t)| {
            app.as_bearer(
                "POST",
                "/api/users",
                t,
                json!({"username": format!("w{i}")}),
            )
        }))
    };

    issuer.hold(true);
    let answers = tokio::time::timeout(std::time::Duration::from_secs(30), create_all())
        .await
        .expect("every write is answered while the issuer holds its key set back");
    for r in &answers {
        r.assert_problem(503);
        assert!(r.header("retry-after").is_some(), "{:?}", r.body);
    }
    assert_eq!(issuer.jwks_fetches(), 1, "one fetch, shared by all ten");
    assert_eq!(
        issuer.jwks_answered(),
        0,
        "all answered while it was in flight"
    );
    assert_eq!(app.get("/api/users/w0").await.status, 404);

    // The issuer answers at last: the fetch nobody waits for any more fills the cache.
    issuer.hold(false);
    issuer.jwks_answered_at_least(1).await;
    assert_eq!(issuer.jwks_answered(), 1, "the held fetch lands");
    eventually("the keys are in use", || async {
        let r = app
            .as_bearer("GET", "/api/me", &tokens[0], Value::Null)
            .await;
        assert!(r.status == 404 || r.status == 503, "{:?}", r.body);
        r.status == 404
    })
    .await;
    for r in create_all().await {
        created(&r);
    }
    assert_eq!(issuer.jwks_fetches(), 1, "the cached keys serve everyone");
}

/// Cached keys past their age are still used at once: ten writes at once are answered while the
/// one refresh they set off is held back by the issuer; when it lands with a rotated key set,
/// the withdrawn key stops being trusted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jwt_stale_keys_are_used_at_once_while_one_refresh_runs() {
    let issuer = Issuer::start().await;
    let rsa = SigningKey::rsa("rsa-1");
    issuer.publish(&[&rsa]);
    let fixture = crate::helpers::embedded_fixture().await;
    // Keys are stale as soon as they are fetched, and a refresh may start whenever none runs.
    let auth = jwt_auth(&issuer, Some(issuer.jwks_url.clone()))
        .with_jwt_timings(std::time::Duration::ZERO, std::time::Duration::ZERO);
    let app = TestApp::spawn_with_auth(fixture, false, auth).await;
    let ana = issuer.token(&rsa, "ana");
    created(
        &app.as_bearer("POST", "/api/users", &ana, json!({"username": "ana"}))
            .await,
    );
    assert_eq!(issuer.jwks_fetches(), 1);

    issuer.hold(true);
    let rotated = SigningKey::rsa("rsa-2");
    issuer.publish(&[&rotated]);
    let posts = futures::future::join_all((0..10).map(|i| {
        app.as_bearer(
            "POST",
            "/api/posts",
            &ana,
            json!({"title": format!("t{i}"), "content": "c"}),
        )
    }));
    let answers = tokio::time::timeout(std::time::Duration::from_secs(30), posts)
        .await
        .expect("every write is answered while the refresh is held back");
    for r in &answers {
        created(r);
    }
    assert_eq!(issuer.jwks_fetches(), 2, "one refresh for all ten");
    assert_eq!(
        issuer.jwks_answered(),
        1,
        "all answered while it was in flight"
    );

    issuer.hold(false);
    issuer.jwks_answered_at_least(2).await;
    eventually("the withdrawn key is no longer trusted", || async {
        let r = app.as_bearer("GET", "/api/me", &ana, Value::Null).await;
        assert!(r.status == 200 || r.status == 401, "{:?}", r.body);
        r.status == 401
    })
    .await;
    let me = app
        .as_bearer(
            "GET",
            "/api/me",
            &issuer.token(&rotated, "ana"),
            Value::Null,
        )
        .await;
    assert_eq!(me.body["username"], "ana");
}

pub async fn easyauth_principals_act_as_themselves(fixture: Fixture) {
    // As under the host: no pump, the principal headers set by the platform.
    let app = TestApp::spawn_with_auth(fixture, false, Auth::easy_auth()).await;
    let ana = ("aad", "ana-object-id");
    let bob = ("aad", "bob-object-id");

    let r = app.post("/api/users", json!({"username": "ana"})).await;
    r.assert_problem(401);
    app.get("/api/me").await.assert_problem(401);
    app.as_principal("GET", "/api/me", ana, Value::Null)
        .await
        .assert_problem(404);
    let ana_id = created(
        &app.as_principal("POST", "/api/users", ana, json!({"username": "ana"}))
            .await,
    );
    let again = app
        .as_principal("POST", "/api/users", ana, json!({"username": "ana2"}))
        .await;
    again.assert_problem(409);
    assert!(again.body["detail"].as_str().unwrap().contains(&ana_id));
    let me = app.as_principal("GET", "/api/me", ana, Value::Null).await;
    assert_eq!((me.status, me.body["id"].clone()), (200, json!(ana_id)));
    // The same principal id from another provider is another identity.
    app.as_principal("GET", "/api/me", ("github", "ana-object-id"), Value::Null)
        .await
        .assert_problem(404);

    let post = app
        .as_principal(
            "POST",
            "/api/posts",
            ana,
            json!({"title": "t", "content": "c"}),
        )
        .await;
    let p = created(&post);
    assert_eq!(post.body["userId"], ana_id.as_str());
    app.as_principal("POST", &format!("/api/posts/{p}/likes"), bob, json!({}))
        .await
        .assert_problem(403);
    app.as_principal(
        "PUT",
        &format!("/api/posts/{p}"),
        bob,
        json!({"title": "x", "content": "x"}),
    )
    .await
    .assert_problem(403);
    app.as_principal(
        "PUT",
        &format!("/api/users/{ana_id}"),
        bob,
        json!({"username": "x"}),
    )
    .await
    .assert_problem(403);

    // A bearer token is the other mode's header: not an identity here.
    let issuer = Issuer::start().await;
    let rsa = SigningKey::rsa("rsa-1");
    issuer.publish(&[&rsa]);
    let r = app
        .as_bearer(
            "POST",
            "/api/posts",
            &issuer.token(&rsa, "ana"),
            json!({"userId": ana_id, "title": "t", "content": "c"}),
        )
        .await;
    r.assert_problem(401);
    assert_eq!(r.header("www-authenticate"), None);
    // Malformed principal headers: 401.
    let r = app
        .send(
            app.client
                .post(app.url("/api/posts"))
                .header("X-MS-CLIENT-PRINCIPAL", "%%%")
                .json(&json!({"title": "t", "content": "c"})),
        )
        .await;
    r.assert_problem(401);

    let post = app.get(&format!("/api/posts/{p}")).await.body;
    assert_eq!(
        (post["title"].clone(), post["likeCount"].clone()),
        (json!("t"), json!(0))
    );
    assert_eq!(
        app.get(&format!("/api/users/{ana_id}")).await.body["username"],
        "ana"
    );
    assert!(app
        .get(&format!("/api/posts/{p}/likes"))
        .await
        .items()
        .is_empty());
}

/// In Azure without App Service authentication nothing strips forged principal headers.
pub async fn easyauth_trusts_no_header_when_app_service_authentication_is_off(fixture: Fixture) {
    let auth = Auth::new(&AuthSettings {
        mode: AuthMode::EasyAuth,
        platform_auth_off: true,
        ..AuthSettings::default()
    });
    let app = TestApp::spawn_with_auth(fixture, false, auth).await;
    let forged = ("aad", "someone-else");
    app.as_principal("POST", "/api/users", forged, json!({"username": "x"}))
        .await
        .assert_problem(401);
    app.as_principal("GET", "/api/me", forged, Value::Null)
        .await
        .assert_problem(401);
    assert_eq!(app.get("/api/feed").await.status, 200);
}

pub async fn none_mode_is_as_before(fixture: Fixture) {
    let app = TestApp::spawn(fixture, false).await;
    let cfg = app.get("/api/config").await;
    assert_eq!(
        cfg.body,
        json!({"auth": "none", "issuer": null, "clientId": null, "scopes": []})
    );
    app.get("/api/me").await.assert_problem(401);
    let user = app.create_user("ana").await;
    // The body names the caller; without it there is nobody to act as.
    app.create_post(&id(&user), "t", "c").await;
    app.post("/api/posts", json!({"title": "t", "content": "c"}))
        .await
        .assert_problem(400);
    app.post(
        "/api/posts",
        json!({"userId": "nobody", "title": "t", "content": "c"}),
    )
    .await
    .assert_problem(422);
}

pub async fn jwt_deletes_are_the_owners_own(fixture: Fixture) {
    let (app, issuer, rsa, ec) = jwt_app(fixture).await;
    let (ana, bob) = (issuer.token(&rsa, "ana-del"), issuer.token(&ec, "bob-del"));
    let cy = issuer.token(&rsa, "cy-del");
    let user = |t: &str, name: &str| {
        let (app, t) = (&app, t.to_string());
        let name = name.to_string();
        async move {
            created(
                &app.as_bearer("POST", "/api/users", &t, json!({ "username": name }))
                    .await,
            )
        }
    };
    let ana_id = user(&ana, "ana").await;
    let bob_id = user(&bob, "bob").await;
    user(&cy, "cy").await;
    let post = created(
        &app.as_bearer(
            "POST",
            "/api/posts",
            &ana,
            json!({"title": "t", "content": "c"}),
        )
        .await,
    );
    let on_post = |t: &str, what: &str, body: Value| {
        let (app, t, path) = (&app, t.to_string(), format!("/api/posts/{post}/{what}"));
        async move { app.as_bearer("POST", &path, &t, body).await }
    };
    let by_bob = created(&on_post(&bob, "comments", json!({"content": "b1"})).await);
    let by_bob_2 = created(&on_post(&bob, "comments", json!({"content": "b2"})).await);
    created(&on_post(&bob, "likes", json!({})).await);

    let del = |t: &str, path: String| {
        let (app, t) = (&app, t.to_string());
        async move { app.as_bearer("DELETE", &path, &t, Value::Null).await }
    };
    // Anonymous: 401 with the challenge, and nothing changes.
    let r = app.delete(&format!("/api/posts/{post}")).await;
    r.assert_problem(401);
    assert_eq!(r.header("www-authenticate"), Some("Bearer"));
    // Someone else's like, comment, post, user: 403.
    del(&cy, format!("/api/posts/{post}/likes/{bob_id}"))
        .await
        .assert_problem(403);
    del(&cy, format!("/api/posts/{post}/comments/{by_bob}"))
        .await
        .assert_problem(403);
    del(&bob, format!("/api/posts/{post}"))
        .await
        .assert_problem(403);
    del(&bob, format!("/api/users/{ana_id}"))
        .await
        .assert_problem(403);
    let after = app.get(&format!("/api/posts/{post}")).await.body;
    assert_eq!(
        (after["commentCount"].as_u64(), after["likeCount"].as_u64()),
        (Some(2), Some(1))
    );
    // The comment's author, and the post's author, may delete a comment.
    assert_eq!(
        del(&bob, format!("/api/posts/{post}/comments/{by_bob}"))
            .await
            .status,
        204
    );
    assert_eq!(
        del(&ana, format!("/api/posts/{post}/comments/{by_bob_2}"))
            .await
            .status,
        204
    );
    assert_eq!(
        del(&bob, format!("/api/posts/{post}/likes/{bob_id}"))
            .await
            .status,
        204
    );
    let after = app.get(&format!("/api/posts/{post}")).await.body;
    assert_eq!(
        (after["commentCount"].as_u64(), after["likeCount"].as_u64()),
        (Some(0), Some(0))
    );
    assert_eq!(del(&ana, format!("/api/posts/{post}")).await.status, 204);

    // Erasing oneself; the identity may start afresh once the erasure is complete.
    assert_eq!(del(&bob, format!("/api/users/{bob_id}")).await.status, 204);
    app.get(&format!("/api/users/{bob_id}"))
        .await
        .assert_problem(404);
    app.as_bearer("GET", "/api/me", &bob, Value::Null)
        .await
        .assert_problem(404);
    app.as_bearer(
        "POST",
        "/api/posts",
        &bob,
        json!({"title": "t", "content": "c"}),
    )
    .await
    .assert_problem(403);
    // Until the change feed has finished the erasure, the identity cannot sign up again.
    let sign_up = || app.as_bearer("POST", "/api/users", &bob, json!({"username": "bob2"}));
    let early = sign_up().await;
    early.assert_problem(409);
    assert!(early.header("retry-after").is_some(), "{:?}", early.body);
    app.settle().await;
    let again = sign_up().await;
    assert_eq!(again.status, 201, "{:?}", again.body);
    assert_eq!(id(&again.body), bob_id, "the same identity, the same id");
    assert_eq!(again.body["username"], "bob2");
    assert!(app
        .get(&format!("/api/users/{bob_id}/posts"))
        .await
        .items()
        .is_empty());
}

/// `BLOG_WRITES_PER_MINUTE=3`: a signed-in caller's fourth write within the minute is 429
/// problem+json with `Retry-After` and writes nothing; another caller (from the same address)
/// and reads are unaffected.
pub async fn jwt_writes_are_limited_per_signed_in_caller(fixture: Fixture) {
    let issuer = Issuer::start().await;
    let key = SigningKey::ec("ec-1");
    issuer.publish(&[&key]);
    let app = TestApp::spawn_with(fixture, false, |a| {
        a.with_auth(jwt_auth(&issuer, None)).with_write_limit(3)
    })
    .await;
    let ana = issuer.token(&key, "ana");
    let bob = issuer.token(&key, "bob");
    let ana_id = created(
        &app.as_bearer("POST", "/api/users", &ana, json!({"username": "ana"}))
            .await,
    );
    for title in ["one", "two"] {
        let body = json!({"title": title, "content": "c"});
        created(&app.as_bearer("POST", "/api/posts", &ana, body).await);
    }
    let over = app
        .as_bearer(
            "POST",
            "/api/posts",
            &ana,
            json!({"title": "three", "content": "c"}),
        )
        .await;
    over.assert_problem(429);
    let retry: u64 = over
        .header("retry-after")
        .expect("Retry-After")
        .parse()
        .unwrap();
    assert!((1..=20).contains(&retry), "Retry-After: {retry}");
    assert!(
        over.body["detail"].as_str().unwrap().contains("3 a minute"),
        "{:?}",
        over.body
    );
    let rename = app
        .as_bearer(
            "PUT",
            &format!("/api/users/{ana_id}"),
            &ana,
            json!({"username": "ana2"}),
        )
        .await;
    rename.assert_problem(429);
    // Nothing of the refused writes is there.
    let anas_posts = blog::store::Query::cross_partition()
        .of_kind(blog::domain::Kind::Post)
        .eq("userId", ana_id.as_str());
    let posts = app.store.count(blog::store::Container::Posts, &anas_posts);
    assert_eq!(posts.await.unwrap(), 2);
    assert_eq!(
        app.get(&format!("/api/users/{ana_id}")).await.body["username"],
        "ana"
    );
    // Reads, the caller's own included, are not writes.
    assert_eq!(
        app.as_bearer("GET", "/api/me", &ana, Value::Null)
            .await
            .status,
        200
    );
    // Another caller writes as usual.
    created(
        &app.as_bearer("POST", "/api/users", &bob, json!({"username": "bob"}))
            .await,
    );
    for title in ["b1", "b2"] {
        let body = json!({"title": title, "content": "c"});
        created(&app.as_bearer("POST", "/api/posts", &bob, body).await);
    }
}

/// `BLOG_AUTH_WRITE_SCOPE=Blog.Write`: a token for the audience writes only when its `scp`
/// (space-separated) or `roles` holds exactly that value; otherwise 403 and nothing written.
/// Reads need no scope.
pub async fn jwt_writes_need_the_write_scope_when_one_is_set(fixture: Fixture) {
    let issuer = Issuer::start().await;
    let key = SigningKey::rsa("rsa-1");
    issuer.publish(&[&key]);
    let auth = Auth::new(&AuthSettings {
        write_scope: Some("Blog.Write".into()),
        ..jwt_settings(&issuer)
    });
    let app = TestApp::spawn_with_auth(fixture, false, auth).await;
    let token = |subject: &str, extra: Value| key.sign(&issuer.claims(subject, extra));
    for (subject, grants) in [
        ("no-grants", json!({})),
        ("reader", json!({"scp": "openid Blog.Read"})),
        ("prefix", json!({"scp": "Blog.Writer", "roles": ["Blog"]})),
        ("other-app-role", json!({"roles": ["Blog.Admin"]})),
    ] {
        let t = token(subject, grants);
        let r = app
            .as_bearer("POST", "/api/users", &t, json!({"username": subject}))
            .await;
        r.assert_problem(403);
        assert!(
            r.body["detail"].as_str().unwrap().contains("Blog.Write"),
            "{:?}",
            r.body
        );
        // Nothing was written, and reading needs no scope.
        app.as_bearer("GET", "/api/me", &t, Value::Null)
            .await
            .assert_problem(404);
    }
    let delegated = token("ana", json!({"scp": "openid Blog.Write profile"}));
    created(
        &app.as_bearer("POST", "/api/users", &delegated, json!({"username": "ana"}))
            .await,
    );
    let application = token("importer", json!({"roles": ["Blog.Import", "Blog.Write"]}));
    created(
        &app.as_bearer(
            "POST",
            "/api/users",
            &application,
            json!({"username": "importer"}),
        )
        .await,
    );
}

/// An OpenID Connect ID token whose `aud` is the audience (a browser client registered under the
/// API's own client id gets such tokens at sign-in) identifies nobody at the API: 401 naming it,
/// even when it lists the write scope among its roles or scopes. (Without a write scope the rule
/// is the same: `id_token_claim` in `src/auth/jwt.rs` runs before any scope is looked at.)
pub async fn jwt_id_tokens_are_refused_even_for_the_audience(fixture: Fixture) {
    let issuer = Issuer::start().await;
    let key = SigningKey::rsa("rsa-1");
    issuer.publish(&[&key]);
    let auth = Auth::new(&AuthSettings {
        write_scope: Some("Blog.Write".into()),
        ..jwt_settings(&issuer)
    });
    let app = TestApp::spawn_with_auth(fixture, false, auth).await;
    let token = |subject: &str, extra: Value| key.sign(&issuer.claims(subject, extra));
    for (subject, marker) in [
        (
            "with-nonce",
            json!({"nonce": "n-0S6_WzA2Mj", "roles": ["Blog.Write"]}),
        ),
        (
            "with-at-hash",
            json!({"at_hash": "77QmUPtjPfzWtF2AnpK9RQ", "scp": "Blog.Write"}),
        ),
        (
            "with-c-hash",
            json!({"c_hash": "LDktKdoQak3Pk0cnXxCltA", "roles": ["Blog.Write"]}),
        ),
        ("keycloak-id", json!({"typ": "ID", "scp": "Blog.Write"})),
    ] {
        let t = token(subject, marker);
        let r = app
            .as_bearer("POST", "/api/users", &t, json!({"username": subject}))
            .await;
        r.assert_problem(401);
        assert!(
            r.body["detail"].as_str().unwrap().contains("ID token"),
            "{subject}: {:?}",
            r.body
        );
        app.as_bearer("GET", "/api/me", &t, Value::Null)
            .await
            .assert_problem(401);
    }
    // The same claims without an ID token's marks: an access token, which writes.
    let access = token("ana", json!({"scp": "Blog.Write", "typ": "Bearer"}));
    created(
        &app.as_bearer("POST", "/api/users", &access, json!({"username": "ana"}))
            .await,
    );
}

/// A user's bookmarks are theirs to list: anonymous 401 with the challenge, another signed-in
/// user 403, and the owner sees them. (With `BLOG_AUTH=none` anyone may, as anyone may write.)
pub async fn jwt_bookmarks_are_listed_only_to_their_owner(fixture: Fixture) {
    let (app, issuer, rsa, ec) = jwt_app(fixture).await;
    let (ana, bob) = (issuer.token(&rsa, "ana-bm"), issuer.token(&ec, "bob-bm"));
    let ana_id = created(
        &app.as_bearer("POST", "/api/users", &ana, json!({"username": "ana"}))
            .await,
    );
    created(
        &app.as_bearer("POST", "/api/users", &bob, json!({"username": "bob"}))
            .await,
    );
    let post = created(
        &app.as_bearer(
            "POST",
            "/api/posts",
            &bob,
            json!({"title": "t", "content": "c"}),
        )
        .await,
    );
    let path = format!("/api/users/{ana_id}/bookmarks/{post}");
    let saved = app.as_bearer("PUT", &path, &ana, Value::Null).await;
    assert_eq!(saved.status, 204, "{:?}", saved.body);
    app.settle().await;

    let list = format!("/api/users/{ana_id}/bookmarks");
    let anonymous = app.get(&list).await;
    anonymous.assert_problem(401);
    assert_eq!(anonymous.header("www-authenticate"), Some("Bearer"));
    app.as_bearer("GET", &list, &bob, Value::Null)
        .await
        .assert_problem(403);
    let own = app.as_bearer("GET", &list, &ana, Value::Null).await;
    assert_eq!(own.status, 200, "{:?}", own.body);
    let ids: Vec<&str> = own
        .items()
        .iter()
        .map(|p| p["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [post.as_str()]);
}
