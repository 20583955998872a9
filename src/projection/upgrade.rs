//! What this release does only for a store an earlier release wrote, each part in one module
//! with the release that deletes it (`docs/deploy.md`, "Upgrading an existing deployment"):
//! - [`timelines`]: the move of timeline items from the followers' partitions of `users` to
//!   `timelines`, with the reads and removals that look in both places meanwhile; deleted in
//!   0.2.0, the first release after every deployment has recorded `timelinesMoved`.
//!
//! Everything else names such a part only through a path `upgrade::<part>::…`, so deleting one
//! is deleting its module and those calls (for the timelines, `docs/ARCHITECTURE.md` lists them
//! and `tests/api/architecture.rs` holds the code to that list).

pub mod timelines;
