//! `bare`: the baseline the bench sets the product against. A bare axum server that answers
//! `GET /api/feed` with fixed bytes (the product's own feed page, read from a file) and `/` with
//! the readiness answer, nothing else: no store, no middleware, no logging. Whatever the product
//! costs beyond it is the product's.
//!
//! Usage: `bare <port> [body.json]` (listens on 127.0.0.1; without a file the feed is `[]`).

use axum::body::Bytes;
use axum::http::header;
use axum::routing::get;
use axum::Router;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let port: u16 = args.next().unwrap_or_default().parse()?;
    let body = match args.next() {
        Some(path) => Bytes::from(std::fs::read(path)?),
        None => Bytes::from_static(b"[]"),
    };
    const JSON: [(header::HeaderName, &str); 1] = [(header::CONTENT_TYPE, "application/json")];
    let app = Router::new()
        .route("/", get(|| async { (JSON, r#"{"status":"ok"}"#) }))
        .route("/api/feed", get(move || async move { (JSON, body) }));
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    axum::serve(listener, app).await?;
    Ok(())
}
