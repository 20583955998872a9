//! The RealWorld ("Conduit") API under `/api/conduit`: the upstream suite (`tests/conduit/`, run
//! as upstream runs it, twice on the same server, on both stores, with the pump on as
//! standalone runs it), and what the suite does not reach: races on handles and emails, a
//! rename freeing its handle and keeping its tokens, the sign-in budget, posts and likes made
//! through the native API seen through this one.

use std::path::PathBuf;
use std::process::Stdio;

use serde_json::{json, Value};

use crate::helpers::{embedded_fixture, Fixture, Resp, TestApp};

const BASE: &str = "/api/conduit/api";

/// The suite's runner found on this machine.
enum Runner {
    Hurl,
    Bruno,
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

fn runner() -> Option<Runner> {
    if on_path("hurl") {
        Some(Runner::Hurl)
    } else if on_path("bru") {
        Some(Runner::Bruno)
    } else {
        None
    }
}

fn suite_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/conduit")
}

/// Run the whole suite once against `host`: its output when a request failed.
async fn run_suite(runner: &Runner, host: &str, uid: &str) -> Result<(), String> {
    let dir = suite_dir();
    let mut cmd = match runner {
        Runner::Hurl => {
            let mut files: Vec<PathBuf> = std::fs::read_dir(dir.join("hurl"))
                .expect("the suite is there")
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "hurl"))
                .collect();
            files.sort();
            let mut cmd = tokio::process::Command::new("hurl");
            cmd.args(["--test", "--jobs", "1", "--variable"])
                .arg(format!("host={host}"))
                .arg("--variable")
                .arg(format!("uid={uid}"))
                .args(files);
            cmd
        }
        Runner::Bruno => {
            let mut cmd = tokio::process::Command::new("bru");
            cmd.current_dir(dir.join("bruno"))
                .args(["run", "--env", "local", "--env-var"])
                .arg(format!("host={host}"))
                .args(["--sandbox", "safe"]);
            cmd
        }
    };
    let out = cmd
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| format!("the runner did not start: {e}"))?;
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() {
        Ok(())
    } else {
        // What failed, and the summary, without every passing request.
        let lines: Vec<&str> = text.lines().collect();
        let keep: Vec<&str> = lines
            .iter()
            .enumerate()
            .filter(|(i, l)| {
                l.contains('✕')
                    || l.contains("error")
                    || l.contains("Failed")
                    || *i + 40 > lines.len()
            })
            .map(|(_, l)| *l)
            .collect();
        Err(keep.join("\n"))
    }
}

