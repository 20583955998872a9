//! The report as markdown, shaped like the article's conclusion table (one row per request, V1
//! and V3 side by side), then the other figures of the run (`results`).

mod conduit;
mod live;
mod scale;

pub use conduit::markdown as conduit_markdown;

use std::fmt::Write as _;

use crate::measure::{Spread, Stats};
use crate::results::{Fanout, Latency, Report, SearchLoad, Versus};

fn num(x: f64) -> String {
    if x < 10.0 {
        format!("{x:.2}")
    } else if x < 100.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.0}")
    }
}

fn count(s: &Spread) -> String {
    if s.min == s.max {
        format!("{}", s.mean)
    } else {
        format!("{:.1}", s.mean)
    }
}

fn cells(s: &Stats) -> String {
    let partitions = if s.partitions.cross_partition.is_empty() {
        count(&s.partitions.distinct)
    } else {
        "all".to_string()
    };
    let ru = s
        .request_charge
        .map_or_else(|| "—".to_string(), |r| format!("{:.2}", r.mean));
    format!(
        "{} / {} | {} | {} | {}",
        num(s.p50_ms),
        num(s.p99_ms),
        count(&s.operations),
        partitions,
        ru
    )
}

/// The whole report as markdown.
pub fn markdown(r: &Report) -> String {
    let d = &r.dataset;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Store `{}`; dataset (seed {}): {} users, {} posts, {} comments, {} likes, {} post \
         copies in `users`, {} in `feed` — {} items loaded in {:.1} s ({:.0} items/s).\n",
        r.store,
        d.seed,
        d.users,
        d.posts,
        d.comments,
        d.likes,
        d.user_post_copies,
        d.feed_copies,
        d.items,
        d.load_seconds,
        d.items_per_second
    );
    out.push_str(
        "| | V1 p50 / p99 (ms) | V1 ops | V1 partitions | V1 RU \
         | V3 p50 / p99 (ms) | V3 ops | V3 partitions | V3 RU |\n",
    );
    out.push_str("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for row in &r.rows {
        let _ = writeln!(
            out,
            "| **[{}]** | {} | {} |",
            row.request,
            row.v1
                .as_ref()
                .map_or_else(|| "— | — | — | —".to_string(), cells),
            cells(&row.v3)
        );
    }
    let samples = r.rows.first().map_or(0, |row| row.v3.samples);
    let _ = writeln!(
        out,
        "\n{samples} sequential samples per cell. V3 is timed at an HTTP client of the running \
         `handler` app (loopback; a request without store work takes p50 {} / p99 {} ms); V1 is \
         timed around its store calls in process. Ops and RU are means per request; \
         partitions are the distinct partitions a request touches (\"all\": a cross-partition \
         query); RU \"—\": the store reports no request units.",
        num(r.http_baseline.p50_ms),
        num(r.http_baseline.p99_ms)
    );
    let settled: Vec<String> = r
        .rows
        .iter()
        .filter_map(|row| {
            Some(format!(
                "[{}] V3 {:.1} s, V1 {:.1} s",
                row.request, row.v3_settle_seconds?, row.v1_settle_seconds?
            ))
        })
        .collect();
    if !settled.is_empty() {
        let _ = writeln!(
            out,
            "\nChange-feed work set off by each write row (time until the pump had applied \
             it all, waited out before the next measurement): {}.",
            settled.join("; ")
        );
    }
    out.push_str(&search_markdown(r));
    out.push_str(&search_load_markdown(&r.search_load));
    out.push_str(&full_price_markdown(r));
    let lag = &r.change_feed_lag;
    let _ = writeln!(
        out,
        "\nChange-feed lag, C2 acknowledged → visible in Q6: p50 {} ms, p99 {} ms, max {} ms \
         ({} posts, Q6 polled every {} ms).",
        num(lag.latency.p50_ms),
        num(lag.latency.p99_ms),
        num(lag.latency.max_ms),
        lag.latency.samples,
        num(lag.poll_interval_ms)
    );
    match (
        &r.change_feed_lag_under_load,
        &r.change_feed_lag_under_load_skipped,
    ) {
        (Some(load), _) => {
            let _ = writeln!(
                out,
                "\nLag under load, the same while {} clients comment on one hot post ({:.0} \
                 comments/s for {:.0} s): p50 {} ms, p99 {} ms, max {} ms ({} posts); the hot \
                 post's count was exact {} ms after the load stopped.",
                load.hot_clients,
                load.comments_per_second,
                load.seconds,
                num(load.lag.latency.p50_ms),
                num(load.lag.latency.p99_ms),
                num(load.lag.latency.max_ms),
                load.lag.latency.samples,
                num(load.count_exact_after_ms)
            );
        }
        (None, why) => {
            let _ = writeln!(
                out,
                "\nLag under load: skipped ({}).",
                why.as_deref().unwrap_or("not measured")
            );
        }
    }
    match (
        &r.change_feed_lag_during_large_delete,
        &r.change_feed_lag_during_large_delete_skipped,
    ) {
        (Some(del), _) => {
            let _ = writeln!(
                out,
                "\nFeed lag of other users' posts while a {}-comment post is deleted: p50 {} ms, \
                 p99 {} ms, max {} ms ({} posts; max {:.1}× the quiet median); the delete \
                 answered in {} ms and every comment was marked {} ms after it.",
                del.comments,
                num(del.lag.latency.p50_ms),
                num(del.lag.latency.p99_ms),
                num(del.lag.latency.max_ms),
                del.lag.latency.samples,
                del.max_over_quiet_p50,
                num(del.delete_answered_ms),
                num(del.all_marked_after_ms)
            );
        }
        (None, why) => {
            let _ = writeln!(
                out,
                "\nLag during a large delete: skipped ({}).",
                why.as_deref().unwrap_or("not measured")
            );
        }
    }
    out.push_str(
        "\n| throughput | concurrency | seconds | requests | requests/s | p50 / p99 (ms) |\n\
         | --- | ---: | ---: | ---: | ---: | ---: |\n",
    );
    for t in &r.throughput {
        let _ = writeln!(
            out,
            "| **[{}]** {} | {} | {:.1} | {} | {:.0} | {} / {} |",
            t.request,
            t.version,
            t.concurrency,
            t.seconds,
            t.requests,
            t.requests_per_second,
            num(t.latency.p50_ms),
            num(t.latency.p99_ms)
        );
    }
    let f = &r.feed_snapshot;
    let ru = match f.request_units_saved_per_1000_reads {
        Some(ru) => format!(
            ", {ru:.0} RU saved per 1,000 reads ({:.2} RU per feed query)",
            f.request_units_per_query.unwrap_or_default()
        ),
        None => String::new(),
    };
    let _ = writeln!(
        out,
        "\nFeed snapshot: {} clients read the feed for {:.1} s while {} posts were created: {} \
         reads made {} feed queries, {:.0} store operations saved per 1,000 reads{ru}.",
        f.concurrency,
        f.seconds,
        f.posts_created,
        f.reads,
        f.store_operations,
        f.operations_saved_per_1000_reads
    );
    out.push_str(&fanout_markdown(&r.fanout));
    if let Some(s) = &r.scale {
        out.push_str(&scale::markdown(s));
    }
    out.push_str(&live::markdown(&r.live));
    out.push_str(&conduit::markdown(&r.conduit));
    match (&r.versus, &r.versus_skipped) {
        (Some(v), _) => out.push_str(&versus_markdown(v)),
        (None, Some(why)) => {
            let _ = writeln!(out, "\nProduct against bare axum: skipped ({why}).");
        }
        (None, None) => {}
    }
    out
}

