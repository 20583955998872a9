//! Inputs that look harmless but are not: invisible or spoofing names, control characters in
//! text, ids that are path segments. Each is refused with 400 and writes nothing; what looks
//! unusual but is legitimate (emoji sequences, every script, line breaks) stays valid.

use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::helpers::{id, spawn_app};

/// `(username, why)`: each must be refused.
pub const BAD_USERNAMES: &[(&str, &str)] = &[
    ("\u{200B}", "zero-width space only"),
    ("\u{200B}\u{200B}\u{200B}", "zero-width spaces only"),
    ("\u{FEFF}", "byte-order mark only"),
    ("\u{200D}\u{200C}", "joiners only"),
    (
        "\u{2060}\u{FE0F}\u{00AD}",
        "word joiner, variation selector, soft hyphen",
    ),
    (" \u{200B} \u{3000} ", "spaces and a zero-width space"),
    ("\u{E0041}\u{E0042}", "tag characters only"),
    ("\u{2800}", "Braille pattern blank"),
    (
        "\u{2800}\u{2800} \u{2800}",
        "Braille pattern blanks and a space",
    ),
    ("\u{3164}", "Hangul filler"),
    ("\u{115F}\u{1160}", "Hangul choseong and jungseong fillers"),
    ("\u{FFA0}", "halfwidth Hangul filler"),
    ("\u{0301}", "a lone combining mark"),
    ("\u{0300}\u{0301}\u{20DD}", "combining marks only"),
    ("\u{3164}\u{0301}", "a mark on a filler"),
    ("\u{2028}", "line separator"),
    ("\u{E000}", "private use only"),
    ("\u{0378}", "unassigned only"),
    ("admin\u{202E}nimda", "right-to-left override"),
    ("\u{202A}ana", "left-to-right embedding"),
    ("\u{202B}ana", "right-to-left embedding"),
    ("ana\u{202C}", "pop directional formatting"),
    ("\u{202D}ana", "left-to-right override"),
    ("\u{2066}ana\u{2069}", "left-to-right isolate"),
    ("\u{2067}ana", "right-to-left isolate"),
    ("\u{2068}ana", "first strong isolate"),
    ("a\u{0}b", "NUL"),
    ("a\u{1B}[31mb", "ESC"),
    ("a\nb", "line break"),
];

/// Each must be accepted, and kept as given (trimmed).
pub const GOOD_USERNAMES: &[&str] = &[
    "ana",
    "👩\u{200D}💻",
    "👨\u{200D}👩\u{200D}👧",
    "🏳\u{FE0F}\u{200D}🌈",
    "Жанна",
    "山田太郎",
    "محمد",
    "می\u{200C}خواهم",
    "नमस्ते",
    "Zoë",
    "e\u{0301}",
    "a b",
    "ᄀ\u{1160}",
    "한글",
    "กานดา",
    "ᓀᐦᐃᔭᐍᐏᐣ",
    "⠁⠝⠁",
    "1\u{FE0F}\u{20E3}",
    "🇵🇱",
    "👍🏽",
    "🏴\u{E0067}\u{E0062}\u{E0073}\u{E0063}\u{E0074}\u{E007F}",
];

#[tokio::test]
async fn invisible_and_spoofing_usernames_are_refused_and_real_ones_kept() {
    let app = spawn_app().await;
    let existing = app.create_user("ana").await;
    for (name, why) in BAD_USERNAMES {
        let r = app.post("/api/users", json!({ "username": name })).await;
        assert_eq!(r.status, 400, "create {why}: {:?}", r.body);
        r.assert_problem(400);
        let r = app
            .put(
                &format!("/api/users/{}", id(&existing)),
                json!({ "username": name }),
            )
            .await;
        assert_eq!(r.status, 400, "rename {why}: {:?}", r.body);
    }
    let user = app.get(&format!("/api/users/{}", id(&existing))).await;
    assert_eq!(
        user.body["username"], "ana",
        "no refused rename was written"
    );
    for name in GOOD_USERNAMES {
        let created = app.create_user(name).await;
        assert_eq!(created["username"], *name);
    }
}

