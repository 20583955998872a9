//! The live-updates row as markdown: one table of the delivery, one of the follower's idle work.

use std::fmt::Write as _;

use super::num;
use crate::results::live::LiveUpdates;

fn mib(x: Option<f64>) -> String {
    x.map_or_else(|| "—".to_string(), |v| format!("{v:.1}"))
}

/// The row, when it ran.
pub fn markdown(l: &LiveUpdates) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nLive updates: {} streams (`post:` {}, `timeline:` {}, `user:` {}) opened in {:.1} s; \
         {} writes at {:.1}/s (comments, likes, posts in turn).\n",
        l.streams,
        l.post_streams,
        l.timeline_streams,
        l.user_streams,
        l.open_seconds,
        l.writes,
        l.write_rate
    );
    out.push_str(
        "| | events delivered / expected | events / s | lag p50 / p99 (ms) | one stream: lag p50 / p99 (ms) | RSS before / idle / peak delivering (MiB) |\n\
         | --- | ---: | ---: | ---: | ---: | ---: |\n",
    );
    let _ = writeln!(
        out,
        "| **[LU]** live updates | {} / {} | {:.0} | {} / {} | {} / {} | {} / {} / {} |",
        l.delivered,
        l.expected,
        l.events_per_second,
        num(l.lag.p50_ms),
        num(l.lag.p99_ms),
        num(l.one_stream_lag.p50_ms),
        num(l.one_stream_lag.p99_ms),
        mib(l.rss_before_mib),
        mib(l.rss_idle_mib),
        mib(l.rss_delivery_peak_mib)
    );
    out.push_str(
        "\n| streams open, idle | seconds | follower's store ops | ops / s | RU |\n\
         | ---: | ---: | ---: | ---: | ---: |\n",
    );
    for i in &l.idle {
        let ru = i
            .request_charge
            .map_or_else(|| "—".to_string(), |r| format!("{r:.2}"));
        let _ = writeln!(
            out,
            "| {} | {:.1} | {} | {:.2} | {ru} |",
            i.streams, i.seconds, i.operations, i.operations_per_second
        );
    }
    out
}
