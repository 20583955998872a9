//! A progress line on a terminal (stderr), nothing anywhere else: logs and reports stay clean
//! when the output is captured.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

pub struct Progress(Option<ProgressBar>);

impl Progress {
    /// A spinner with a count when stderr is a terminal; silent otherwise.
    pub fn for_terminal() -> Self {
        if !std::io::stderr().is_terminal() {
            return Self::hidden();
        }
        let bar = ProgressBar::new_spinner();
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg}: {pos} [{elapsed}]")
                .expect("valid template"),
        );
        bar.enable_steady_tick(Duration::from_millis(120));
        Progress(Some(bar))
    }

    pub fn hidden() -> Self {
        Progress(None)
    }

    /// Start counting a new stage (`posts`, `users`, …).
    pub fn stage(&self, name: &'static str) {
        if let Some(b) = &self.0 {
            b.set_message(name);
            b.set_position(0);
        }
    }

    pub fn inc(&self, n: u64) {
        if let Some(b) = &self.0 {
            b.inc(n);
        }
    }

    pub fn finish(&self) {
        if let Some(b) = &self.0 {
            b.finish_and_clear();
        }
    }
}
