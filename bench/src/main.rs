//! `bench`: the article's measurements, repeated on this implementation.
//!
//! *How to model and partition data on Azure Cosmos DB using a real-world example* measures
//! every request of its blog — C1 create/edit a user, Q1 retrieve a user, C2 create/edit a post,
//! Q2 retrieve a post, Q3 list a user's posts in short form, C3 create a comment, Q4 list a
//! post's comments, C4 like a post, Q5 list a post's likes, Q6 list the newest posts in short
//! form (the feed) — under each version of its data model. This tool does the same for two:
//!
//! - **V3**, the product: the real `handler` application (`blog::startup::Application`, change-
//!   feed pump on) serving on `127.0.0.1:<ephemeral>`, driven with real HTTP requests. Every
//!   query is one single-partition operation thanks to the denormalized copies the change feed
//!   maintains (names and counters on every post, comment and like; post copies per user in
//!   `users`; the newest posts in `feed`).
//! - **V1**, the article's first version, on the same data: posts, comments and likes only in
//!   `posts`, no denormalization, so reads aggregate names and counts with extra queries and Q3
//!   and Q6 fan out across every partition of `posts` (see [`v1`]). It is implemented here,
//!   directly against the `Store` trait.
//!
//! How the numbers are made:
//!
//! - The dataset is the article's shape scaled to `--users` ([`dataset`]), deterministic for a
//!   `--seed`, loaded through the `Store` trait already converged (as if the change feed had
//!   caught up), after which the pump is checkpointed at the end of the change feed.
//! - Each row is `--warmup` discarded requests and `--samples` measured ones, sequential, on
//!   the same randomly drawn users and posts for V1 and V3. Latency is wall time: for V3 at
//!   the HTTP client (so it includes a loopback HTTP round trip, reported separately as the
//!   baseline), for V1 around its store calls. Store operations and request units come from
//!   `blog::store::metrics` — for V3 the `x-store-operations` / `x-request-charge` headers the
//!   app sends, for V1 the same accounting around the V1 code. Partitions touched are noted by
//!   a wrapper around the store ([`measure::Tally`]); for V3 from one extra request answered in
//!   process through the app's router (the first warm-up), since the HTTP server's tasks are
//!   out of the bench's reach.
//! - Reads run first, on the loaded data; then the writes (C1–C4), waiting after each for the
//!   pump to settle so that its work is not charged to the next row. V1's C4 likes are by the
//!   users V1's C1 created, V3's by V3's, so every like is a first like (201).
//! - Change-feed lag: a post is created (C2) and Q6 is polled until the post is the newest
//!   entry; the lag is from the 201 to the answer that shows it. "Lag under load" measures the
//!   same while `--concurrency` clients comment on one hot post as fast as they can (not on the
//!   emulated store, whose cost it would measure).
//! - Throughput: `--concurrency` workers repeat Q2 (random posts) or Q6 for `--seconds`.
//! - The scale rows (`scale`, `--scale-rows`): writes per like by audience, other users' lag
//!   while an author with many followers acts, timeline pages, and a like's price on a post of
//!   many likes, each at a scale its own options set (docs/scale.md builds on them).
//! - Search ([`search`]): S1, searches across the partitions of `posts` on the data as loaded,
//!   and S2, the same searches once the posts are ten times as many (the run's last row).
//! - Search under load ([`search_load`]): SL, `--searchers` clients searching from one address
//!   while a user at another reads, comments and posts, after S2 on its posts.
//! - Live updates ([`live`]): `--live-streams` streams open at once while writes come in, after
//!   SL.
//! - A tag's page ([`tags`]): G1, one query of the tag's partition, before S2.
//! - The RealWorld API ([`conduit`]): RW, register, follow, post, favorite, the lists, the feed
//!   and an article through `/api/conduit` (or at `--conduit-base`, any RealWorld server on this
//!   machine), after S2; `--conduit-only` runs it alone.
//! - Request units are reported where the store reports them (Cosmos DB, or the SDK's in-memory
//!   emulator with `--store emulated`, whose charges follow its own RU model); the embedded
//!   store reports none, shown as "—".

mod args;
mod chart;
mod conduit;
mod dataset;
mod fanout;
mod guards;
mod lag;
mod limit;
mod live;
mod measure;
mod phases;
mod price;
mod report;
mod results;
mod rows;
mod runner;
mod scale;
mod scratch;
mod search;
mod search_load;
mod snapshot;
mod stores;
mod tags;
mod throughput;
mod timeline;
mod v1;
mod versus;

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use blog::domain;
use blog::startup::Application;
use blog::store::Store;
use clap::Parser as _;
use rand::SeedableRng;
use rand_pcg::Pcg64;
use tokio::net::TcpListener;

