//! A blog backend on the Azure Cosmos DB data model of "How to model and partition data on Azure
//! Cosmos DB using a real-world example" (its final V3 design), served by one binary, `handler`,
//! either standalone or as an Azure Functions custom handler.
//!
//! Where each part lives, from the bottom up (each module imports only those of its own line or
//! above it in this list, with no cycle, submodules included: `tests/api/layers.rs` checks it):
//! - [`settings`]: environment variables (`docs/settings.md`), the server's limits and
//!   the log's levels among them; [`telemetry`]: logging to stdout; [`tls`]: TLS and token
//!   signatures on ring.
//! - [`domain`]: validated inputs, the kinds of item and their shapes, soft deletes (the mark a
//!   deleted item carries), follow edges, short-form content, timestamps.
//! - [`store`]: the Cosmos-shaped [`store::Store`] trait, its embedded SQLite and Cosmos DB
//!   implementations, and the accounting behind `x-store-operations` / `x-request-charge`.
//! - [`error`]: the one error type (problem+json); [`auth`]: who is calling (`BLOG_AUTH`):
//!   bearer tokens, Easy Auth, the `Caller` of a write.
//! - [`projection`]: the change-feed denormalizations (copies, names, counters, timelines) and
//!   what a deletion implies, planned as pure functions and applied through the store;
//!   [`quarantine`]: the changes a lane could not apply, kept to be replayed or dropped;
//!   [`rechecks`]: the one scheduler of the counters' rechecks, for every driver;
//!   [`pump`]: the in-process change-feed follower that drives them standalone; [`live`]: live
//!   updates, hints derived from the change feed and published once per change; [`functions`]:
//!   the same projections invoked by the Functions host's Cosmos DB triggers.
//! - [`api`]: the HTTP routes (`docs/api.md`) and the typed answers they return, which the
//!   OpenAPI document is generated from (`api::views`); [`web`]: the browser client in `web/`,
//!   served at `/` and `/api/web/`; [`compression`]: gzip-compressed answers and their entity
//!   tags; [`server`]: the HTTP server with its timeouts, connection
//!   caps and graceful shutdown.
//! - [`app`]: the composition root, the one place the application is put together.
//! - [`startup`]: open the store while binding and serving (the readiness probe at once), start
//!   the pump; [`ops`]: the operations commands (`handler verify [--repair]`, `handler backup`).

#[cfg(test)]
mod allocations;
pub mod api;
pub mod app;
pub mod auth;
pub mod compression;
pub mod domain;
pub mod error;
pub mod functions;
pub mod live;
pub mod ops;
pub mod projection;
pub mod pump;
pub mod quarantine;
pub mod rechecks;
pub mod server;
pub mod settings;
pub mod startup;
pub mod store;
pub mod telemetry;
pub mod tls;
pub mod web;

pub use api::AppState;
