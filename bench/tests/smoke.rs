//! The bench runs end to end at a tiny scale and writes a full JSON report. No timing is
//! asserted: only that every row was measured and that the accounting is what the product's
//! contract says (one store operation per V3 query).

use std::process::Command;

use serde_json::Value;

/// Run the bench with `args`, which must succeed; its JSON report and its markdown table.
fn run_bench(args: &[&str]) -> (Value, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let json = dir.path().join("report.json");
    let out = Command::new(env!("CARGO_BIN_EXE_bench"))
        .args(args)
        .arg("--json")
        .arg(&json)
        .env_remove("RUST_LOG")
        .output()
        .expect("the bench starts");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "bench failed: {stderr}");
    let report: Value =
        serde_json::from_slice(&std::fs::read(&json).expect("a JSON report")).expect("JSON");
    // The chart beside the report: an SVG with a band per row.
    let svg =
        std::fs::read_to_string(json.with_extension("svg")).expect("a chart beside the report");
    assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(200)]);
    if report["conduit"].is_object() {
        assert!(svg.contains("[RW] RealWorld API"), "no RealWorld panels");
    }
    if report["live"].is_object() {
        assert!(svg.contains("[LU] live updates"), "no live-updates panels");
    }
    if report["scale"].is_object() {
        assert!(
            svg.contains("store writes per like"),
            "no scale panels in the chart"
        );
    }
    for row in report["rows"].as_array().expect("rows") {
        let name = row["request"].as_str().unwrap();
        assert!(
            svg.contains(&format!("\n{name}\n</text>")),
            "no {name} in the chart"
        );
    }
    (report, String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn the_bench_runs_at_tiny_scale_and_reports_every_row() {
    let (report, table) = run_bench(&[
        "--users",
        "3",
        "--samples",
        "3",
        "--warmup",
        "1",
        "--lag-samples",
        "2",
        "--concurrency",
        "2",
        "--seconds",
        "0.2",
        "--load-seconds",
        "0.5",
        "--verify",
        "--cold-starts",
        "2",
        "--large-delete-comments",
        "450",
        "--fanout-followers",
        "20",
        "--audiences",
        "0,3",
        "--bookmarkers",
        "0,4",
        "--post-tags",
        "3",
        "--likes",
        "3",
        "--like-rate",
        "50",
        "--hot-followers",
        "8",
        "--hot-likes",
        "2",
        "--merged-authors",
        "4",
        "--timeline-readers",
        "3",
        "--price-likes",
        "150",
        "--conduit-users",
        "4",
        "--conduit-follows",
        "2",
        "--conduit-articles",
        "2",
        "--conduit-favorites",
        "2",
        "--conduit-reads",
        "3",
        "--conduit-limit",
        "5",
        "--conduit-concurrency",
        "2",
        "--searchers",
        "3",
        "--live-streams",
        "7",
        "--live-writes",
        "6",
    ]);
    let rows = report["rows"].as_array().expect("rows");
    let names: Vec<&str> = rows
        .iter()
        .map(|r| r["request"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "C1", "Q1", "C2", "Q2", "Q3", "C3", "Q4", "C4", "Q5", "Q6", "D1", "D2", "D3", "D4",
            "T1", "S1", "G1", "S2"
        ]
    );
    for r in rows {
        // V3 only: the article has no deletes, no follows and no search.
        let deletes = r["request"]
            .as_str()
            .unwrap()
            .starts_with(['D', 'T', 'S', 'G']);
        if deletes {
            assert!(r["v1"].is_null(), "{r}");
        }
        let versions: &[&str] = if deletes { &["v3"] } else { &["v1", "v3"] };
        for &v in versions {
            assert_eq!(r[v]["samples"], 3, "{r}");
            assert!(r[v]["p50Ms"].as_f64().is_some(), "{r}");
            assert!(r[v]["operations"]["mean"].as_f64().unwrap() >= 1.0, "{r}");
        }
        if r["request"].as_str().unwrap().starts_with('Q') {
            assert_eq!(
                r["v3"]["operations"]["max"], 1.0,
                "one operation per query: {r}"
            );
            assert_eq!(r["v3"]["partitions"]["distinct"]["max"], 1.0, "{r}");
        }
        if r["request"] == "G1" {
            // A tag's page: one query of the tag's partition, plus a read of the counts of each
            // post shown (copies keep no counts; the bench keeps no snapshot of them): at most
            // 1 + the page's limit, whatever the tag's posts.
            let max = r["v3"]["operations"]["max"].as_f64().unwrap();
            assert!((1.0..=21.0).contains(&max), "a bounded tag page: {r}");
        }
        if r["request"] == "T1" {
            // One query of the reader's partition, plus a read of the counts of each post shown
            // (the bench keeps no snapshot of them): at most 2 + the page's limit.
            let max = r["v3"]["operations"]["max"].as_f64().unwrap();
            assert!((1.0..=22.0).contains(&max), "a bounded timeline page: {r}");
        }
    }
    // A search is one query across the partitions of `posts`, plus a point read of each author
    // shown: at most 1 + the page's 20. The same searches once the posts are ten times as many.
    for r in rows
        .iter()
        .filter(|r| r["request"].as_str().unwrap().starts_with('S'))
    {
        assert_eq!(r["v3"]["partitions"]["crossPartition"][0], "posts", "{r}");
        let max = r["v3"]["operations"]["max"].as_f64().unwrap();
        assert!((2.0..=21.0).contains(&max), "a bounded search page: {r}");
    }
    let g = &report["searchGrowth"];
    let (before, after) = (
        g["postsBefore"].as_u64().unwrap(),
        g["postsAfter"].as_u64().unwrap(),
    );
    assert!(before > 0 && after >= 10 * before, "{g}");
    assert!(g["operationsRatio"].as_f64().unwrap() > 0.0, "{g}");
    assert!(
        table.contains(&format!("with {before} live posts, then {after}")),
        "{table}"
    );

    // SL: searches from one address, with the default budget per address and without one,
    // each answered; the other address's reads, comments and posts all measured.
    let sl = &report["searchLoad"];
    assert_eq!(sl["searchers"], 3, "{sl}");
    assert!(sl["postsFound"].as_u64().unwrap() > 0, "{sl}");
    let runs = sl["runs"].as_array().expect("SL runs");
    let budgets: Vec<u64> = runs
        .iter()
        .map(|r| r["searchesPerMinute"].as_u64().unwrap())
        .collect();
    assert_eq!(budgets, [60, 0], "{sl}");
    for r in runs {
        let answered = ["answeredOk", "answeredTooMany", "answeredUnavailable"]
            .iter()
            .map(|k| r[k].as_u64().unwrap())
            .sum::<u64>();
        assert!(answered >= 1 && r["answeredOther"] == 0, "{r}");
        for k in ["pointRead", "write", "feedLag"] {
            assert!(r[k]["samples"].as_u64().unwrap() >= 1, "{k}: {r}");
        }
    }
    assert!(table.contains("Search under load ([SL])"), "{table}");

    // Live updates: every event naming a write reached every stream on its topic, the
    // follower's idle work counted with one stream and with all of them.
    let lu = &report["live"];
    assert_eq!(lu["streams"], 7, "{lu}");
    // 2 comments and 2 likes to 3 `post:` streams, 2 posts to 2 `timeline:` and 2 `user:`.
    assert_eq!(lu["expected"], 20, "{lu}");
    assert_eq!(lu["delivered"], lu["expected"], "{lu}");
    assert_eq!(lu["lag"]["samples"], 20, "{lu}");
    assert!(lu["eventsPerSecond"].as_f64().unwrap() > 0.0, "{lu}");
    let idle: Vec<u64> = lu["idle"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["streams"].as_u64().unwrap())
        .collect();
    assert_eq!(idle, [1, 7], "{lu}");
    assert!(table.contains("**[LU]** live updates | 20 / 20"), "{table}");

    // V1 fans out where the article says it does.
    for q in [4, 9] {
        assert_eq!(rows[q]["v1"]["partitions"]["crossPartition"][0], "posts");
    }
    let d = &report["dataset"];
    assert_eq!(d["users"], 3);
    assert_eq!(d["posts"], d["userPostCopies"]);
    assert!(report["verification"]["changesReplayed"].as_u64().unwrap() > 0);
    assert_eq!(report["changeFeedLag"]["samples"], 2);
    let load = &report["changeFeedLagUnderLoad"];
    assert!(load["samples"].as_u64().unwrap() >= 1, "{load}");
    assert_eq!(load["hotClients"], 2);
    let throughput = report["throughput"].as_array().unwrap();
    assert_eq!(throughput.len(), 5);
    // The feed read as a client taking gzip, beside the plain one.
    assert!(
        throughput.iter().any(|t| t["request"] == "Q6"
            && t["version"] == "V3 gzip"
            && t["requests"].as_u64() > Some(0)),
        "{throughput:?}"
    );
    let del = &report["changeFeedLagDuringLargeDelete"];
    assert_eq!(del["comments"], 450, "{del}");
    assert!(del["samples"].as_u64().unwrap() >= 1, "{del}");
    assert!(del["maxOverQuietP50"].as_f64().is_some(), "{del}");
    assert!(
        table.contains("while a 450-comment post is deleted"),
        "{table}"
    );

    // The full price: every write row says what change-feed work its requests set off, and the
    // writes whose projections do work (a post's copies, a comment's and a like's counters)
    // report some; C3 and C4 are also priced under the hot-post load.
    let write = |r: &&Value| {
        let name = r["request"].as_str().unwrap();
        name.starts_with('C') || name.starts_with('D')
    };
    for r in rows.iter().filter(write) {
        let cf = &r["changeFeed"];
        assert_eq!(cf["commands"], 4, "{r}");
        assert!(cf["operationsPerCommand"].as_f64().unwrap() >= 0.0, "{r}");
    }
    for q in rows.iter().filter(|r| !write(r)) {
        assert!(
            q["changeFeed"].is_null(),
            "reads have no change-feed price: {q}"
        );
    }
    for w in ["C2", "C3", "C4"] {
        let r = rows.iter().find(|r| r["request"] == w).unwrap();
        assert!(
            r["changeFeed"]["operationsPerCommand"].as_f64().unwrap() >= 1.0,
            "{r}"
        );
    }
    let prices = report["pricesUnderLoad"]
        .as_array()
        .expect("prices under load");
    assert_eq!(prices.len(), 2, "{prices:?}");
    for (p, name) in prices.iter().zip(["C3", "C4"]) {
        assert_eq!(p["request"], name, "{p}");
        assert_eq!(p["clients"], 2, "{p}");
        assert!(p["changeFeed"]["commands"].as_u64().unwrap() >= 1, "{p}");
        assert!(
            p["requestOperationsPerCommand"].as_f64().unwrap() >= 1.0,
            "{p}"
        );
        assert!(
            p["changeFeed"]["operationsPerCommand"].as_f64().unwrap() > 0.0,
            "{p}"
        );
    }
    assert!(table.contains("The full price of each write"), "{table}");

    // Without the snapshot (the rows), every feed read is a query; with it, the reads made at
    // most as many queries as there were reads.
    let f = &report["feedSnapshot"];
    assert!(f["reads"].as_u64().unwrap() > 0, "{f}");
    assert!(f["storeOperations"].as_u64().unwrap() <= f["reads"].as_u64().unwrap());
    assert!(f["postsCreated"].as_u64().unwrap() >= 1, "{f}");

    // The fan-out of one post: copied into every follower's timeline with the threshold off, not
    // copied but still read with it on.
    let f = &report["fanout"];
    assert_eq!(f["followers"], 20, "{f}");
    assert_eq!(f["copied"]["timelineCopies"], 20, "{f}");
    assert!(
        f["copied"]["changeFeedOperations"].as_u64().unwrap() >= 20,
        "{f}"
    );
    assert_eq!(f["merged"]["timelineCopies"], 0, "{f}");
    // The timeline, the merged authors' posts, the counts of each post shown: at most 2 + 20.
    let ops = f["mergedRead"]["operations"].as_u64().unwrap();
    assert!((3..=22).contains(&ops), "{f}");
    assert_eq!(f["mergedRead"]["showsPost"], true, "{f}");
    assert!(table.contains("by an author with 20 followers"), "{table}");

    // The process measurements need the product binary next to the bench (a workspace build
    // has it); `bare` is built with the bench.
    let handler = std::path::Path::new(env!("CARGO_BIN_EXE_bench")).with_file_name("handler");
    if handler.is_file() {
        let v = &report["versus"];
        assert_eq!(v["coldStart"]["product"]["samples"], 2, "{v}");
        assert!(v["coldStart"]["ratio"].as_f64().unwrap() > 0.0, "{v}");
        for (read, items) in [("feedThroughput", 20), ("postThroughput", 1)] {
            let t = &v[read];
            assert_eq!(t["items"], items, "{t}");
            assert!(t["product"]["requests"].as_u64().unwrap() > 0, "{t}");
            assert!(t["bare"]["requests"].as_u64().unwrap() > 0, "{t}");
            assert!(t["ratio"].as_f64().unwrap() > 0.0, "{t}");
        }
        assert!(
            v["hotPost"]["comments"]["requests"].as_u64().unwrap() > 0,
            "{v}"
        );
        assert!(v["hotPost"]["peakRssMib"].as_f64().unwrap() > 0.0, "{v}");
        assert!(v["handlerBytes"].as_u64().unwrap() > 0, "{v}");
    } else {
        assert!(report["versusSkipped"].is_string(), "{report}");
    }

    for name in names {
        assert!(table.contains(&format!("**[{name}]**")), "{table}");
    }

    // The RealWorld row, against the handler the bench started: every kind answered in full, and
    // every list page within its documented bound of store operations.
    let c = &report["conduit"];
    assert_conduit(c, 4, 5);
    assert_eq!(c["ownHandler"], true, "{c}");
    assert!(c["base"].as_str().unwrap().ends_with("/api/conduit"), "{c}");
    for k in c["kinds"].as_array().unwrap() {
        assert!(k["operations"]["max"].as_f64().unwrap() >= 1.0, "{k}");
    }
    assert!(table.contains("**[RW]** The RealWorld API at"), "{table}");

    // The scale rows, each group at its tiny scale: the shapes, and what a user would see (every
    // like counted, every probe answered, the merged authors' posts on the page).
    let s = &report["scale"];
    assert_eq!(
        s["rows"],
        serde_json::json!(["writes", "lag", "timeline", "price"])
    );
    let runs = s["writesPerLike"]["runs"].as_array().expect("like runs");
    let shape: Vec<(u64, u64, u64, &str)> = runs
        .iter()
        .map(|r| {
            let n = |f: &str| r[f].as_u64().unwrap();
            (
                n("followers"),
                n("bookmarkers"),
                n("tags"),
                r["mode"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        shape,
        [
            (0, 0, 0, "steady"),
            (0, 0, 0, "burst"),
            (3, 0, 0, "steady"),
            (3, 0, 0, "burst"),
            (3, 0, 3, "steady"),
            (3, 0, 3, "burst"),
            (3, 4, 3, "steady"),
            (3, 4, 3, "burst"),
        ]
    );
    for r in runs {
        assert_eq!(r["likes"], 3, "{r}");
        assert_eq!(r["likeCount"], 3, "every like counted: {r}");
        assert!(r["writesPerLike"].as_f64().unwrap() >= 1.0, "{r}");
        assert!(
            r["requestOperationsPerLike"].as_f64().unwrap() >= 1.0,
            "{r}"
        );
    }
    let l = &s["othersLag"];
    assert_eq!(l["followers"], 8, "{l}");
    let scenarios: Vec<&str> = l["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        scenarios,
        ["liked", "renamed", "deleted a post", "crossed the limit"]
    );
    assert_eq!(l["quiet"]["feedLag"]["samples"], 5, "{l}");
    let liked = &l["scenarios"][0]["what"];
    assert!(
        liked
            .as_str()
            .unwrap()
            .contains("likes 2 of the author's posts"),
        "{liked}"
    );
    for x in l["scenarios"].as_array().unwrap() {
        assert!(x["feedLag"]["samples"].as_u64().unwrap() >= 1, "{x}");
        assert!(x["followLag"]["samples"].as_u64().unwrap() >= 1, "{x}");
    }
    let t = &s["timelinePages"];
    assert!(t["ordinary"]["operationsMax"].as_u64().unwrap() >= 1, "{t}");
    assert_eq!(t["merged"]["mergedAuthors"], 4, "{t}");
    assert_eq!(t["merged"]["items"], 20, "a full page of theirs: {t}");
    assert_eq!(t["concurrent"]["answered"], 3, "{t}");
    let p = &s["likePrice"];
    assert_eq!(p["small"]["postLikes"], 10, "{p}");
    assert_eq!(p["large"]["postLikes"], 150, "{p}");
    assert!(p["operationsRatio"].as_f64().unwrap() > 0.0, "{p}");
    for heading in [
        "Writes per like by audience",
        "Other users' lag while an author with 8 followers",
        "**[T3]**",
        "The price of a like by the post's total",
    ] {
        assert!(table.contains(heading), "{heading}: {table}");
    }
}

/// The RealWorld row's figures: every kind of request in order, each answered as planned, each
/// page of the lists and the feed within the documented bound (4 + 3 × limit) where the server
/// counts its store operations, and the pages not empty (the users follow and favorite).
fn assert_conduit(c: &Value, users: u64, limit: u64) {
    assert_eq!(c["users"], users, "{c}");
    let kinds: Vec<&str> = c["kinds"]
        .as_array()
        .expect("kinds")
        .iter()
        .map(|k| k["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "register",
            "follow",
            "post",
            "favorite",
            "list",
            "by author",
            "by tag",
            "favorited",
            "feed",
            "get",
            "tags"
        ]
    );
    for k in c["kinds"].as_array().unwrap() {
        assert!(k["planned"].as_u64().unwrap() >= 1, "{k}");
        assert_eq!(k["requests"], k["planned"], "{k}");
        assert!(k["requestsPerSecond"].as_f64().unwrap() > 0.0, "{k}");
        assert!(k["p99Ms"].as_f64().unwrap() >= k["p50Ms"].as_f64().unwrap());
        if k["operationsBound"].is_u64() {
            assert_eq!(k["operationsBound"], 4 + 3 * limit, "{k}");
            assert!(k["items"]["min"].as_f64().unwrap() >= 1.0, "{k}");
            assert!(k["items"]["max"].as_f64().unwrap() <= limit as f64, "{k}");
            if let Some(max) = k["operations"]["max"].as_f64() {
                assert!(max <= (4 + 3 * limit) as f64, "over the bound: {k}");
            }
        }
    }
}

/// Run the bench with `args`, which must fail before measuring anything; its stderr.
fn bench_fails(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_bench"))
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .expect("the bench starts");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{stderr}");
    assert!(out.stdout.is_empty(), "no report");
    stderr
}

/// The RealWorld row alone, against the handler the bench starts on an empty store; and it
/// drives servers on this machine only.
#[test]
fn the_realworld_row_runs_alone() {
    let (report, table) = run_conduit_only(&[]);
    assert!(report["store"].is_string(), "{report}");
    assert_eq!(report["conduit"]["ownHandler"], true);
    assert!(
        table.contains("| feed | `GET /api/articles/feed?limit=` |"),
        "{table}"
    );
    let stderr = bench_fails(&["--conduit-only", "--conduit-base", "http://example.com/api"]);
    assert!(stderr.contains("loopback"), "{stderr}");
}

/// The RealWorld row, small, alone (`--conduit-only` and `extra`); its JSON report and table,
/// the chart beside it checked.
fn run_conduit_only(extra: &[&str]) -> (Value, String) {
    let mut args = vec![
        "--conduit-only",
        "--conduit-users",
        "3",
        "--conduit-reads",
        "4",
        "--conduit-limit",
        "4",
        "--conduit-concurrency",
        "3",
    ];
    args.extend_from_slice(extra);
    let dir = tempfile::tempdir().expect("temp dir");
    let json = dir.path().join("rw.json");
    let out = Command::new(env!("CARGO_BIN_EXE_bench"))
        .args(&args)
        .arg("--json")
        .arg(&json)
        .env_remove("RUST_LOG")
        .output()
        .expect("the bench starts");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "bench failed: {stderr}");
    let report: Value =
        serde_json::from_slice(&std::fs::read(&json).expect("a JSON report")).expect("JSON");
    assert_conduit(&report["conduit"], 3, 4);
    let svg = std::fs::read_to_string(json.with_extension("svg")).expect("a chart");
    assert!(
        svg.contains("[RW] latency (ms)"),
        "{}",
        &svg[..svg.len().min(300)]
    );
    (report, String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Against another RealWorld server, one that sends none of this app's headers: a stand-in in
/// this test, answering the routes the row uses in RealWorld's shapes. The row needs nothing
/// else, and reports no store operations for it.
#[test]
fn the_realworld_row_drives_any_realworld_server() {
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("a port");
    let base = format!("http://{}/", listener.local_addr().unwrap());
    rt.spawn(async move { axum::serve(listener, stand_in()).await });
    let (report, table) = run_conduit_only(&["--conduit-base", &base]);
    let c = &report["conduit"];
    assert_eq!(c["ownHandler"], false, "{c}");
    assert_eq!(c["base"], base.trim_end_matches('/'), "{c}");
    assert!(report["store"].is_null(), "{report}");
    for k in c["kinds"].as_array().unwrap() {
        assert!(k["operations"].is_null(), "{k}");
        assert!(k["requestCharge"].is_null(), "{k}");
    }
    assert!(table.contains("the server at that address"), "{table}");
}

/// A RealWorld server of the fewest words: every list holds one article.
fn stand_in() -> axum::Router {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use axum::extract::Path;
    use axum::http::StatusCode;
    use axum::routing::{get, post};
    use axum::Json;
    use serde_json::json;

    static SLUGS: AtomicUsize = AtomicUsize::new(0);
    fn article(slug: &str) -> Value {
        json!({ "slug": slug, "title": "t", "description": "d", "body": "b", "tagList": [],
                "favorited": false, "favoritesCount": 0,
                "author": { "username": "u", "bio": null, "image": null, "following": false } })
    }
    let list = || async { Json(json!({ "articles": [article("a-0")], "articlesCount": 1 })) };
    axum::Router::new()
        .route(
            "/api/users",
            post(|Json(b): Json<Value>| async move {
                let u = &b["user"];
                let user = json!({ "username": u["username"], "email": u["email"],
                                   "token": "stand-in", "bio": null, "image": null });
                (StatusCode::CREATED, Json(json!({ "user": user })))
            }),
        )
        .route(
            "/api/profiles/{username}/follow",
            post(|Path(u): Path<String>| async move {
                Json(json!({ "profile": { "username": u, "following": true } }))
            }),
        )
        .route(
            "/api/articles",
            get(list).post(|| async {
                let slug = format!("a-{}", SLUGS.fetch_add(1, Ordering::Relaxed));
                (
                    StatusCode::CREATED,
                    Json(json!({ "article": article(&slug) })),
                )
            }),
        )
        .route("/api/articles/feed", get(list))
        .route(
            "/api/articles/{slug}",
            get(|Path(s): Path<String>| async move { Json(json!({ "article": article(&s) })) }),
        )
        .route(
            "/api/articles/{slug}/favorite",
            post(|Path(s): Path<String>| async move { Json(json!({ "article": article(&s) })) }),
        )
        .route(
            "/api/tags",
            get(|| async { Json(json!({ "tags": ["t"] })) }),
        )
}

/// Without the `emulator` feature (every default build) the emulated store is not built in, and
/// the bench says how to build it rather than measuring something else.
#[cfg(not(feature = "emulator"))]
#[test]
fn the_emulated_store_needs_the_emulator_feature() {
    let out = Command::new(env!("CARGO_BIN_EXE_bench"))
        .args(["--store", "emulated", "--users", "1"])
        .env_remove("RUST_LOG")
        .output()
        .expect("the bench starts");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("--features emulator"), "{stderr}");
    assert!(out.stdout.is_empty(), "no report");
}

/// On the SDK's in-memory emulator every row and the feed snapshot get request units
/// (`cargo test -p bench --features emulator`; not part of the default test run).
#[cfg(feature = "emulator")]
#[test]
fn the_emulated_store_reports_request_units_everywhere() {
    let (report, _) = run_bench(&[
        "--store",
        "emulated",
        "--users",
        "2",
        "--samples",
        "2",
        "--warmup",
        "1",
        "--lag-samples",
        "1",
        "--concurrency",
        "2",
        "--seconds",
        "0.5",
        "--load-seconds",
        "0.5",
        "--fanout-followers",
        "10",
        "--large-delete-comments",
        "200",
        "--audiences",
        "0,3",
        "--bookmarkers",
        "0,4",
        "--post-tags",
        "3",
        "--likes",
        "2",
        "--like-rate",
        "50",
        "--hot-followers",
        "5",
        "--hot-likes",
        "2",
        "--merged-authors",
        "3",
        "--timeline-readers",
        "2",
        "--price-likes",
        "50",
        "--searchers",
        "2",
    ]);
    assert!(report["store"].as_str().unwrap().contains("emulator"));
    // A large delete of a few sweep pages is measured there.
    let del = &report["changeFeedLagDuringLargeDelete"];
    assert_eq!(del["comments"], 200, "{report}");
    assert!(report["changeFeedLagDuringLargeDeleteSkipped"].is_null());
    for r in report["rows"].as_array().expect("rows") {
        for v in ["v1", "v3"] {
            if !r[v].is_null() {
                assert!(r[v]["requestCharge"]["mean"].as_f64().unwrap() > 0.0, "{r}");
            }
        }
    }
    // The scale rows' request units: a like's, a timeline page's, the like price's.
    let s = &report["scale"];
    for r in s["writesPerLike"]["runs"].as_array().unwrap() {
        assert!(r["requestChargePerLike"].as_f64().unwrap() > 0.0, "{r}");
    }
    let t = &s["timelinePages"];
    assert!(
        t["merged"]["requestChargeMean"].as_f64().unwrap() > 0.0,
        "{t}"
    );
    assert!(
        s["likePrice"]["requestChargeRatio"].as_f64().unwrap() > 0.0,
        "{s}"
    );
    let f = &report["feedSnapshot"];
    assert!(f["requestUnitsPerQuery"].as_f64().unwrap() > 0.0, "{f}");
    assert!(f["requestUnitsSavedPer1000Reads"].as_f64().is_some(), "{f}");
    // Lag under load and the process measurements are not run on the emulator, and the report
    // says why.
    assert!(report["changeFeedLagUnderLoad"].is_null(), "{report}");
    assert!(report["changeFeedLagUnderLoadSkipped"]
        .as_str()
        .unwrap()
        .contains("emulator"));
    assert!(report["versus"].is_null(), "{report}");
    assert!(report["versusSkipped"]
        .as_str()
        .unwrap()
        .contains("emulator"));
}
