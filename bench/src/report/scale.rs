//! The scale rows as markdown: one table per group.

use std::fmt::Write as _;

use super::num;
use crate::results::scale::{LikePrice, OthersLag, Scale, TimelinePages, WritesPerLike};

/// The scale rows that ran.
pub fn markdown(s: &Scale) -> String {
    let mut out = String::new();
    if let Some(w) = &s.writes_per_like {
        out.push_str(&writes(w));
    }
    if let Some(l) = &s.others_lag {
        out.push_str(&lag(l));
    }
    if let Some(t) = &s.timeline_pages {
        out.push_str(&pages(t));
    }
    if let Some(p) = &s.like_price {
        out.push_str(&price(p));
    }
    out
}

fn ru(x: Option<f64>) -> String {
    x.map_or_else(|| "—".to_string(), |v| format!("{v:.2}"))
}

fn writes(w: &WritesPerLike) -> String {
    let mut out = format!(
        "\nWrites per like by audience (the author's followers, the post's bookmarkers and tags): \
         {} likes of one post, each by a user of its own, at {}/s \
         (steady) or all at once (burst), from the first like to every lane of the change feed \
         done; every item written meanwhile (requests and change feed), per like:\n\n\
         | | followers | bookmarkers | tags | mode | writes / like | by container \
         | request ops / like | change-feed ops / like | RU / like | applied (ms) |\n\
         | --- | ---: | ---: | ---: | --- | ---: | --- | ---: | ---: | ---: | ---: |\n",
        w.likes, w.steady_per_second
    );
    for r in &w.runs {
        let by: Vec<String> = r
            .writes_per_like_by_container
            .iter()
            .map(|(c, n)| format!("{c} {}", num(*n)))
            .collect();
        let charge = match (r.request_charge_per_like, r.change_feed_charge_per_like) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
        };
        let _ = writeln!(
            out,
            "| **[W]** | {} | {} | {} | {} | {} | {} | {:.2} | {} | {} | {} |",
            r.followers,
            r.bookmarkers,
            r.tags,
            r.mode,
            num(r.writes_per_like),
            by.join(", "),
            r.request_operations_per_like,
            num(r.change_feed_operations_per_like),
            ru(charge),
            num(r.applied_ms)
        );
    }
    let _ = writeln!(
        out,
        "\nWriting the authors, followers and posts took {:.1} s, not measured.",
        w.setup_seconds
    );
    out
}

fn lag(l: &OthersLag) -> String {
    let mut out = format!(
        "\nOther users' lag while an author with {} followers (the fan-out limit at {}) acts: \
         another user's new post until it is the newest in `/api/feed`, another user's follow \
         until it shows in `/followers`, probed over and over until the change feed had applied \
         everything:\n\n\
         | | scenario | applied (ms) | store writes | feed lag p50 / max (ms) \
         | follow lag p50 / max (ms) | probes |\n\
         | --- | --- | ---: | ---: | ---: | ---: | ---: |\n",
        l.followers, l.fanout_limit
    );
    for s in std::iter::once(&l.quiet).chain(&l.scenarios) {
        let _ = writeln!(
            out,
            "| **[L]** {} | {} | {} | {} | {} / {} | {} / {} | {} |",
            s.name,
            s.what,
            num(s.applied_ms),
            s.store_writes,
            num(s.feed_lag.p50_ms),
            num(s.feed_lag.max_ms),
            num(s.follow_lag.p50_ms),
            num(s.follow_lag.max_ms),
            s.feed_lag.samples
        );
    }
    let _ = writeln!(
        out,
        "\nStore writes are less the probes' own (the quiet run's per probe). Writing the author \
         and followers took {:.1} s, not measured.",
        l.setup_seconds
    );
    out
}

fn pages(t: &TimelinePages) -> String {
    let mut out = format!(
        "\nA timeline page ({} posts asked for), read one after another:\n\n\
         | | follows | of them merged | posts shown | ops mean / max | RU | p50 / p99 (ms) |\n\
         | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n",
        t.page_limit
    );
    for (name, p) in [("T2", &t.ordinary), ("T3", &t.merged)] {
        let _ = writeln!(
            out,
            "| **[{name}]** | {} | {} | {} | {} / {} | {} | {} / {} |",
            p.follows,
            p.merged_authors,
            p.items,
            num(p.operations_mean),
            p.operations_max,
            ru(p.request_charge_mean),
            num(p.latency.p50_ms),
            num(p.latency.p99_ms)
        );
    }
    let c = &t.concurrent;
    let failed = c
        .first_failure
        .as_ref()
        .map_or_else(String::new, |f| format!(" (first failure: {f})"));
    let _ = writeln!(
        out,
        "\nT3's page read by {} clients at once: {} answered{failed}, p50 {} ms, max {} ms, all \
         done in {} ms; the process's peak resident set {} MiB above its resident set before. \
         Setting the readers up took {:.1} s, not measured.",
        c.readers,
        c.answered,
        num(c.latency.p50_ms),
        num(c.latency.max_ms),
        num(c.wall_ms),
        c.peak_rss_above_idle_mib
            .map_or_else(|| "—".to_string(), |m| format!("{m:.1}")),
        t.setup_seconds
    );
    out
}

fn price(p: &LikePrice) -> String {
    let mut out = String::from(
        "\nThe price of a like by the post's total (one like at a time, the change feed settled \
         after each; per like):\n\n\
         | | post's likes | request ops | change-feed ops | total ops | writes | request RU \
         | change-feed RU | request p50 (ms) | applied p50 (ms) |\n\
         | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    for c in [&p.small, &p.large] {
        let _ = writeln!(
            out,
            "| **[P]** | {} | {:.2} | {:.2} | {:.2} | {:.2} | {} | {} | {} | {} |",
            c.post_likes,
            c.request_operations,
            c.change_feed_operations,
            c.operations(),
            c.writes,
            ru(c.request_charge),
            ru(c.change_feed_charge),
            num(c.request_p50_ms),
            num(c.applied_p50_ms)
        );
    }
    let _ = writeln!(
        out,
        "\nLarge over small: {:.2}× the store operations{}. Writing the likes and letting the \
         change feed go over them took {:.1} s, not measured.",
        p.operations_ratio,
        p.request_charge_ratio
            .map_or_else(String::new, |r| format!(", {r:.2}× the request units")),
        p.setup_seconds
    );
    out
}
