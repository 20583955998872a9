//! The caps on live-update streams (`GET /api/events`, docs/live.md): how many the process holds
//! (`BLOG_LIVE_STREAMS`) and how many of them one client address may hold
//! (`BLOG_LIVE_STREAMS_PER_CLIENT`); `crate::live::hub` applies them.

use super::read::within;
use super::{Lookup, SettingError};

/// Streams the process holds by default (`BLOG_LIVE_STREAMS`): a quarter of the default
/// connection cap, so that streams never take the connections requests need.
pub const DEFAULT_LIVE_STREAMS: usize = 256;
/// Streams one client address holds by default (`BLOG_LIVE_STREAMS_PER_CLIENT`): a page per
/// tab of a few browsers behind one address.
pub const DEFAULT_LIVE_STREAMS_PER_CLIENT: usize = 8;

/// The caps on open streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveStreams {
    /// Streams the process holds (1..=65536).
    pub total: usize,
    /// Streams one client address may hold (0..=65536; 0: no cap).
    pub per_client: usize,
}

impl Default for LiveStreams {
    fn default() -> Self {
        LiveStreams {
            total: DEFAULT_LIVE_STREAMS,
            per_client: DEFAULT_LIVE_STREAMS_PER_CLIENT,
        }
    }
}

impl LiveStreams {
    /// From `BLOG_LIVE_STREAMS` (1..=65536) and `BLOG_LIVE_STREAMS_PER_CLIENT` (0..=65536, 0:
    /// none); unset means the default.
    pub(super) fn from_lookup(get: &Lookup) -> Result<Self, SettingError> {
        let within = |name: &'static str, min: u64, default: usize| {
            within(name, get(name), (min, 65_536), default as u64).map(|n| n as usize)
        };
        Ok(LiveStreams {
            total: within("BLOG_LIVE_STREAMS", 1, DEFAULT_LIVE_STREAMS)?,
            per_client: within(
                "BLOG_LIVE_STREAMS_PER_CLIENT",
                0,
                DEFAULT_LIVE_STREAMS_PER_CLIENT,
            )?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::tests::parse;

    #[test]
    fn stream_caps_default_and_parse() {
        assert_eq!(parse(&[]).unwrap().live, LiveStreams::default());
        let s = parse(&[
            ("BLOG_LIVE_STREAMS", " 1000 "),
            ("BLOG_LIVE_STREAMS_PER_CLIENT", "0"),
        ])
        .unwrap();
        assert_eq!(
            s.live,
            LiveStreams {
                total: 1000,
                per_client: 0
            }
        );
        for (k, v) in [
            ("BLOG_LIVE_STREAMS", "0"),
            ("BLOG_LIVE_STREAMS", "65537"),
            ("BLOG_LIVE_STREAMS", "many"),
            ("BLOG_LIVE_STREAMS_PER_CLIENT", "-1"),
            ("BLOG_LIVE_STREAMS_PER_CLIENT", "65537"),
        ] {
            let e = parse(&[(k, v)]).unwrap_err();
            assert_eq!(e.name, k, "{v}");
            assert!(e.to_string().contains(v), "{e}");
        }
    }
}
