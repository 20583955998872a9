//! Operations commands of the `handler` binary (`docs/operations.md`):
//!
//! - `handler verify [--repair]`: check every derived copy against the source of truth and, with
//!   `--repair`, mend it through the projections and check again. One [`part`] per projection's
//!   copies, run in the order of one table, [`PARTS`]: [`bookmarks`], [`posts`] (the walk in
//!   [`verify`], what each copy should be in [`expected`] and [`newest`], the repair in
//!   [`repair`], the report in [`report`]), [`timeline`], [`tags`], and the [`quarantine`];
//!   [`lag`] tells lag from drift for each; [`traversal`] pages through a container for all. Exit 0 without drift (lag aside), 1 with drift or a
//!   quarantined change, 2 when it cannot run.
//! - `handler backup PATH`: an online copy of the embedded store ([`backup`]).
//! - `handler quarantine list|replay|drop`: the changes a projection lane could not apply
//!   ([`quarantine`]).
//!
//! They read the same settings as the service. Without a subcommand the binary serves.

pub mod backup;
pub mod bookmarks;
pub mod cli;
pub mod expected;
pub mod lag;
pub mod newest;
pub mod part;
pub mod posts;
pub mod progress;
pub mod quarantine;
pub mod repair;
pub mod report;
pub mod tags;
pub mod timeline;
pub mod traversal;
pub mod verify;

use std::any::Any;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use crate::settings::{Settings, StoreKind};
use crate::store::metrics::{self, Usage};
use crate::store::Store;
use part::{Found, Part, Pass, Tally};
use progress::Progress;

/// Items per page of the queries the checks walk the containers with (`verify`'s traversal, the
/// timelines', the tags' and the bookmarks' checks).
pub const TRAVERSAL_PAGE: u32 = 100;
/// Partitions `verify` (and the bookmarks' check) reads, and `--repair` mends, at the same time.
pub const PARTITIONS_IN_FLIGHT: usize = 8;

/// An operations command, as `cli` parses it (its help pages describe each one).
#[derive(Debug, PartialEq)]
pub enum Command {
    /// `handler verify [--repair] [--settle SECONDS]`.
    Verify { repair: bool, settle: u64 },
    /// `handler quarantine list|replay|drop`.
    Quarantine { action: quarantine::Action },
    /// `handler backup PATH`.
    Backup { path: PathBuf },
}

const DRIFT: u8 = 1;
const CANNOT_RUN: u8 = 2;

/// The subcommand named on the command line, if any; `None` means: serve.
pub fn command() -> Option<Command> {
    match cli::parse(std::env::args_os().skip(1)) {
        Ok(cli::Parsed::Serve) => None,
        Ok(cli::Parsed::Run(command)) => Some(command),
        Ok(cli::Parsed::Print(text)) => {
            print!("{text}");
            std::process::exit(0)
        }
        Err(misuse) => {
            eprintln!("{misuse}");
            std::process::exit(i32::from(CANNOT_RUN))
        }
    }
}

/// Run `command`.
pub async fn run(command: Command) -> ExitCode {
    // The service's settings, less who may call it: these commands serve no requests.
    let settings = match Settings::from_env_without_auth() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("handler: {e}");
            return ExitCode::from(CANNOT_RUN);
        }
    };
    crate::telemetry::init(&settings.log);
    match command {
        Command::Verify { repair, settle } => {
            run_verify(&settings, repair, Duration::from_secs(settle)).await
        }
        Command::Backup { path } => run_backup(&settings, path).await,
        Command::Quarantine { action } => match open(&settings).await {
            Ok(store) => quarantine::run(&*store, action).await,
            Err(e) => cannot_run("quarantine", e),
        },
    }
}

/// Open the service's store for an operations command, without creating anything.
async fn open(settings: &Settings) -> anyhow::Result<std::sync::Arc<dyn Store>> {
    let mut settings = settings.clone();
    match settings.store {
        StoreKind::Embedded if !settings.db_path.is_file() => {
            anyhow::bail!("no embedded store at {}", settings.db_path.display())
        }
        StoreKind::Embedded => {}
        StoreKind::Cosmos => settings.cosmos.create_containers = false,
    }
    crate::startup::open_store(&settings).await
}

fn describe(settings: &Settings) -> String {
    match settings.store {
        StoreKind::Embedded => format!("embedded store at {}", settings.db_path.display()),
        StoreKind::Cosmos => format!("Cosmos DB database {:?}", settings.cosmos.database),
    }
}

async fn run_verify(settings: &Settings, repair: bool, settle: Duration) -> ExitCode {
    let store = match open(settings).await {
        Ok(s) => s,
        Err(e) => return cannot_run("verify", e),
    };
    println!("verify: {}", describe(settings));
    // Verify and repair judge by the fan-out limit recorded in the store, the one the timeline
    // lanes project by (this process's setting is recorded by the processes that project).
    let outcome = match verify_and_repair(&*store, repair, settle, &Progress::for_terminal).await {
        Ok(o) => o,
        Err(e) => return cannot_run("verify", e),
    };
    print!("{}", outcome.render());
    ExitCode::from(if outcome.is_clean() { 0 } else { DRIFT })
}

fn cannot_run(what: &str, e: impl std::fmt::Display) -> ExitCode {
    eprintln!("{what}: cannot run: {e:#}");
    ExitCode::from(CANNOT_RUN)
}

/// Every part of verify, in the order they run (and report). A part runs before the parts whose
/// copies hold what it mends, so that one repair leaves them agreeing: bookmarks before posts
/// (a post's copies hold its `bookmarkCount`), posts before the timelines and tags (which copy
/// posts). The quarantine is looked at last.
pub const PARTS: &[&Part] = &[
    &bookmarks::PART,
    &posts::PART,
    &timeline::PART,
    &tags::PART,
    &quarantine::PART,
];