/// S1 against S2: the same searches on the data as loaded and with ten times the posts.
fn search_markdown(r: &Report) -> String {
    let g = &r.search_growth;
    let ru = g
        .request_charge_ratio
        .map_or_else(String::new, |x| format!(", {x:.2}× the RU"));
    format!(
        "\nSearch ([S1], [S2]: `GET /api/search`, two words, one query across the partitions of \
         `posts` plus a point read of each author shown): with {} live posts, then {}, the same \
         searches took {:.2}× the store operations{ru} and {:.2}× the p50 latency (the posts \
         were written and projected in {:.1} s).\n",
        g.posts_before, g.posts_after, g.operations_ratio, g.p50_ratio, g.setup_seconds
    )
}

/// `p50 / p99 / max` of `l`.
fn spread(l: &Latency) -> String {
    format!("{} / {} / {}", num(l.p50_ms), num(l.p99_ms), num(l.max_ms))
}

/// SL: one line per search budget.
fn search_load_markdown(s: &SearchLoad) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nSearch under load ([SL]): {} clients at one address send searches back to back for \
         {:.1} s ({} live posts, {} of them found by the first search), while a user at another \
         address reads posts (Q2), comments (C3) and posts (C2), each post awaited in the feed \
         (Q6); at most {} searches run at once in the server:\n\n\
         | searches a minute per address | searches 200 / 429 / 503 | search 200 p50 / p99 (ms) \
         | other address: Q2 p50 / p99 / max (ms) | C3 p50 / p99 / max (ms) \
         | feed lag p50 / p99 / max (ms) |\n\
         | --- | ---: | ---: | ---: | ---: | ---: |",
        s.searchers,
        s.seconds,
        s.posts,
        s.posts_found,
        s.runs.first().map_or(0, |r| r.searches_in_flight)
    );
    for r in &s.runs {
        let budget = if r.searches_per_minute == 0 {
            "none".to_string()
        } else {
            r.searches_per_minute.to_string()
        };
        let other = if r.answered_other > 0 {
            format!(" (+{} other)", r.answered_other)
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "| {budget} | {} / {} / {}{other} | {} / {} | {} ({}) | {} ({}) | {} ({}) |",
            r.answered_ok,
            r.answered_too_many,
            r.answered_unavailable,
            num(r.search_latency.p50_ms),
            num(r.search_latency.p99_ms),
            spread(&r.point_read),
            r.point_read.samples,
            spread(&r.write),
            r.write.samples,
            spread(&r.feed_lag.latency),
            r.feed_lag.latency.samples
        );
    }
    out
}