use args::{Args, ScaleRow, StoreArg, EMULATED_LARGE_DELETE_MAX};
use measure::Client;
use phases::Phases;
use results::Report;
use runner::Bench;
use stores::open_store;

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    // The HTTP clients' rustls has no built-in provider: the product's (ring), as `handler` has.
    blog::tls::install();
    // The app logs every request at info; only warnings (a pump retrying, say) matter here,
    // and they go to stderr, away from the report on stdout.
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The RealWorld row's plan: the base given, or `origin`'s `/api/conduit`.
fn conduit_plan(args: &Args, origin: Option<&str>) -> anyhow::Result<conduit::Plan> {
    let (base, own_handler) = match (&args.conduit_base, origin) {
        (Some(base), _) => (base.clone(), false),
        (None, Some(origin)) => (format!("{origin}/api/conduit"), true),
        (None, None) => bail!("no RealWorld server to drive"),
    };
    Ok(conduit::Plan {
        base: conduit::loopback_base(&base)?,
        own_handler,
        users: args.conduit_users,
        follows: args.conduit_follows,
        articles: args.conduit_articles,
        favorites: args.conduit_favorites,
        reads: args.conduit_reads,
        limit: args.conduit_limit,
        concurrency: args.conduit_concurrency,
        seconds: args.conduit_seconds,
        seed: args.seed,
    })
}

/// `--conduit-only`: the RealWorld row alone, against `--conduit-base` or the handler started
/// on an empty store of `--store`.
async fn run_conduit_only(args: Args) -> anyhow::Result<()> {
    let started = Instant::now();
    let (report, store) = if args.conduit_base.is_some() {
        let plan = conduit_plan(&args, None)?;
        (conduit::run(&plan).await?, None)
    } else {
        let (raw, _scratch) = open_store(args.store).await?;
        dataset::ensure_empty(&*raw).await?;
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let origin = format!("http://{}", listener.local_addr()?);
        let kind = raw.kind().to_string();
        let app = Application::new(listener, raw, true);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(app.run_until(async {
            let _ = stopped.await;
        }));
        let plan = conduit_plan(&args, Some(&origin))?;
        let measured = conduit::run(&plan).await;
        let _ = stop.send(());
        server.await.context("the server task failed")??;
        (measured?, Some(kind))
    };
    let report = results::conduit::ConduitReport {
        generated_at: domain::now(),
        machine: results::Machine::this(),
        store,
        config: serde_json::to_value(&args)?,
        conduit: report,
        total_seconds: started.elapsed().as_secs_f64(),
    };
    println!("{}", report::conduit_markdown(&report.conduit));
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)
            .with_context(|| format!("cannot write the report to {}", path.display()))?;
        let svg = path.with_extension("svg");
        chart::write_conduit(&report.conduit, &svg)?;
        eprintln!(
            "bench: report written to {}, chart to {}",
            path.display(),
            svg.display()
        );
    }
    eprintln!("bench: done in {:.1} s", report.total_seconds);
    Ok(())
}

