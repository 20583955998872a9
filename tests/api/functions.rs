//! The Azure Functions custom handler: the app definition against the router, trigger
//! invocations as the host sends them, hosted mode and the binary's logging.
//!
//! The packaging layout (`scripts/package.sh`, a static musl build) is checked by
//! `.ci/package-check.sh` instead, since it needs a release build for another target.

pub mod common;
mod contract;
mod deployment;
mod envelope;
mod forged;
mod hosted;
mod limits;
mod timeline;
