//! How the log is written (`crate::telemetry` sets it up): `BLOG_LOG_FORMAT` (`text` or `json`)
//! and the levels of `RUST_LOG` (default `info`), as a level and `target=level` pairs
//! (`warn,blog=debug`). A `RUST_LOG` that does not parse as that is ignored and the default holds,
//! so a typo in a log filter never stops the service.

use std::str::FromStr;

use tracing::Level;
use tracing_subscriber::filter::Targets;

use super::read::parsed;
use super::{Lookup, SettingError};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

impl FromStr for LogFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            _ => Err(format!("`{s}` is neither `text` nor `json`")),
        }
    }
}

/// The log's format and levels.
#[derive(Debug, Clone, PartialEq)]
pub struct LogSettings {
    /// `BLOG_LOG_FORMAT`: human-readable lines (`text`, the default) or JSON lines (`json`).
    pub format: LogFormat,
    /// `RUST_LOG`: which targets log at which level.
    pub levels: Targets,
}

impl Default for LogSettings {
    fn default() -> Self {
        LogSettings {
            format: LogFormat::Text,
            levels: default_levels(),
        }
    }
}

/// `info` for every target.
fn default_levels() -> Targets {
    Targets::new().with_default(Level::INFO)
}

pub(super) fn log_settings(get: &Lookup) -> Result<LogSettings, SettingError> {
    Ok(LogSettings {
        format: parsed("BLOG_LOG_FORMAT", get("BLOG_LOG_FORMAT"))?.unwrap_or(LogFormat::Text),
        levels: levels(get("RUST_LOG").as_deref()),
    })
}

/// The levels `RUST_LOG` asks for. (Not tracing-subscriber's `EnvFilter`: its span and field
/// filters, never needed here, bring a regular-expression engine into the binary.)
fn levels(rust_log: Option<&str>) -> Targets {
    rust_log
        .filter(|v| !v.trim().is_empty())
        .and_then(|v| v.parse::<Targets>().ok())
        .unwrap_or_else(default_levels)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::tests::parse;

    #[test]
    fn rust_log_sets_levels_by_target_with_info_by_default() {
        let enabled = |rust_log: Option<&str>, target, level| {
            let pairs: Vec<(&str, &str)> = rust_log.map(|v| ("RUST_LOG", v)).into_iter().collect();
            let from_env = parse(&pairs).unwrap().log.levels;
            assert_eq!(from_env, levels(rust_log), "{rust_log:?}");
            from_env.would_enable(target, &level)
        };
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

    #[test]
    fn the_log_format_is_text_unless_json_is_asked_for() {
        assert_eq!(parse(&[]).unwrap().log, LogSettings::default());
        let s = parse(&[("BLOG_LOG_FORMAT", " JSON ")]).unwrap();
        assert_eq!(s.log.format, LogFormat::Json);
        assert_eq!(
            parse(&[("BLOG_LOG_FORMAT", "xml")]).unwrap_err().name,
            "BLOG_LOG_FORMAT"
        );
    }
}