async fn run(args: Args) -> anyhow::Result<()> {
    let started = Instant::now();
    // Fail now rather than after the whole run when the report cannot be written.
    if let Some(path) = &args.json {
        std::fs::write(path, b"")
            .with_context(|| format!("cannot write the report to {}", path.display()))?;
    }
    // And before any work when the RealWorld server named is not one the bench drives.
    if let Some(base) = &args.conduit_base {
        conduit::loopback_base(base)?;
    }
    if args.conduit_only {
        return run_conduit_only(args).await;
    }
    let (raw, _scratch) = open_store(args.store).await?;
    let store: Arc<dyn Store> = Arc::new(measure::Tally(raw));
    dataset::ensure_empty(&*store).await?;

    eprintln!(
        "bench: loading {} users (seed {}) into the {} store",
        args.users,
        args.seed,
        store.kind()
    );
    let mut phases = Phases::new();
    let data = dataset::load(store.clone(), args.users, args.seed).await?;
    phases.done("load");
    let d = &data.summary;
    eprintln!(
        "bench: loaded {} items ({} posts, {} comments, {} likes) in {:.1} s",
        d.items, d.posts, d.comments, d.likes, d.load_seconds
    );
    let verification = if args.verify {
        let v = dataset::verify(&*store).await?;
        eprintln!(
            "bench: verified: {} changes replayed, nothing left to project ({:.1} s)",
            v.changes_replayed, v.seconds
        );
        phases.done("verify");
        Some(v)
    } else {
        None
    };
    // Everything is projected already: the pump starts after it.
    blog::pump::checkpoint_at_end(&*store).await?;
    phases.done("checkpoint");

    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let origin = format!("http://{}", listener.local_addr()?);
    // The rows measure the queries themselves: no feed snapshot here (see `snapshot`).
    let app = Application::new(listener, store.clone(), true).with_feed_cache(Duration::ZERO);
    let state = app.state().clone();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(app.run_until(async {
        let _ = stopped.await;
    }));

    let mut bench = Bench {
        rng: Pcg64::seed_from_u64(args.seed.wrapping_add(1)),
        client: Client::new(origin.clone(), state),
        store,
        data,
        args: args.clone(),
        big_authors: Vec::new(),
    };
    let measured = async {
        let baseline = bench.http_baseline().await?;
        let [q1, q2, q3, q4, q5, q6] = bench.reads().await?;
        phases.done("reads");
        let searches = bench.search_requests();
        let s1 = bench.search(&searches).await?;
        phases.done("search");
        let ([c1, c2, c3, c4], likes) = bench.writes().await?;
        phases.done("writes");
        let [d1, d2, d3, d4] = bench.deletes(&likes).await?;
        phases.done("deletes");
        let t1 = bench.timeline().await?;
        phases.done("timeline");
        let lag = bench.lag().await?;
        phases.done("lag");
        // The emulator serves every change-feed page and query by copying (and sorting) all the
        // documents of the range it reads, in this process: under a hot-post load that grows
        // the container, the figure would be the emulator's cost, not the product's lag.
        let lag_under_load = if args.store == StoreArg::Emulated {
            let why = "on the in-process emulator every change-feed page and query copies the \
                       whole range it reads, so a hot-post load measures the emulator";
            eprintln!("bench: lag under load is skipped: {why}");
            Err(why.to_string())
        } else {
            let l = bench.lag_under_load().await?;
            phases.done("lag under load");
            Ok(l)
        };
        // The same holds for a post of tens of thousands of comments deleted a page at a time:
        // each page's query and change-feed read copies the whole range on the emulator. A post
        // of a few pages is measured there.
        let lag_during_large_delete = if args.store == StoreArg::Emulated
            && args.large_delete_comments > EMULATED_LARGE_DELETE_MAX
        {
            let why = format!(
                "on the in-process emulator every page of the delete's sweep copies the whole \
                 range it reads, so the figure would be the emulator's; it runs there with \
                 --large-delete-comments {EMULATED_LARGE_DELETE_MAX} or fewer"
            );
            eprintln!("bench: lag during a large delete is skipped: {why}");
            Err(why)
        } else {
            let l = bench.lag_during_large_delete(&lag).await?;
            phases.done("lag during a large delete");
            Ok(l)
        };
        let prices_under_load = bench.prices_under_load().await?;
        phases.done("prices under load");
        let throughput = bench.throughput().await?;
        phases.done("throughput");
        let feed_snapshot = bench.feed_snapshot(&q6).await?;
        phases.done("feed snapshot");
        // Last but the scale rows: its many users and follows would weigh on nothing after it.
        let fanout = bench.fanout().await?;
        phases.done("fan-out");
        let chosen = scale::chosen(&args.scale_rows);
        let mut scale_rows = (!chosen.is_empty()).then(|| results::Scale {
            rows: chosen.iter().map(|r| scale::name(*r).to_string()).collect(),
            ..Default::default()
        });
        for row in chosen {
            // Each row from a clean slate: no author with many followers left by a row (or the
            // fan-out rows) before it, whom a row's own fan-out limit would send across it.
            bench.retire_big_authors().await?;
            let s = scale_rows.as_mut().expect("rows chosen");
            match row {
                ScaleRow::Writes => {
                    s.writes_per_like = Some(bench.writes_per_like().await?);
                    phases.done("scale: writes per like");
                }
                ScaleRow::Lag => {
                    s.others_lag = Some(bench.others_lag().await?);
                    phases.done("scale: others' lag");
                }
                ScaleRow::Timeline => {
                    s.timeline_pages = Some(bench.timeline_pages().await?);
                    phases.done("scale: timeline pages");
                }
                ScaleRow::Price => {
                    s.like_price = Some(bench.like_price().await?);
                    phases.done("scale: like price");
                }
                ScaleRow::None => {}
            }
        }
        let g1 = bench.tag_page().await?;
        phases.done("tag page");
        // Last: every row after it would read ten times the posts.
        let (s2, search_growth) = bench.search_growth(&searches, &s1).await?;
        phases.done("search with 10× the posts");
        // On those posts, with S1's searches; its posts and comments change no figure after it.
        let search_load = bench.search_load(&searches).await?;
        phases.done("search load");
        let live = bench.live_updates().await?;
        phases.done("live updates");
        // After every other row: its users and articles change no figure before it.
        let conduit = conduit::run(&conduit_plan(&args, Some(&origin))?).await?;
        phases.done("the RealWorld API");
        let rows = vec![
            c1, q1, c2, q2, q3, c3, q4, c4, q5, q6, d1, d2, d3, d4, t1, s1, g1, s2,
        ];
        anyhow::Ok((
            baseline,
            rows,
            search_growth,
            search_load,
            lag,
            lag_under_load,
            lag_during_large_delete,
            prices_under_load,
            throughput,
            feed_snapshot,
            fanout,
            scale_rows,
            live,
            conduit,
        ))
    }
    .await;
    let _ = stop.send(());
    server.await.context("the server task failed")??;
    let (
        http_baseline,
        rows,
        search_growth,
        search_load,
        change_feed_lag,
        change_feed_lag_under_load,
        change_feed_lag_during_large_delete,
        prices_under_load,
        throughput,
        feed_snapshot,
        fanout,
        scale,
        live,
        conduit,
    ) = measured?;
    let (change_feed_lag_under_load, change_feed_lag_under_load_skipped) =
        match change_feed_lag_under_load {
            Ok(load) => (Some(load), None),
            Err(why) => (None, Some(why)),
        };
    let (change_feed_lag_during_large_delete, change_feed_lag_during_large_delete_skipped) =
        match change_feed_lag_during_large_delete {
            Ok(del) => (Some(del), None),
            Err(why) => (None, Some(why)),
        };

    // The process measurements start `handler` on a fresh embedded store: they measure nothing
    // of the emulated store, and an embedded run reports them.
    let binaries = if args.store == StoreArg::Emulated {
        Err(
            "they run the product binary on its embedded store, not on the emulator; an \
             embedded run reports them"
                .to_string(),
        )
    } else {
        versus::binaries(args.handler.as_deref())
    };
    let (versus, versus_skipped) = match binaries {
        Ok((handler, bare)) => {
            let v = versus::run(&args, &handler, &bare).await?;
            phases.done("versus bare axum");
            (Some(v), None)
        }
        Err(why) => {
            eprintln!("bench: the process measurements are skipped: {why}");
            (None, Some(why))
        }
    };

    let report = Report {
        generated_at: domain::now(),
        machine: results::Machine::this(),
        store: match args.store {
            StoreArg::Emulated => format!("{} (the SDK's in-memory emulator)", bench.store.kind()),
            _ => bench.store.kind().to_string(),
        },
        config: serde_json::to_value(&args)?,
        dataset: bench.data.summary.clone(),
        verification,
        http_baseline,
        rows,
        search_growth,
        search_load,
        change_feed_lag,
        change_feed_lag_under_load,
        change_feed_lag_under_load_skipped,
        change_feed_lag_during_large_delete,
        change_feed_lag_during_large_delete_skipped,
        prices_under_load,
        throughput,
        feed_snapshot,
        fanout,
        scale,
        live,
        conduit,
        versus,
        versus_skipped,
        phases: phases.list,
        total_seconds: started.elapsed().as_secs_f64(),
    };
    println!("{}", report::markdown(&report));
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)
            .with_context(|| format!("cannot write the report to {}", path.display()))?;
        eprintln!("bench: report written to {}", path.display());
        let svg = path.with_extension("svg");
        chart::write(&report, &svg)?;
        eprintln!("bench: chart written to {}", svg.display());
    }
    eprintln!("bench: done in {:.1} s", report.total_seconds);
    let over = guards::over(&report);
    for o in &over {
        println!("**Over target:** {o}.");
    }
    if !over.is_empty() && !guards::JUDGED {
        eprintln!(
            "bench: {} figures over their targets, not judged: a debug build measures neither \
             speed nor size",
            over.len()
        );
    } else if !over.is_empty() {
        bail!(
            "{} figures over their targets: {}",
            over.len(),
            over.join("; ")
        );
    }
    Ok(())
}