#[tokio::test]
async fn control_characters_in_titles_and_contents_are_refused() {
    let app = spawn_app().await;
    let user = app.create_user("ana").await;
    let uid = id(&user);
    let post = app.create_post(&uid, "t", "c").await;
    let pid = id(&post);
    let bad = [
        ("a\u{0}b", "NUL"),
        ("a\u{1B}[2Jb", "ESC"),
        ("a\u{7}b", "BEL"),
        ("a\u{8}b", "backspace"),
        ("a\u{7F}b", "DEL"),
        ("a\u{85}b", "C1 next line"),
        ("\u{200B}", "zero-width space only"),
    ];
    for (text, why) in bad {
        let r = app
            .post(
                "/api/posts",
                json!({ "userId": uid, "title": text, "content": "c" }),
            )
            .await;
        r.assert_problem(400);
        let r = app
            .post(
                "/api/posts",
                json!({ "userId": uid, "title": "t", "content": text }),
            )
            .await;
        assert_eq!(r.status, 400, "post content {why}");
        let r = app
            .put(
                &format!("/api/posts/{pid}"),
                json!({ "userId": uid, "title": text, "content": "c" }),
            )
            .await;
        assert_eq!(r.status, 400, "edited title {why}");
        let r = app.comment(&pid, &uid, text).await;
        assert_eq!(r.status, 400, "comment {why}");
    }
    let posts = app.get(&format!("/api/users/{uid}/posts")).await;
    assert!(posts.items().len() <= 1, "only the first post exists");
    let comments = app.get(&format!("/api/posts/{pid}/comments")).await;
    assert!(comments.items().is_empty());
    assert_eq!(
        app.get(&format!("/api/posts/{pid}")).await.body["title"],
        "t"
    );

    // Line breaks and tabs stay, in any script.
    let text = "Première ligne\r\n\tsecond line — 第二行\nصفحة";
    let r = app
        .post(
            "/api/posts",
            json!({ "userId": uid, "title": "Ωmega\tα", "content": text }),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    assert_eq!(r.body["content"], text);
    assert_eq!(app.comment(&pid, &uid, text).await.status, 201);
}

#[tokio::test]
async fn ids_made_only_of_dots_are_refused() {
    let app = spawn_app().await;
    let user = app.create_user("ana").await;
    let uid = id(&user);
    for dots in [".", "..", "...", "%2E", "%2E%2E", "%2e.", ".%2E"] {
        for path in [
            format!("/api/users/{dots}"),
            format!("/api/users/{dots}/posts"),
            format!("/api/posts/{dots}"),
            format!("/api/posts/{dots}/comments"),
            format!("/api/posts/{dots}/likes"),
        ] {
            let status = raw_get(&app.origin, &path).await;
            assert_eq!(status, 400, "GET {path}");
        }
        let r = app
            .put(&format!("/api/users/{dots}"), json!({ "username": "x" }))
            .await;
        assert!(
            r.status == 400 || r.status == 404,
            "PUT {dots}: {}",
            r.status
        );
    }
    for dots in [".", ".."] {
        let r = app
            .post(
                "/api/posts",
                json!({ "userId": dots, "title": "t", "content": "c" }),
            )
            .await;
        assert_eq!(r.status, 400, "userId {dots}: {:?}", r.body);
    }
    // Dots among other characters are ordinary ids.
    assert_eq!(app.get("/api/users/a.b").await.status, 404);
    assert_eq!(app.get("/api/users/..a").await.status, 404);
    assert_eq!(app.get(&format!("/api/users/{uid}")).await.status, 200);
}

/// The status of `GET path` sent exactly as written (an HTTP client library would resolve
/// `.`, `..` and their percent-encoded forms before sending).
async fn raw_get(origin: &str, path: &str) -> u16 {
    let addr = origin.trim_start_matches("http://");
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    s.read_to_end(&mut answer).await.unwrap();
    let answer = String::from_utf8_lossy(&answer);
    answer
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {answer}"))
}
