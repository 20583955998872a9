//! The browser client in `web/` as the handler serves it: every file embedded, each with its
//! content type and the Content-Security-Policy, at `/` for a browser and at `/api/web/` (the
//! Functions shape), while `/` stays the host's readiness answer for everything else. The client
//! itself is exercised in real Chromium by `.ci/browser-test.sh`.

use std::collections::BTreeSet;

use blog::auth::Auth;
use blog::settings::{AuthMode, AuthSettings};
use blog::web::{ASSETS, INDEX};
use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::{embedded_fixture, spawn_app, TestApp};

/// The whole client, uncompressed, stays under this size.
const SIZE_BUDGET: usize = 64 * 1024;

fn web_dir_files() -> BTreeSet<String> {
    std::fs::read_dir(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("web"))
        .expect("web/ exists")
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn every_file_in_web_is_embedded_and_the_client_is_small() {
    let embedded: BTreeSet<String> = ASSETS.iter().map(|a| a.name.to_string()).collect();
    assert_eq!(
        embedded,
        web_dir_files(),
        "web/ and blog::web::ASSETS must list the same files"
    );
    let total: usize = ASSETS.iter().map(|a| a.body.len()).sum();
    assert!(
        total < SIZE_BUDGET,
        "the client is {total} bytes, over its {SIZE_BUDGET}-byte budget"
    );
}

/// Relative references (`src="x"`, `href="x"`, `from './x.js'`) in `text`.
fn references(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for marker in ["src=\"", "href=\"", "from './", "import('./"] {
        for part in text.split(marker).skip(1) {
            let end = part.find(['"', '\'']).unwrap_or(part.len());
            let target = &part[..end];
            if !target.starts_with('#') && !target.contains(':') {
                out.push(target.trim_start_matches("./").to_string());
            }
        }
    }
    out
}

#[test]
fn the_page_loads_only_embedded_files_and_has_no_inline_code() {
    let mut checked = 0;
    for a in ASSETS {
        let text = std::str::from_utf8(a.body).unwrap();
        for target in references(text) {
            assert!(
                blog::web::asset(&target).is_some(),
                "{} refers to `{target}`, which is not embedded",
                a.name
            );
            checked += 1;
        }
    }
    assert!(checked >= 8, "the page and its modules refer to each other");

    let index = std::str::from_utf8(blog::web::asset(INDEX).unwrap().body).unwrap();
    for script in index.split("<script").skip(1) {
        let tag = &script[..script.find('>').unwrap()];
        assert!(tag.contains("src="), "inline script in index.html: {tag}");
    }
    assert!(!index.contains("<style") && !index.contains("style="));
    // Text from the API goes into the page as text: no script uses an HTML sink.
    for a in ASSETS.iter().filter(|a| a.name.ends_with(".js")) {
        let code = std::str::from_utf8(a.body).unwrap();
        for sink in [
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
        ] {
            assert!(!code.contains(sink), "{} uses {sink}", a.name);
        }
    }
}

#[tokio::test]
async fn every_file_is_served_with_its_type_and_the_security_policy() {
    let app = spawn_app().await;
    for a in ASSETS {
        for path in [format!("/api/web/{}", a.name), format!("/{}", a.name)] {
            if path == format!("/{INDEX}") {
                continue;
            }
            let r = app.client.get(app.url(&path)).send().await.unwrap();
            assert_eq!(r.status(), StatusCode::OK, "{path}");
            let h = r.headers().clone();
            assert_eq!(h["content-type"], a.content_type, "{path}");
            let csp = h["content-security-policy"].to_str().unwrap();
            for directive in [
                "default-src 'self'",
                "script-src 'self';",
                "style-src 'self';",
                "connect-src 'self'",
                "object-src 'none'",
                "frame-ancestors 'none'",
                "require-trusted-types-for 'script'",
            ] {
                assert!(csp.contains(directive), "{path}: {directive} in {csp}");
            }
            assert!(!csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"));
            assert_eq!(h["x-content-type-options"], "nosniff", "{path}");
            assert_eq!(h["referrer-policy"], "no-referrer", "{path}");
            assert_eq!(r.bytes().await.unwrap(), a.body, "{path}");
        }
    }
    // Revalidation: the same bytes answer 304 to the ETag they were served with.
    for a in ASSETS {
        let url = app.url(&format!("/api/web/{}", a.name));
        let first = app.client.get(&url).send().await.unwrap();
        let tag = first.headers()["etag"].clone();
        assert_eq!(tag, blog::web::etag(a).as_str());
        let again = app
            .client
            .get(&url)
            .header("if-none-match", tag)
            .send()
            .await
            .unwrap();
        assert_eq!(again.status(), StatusCode::NOT_MODIFIED, "{}", a.name);
        assert!(again.bytes().await.unwrap().is_empty());
        let other = app
            .client
            .get(&url)
            .header("if-none-match", "\"0000\"")
            .send()
            .await
            .unwrap();
        assert_eq!(other.status(), StatusCode::OK, "{}", a.name);
    }
    let page = app.client.get(app.url("/api/web/")).send().await.unwrap();
    assert_eq!(page.headers()["content-type"], "text/html; charset=utf-8");
    assert!(page.headers().contains_key("content-security-policy"));
    assert_eq!(
        page.bytes().await.unwrap(),
        blog::web::asset(INDEX).unwrap().body
    );
}

#[tokio::test]
async fn a_browser_gets_the_page_at_the_root_and_anything_else_the_readiness_answer() {
    let app = spawn_app().await;
    let browser = app
        .client
        .get(app.url("/"))
        .header(
            "accept",
            "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
        )
        .send()
        .await
        .unwrap();
    assert_eq!(browser.status(), StatusCode::OK);
    assert_eq!(
        browser.headers()["content-type"],
        "text/html; charset=utf-8"
    );
    assert_eq!(browser.headers()["vary"], "accept");
    assert!(browser.headers().contains_key("content-security-policy"));
    assert_eq!(
        browser.bytes().await.unwrap(),
        blog::web::asset(INDEX).unwrap().body
    );

    // The readiness answer whatever the method, as before the page existed.
    let posted = app
        .send(app.client.post(app.url("/")).header("accept", "text/html"))
        .await;
    assert_eq!(posted.status, 200);
    assert_eq!(posted.body, json!({ "status": "ok" }));

    for accept in [None, Some("*/*"), Some("application/json")] {
        let mut req = app.client.get(app.url("/"));
        if let Some(a) = accept {
            req = req.header("accept", a);
        }
        let r = app.send(req).await;
        assert_eq!(r.status, 200, "{accept:?}");
        assert_eq!(r.body, json!({ "status": "ok" }), "{accept:?}");
    }
}

#[tokio::test]
async fn under_the_host_the_client_is_at_api_web_and_the_root_answers_the_probe() {
    // As the host runs it: hosted, no pump.
    let app = TestApp::spawn_with(embedded_fixture().await, false, |app| app.hosted(true)).await;
    // The host's readiness probe.
    let probe = app.get("/").await;
    assert_eq!(probe.status, 200);
    assert_eq!(probe.body, json!({ "status": "ok" }));
    // The URL the WebClient function forwards.
    let page = app.client.get(app.url("/api/web/")).send().await.unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    assert_eq!(page.headers()["content-type"], "text/html; charset=utf-8");
    assert!(page.headers().contains_key("content-security-policy"));
    let module = app
        .client
        .get(app.url("/api/web/app.js"))
        .send()
        .await
        .unwrap();
    assert_eq!(module.status(), StatusCode::OK);
    assert_eq!(
        module.headers()["content-type"],
        "text/javascript; charset=utf-8"
    );

    // Without its slash the page's relative links would break: redirected.
    let no_redirects = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let r = no_redirects.get(app.url("/api/web")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::PERMANENT_REDIRECT);
    assert_eq!(r.headers()["location"], "/api/web/");

    // No such file: a problem, not the page.
    app.get("/api/web/nope.js").await.assert_problem(404);
    app.get("/api/web/..%2FCargo.toml")
        .await
        .assert_problem(404);
    let r = app.post("/api/web/app.js", json!({})).await;
    r.assert_problem(405);
}

#[tokio::test]
async fn with_an_issuer_the_page_may_call_it_and_nothing_else() {
    let settings = AuthSettings {
        mode: AuthMode::Jwt,
        issuer: Some("https://login.example.com/tenant-1/v2.0".into()),
        audience: Some("api://blog".into()),
        client_id: Some("web-client".into()),
        ..AuthSettings::default()
    };
    let app = TestApp::spawn_with_auth(embedded_fixture().await, false, Auth::new(&settings)).await;
    for path in ["/api/web/", "/api/web/auth.js"] {
        let r = app.client.get(app.url(path)).send().await.unwrap();
        let csp = r.headers()["content-security-policy"].to_str().unwrap();
        assert!(
            csp.contains("connect-src 'self' https://login.example.com;"),
            "{path}: {csp}"
        );
    }
    // The client learns where to sign in from the same handler.
    let config = app.get("/api/config").await;
    assert_eq!(config.body["auth"], "jwt");
    assert_eq!(
        config.body["issuer"],
        "https://login.example.com/tenant-1/v2.0"
    );

    // Without an issuer, only the page's own origin.
    let plain = spawn_app().await;
    let r = plain
        .client
        .get(plain.url("/api/web/"))
        .send()
        .await
        .unwrap();
    let csp = r.headers()["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("connect-src 'self';"), "{csp}");
}

/// The reference's script, to clients that do not take gzip, is inflated once per process and
/// served from memory: the same bytes each time.
#[tokio::test]
async fn the_reference_script_is_inflated_once() {
    use blog::web::reference;
    let app = spawn_app().await;
    let url = app.url(&format!("/api/docs/{}", reference::SCRIPT));
    let mut bodies = Vec::new();
    for _ in 0..3 {
        let r = app.client.get(&url).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        assert!(r.headers().get("content-encoding").is_none());
        bodies.push(r.bytes().await.unwrap());
    }
    assert!(bodies[0].len() > reference::SCRIPT_GZIP.len() * 3);
    assert!(bodies.iter().all(|b| *b == bodies[0]));
    assert_eq!(reference::times_inflated(), 1);
}

/// The API reference at `/api/docs`: a page and one script, both from this origin under a policy
/// that allows scripts only from it (no inline script, no eval); the script goes gzip-compressed to a browser and plain to a
/// client that does not take gzip. (`.ci/browser-test.sh` checks that it renders the operations.)
#[tokio::test]
async fn the_api_reference_is_served_from_this_origin_under_the_policy() {
    use blog::web::reference;
    let app = spawn_app().await;
    for path in ["/api/docs", "/api/docs/"] {
        let r = app.client.get(app.url(path)).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{path}");
        assert_eq!(r.headers()["content-type"], "text/html; charset=utf-8");
        let csp = r.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .to_string();
        for directive in [
            "default-src 'self'",
            "script-src 'self';",
            "style-src 'self' 'unsafe-inline';",
            "connect-src 'self';",
            "object-src 'none'",
            "base-uri 'none'",
            "frame-ancestors 'none'",
            "require-trusted-types-for 'script'",
            "trusted-types lit-html",
        ] {
            assert!(csp.contains(directive), "{directive} in {csp}");
        }
        assert!(!csp.contains("unsafe-eval"), "{csp}");
        let page = r.text().await.unwrap();
        assert!(page.contains(r#"spec-url="/api/openapi.json""#));
        assert!(page.contains(r#"<script type="module" src="/api/docs/rapidoc-min.js">"#));
        assert!(!page.contains("<style") && !page.contains(" style="));
    }

    let url = app.url(&format!("/api/docs/{}", reference::SCRIPT));
    let gz = app
        .client
        .get(&url)
        .header("accept-encoding", "gzip, deflate, br")
        .send()
        .await
        .unwrap();
    assert_eq!(gz.status(), StatusCode::OK);
    assert_eq!(
        gz.headers()["content-type"],
        "text/javascript; charset=utf-8"
    );
    assert_eq!(gz.headers()["content-encoding"], "gzip");
    assert!(gz.headers()["vary"]
        .to_str()
        .unwrap()
        .contains("accept-encoding"));
    assert!(gz.headers().contains_key("content-security-policy"));
    let gz_tag = gz.headers()["etag"].to_str().unwrap().to_string();
    assert_eq!(gz.bytes().await.unwrap(), reference::SCRIPT_GZIP);

    let plain = app.client.get(&url).send().await.unwrap();
    assert_eq!(plain.status(), StatusCode::OK);
    assert!(plain.headers().get("content-encoding").is_none());
    let plain_tag = plain.headers()["etag"].to_str().unwrap().to_string();
    assert_ne!(plain_tag, gz_tag);
    let script = plain.bytes().await.unwrap();
    let mut expected = Vec::new();
    std::io::Read::read_to_end(
        &mut flate2::read::GzDecoder::new(reference::SCRIPT_GZIP),
        &mut expected,
    )
    .unwrap();
    assert_eq!(script, expected);
    assert!(String::from_utf8_lossy(&script).contains("customElements.define(\"rapi-doc\""));

    let again = app
        .client
        .get(&url)
        .header("accept-encoding", "gzip")
        .header("if-none-match", &gz_tag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
    assert_eq!(again.headers()["etag"], gz_tag.as_str());

    app.get("/api/docs/nope.js").await.assert_problem(404);
}
