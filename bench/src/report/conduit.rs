//! The RealWorld row (RW) as markdown: one line per kind of request.

use std::fmt::Write as _;

use super::num;
use crate::results::conduit::Conduit;

/// The RealWorld row's table and its conditions.
pub fn markdown(c: &Conduit) -> String {
    let mut out = String::new();
    let whose = if c.own_handler {
        "this app's handler, started by the bench"
    } else {
        "the server at that address"
    };
    let _ = writeln!(
        out,
        "\n**[RW]** The RealWorld API at `{}` ({whose}): {} users registered, each following \
         {} others, posting {} articles and favoriting {} of others'; then {} requests of each \
         read, pages of {}; {} clients at once, at most {:.0} s per kind ({:.1} s in all):\n\n\
         | kind | route | requests | requests/s | p50 / p99 (ms) | articles per page | store ops per request (max) |\n\
         | --- | --- | ---: | ---: | ---: | ---: | ---: |",
        c.base,
        c.users,
        c.follows_per_user,
        c.articles_per_user,
        c.favorites_per_user,
        c.reads,
        c.limit,
        c.concurrency,
        c.seconds_per_kind,
        c.total_seconds
    );
    for k in &c.kinds {
        let requests = if k.requests == k.planned {
            k.requests.to_string()
        } else {
            format!("{} of {}", k.requests, k.planned)
        };
        let items = k
            .items
            .map_or_else(|| "—".to_string(), |s| format!("{:.1}", s.mean));
        let ops = k.operations.map_or_else(
            || "—".to_string(),
            |s| {
                let bound = k
                    .operations_bound
                    .map_or_else(String::new, |b| format!(", bound {b}"));
                format!("{:.1} ({}{bound})", s.mean, s.max)
            },
        );
        let _ = writeln!(
            out,
            "| {} | `{}` | {requests} | {:.0} | {} / {} | {items} | {ops} |",
            k.kind,
            k.route,
            k.requests_per_second,
            num(k.latency.p50_ms),
            num(k.latency.p99_ms)
        );
    }
    let over: Vec<&str> = c
        .kinds
        .iter()
        .filter(|k| k.within_bound() == Some(false))
        .map(|k| k.kind)
        .collect();
    if !over.is_empty() {
        let _ = writeln!(
            out,
            "\nOver the documented bound of a list page (4 + 3 × limit store operations): {}.",
            over.join(", ")
        );
    }
    out.push_str(
        "\nStore operations come from the `x-store-operations` header (\"—\": the server sends \
         none); the same load runs against any RealWorld server with `--conduit-only \
         --conduit-base <its base URL>`.\n",
    );
    out
}
