//! Operations commands of the `handler` binary (`docs/operations.md`):
//!
//! - `handler verify [--repair]`: check every derived copy against the source of truth
//!   ([`verify`], from [`expected`]); with `--repair`, mend it through the projections
//!   ([`repair`]) and check again; [`newest`] is the feed as it should be; [`lag`] tells lag from
//!   drift; [`timeline`] and [`tags`] check their projections after. Exit 0 without drift (lag aside), 1 with drift or a quarantined change, 2 when it
//!   cannot run.
//! - `handler backup PATH`: an online copy of the embedded store ([`backup`]).
//! - `handler quarantine list|replay|drop`: the changes a projection lane could not apply
//!   ([`quarantine`]).
//!
//! They read the same settings as the service. Without a subcommand the binary serves.

pub mod backup;
pub mod cli;
pub mod expected;
pub mod lag;
pub mod newest;
pub mod progress;
pub mod quarantine;
pub mod repair;
pub mod report;
pub mod tags;
pub mod timeline;
pub mod verify;

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use crate::settings::{Settings, StoreKind};
use crate::store::Store;
use progress::Progress;
use repair::Repaired;
use report::Report;

/// Items per page of the queries the checks walk the containers with (`verify`'s traversal, the
/// timelines' and the tags' checks).
pub const TRAVERSAL_PAGE: u32 = 100;
/// Partitions `verify` reads, and `--repair` mends, at the same time.
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

/// A verification, and with `--repair` the repair and the verification after it.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub before: Report,
    pub repair: Option<(Repaired, Report)>,
    /// Follows and timelines, checked (and repaired) after the rest.
    pub timelines: timeline::Outcome,
    /// Changes a projection lane could not apply: a finding while any is kept.
    pub quarantined: Vec<crate::quarantine::Entry>,
    /// Tag copies, records and counts, checked (and repaired) after the timelines.
    pub tags: tags::Outcome,
}

impl Outcome {
    /// The state the database was left in.
    pub fn last(&self) -> &Report {
        self.repair.as_ref().map_or(&self.before, |(_, r)| r)
    }

    /// Nothing drifted (after the repair, if any) and nothing is quarantined.
    pub fn is_clean(&self) -> bool {
        self.last().is_clean()
            && self.timelines.last().is_clean()
            && self.quarantined.is_empty()
            && self.tags.last().is_clean()
    }

    /// The report as printed; its last line is the [`Summary`].
    pub fn render(&self) -> String {
        let mut out = report::render(&self.before);
        let mut charge = self.before.usage.request_charge;
        if let Some((done, after)) = &self.repair {
            let _ = writeln!(
                out,
                "before repair: {} items checked, {} drifted",
                self.before.total_checked(),
                self.before.drifted_items
            );
            let _ = writeln!(
                out,
                "repair: {} posts replayed through the projections, {} post copies and {} feed entries deleted",
                done.replayed, done.deleted_copies, done.deleted_feed
            );
            for f in &done.failed {
                let _ = writeln!(out, "  not repaired: {f}");
            }
            out.push_str("after repair:\n");
            out.push_str(&report::render(after));
            charge += done.usage.request_charge + after.usage.request_charge;
        }
        out.push_str(&self.timelines.render());
        out.push_str(&self.tags.render());
        out.push_str(&quarantine::render(&self.quarantined));
        if charge > 0.0 {
            let _ = writeln!(out, "request units: {charge:.2}");
        }
        if !self.before.lag_known {
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

    /// The figures of the report's last line, over every part (after the repair, if any).
    pub fn summary(&self) -> Summary {
        let (posts, timelines) = (self.last(), self.timelines.last());
        let tags = self.tags.last();
        Summary {
            checked: posts.total_checked() + timelines.checked + tags.checked,
            drifted: posts.drifted_items + timelines.drifted() + tags.findings.len() as u64,
            lagging: posts.lagging + timelines.lagging + tags.lagging,
            quarantined: self.quarantined.len() as u64,
        }
    }
}

/// The report's last line: `verify: N items checked, D drifted, L lagging, Q quarantined`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    /// Derived items checked: posts, comments, likes, copies, feed entries, users, edges,
    /// mirrors, timeline entries and markers, merged copies.
    pub checked: u64,
    /// Items found wrong whose sources the change feed had applied (after the repair, if any).
    pub drifted: u64,
    /// Items found wrong while a change of theirs was still on its way: not drift.
    pub lagging: u64,
    /// Changes a projection lane could not apply, kept for replay.
    pub quarantined: u64,
}

/// Verify, and with `repair` mend and verify again. `settle`: see [`verify::verify`];
/// `progress` makes the progress display of each pass.
pub async fn verify_and_repair(
    store: &dyn Store,
    repair: bool,
    settle: Duration,
    progress: &dyn Fn() -> Progress,
) -> anyhow::Result<Outcome> {
    let mend = repair;
    let before = verify::verify(store, &progress(), settle).await?;
    let repair = if repair && !before.is_clean() {
        let done = repair::repair(store, &before, &progress()).await;
        let after = verify::verify(store, &progress(), settle).await?;
        Some((done, after))
    } else {
        None
    };
    let timelines = timeline::verify_and_repair(store, mend, settle).await?;
    let quarantined = crate::quarantine::list(store, None).await?;
    let tags = tags::verify_and_repair(store, mend, settle).await?;
    Ok(Outcome {
        before,
        repair,
        timelines,
        quarantined,
        tags,
    })
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