/// The suite, twice against one app on `fixture`'s store.
async fn the_suite_passes_twice_on(fixture: Fixture, store: &str) {
    let Some(runner) = runner() else {
        let why = "neither `hurl` nor `bru` is on the PATH: install the Bruno CLI \
                   (`npm install -g @usebruno/cli`) or Hurl (`cargo install hurl --locked`)";
        assert!(std::env::var_os("CI").is_none(), "{why}");
        eprintln!("the RealWorld suite was not run on the {store} store: {why}");
        return;
    };
    let app = TestApp::spawn(fixture, true).await;
    let host = app.url("/api/conduit");
    for round in 1..=2 {
        let uid = format!("{}{}", std::process::id(), round);
        if let Err(failed) = run_suite(&runner, &host, &uid).await {
            panic!("the RealWorld suite failed on the {store} store (run {round}):\n{failed}");
        }
    }
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_realworld_suite_passes_twice_on_the_embedded_store() {
    the_suite_passes_twice_on(embedded_fixture().await, "embedded").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_realworld_suite_passes_twice_on_the_cosmos_store() {
    the_suite_passes_twice_on(crate::cosmos::cosmos_fixture().await, "cosmos").await;
}

// ---- what the suite does not reach ----

async fn send(
    app: &TestApp,
    method: reqwest::Method,
    path: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> Resp {
    let mut req = app
        .client
        .request(method, app.url(&format!("{BASE}{path}")));
    if let Some(t) = token {
        req = req.header("authorization", format!("Token {t}"));
    }
    if let Some(b) = body {
        req = req.json(&b);
    }
    app.send(req).await
}

async fn register(app: &TestApp, name: &str, email: &str) -> Resp {
    let body = json!({"user": {"username": name, "email": email, "password": "password123"}});
    send(app, reqwest::Method::POST, "/users", None, Some(body)).await
}

fn token(r: &Resp) -> String {
    r.body["user"]["token"]
        .as_str()
        .expect("a token")
        .to_string()
}

#[tokio::test]
async fn of_two_concurrent_registrations_of_one_name_exactly_one_wins() {
    let app = TestApp::spawn(embedded_fixture().await, false).await;
    for round in 0..4 {
        // The same handle in two cases, then the same email in two cases.
        let names = if round % 2 == 0 {
            [
                (format!("Twin{round}"), format!("a{round}@x.org")),
                (format!("twin{round}"), format!("b{round}@x.org")),
            ]
        } else {
            [
                (format!("one{round}"), format!("Same{round}@x.org")),
                (format!("two{round}"), format!("same{round}@X.org")),
            ]
        };
        let (a, b) = tokio::join!(
            register(&app, &names[0].0, &names[0].1),
            register(&app, &names[1].0, &names[1].1)
        );
        let mut statuses = [a.status, b.status];
        statuses.sort();
        assert_eq!(
            statuses,
            [201, 409],
            "round {round}: {:?} {:?}",
            a.body,
            b.body
        );
        let field = if round % 2 == 0 { "username" } else { "email" };
        let lost = if a.status == 409 { &a } else { &b };
        assert_eq!(lost.body["errors"][field][0], "has already been taken");
    }
}

#[tokio::test]
async fn a_name_claimed_by_a_registration_under_way_is_taken() {
    // A registration writes the name's guard first and its user last: in between, the guard's
    // owner does not exist yet. Another registration of the name then must not take it over.
    let app = TestApp::spawn(embedded_fixture().await, false).await;
    for (name, email) in [("Zed", "zed@x.org"), ("other", "Yve@x.org")] {
        use blog::domain::accounts::{EmailGuard, HandleGuard};
        let owner = "a-user-being-registered";
        let guard = if name == "Zed" {
            json!(HandleGuard::new("zed", owner))
        } else {
            json!(EmailGuard::new("yve@x.org", owner, "s", "h".into()))
        };
        let id = guard["id"].as_str().unwrap().to_string();
        app.store
            .create(blog::store::Container::Users, &id, guard)
            .await
            .unwrap();
        let r = register(&app, name, email).await;
        assert_eq!(r.status, 409, "{name}: {:?}", r.body);
    }
}

#[tokio::test]
async fn a_rename_frees_the_old_handle_and_keeps_the_token() {
    let app = TestApp::spawn(embedded_fixture().await, false).await;
    let first = register(&app, "ana", "ana@x.org").await;
    assert_eq!(first.status, 201);
    let t = token(&first);
    let renamed = send(
        &app,
        reqwest::Method::PUT,
        "/user",
        Some(&t),
        Some(json!({"user": {"username": "ana2", "email": "ana2@x.org"}})),
    )
    .await;
    assert_eq!(renamed.status, 200, "{:?}", renamed.body);
    // The old name and email are free again; the new ones are taken.
    assert_eq!(register(&app, "ANA", "ana@x.org").await.status, 201);
    let taken = register(&app, "Ana2", "other@x.org").await;
    assert_eq!(taken.status, 409);
    // The first token still signs in as the renamed account.
    let me = send(&app, reqwest::Method::GET, "/user", Some(&t), None).await;
    assert_eq!(me.status, 200);
    assert_eq!(me.body["user"]["username"], "ana2");
    assert_eq!(me.body["user"]["email"], "ana2@x.org");
    let profile = send(&app, reqwest::Method::GET, "/profiles/ana", None, None).await;
    assert_eq!(profile.body["profile"]["username"], "ANA");
    // The new email signs in; the old one is the new account's.
    let login = |email: &str| json!({"user": {"email": email, "password": "password123"}});
    let by_new = send(
        &app,
        reqwest::Method::POST,
        "/users/login",
        None,
        Some(login("ana2@x.org")),
    )
    .await;
    assert_eq!(by_new.body["user"]["username"], "ana2");
    let by_old = send(
        &app,
        reqwest::Method::POST,
        "/users/login",
        None,
        Some(login("ana@x.org")),
    )
    .await;
    assert_eq!(by_old.body["user"]["username"], "ANA");
}

#[tokio::test]
async fn sign_in_attempts_are_limited_per_account_with_retry_after() {
    let app = TestApp::spawn(embedded_fixture().await, false).await;
    assert_eq!(register(&app, "bo", "bo@x.org").await.status, 201);
    let attempt = |password: &str| json!({"user": {"email": "BO@x.org", "password": password}});
    let limit = blog::api::write_limit::LOGINS_PER_ACCOUNT_PER_MINUTE;
    for _ in 0..limit {
        let r = send(
            &app,
            reqwest::Method::POST,
            "/users/login",
            None,
            Some(attempt("wrong-password")),
        )
        .await;
        assert_eq!(r.status, 401);
        assert_eq!(r.body["errors"]["credentials"][0], "invalid");
    }
    // Over the budget: refused before the password is looked at, even the right one.
    let r = send(
        &app,
        reqwest::Method::POST,
        "/users/login",
        None,
        Some(attempt("password123")),
    )
    .await;
    assert_eq!(r.status, 429, "{:?}", r.body);
    let wait: u64 = r
        .header("retry-after")
        .expect("Retry-After")
        .parse()
        .unwrap();
    assert!((1..=60).contains(&wait));
    assert!(r.body.to_string().find("token").is_none());
}

#[tokio::test]
async fn no_answer_shows_a_password_or_its_hash_and_a_foreign_token_is_refused() {
    let app = TestApp::spawn(embedded_fixture().await, false).await;
    let r = register(&app, "cy", "cy@x.org").await;
    let t = token(&r);
    let text = r.body.to_string();
    assert!(
        !text.contains("password123") && !text.contains("argon2"),
        "{text}"
    );
    let me = send(&app, reqwest::Method::GET, "/user", Some(&t), None).await;
    assert!(!me.body.to_string().contains("argon2"));
    // Signed with another key: 401, `token: is invalid`.
    let (other, _) = blog::auth::local::TokenKey::generate();
    let forged = other.issue("anyone");
    let refused = send(&app, reqwest::Method::GET, "/user", Some(&forged), None).await;
    assert_eq!(refused.status, 401);
    assert_eq!(refused.body["errors"]["token"][0], "is invalid");
}

#[tokio::test]
async fn posts_and_likes_made_natively_read_as_articles_and_favorites() {
    let app = TestApp::spawn(embedded_fixture().await, false).await;
    let r = register(&app, "dee", "dee@x.org").await;
    let me = send(&app, reqwest::Method::GET, "/user", Some(&token(&r)), None).await;
    assert_eq!(me.status, 200);
    // A native user (BLOG_AUTH=none) writes a post without description; dee likes it natively.
    let author = app.create_user("old-timer").await;
    let author_id = author["id"].as_str().unwrap();
    let post = app
        .create_post(author_id, "Written before", "First line.\nSecond line.")
        .await;
    let post_id = post["id"].as_str().unwrap().to_string();
    app.settle().await;
    let article = send(
        &app,
        reqwest::Method::GET,
        &format!("/articles/{post_id}"),
        None,
        None,
    )
    .await;
    assert_eq!(article.status, 200, "{:?}", article.body);
    assert_eq!(article.body["article"]["description"], "First line.");
    let slug = article.body["article"]["slug"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(slug, format!("written-before-{post_id}"));
    // Liked through the Conduit API, listed as dee's favorite.
    let t = token(&r);
    let fav = send(
        &app,
        reqwest::Method::POST,
        &format!("/articles/{slug}/favorite"),
        Some(&t),
        None,
    )
    .await;
    assert_eq!(fav.status, 200);
    assert_eq!(fav.body["article"]["favorited"], true);
    assert_eq!(fav.body["article"]["favoritesCount"], 1);
    let list = send(
        &app,
        reqwest::Method::GET,
        "/articles?favorited=dee",
        None,
        None,
    )
    .await;
    assert_eq!(list.body["articlesCount"], 1);
    assert_eq!(list.body["articles"][0]["slug"], slug.as_str());
    // A comment by number: its id is an integer and deletes by that integer.
    let c = send(
        &app,
        reqwest::Method::POST,
        &format!("/articles/{slug}/comments"),
        Some(&t),
        Some(json!({"comment": {"body": "hi"}})),
    )
    .await;
    assert_eq!(c.status, 201);
    let n = c.body["comment"]["id"].as_u64().expect("an integer id");
    assert!(n < 1 << 53);
    let gone = send(
        &app,
        reqwest::Method::DELETE,
        &format!("/articles/{slug}/comments/{n}"),
        Some(&t),
        None,
    )
    .await;
    assert_eq!(gone.status, 204);
}

/// A signed-in reader's comment lists leave out the users they muted, as the native list does
/// for its reader; an anonymous reader and the muted user still see every comment.
#[tokio::test]
async fn a_readers_muted_users_comments_are_left_out_of_their_lists() {
    let app = TestApp::spawn(embedded_fixture().await, false).await;
    let (dee, bo) = (
        token(&register(&app, "dee", "dee@x.org").await),
        token(&register(&app, "bo", "bo@x.org").await),
    );
    let author = app.create_user("old-timer").await;
    let post = app
        .create_post(author["id"].as_str().unwrap(), "Talk", "About it.")
        .await;
    let slug = format!("talk-{}", post["id"].as_str().unwrap());
    let path = format!("/articles/{slug}/comments");
    for (t, body) in [(&dee, "from dee"), (&bo, "from bo")] {
        let body = Some(json!({"comment": {"body": body}}));
        let c = send(&app, reqwest::Method::POST, &path, Some(t), body).await;
        assert_eq!(c.status, 201, "{:?}", c.body);
    }
    // Their user ids, from the native list; dee mutes bo there (BLOG_AUTH=none: the path names
    // the caller).
    let native = app
        .get(&format!(
            "/api/posts/{}/comments",
            post["id"].as_str().unwrap()
        ))
        .await;
    let id_of = |content: &str| {
        native.body["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["content"] == content)
            .map(|c| c["userId"].as_str().unwrap().to_string())
            .unwrap()
    };
    let (dee_id, bo_id) = (id_of("from dee"), id_of("from bo"));
    let muted = app
        .put(&format!("/api/users/{dee_id}/mutes/{bo_id}"), Value::Null)
        .await;
    assert_eq!(muted.status, 204, "{:?}", muted.body);
    let bodies = |r: &Resp| -> Vec<String> {
        r.body["comments"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["body"].as_str().unwrap().to_string())
            .collect()
    };
    let as_dee = send(&app, reqwest::Method::GET, &path, Some(&dee), None).await;
    assert_eq!(bodies(&as_dee), ["from dee"]);
    let anyone = send(&app, reqwest::Method::GET, &path, None, None).await;
    assert_eq!(bodies(&anyone).len(), 2);
    let as_bo = send(&app, reqwest::Method::GET, &path, Some(&bo), None).await;
    assert_eq!(bodies(&as_bo).len(), 2);
}

#[tokio::test]
async fn conduit_writes_spend_the_callers_write_budget() {
    let app = TestApp::spawn_with(embedded_fixture().await, false, |a| a.with_write_limit(3)).await;
    let r = register(&app, "eve", "eve@x.org").await;
    assert_eq!(r.status, 201);
    let t = token(&r);
    let post = || {
        send(
            &app,
            reqwest::Method::POST,
            "/articles",
            Some(&t),
            Some(json!({"article": {"title": "t", "description": "d", "body": "b"}})),
        )
    };
    for _ in 0..3 {
        assert_eq!(post().await.status, 201);
    }
    let refused = post().await;
    assert_eq!(refused.status, 429, "{:?}", refused.body);
    assert!(refused.header("retry-after").is_some());
    // Reads are free.
    let me = send(&app, reqwest::Method::GET, "/user", Some(&t), None).await;
    assert_eq!(me.status, 200);
}

#[tokio::test]
async fn the_served_description_names_this_server_and_every_operation_in_it_is_routed() {
    let app = TestApp::spawn(embedded_fixture().await, false).await;
    let r = app
        .client
        .get(app.url("/api/conduit/openapi.yml"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "application/yaml");
    let doc = r.text().await.unwrap();
    assert!(
        doc.contains("servers:\n  - url: /api/conduit/api\n"),
        "its server is this one"
    );
    // Every `path` / `method` of the document reaches a Conduit handler (a Conduit answer, not
    // the fallback's problem+json).
    let mut path = String::new();
    let mut operations = 0;
    for line in doc.lines() {
        if let Some(p) = line.strip_prefix("  /").and_then(|p| p.strip_suffix(':')) {
            path = format!("/{p}");
            continue;
        }
        let Some(method) = ["get", "post", "put", "delete"]
            .into_iter()
            .find(|m| line == format!("    {m}:"))
        else {
            continue;
        };
        let url = format!(
            "{BASE}{}",
            path.replace("{username}", "nobody")
                .replace("{slug}", "nothing")
                .replace("{id}", "1")
        );
        let r = app
            .client
            .request(method.to_uppercase().parse().unwrap(), app.url(&url))
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        let body: Value = r.json().await.unwrap_or(Value::Null);
        assert_ne!(status, 405, "{method} {url}");
        assert!(
            body.get("errors").is_some() || (200..300).contains(&status),
            "{method} {url}: not routed ({status} {body})"
        );
        operations += 1;
    }
    assert_eq!(operations, 19, "the document's operations");
}

#[tokio::test]
async fn an_erasure_removes_the_accounts_guards_and_frees_its_name_and_email() {
    let app = TestApp::spawn(embedded_fixture().await, false).await;
    let r = register(&app, "fay", "fay@x.org").await;
    assert_eq!(r.status, 201);
    // Standalone (`BLOG_AUTH=none`) the native API names the user in the path: its id is the
    // guard's owner.
    let guard_id = blog::domain::accounts::email_id("fay@x.org");
    let guard = app
        .store
        .read(blog::store::Container::Users, &guard_id, &guard_id)
        .await
        .unwrap()
        .expect("the email's guard");
    let owner = guard["owner"].as_str().unwrap().to_string();
    let erased = app.delete(&format!("/api/users/{owner}")).await;
    assert_eq!(erased.status, 204, "{:?}", erased.body);
    for id in [guard_id.clone(), blog::domain::accounts::handle_id("fay")] {
        let left = app
            .store
            .read(blog::store::Container::Users, &id, &id)
            .await
            .unwrap();
        assert!(left.is_none(), "the guard {id} is left: {left:?}");
    }
    assert_eq!(register(&app, "Fay", "FAY@x.org").await.status, 201);
}
