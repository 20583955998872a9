//! The targets the bench holds the product to: each figure over its target is printed as a
//! finding at the end of the report and fails the run (exit 1), after the report and its JSON
//! are written, so a slip is seen where the figures are.

use crate::results::Report;

/// The idle change-feed lag's p99, C2 acknowledged → visible in Q6 (ms).
pub const IDLE_LAG_P99_MS: f64 = 5.0;
/// The product binary's size on disk (bytes): the packaged handler is downloaded on every cold
/// start of the Functions host.
pub const HANDLER_BYTES: u64 = 10_000_000;

/// Whether the targets fail the run: only in an optimized build of the bench (and of the handler
/// it measures). A debug build, such as `cargo test`'s smoke run, still reports what is over.
pub const JUDGED: bool = !cfg!(debug_assertions);

/// Each figure of `r` over its target, described.
pub fn over(r: &Report) -> Vec<String> {
    let mut out = Vec::new();
    let lag = r.change_feed_lag.latency.p99_ms;
    if lag > IDLE_LAG_P99_MS {
        out.push(format!(
            "idle change-feed lag p99 {lag:.2} ms is over the target of {IDLE_LAG_P99_MS} ms"
        ));
    }
    if let Some(v) = &r.versus {
        if v.handler_bytes > HANDLER_BYTES {
            out.push(format!(
                "{} is {} bytes, over the target of {HANDLER_BYTES}",
                v.handler, v.handler_bytes
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` with a comma every three digits, as the docs write numbers.
    fn grouped(n: u64) -> String {
        let digits = n.to_string();
        let mut out = String::new();
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i).is_multiple_of(3) {
                out.push(',');
            }
            out.push(c);
        }
        out
    }

    #[test]
    fn the_targets_are_the_documented_ones() {
        let doc = include_str!("../../docs/performance.md");
        let lag = format!("idle change-feed lag p99 at most {IDLE_LAG_P99_MS} ms");
        assert!(doc.contains(&lag), "docs/performance.md must state: {lag}");
        let size = format!("at most {} bytes", grouped(HANDLER_BYTES));
        assert!(
            doc.contains(&size),
            "docs/performance.md must state: {size}"
        );
    }
}
