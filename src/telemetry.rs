//! Logging to stdout (the Functions host logs every stderr line as an error): human-readable by
//! default, JSON lines with `BLOG_LOG_FORMAT=json`; levels from `RUST_LOG` (default `info`).

use tracing_subscriber::EnvFilter;

use crate::settings::LogFormat;

pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stdout)
        // Colour codes only for a person at a terminal, not for the host's log capture.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()));
    // `try_init`: a second call (tests) keeps the first subscriber.
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}
