//! `handler quarantine list|replay|drop`: the changes a projection lane could not apply
//! (`crate::quarantine`), for an operator to see, replay once the cause is fixed, or give up.
//! Exit 0 when done (for `replay`: every entry applied), 1 when entries failed again or the one
//! named does not exist, 2 when the store cannot be used.

use std::fmt::Write as _;
use std::process::ExitCode;

use super::part::{Finding, Found, Part, Pass, Tally};
use crate::quarantine::{self, Entry};
use crate::store::Store;

/// `handler verify`'s part: a change kept in the quarantine is a finding while it is kept (no
/// repair: `handler quarantine replay` applies it, `--repair` mends the copies it left behind).
pub const PART: Part = Part {
    name: "quarantine",
    run: |store, _: &Pass| {
        Box::pin(async move {
            let entries = quarantine::list(store, None).await?;
            Ok(Box::new(Quarantined(entries)) as Box<dyn Found>)
        })
    },
};

/// The changes a projection lane could not apply, as verify found them.
#[derive(Debug, Clone, PartialEq)]
pub struct Quarantined(pub Vec<Entry>);

impl Found for Quarantined {
    fn tally(&self) -> Tally {
        Tally {
            quarantined: self.0.len() as u64,
            ..Tally::default()
        }
    }

    fn render(&self) -> String {
        render(&self.0)
    }

    fn findings(&self) -> Vec<Finding> {
        let found = self.0.iter().map(|e| Finding {
            kind: "quarantined",
            target: format!("{}/{}/{}", e.container, e.pk, e.item_id),
            detail: e.error.clone(),
        });
        found.collect()
    }
}

/// What to do with the quarantine (`super::cli`'s help pages describe each action).
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// One line per entry.
    List,
    /// Replay the entry named, or every entry.
    Replay { id: Option<String> },
    /// Drop the entry named, or with `all` every entry (not both).
    Drop { id: Option<String>, all: bool },
}

const FAILED: u8 = 1;
const CANNOT_RUN: u8 = 2;

/// Run `action` on `store`, printing what it did.
pub async fn run(store: &dyn Store, action: Action) -> ExitCode {
    match act(store, action).await {
        Ok((text, ok)) => {
            print!("{text}");
            ExitCode::from(if ok { 0 } else { FAILED })
        }
        Err(e) => {
            eprintln!("quarantine: cannot run: {e:#}");
            ExitCode::from(CANNOT_RUN)
        }
    }
}

/// What `action` prints, and whether it succeeded.
pub async fn act(store: &dyn Store, action: Action) -> anyhow::Result<(String, bool)> {
    let entries = quarantine::list(store, None).await?;
    let pick = |id: &Option<String>| -> Vec<Entry> {
        entries
            .iter()
            .filter(|e| id.as_ref().is_none_or(|id| *id == e.id))
            .cloned()
            .collect()
    };
    let mut out = String::new();
    match action {
        Action::List => {
            for e in &entries {
                let _ = writeln!(out, "{}", line(e));
            }
            let _ = writeln!(out, "quarantine: {} changes", entries.len());
            Ok((out, true))
        }
        Action::Replay { id } => {
            let chosen = pick(&id);
            if id.is_some() && chosen.is_empty() {
                let _ = writeln!(out, "quarantine: no entry {}", id.unwrap_or_default());
                return Ok((out, false));
            }
            let done = quarantine::replay(store, &chosen).await?;
            for id in &done.applied {
                let _ = writeln!(out, "applied: {id}");
            }
            for id in &done.gone {
                let _ = writeln!(out, "item gone, entry removed: {id}");
            }
            for (id, error) in &done.failed {
                let _ = writeln!(out, "failed again: {id}: {error}");
            }
            let _ = writeln!(
                out,
                "quarantine: {} applied, {} gone, {} failed again",
                done.applied.len(),
                done.gone.len(),
                done.failed.len()
            );
            Ok((out, done.failed.is_empty()))
        }
        Action::Drop { id, all } => {
            if id.is_none() && !all {
                anyhow::bail!("name the entry to drop, or --all");
            }
            let chosen = pick(&id);
            if chosen.is_empty() && id.is_some() {
                let _ = writeln!(out, "quarantine: no entry {}", id.unwrap_or_default());
                return Ok((out, false));
            }
            for e in &chosen {
                quarantine::drop_entry(store, &e.id).await?;
                tracing::warn!(quarantine_dropped = e.label(), "quarantined change dropped");
                let _ = writeln!(out, "dropped: {}", e.id);
            }
            let _ = writeln!(out, "quarantine: {} dropped", chosen.len());
            Ok((out, true))
        }
    }
}

fn line(e: &Entry) -> String {
    format!(
        "{}  {}  unit={} attempts={} first={} last={} error={}",
        e.id,
        e.label(),
        if e.unit.is_empty() { "?" } else { &e.unit },
        e.attempts,
        e.first_failure,
        e.last_failure,
        e.error
    )
}

/// `handler verify`'s section: each entry, then the count (nothing when there is none).
pub fn render(entries: &[Entry]) -> String {
    let mut out = String::new();
    if entries.is_empty() {
        return out;
    }
    for e in entries {
        let _ = writeln!(out, "  quarantined: {}", line(e));
    }
    let _ = writeln!(
        out,
        "quarantine: {} changes not applied (handler quarantine list|replay|drop)",
        entries.len()
    );
    out
}
