//! `bare` answers what the bench compares the product with: the readiness answer at `/` and the
//! given bytes at `/api/feed` and `/api/posts/{id}`. (Also why `cargo test` builds the `bare` executable next to
//! `bench`, where the bench's process measurements look for it.)

use std::io::{Read as _, Write as _};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

fn get(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some(out)
}

#[test]
fn serves_the_given_feed_and_post_bytes_and_the_readiness_answer() {
    let dir = std::env::temp_dir().join(format!("bare-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let body = dir.join("feed.json");
    std::fs::write(&body, r#"[{"id":"p1"}]"#).unwrap();
    let post = dir.join("post.json");
    std::fs::write(&post, r#"{"id":"p1","title":"One"}"#).unwrap();
    let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_bare"))
        .arg(port.to_string())
        .arg(&body)
        .arg(&post)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let feed = loop {
        if let Some(answer) = get(port, "/api/feed") {
            break answer;
        }
        assert!(Instant::now() < deadline, "bare did not answer");
        std::thread::sleep(Duration::from_millis(20));
    };
    let root = get(port, "/").unwrap();
    let one = get(port, "/api/posts/p1").unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(feed.starts_with("HTTP/1.1 200"), "{feed}");
    assert!(feed.ends_with(r#"[{"id":"p1"}]"#), "{feed}");
    assert!(one.starts_with("HTTP/1.1 200"), "{one}");
    assert!(one.ends_with(r#"{"id":"p1","title":"One"}"#), "{one}");
    assert!(root.ends_with(r#"{"status":"ok"}"#), "{root}");
}
