//! A blog backend on the Azure Cosmos DB data model of "How to model and partition data on Azure
//! Cosmos DB using a real-world example" (its final V3 design), served by one binary, `handler`,
//! either standalone or as an Azure Functions custom handler.
//!
//! Where each part lives:
//! - [`settings`]: environment variables (README, "Settings"); [`telemetry`]: logging to stdout.
//! - [`domain`]: validated inputs, the four kinds of item and their shapes, soft deletes (the
//!   mark a deleted item carries), short-form content, timestamps.
//! - [`store`]: the Cosmos-shaped [`store::Store`] trait, its embedded SQLite implementation and
//!   the per-request accounting behind `x-store-operations` / `x-request-charge`.
//! - [`auth`]: who is calling (`BLOG_AUTH`): bearer tokens, Easy Auth, the `Caller` of a write.
//! - [`api`]: the HTTP routes (`docs/api.md`); [`error`]: the one error type (problem+json).
//! - [`projection`]: the change-feed denormalizations (copies, names, counters) and what a
//!   deletion implies, planned as pure functions and applied through the store; [`pump`]: the
//!   in-process change-feed follower that drives them standalone; [`functions`]: the same projections invoked by the Functions host's
//!   Cosmos DB triggers.
//! - [`startup`]: open the store while binding and serving (the readiness probe at once), start
//!   the pump; [`server`]: the HTTP server
//!   with its timeouts, connection cap and graceful shutdown.
//! - [`ops`]: the operations commands (`handler verify [--repair]`, `handler backup PATH`).
//! - [`web`]: the browser client in `web/`, embedded and served at `/` and `/api/web/`.
//! - [`tls`]: TLS and token signatures on ring (installed before any HTTPS client is built).

#[cfg(test)]
mod allocations;
pub mod api;
pub mod app;
pub mod auth;
pub mod domain;
pub mod error;
pub mod functions;
pub mod ops;
pub mod projection;
pub mod pump;
pub mod server;
pub mod settings;
pub mod startup;
pub mod store;
pub mod telemetry;
pub mod tls;
pub mod web;

pub use api::AppState;
