//! The integration tests: one binary.
//! - `helpers` starts the app on port 0 over a fresh store, talks to it as a client would, and
//!   settles the change feed (`TestApp::settle`) where a test means "once it was projected";
//! - `store_suite` and `api_suite` are written once against the `Store` trait / the HTTP API and
//!   instantiated per store (`embedded`, and `cosmos` on the Cosmos DB SDK's in-memory emulator);
//!   so is `client_suite` (ETags, conditional requests, CORS, the OpenAPI document);
//! - `functions`: the Azure Functions custom handler (app definition vs router, trigger envelopes,
//!   hosted mode, logging);
//! - `openapi`: the OpenAPI document against the router and the Functions app;
//! - `process`: the real binary, killed with SIGKILL and restarted;
//! - `identity`: who is calling (`BLOG_AUTH`): bearer tokens from a local OpenID Connect issuer,
//!   Easy Auth principals, on both stores, and what the binary logs about them;
//! - `ops_suite`: `handler verify [--repair]` on both stores and `handler backup` under load;
//! - `deletes_suite`: unlike, delete a comment or a post, erase an account, on both stores;
//! - `search_suite`: `GET /api/search` on both stores;
//! - `bookmarks_suite`: bookmarks, their copies and counts, on both stores;
//! - `mutes_suite`: mute lists and what the muter reads, on both stores;
//! - `tags_suite`: tags on posts, a tag's posts, the tag list, on both stores;
//! - `audience_suite`: the copies kept for a post's bookmarkers and tags: what a like costs
//!   them, the counts their lists show, an edit racing their fan-out, on both stores;
//! - `live_suite`: live updates (`GET /api/events`): topics, resuming, resets, on both stores;
//!   caps, bad input and shutdown on the embedded one;
//! - `counters`: what keeping `commentCount` / `likeCount` exact costs, and that they converge;
//! - `web`: the browser client's files as the handler serves them;
//! - `doc_links`: the relative links of the repository's Markdown;
//! - `webpubsub`: live updates pushed to Azure Web PubSub, against a stand-in of its REST API.
//!
//! The `bench` tool's smoke test is in its own package: `bench/tests/smoke.rs`.

mod helpers;
mod hooks;

mod api_suite;
mod audience_suite;
mod bookmarks_suite;
mod client_suite;
mod conduit;
mod deletes_suite;
mod lane_suite;
mod live_suite;
mod mutes_suite;
mod ops_suite;
mod quarantine_suite;
mod search_suite;
mod store_suite;
mod tags_suite;
mod timeline_read_suite;
mod timeline_suite;

mod architecture;
mod compression;
mod cosmos;
mod counters;
mod doc_links;
mod embedded;
mod errors;
mod functions;
mod identity;
mod layers;
mod model;
mod openapi;
mod problems;
mod process;
mod projection;
mod schema;
mod server;
mod startup;
mod timeline_process;
mod validation;
mod web;
mod webpubsub;
