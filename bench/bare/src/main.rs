//! `bare`: the baseline the bench sets the product against. A bare axum server that answers
//! `GET /api/feed` and `GET /api/posts/{id}` with fixed bytes (the product's own feed page and
//! post, read from files) and `/` with the readiness answer, nothing else: no store, no
//! middleware, no logging. Whatever the product costs beyond it is the product's.
//!
//! Usage: `bare <port> [feed.json [post.json]]` (listens on 127.0.0.1; without a file the feed
//! is `[]` and the post `{}`, whatever its id).

use axum::body::Bytes;
use axum::http::header;
use axum::routing::get;
use axum::Router;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let port: u16 = args.next().unwrap_or_default().parse()?;
    let mut body = |empty: &'static [u8]| -> anyhow::Result<Bytes> {
        Ok(match args.next() {
            Some(path) => Bytes::from(std::fs::read(path)?),
            None => Bytes::from_static(empty),
        })
    };
    let (feed, post) = (body(b"[]")?, body(b"{}")?);
    const JSON: [(header::HeaderName, &str); 1] = [(header::CONTENT_TYPE, "application/json")];
    let app = Router::new()
        .route("/", get(|| async { (JSON, r#"{"status":"ok"}"#) }))
        .route("/api/feed", get(move || async move { (JSON, feed) }))
        .route("/api/posts/{id}", get(move || async move { (JSON, post) }));
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    axum::serve(listener, app).await?;
    Ok(())
}