/// A verification: each part's outcome (with `--repair`, its repair and the look after it).
#[derive(Debug)]
pub struct Outcome {
    /// Each part's name and outcome, in the order of [`PARTS`].
    pub parts: Vec<(&'static str, Box<dyn Found>)>,
    /// The store operations and request units every part used (request units on Cosmos DB).
    pub usage: Usage,
}

/// The report's last line: `verify: N items checked, D drifted, L lagging, Q quarantined`, over
/// every part (after the repair, if any).
pub type Summary = Tally;

impl Outcome {
    /// The outcome of the part whose type is `T` (e.g. [`posts::Outcome`]).
    pub fn get<T: Found>(&self) -> Option<&T> {
        self.parts
            .iter()
            .find_map(|(_, f)| (f.as_ref() as &dyn Any).downcast_ref::<T>())
    }

    /// Nothing drifted in any part (after the repair, if any) and nothing is quarantined.
    pub fn is_clean(&self) -> bool {
        self.summary().is_clean()
    }

    /// The report as printed: each part's lines, then the [`Summary`].
    pub fn render(&self) -> String {
        let mut out = String::new();
        for (_, part) in &self.parts {
            out.push_str(&part.render());
        }
        let charge = self.usage.request_charge;
        if charge > 0.0 {
            let _ = writeln!(out, "request units: {charge:.2}");
        }
        if self.parts.iter().any(|(_, p)| !p.lag_known()) {
            out.push_str(
                "lag: judged by time alone (no pump checkpoint in this store: the Functions \
                 host's triggers follow its feeds)\n",
            );
        }
        let s = self.summary();
        let _ = writeln!(
            out,
            "verify: {} items checked, {} drifted, {} lagging, {} quarantined",
            s.checked, s.drifted, s.lagging, s.quarantined
        );
        out
    }

    /// The figures of the report's last line: every part's, summed.
    pub fn summary(&self) -> Summary {
        self.parts.iter().map(|(_, p)| p.tally()).sum()
    }
}

/// Verify every part, and with `repair` mend what drifted and verify it again. `settle`: the
/// wait between looks at what drifted (see [`part`]); `progress` makes the progress display of
/// each pass.
pub async fn verify_and_repair(
    store: &dyn Store,
    repair: bool,
    settle: Duration,
    progress: &dyn Fn() -> Progress,
) -> anyhow::Result<Outcome> {
    let pass = Pass {
        repair,
        settle,
        progress,
    };
    let mut parts = Vec::new();
    let mut usage = Usage::default();
    for part in PARTS {
        let (found, used) = metrics::scope((part.run)(store, &pass)).await;
        usage.operations += used.operations;
        usage.request_charge += used.request_charge;
        parts.push((part.name, found?));
    }
    Ok(Outcome { parts, usage })
}

async fn run_backup(settings: &Settings, path: PathBuf) -> ExitCode {
    if settings.store == StoreKind::Cosmos {
        eprintln!(
            "backup: the Cosmos DB store is backed up by Cosmos DB itself (the account's backup \
             policy); see docs/operations.md"
        );
        return ExitCode::from(CANNOT_RUN);
    }
    let source = settings.db_path.clone();
    let target = path.clone();
    match tokio::task::spawn_blocking(move || backup::backup(&source, &target)).await {
        Ok(Ok(info)) => {
            println!(
                "backup: {} items, {} bytes, written to {}",
                info.items,
                info.bytes,
                info.path.display()
            );
            ExitCode::SUCCESS
        }
        Ok(Err(e)) => cannot_run("backup", e),
        Err(e) => cannot_run("backup", e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use part::Finding;

    /// A part's outcome that reports the figures it is given.
    #[derive(Debug)]
    struct Stub(&'static str, Tally);

    impl Found for Stub {
        fn tally(&self) -> Tally {
            self.1
        }

        fn render(&self) -> String {
            format!("{}: {} drifted\n", self.0, self.1.drifted)
        }

        fn findings(&self) -> Vec<Finding> {
            Vec::new()
        }
    }

    fn outcome(rows: &[(&'static str, u64, u64)]) -> Outcome {
        let parts = rows.iter().map(|&(name, drifted, quarantined)| {
            let tally = Tally {
                checked: 2,
                drifted,
                lagging: 1,
                quarantined,
            };
            (name, part::found(Stub(name, tally)))
        });
        Outcome {
            parts: parts.collect(),
            usage: Usage::default(),
        }
    }

    #[test]
    fn the_table_names_each_part_once() {
        let names: std::collections::BTreeSet<&str> = PARTS.iter().map(|p| p.name).collect();
        assert_eq!(names.len(), PARTS.len());
    }

    /// Whatever the rows, the report is theirs in order, the summary their sum, and the verdict
    /// clean only when none drifted and nothing is quarantined (lag is not a fault).
    #[test]
    fn the_report_the_summary_and_the_verdict_take_every_row_alike() {
        let o = outcome(&[("a", 0, 0), ("b", 1, 0), ("c", 0, 0)]);
        let text = o.render();
        assert_eq!(
            text,
            "a: 0 drifted\nb: 1 drifted\nc: 0 drifted\n\
             verify: 6 items checked, 1 drifted, 3 lagging, 0 quarantined\n"
        );
        assert!(!o.is_clean());
        assert_eq!(o.get::<Stub>().map(|s| s.0), Some("a"));
        assert!(outcome(&[("a", 0, 0), ("b", 0, 0)]).is_clean());
        assert!(!outcome(&[("a", 0, 0), ("q", 0, 1)]).is_clean());
    }
}
