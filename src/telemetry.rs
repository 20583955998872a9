//! Logging to stdout (the Functions host logs every stderr line as an error): human-readable by
//! default, JSON lines with `BLOG_LOG_FORMAT=json`; levels from `RUST_LOG` (default `info`), as a
//! level and `target=level` pairs (`warn,blog=debug`). A `RUST_LOG` that does not parse as that
//! is ignored, and the default holds.

use tracing::Level;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

use crate::settings::LogFormat;

pub fn init(format: LogFormat) {
    let filter = levels(std::env::var("RUST_LOG").ok().as_deref());
    // Colour codes only for a person at a terminal, not for the host's log capture.
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stdout)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()));
    let registry = tracing_subscriber::registry().with(filter);
    // `try_init`: a second call (tests) keeps the first subscriber.
    let _ = match format {
        LogFormat::Text => registry.with(layer).try_init(),
        LogFormat::Json => registry.with(layer.json().flatten_event(true)).try_init(),
    };
}

/// The levels `RUST_LOG` asks for. (Not tracing-subscriber's `EnvFilter`: its span and field
/// filters, never needed here, bring a regular-expression engine into the binary.)
fn levels(rust_log: Option<&str>) -> Targets {
    rust_log
        .filter(|v| !v.trim().is_empty())
        .and_then(|v| v.parse::<Targets>().ok())
        .unwrap_or_else(|| Targets::new().with_default(Level::INFO))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_log_sets_levels_by_target_with_info_by_default() {
        let enabled = |rust_log, target, level| levels(rust_log).would_enable(target, &level);
        assert!(enabled(None, "blog", Level::INFO));
        assert!(!enabled(None, "blog", Level::DEBUG));
        assert!(!enabled(Some("warn"), "blog::api", Level::INFO));
        assert!(enabled(Some("warn,blog=debug"), "blog::api", Level::DEBUG));
        assert!(!enabled(Some("warn,blog=debug"), "hyper", Level::INFO));
        assert!(enabled(Some("blog=trace"), "blog", Level::TRACE));
        assert!(
            !enabled(Some("blog=trace"), "hyper", Level::ERROR),
            "no default: off"
        );
        // Unparseable or empty: the default.
        assert!(enabled(Some("=(!"), "blog", Level::INFO));
        assert!(enabled(Some(" "), "blog", Level::INFO));
    }
}