fn fanout_markdown(f: &Fanout) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nFan-out of one post (C2) by an author with {} followers: from the request to the \
         change feed done, the change-feed work it set off, the copies it left, and the \
         process's peak resident set above its start:\n\n\
         | | fan-out limit | C2 → applied (ms) | change-feed ops | timeline copies | peak RSS + (MiB) |\n\
         | --- | ---: | ---: | ---: | ---: | ---: |",
        f.followers
    );
    for (name, what, run) in [
        ("F1", "threshold off: copied", &f.copied),
        ("F2", "threshold on: merged when read", &f.merged),
    ] {
        let _ = writeln!(
            out,
            "| **[{name}]** {what} | {} | {} | {} | {} | {} |",
            run.fanout_limit,
            num(run.applied_ms),
            run.change_feed_operations,
            run.timeline_copies,
            run.peak_rss_above_start_mib
                .map_or_else(|| "—".to_string(), |m| format!("{m:.1}"))
        );
    }
    let r = &f.merged_read;
    let _ = writeln!(
        out,
        "\nWith the threshold on, a follower's timeline read: {} store operations, p50 {} ms, \
         p99 {} ms ({} reads; the post {}). Writing the followers and letting the change feed go \
         over them took {:.1} s, not measured.",
        r.operations,
        num(r.latency.p50_ms),
        num(r.latency.p99_ms),
        r.latency.samples,
        if r.shows_post { "shown" } else { "not shown" },
        f.setup_seconds
    );
    out
}

fn versus_markdown(v: &Versus) -> String {
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    let (c, h) = (&v.cold_start, &v.hot_post);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nThe product (`{}`, {:.1} MiB) against a bare axum server serving the same bytes \
         ({:.1} MiB), as processes:\n\n\
         | figure | product | bare axum | ratio |\n| --- | ---: | ---: | ---: |",
        v.handler,
        mib(v.handler_bytes),
        mib(v.bare_bytes)
    );
    let _ = writeln!(
        out,
        "| cold start, exec → first 200 on `/api/feed`, p50 / p99 (ms) | {} / {} | {} / {} | {:.2}× |",
        num(c.product.p50_ms),
        num(c.product.p99_ms),
        num(c.bare.p50_ms),
        num(c.bare.p99_ms),
        c.ratio
    );
    for (t, read) in [
        (&v.feed_throughput, "`GET /api/feed`"),
        (&v.post_throughput, "`GET /api/posts/{id}`"),
    ] {
        let _ = writeln!(
            out,
            "| **[{}]** {read} ({} items, {} bytes), {} clients, requests/s | {:.0} | {:.0} | {:.2} |",
            t.request,
            t.items,
            t.body_bytes,
            t.concurrency,
            t.product.requests_per_second,
            t.bare.requests_per_second,
            t.ratio
        );
    }
    let _ = writeln!(
        out,
        "| peak RSS after {} clients commented on one post for {:.1} s ({:.0} comments/s), MiB | {:.1} | {:.1} | {:.2} |",
        h.concurrency,
        h.seconds,
        h.comments.requests_per_second,
        h.peak_rss_mib,
        h.bare_peak_rss_mib,
        h.peak_rss_mib / h.bare_peak_rss_mib
    );
    out
}

/// The full price of each write: its request's store operations plus the change-feed work it
/// set off, one at a time and (C3, C4) under the hot-post load.
fn full_price_markdown(r: &Report) -> String {
    let mut out = String::from(
        "\nThe full price of each write (store operations per command: the request, then the \
         change-feed work it set off; RU where the store reports them):\n\n\
         | | request ops | change-feed ops | total | request RU | change-feed RU \
         | under load: request ops | change-feed ops | total |\n\
         | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    let ru = |x: Option<f64>| x.map_or_else(|| "—".to_string(), |v| format!("{v:.2}"));
    for row in &r.rows {
        let Some(cf) = &row.change_feed else { continue };
        let load = r
            .prices_under_load
            .iter()
            .find(|p| p.request == row.request);
        let under_load = load.map_or_else(
            || "— | — | —".to_string(),
            |p| {
                format!(
                    "{:.2} | {:.2} | {:.2}",
                    p.request_operations_per_command,
                    p.change_feed.operations_per_command,
                    p.request_operations_per_command + p.change_feed.operations_per_command
                )
            },
        );
        let _ = writeln!(
            out,
            "| **[{}]** | {:.2} | {:.2} | {:.2} | {} | {} | {} |",
            row.request,
            row.v3.operations.mean,
            cf.operations_per_command,
            row.v3.operations.mean + cf.operations_per_command,
            ru(row.v3.request_charge.map(|s| s.mean)),
            ru(cf.request_charge_per_command),
            under_load
        );
    }
    if let Some(p) = r.prices_under_load.first() {
        let _ = writeln!(
            out,
            "\nUnder load: {} clients writing to one post for {:.0} s each ({}).",
            p.clients,
            p.seconds,
            r.prices_under_load
                .iter()
                .map(|p| format!("{} {:.0}/s", p.request, p.commands_per_second))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    out
}
