//! What follows the change feed: whether this process runs the projections itself (`BLOG_PUMP`;
//! under the Functions host its Cosmos DB triggers do) and how far a post is copied into
//! timelines (`BLOG_TIMELINE_FANOUT_LIMIT`).

use super::read::{bad, flag};
use super::{Lookup, SettingError};

/// The fan-out limit when `BLOG_TIMELINE_FANOUT_LIMIT` is not set: authors with more followers
/// are merged into timelines when read rather than copied into each.
pub const DEFAULT_TIMELINE_FANOUT_LIMIT: u64 = 10_000;

/// `BLOG_PUMP`: on standalone, off under the Functions host (`hosted`), whose triggers deliver the
/// change feed instead; either can be switched.
pub(super) fn pump(get: &Lookup, hosted: bool) -> Result<bool, SettingError> {
    Ok(flag("BLOG_PUMP", get("BLOG_PUMP"))?.unwrap_or(!hosted))
}

/// `BLOG_TIMELINE_FANOUT_LIMIT`: a whole number of followers; 0 copies no post into timelines.
/// Unset: `None`, the limit recorded in the store (or the default) is used.
pub(super) fn timeline_fanout_limit(get: &Lookup) -> Result<Option<u64>, SettingError> {
    let Some(v) = get("BLOG_TIMELINE_FANOUT_LIMIT") else {
        return Ok(None);
    };
    v.trim().parse::<u64>().map(Some).map_err(|_| {
        bad(
            "BLOG_TIMELINE_FANOUT_LIMIT",
            format!("`{v}` is not a whole number of followers"),
        )
    })
}

#[cfg(test)]
mod tests {
    use crate::settings::tests::parse;

    #[test]
    fn the_pump_runs_standalone_and_not_under_the_host_unless_switched() {
        let host = ("FUNCTIONS_CUSTOMHANDLER_PORT", "40123");
        assert!(parse(&[]).unwrap().pump);
        assert!(!parse(&[host]).unwrap().pump);
        assert!(parse(&[host, ("BLOG_PUMP", "on")]).unwrap().pump);
        assert!(!parse(&[("BLOG_PUMP", "off")]).unwrap().pump);
        assert_eq!(
            parse(&[("BLOG_PUMP", "maybe")]).unwrap_err().name,
            "BLOG_PUMP"
        );
    }

    #[test]
    fn the_timeline_fanout_limit_is_a_number_of_followers() {
        assert_eq!(parse(&[]).unwrap().timeline_fanout_limit, None);
        let s = parse(&[("BLOG_TIMELINE_FANOUT_LIMIT", "0")]).unwrap();
        assert_eq!(s.timeline_fanout_limit, Some(0));
        for v in ["-1", "many"] {
            let e = parse(&[("BLOG_TIMELINE_FANOUT_LIMIT", v)]).unwrap_err();
            assert_eq!(e.name, "BLOG_TIMELINE_FANOUT_LIMIT", "{v}");
        }
    }
}
