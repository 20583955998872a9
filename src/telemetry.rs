//! Logging to stdout (the Functions host logs every stderr line as an error), in the format and at
//! the levels the settings name (`BLOG_LOG_FORMAT`, `RUST_LOG`; read and checked with the other
//! settings).

use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

use crate::settings::{LogFormat, LogSettings};

pub fn init(log: &LogSettings) {
    let filter = log.levels.clone();
    // Colour codes only for a person at a terminal, not for the host's log capture.
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stdout)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()));
    let registry = tracing_subscriber::registry().with(filter);
    // `try_init`: a second call (tests) keeps the first subscriber.
    let _ = match log.format {
        LogFormat::Text => registry.with(layer).try_init(),
        LogFormat::Json => registry.with(layer.json().flatten_event(true)).try_init(),
    };
}
