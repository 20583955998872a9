//! The fan-out limit (`BLOG_TIMELINE_FANOUT_LIMIT`) of the application running in this process:
//! the one place the bench sets it, for the rows that need an author at, over or far below it.
//! `handler` sets it from its settings at start; the bench, which runs the application in its
//! own process, sets it for the length of a row and puts it back.

use blog::projection::timeline::{fanout_limit, set_fanout_limit};

/// The limit in force.
#[cfg(test)]
pub fn current() -> u64 {
    fanout_limit()
}

/// Put `limit` in force; the one it replaces.
pub fn set(limit: u64) -> u64 {
    let was = fanout_limit();
    set_fanout_limit(limit);
    was
}
