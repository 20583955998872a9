//! Where the service listens and what it lets a client do: the address (`PORT`, `BLOG_BIND`, or
//! the Functions host's `FUNCTIONS_CUSTOMHANDLER_PORT`), the browser origins allowed to call it
//! (`BLOG_CORS_ORIGINS`), the HTTP server's limits (`crate::server` applies them) and the
//! fair-use budget of writes (`BLOG_WRITES_PER_MINUTE`).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use super::read::{bad, within};
use super::{Lookup, SettingError};

/// Writes a caller may make per minute by default (`BLOG_WRITES_PER_MINUTE`): a person posting,
/// commenting and liking as fast as they can read and type stays far below one write a second
/// for a minute, while a script reaches it within a second.
pub const DEFAULT_WRITES_PER_MINUTE: u32 = 60;

/// The standalone listen port when `PORT` is not set (the one `func start` uses too).
pub const DEFAULT_PORT: u16 = 7071;

/// Where to listen, and whether under the Functions host: the host's port
/// (`FUNCTIONS_CUSTOMHANDLER_PORT`, on loopback, where the host talks to the handler) wins over
/// `PORT` and `BLOG_BIND` (default `127.0.0.1`).
pub(super) fn listen(get: &Lookup) -> Result<(SocketAddr, bool), SettingError> {
    let port = |name: &'static str, v: String| {
        v.trim()
            .parse::<u16>()
            .map_err(|_| bad(name, format!("`{v}` is not a port number")))
    };
    if let Some(v) = get("FUNCTIONS_CUSTOMHANDLER_PORT") {
        let p = port("FUNCTIONS_CUSTOMHANDLER_PORT", v)?;
        return Ok((SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), p), true));
    }
    let p = get("PORT")
        .map(|v| port("PORT", v))
        .transpose()?
        .unwrap_or(DEFAULT_PORT);
    let ip = match get("BLOG_BIND") {
        Some(v) => v
            .trim()
            .parse::<IpAddr>()
            .map_err(|_| bad("BLOG_BIND", format!("`{v}` is not an IP address")))?,
        None => IpAddr::V4(Ipv4Addr::LOCALHOST),
    };
    Ok((SocketAddr::new(ip, p), false))
}

/// `BLOG_CORS_ORIGINS`: comma-separated origins as a browser sends them in `Origin`
/// (`https://app.example.com`, `http://localhost:5173`: scheme, host and optional port, no path
/// and no trailing slash), or `*` alone for any origin.
pub(super) fn cors_origins(get: &Lookup) -> Result<Vec<String>, SettingError> {
    const NAME: &str = "BLOG_CORS_ORIGINS";
    let Some(v) = get(NAME) else {
        return Ok(Vec::new());
    };
    let origins: Vec<String> = v
        .split(',')
        .map(|o| o.trim().to_string())
        .filter(|o| !o.is_empty())
        .collect();
    if origins.iter().any(|o| o == "*") {
        if origins.len() > 1 {
            return Err(bad(NAME, "`*` allows every origin and cannot be combined"));
        }
        return Ok(origins);
    }
    for o in &origins {
        let rest = o
            .strip_prefix("https://")
            .or_else(|| o.strip_prefix("http://"));
        let ok = rest.is_some_and(|host| {
            !host.is_empty()
                && host
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-.:[]".contains(c))
        });
        if !ok {
            return Err(bad(
                NAME,
                format!("`{o}` is not an origin like `https://app.example.com` (no path, no trailing slash)"),
            ));
        }
    }
    Ok(origins)
}

/// `BLOG_WRITES_PER_MINUTE`: 0 (no limit) to 1000000.
/// `BLOG_WRITES_PER_MINUTE`; unset, [`DEFAULT_WRITES_PER_MINUTE`], or no limit when
/// `local_only` (standalone on loopback without sign-in, where only this machine can write).
pub(super) fn writes_per_minute(get: &Lookup, local_only: bool) -> Result<u32, SettingError> {
    let Some(v) = get("BLOG_WRITES_PER_MINUTE") else {
        return Ok(if local_only {
            0
        } else {
            DEFAULT_WRITES_PER_MINUTE
        });
    };
    v.trim()
        .parse::<u32>()
        .ok()
        .filter(|n| *n <= 1_000_000)
        .ok_or_else(|| {
            bad(
                "BLOG_WRITES_PER_MINUTE",
                format!("`{v}` is not a whole number from 0 (no limit) to 1000000"),
            )
        })
}

/// Searches a client address may make per minute by default (`BLOG_SEARCHES_PER_MINUTE`): a
/// person searching by hand, not a script.
pub const DEFAULT_SEARCHES_PER_MINUTE: u32 = 60;

/// `BLOG_SEARCHES_PER_MINUTE`: 0 (no limit) to 1000000; unset, [`DEFAULT_SEARCHES_PER_MINUTE`]
/// everywhere (a search is anonymous, so loopback is no exception).
pub(super) fn searches_per_minute(get: &Lookup) -> Result<u32, SettingError> {
    let Some(v) = get("BLOG_SEARCHES_PER_MINUTE") else {
        return Ok(DEFAULT_SEARCHES_PER_MINUTE);
    };
    v.trim()
        .parse::<u32>()
        .ok()
        .filter(|n| *n <= 1_000_000)
        .ok_or_else(|| {
            bad(
                "BLOG_SEARCHES_PER_MINUTE",
                format!("`{v}` is not a whole number from 0 (no limit) to 1000000"),
            )
        })
}

/// How long a client may take to send a request's headers (`BLOG_HEADER_TIMEOUT_SECS`).
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(20);
/// How long a request may take to be answered (`BLOG_REQUEST_TIMEOUT_SECS`).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How many connections are served at once (`BLOG_MAX_CONNECTIONS`).
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
/// How many of them one client address may hold (`BLOG_MAX_CONNECTIONS_PER_IP`): a browser opens
/// at most six per origin, so this leaves room for several browsers behind one shared address,
/// while one address can take only a sixteenth of the default connection cap.
pub const DEFAULT_MAX_CONNECTIONS_PER_IP: usize = 64;
/// The server's limits; `crate::server`'s module documentation says what each one does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerLimits {
    pub header_timeout: Duration,
    pub request_timeout: Duration,
    pub max_connections: usize,
    /// 0: no per-address cap (under the Functions host every connection comes from the host).
    pub max_connections_per_ip: usize,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_connections_per_ip: DEFAULT_MAX_CONNECTIONS_PER_IP,
        }
    }
}

impl ServerLimits {
    /// From `BLOG_HEADER_TIMEOUT_SECS` (1..=30), `BLOG_REQUEST_TIMEOUT_SECS` (1..=3600),
    /// `BLOG_MAX_CONNECTIONS` (1..=65536) and `BLOG_MAX_CONNECTIONS_PER_IP` (0..=65536, 0: none);
    /// unset means the default, except that the per-address cap is off by default under the
    /// Functions host (`hosted`), where every connection comes from the host.
    pub(super) fn from_lookup(get: &Lookup, hosted: bool) -> Result<Self, SettingError> {
        let within = |name: &'static str, min: u64, max: u64, default: u64| {
            within(name, get(name), (min, max), default)
        };
        let number = |name: &'static str, max: u64, default: u64| within(name, 1, max, default);
        let d = ServerLimits::default();
        Ok(ServerLimits {
            header_timeout: Duration::from_secs(number(
                "BLOG_HEADER_TIMEOUT_SECS",
                30,
                d.header_timeout.as_secs(),
            )?),
            request_timeout: Duration::from_secs(number(
                "BLOG_REQUEST_TIMEOUT_SECS",
                3600,
                d.request_timeout.as_secs(),
            )?),
            max_connections: number("BLOG_MAX_CONNECTIONS", 65_536, d.max_connections as u64)?
                as usize,
            max_connections_per_ip: within(
                "BLOG_MAX_CONNECTIONS_PER_IP",
                0,
                65_536,
                if hosted {
                    0
                } else {
                    d.max_connections_per_ip as u64
                },
            )? as usize,
        })
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::tests::parse;

    #[test]
    fn cors_origins_are_a_list_of_origins_or_a_star() {
        assert!(parse(&[]).unwrap().cors_origins.is_empty());
        let s = parse(&[(
            "BLOG_CORS_ORIGINS",
            " https://app.example.com, http://localhost:5173 ,",
        )])
        .unwrap();
        assert_eq!(
            s.cors_origins,
            ["https://app.example.com", "http://localhost:5173"]
        );
        assert_eq!(
            parse(&[("BLOG_CORS_ORIGINS", "*")]).unwrap().cors_origins,
            ["*"]
        );
        for bad in [
            "app.example.com",
            "https://app.example.com/",
            "https://a.example/path",
            "ftp://a.example",
            "*,https://a.example",
            "https://",
        ] {
            let e = parse(&[("BLOG_CORS_ORIGINS", bad)]).unwrap_err();
            assert_eq!(e.name, "BLOG_CORS_ORIGINS", "{bad}");
        }
    }

    #[test]
    fn the_functions_host_port_wins_and_turns_the_pump_off() {
        let s = parse(&[("FUNCTIONS_CUSTOMHANDLER_PORT", "40123"), ("PORT", "9")]).unwrap();
        assert_eq!(s.addr, "127.0.0.1:40123".parse().unwrap());
        assert!(s.hosted && !s.pump);
        let s = parse(&[
            ("FUNCTIONS_CUSTOMHANDLER_PORT", "40123"),
            ("BLOG_PUMP", "on"),
        ])
        .unwrap();
        assert!(s.pump);
    }

    #[test]
    fn limits_default_and_parse() {
        let parse = |pairs: &[(&str, &str)]| parse(pairs).map(|s| s.server);
        assert_eq!(parse(&[]).unwrap(), ServerLimits::default());
        let l = parse(&[
            ("BLOG_HEADER_TIMEOUT_SECS", "5"),
            ("BLOG_REQUEST_TIMEOUT_SECS", " 60 "),
            ("BLOG_MAX_CONNECTIONS", "10"),
        ])
        .unwrap();
        assert_eq!(l.header_timeout, Duration::from_secs(5));
        assert_eq!(l.request_timeout, Duration::from_secs(60));
        assert_eq!(l.max_connections, 10);
        assert_eq!(l.max_connections_per_ip, 64);
        let l = parse(&[("BLOG_MAX_CONNECTIONS_PER_IP", "0")]).unwrap();
        assert_eq!(l.max_connections_per_ip, 0);
        let hosted = parse(&[("FUNCTIONS_CUSTOMHANDLER_PORT", "40123")]).unwrap();
        assert_eq!(hosted.max_connections_per_ip, 0);
        for (k, v) in [
            ("BLOG_MAX_CONNECTIONS_PER_IP", "-1"),
            ("BLOG_MAX_CONNECTIONS_PER_IP", "65537"),
            ("BLOG_HEADER_TIMEOUT_SECS", "0"),
            ("BLOG_HEADER_TIMEOUT_SECS", "31"),
            ("BLOG_REQUEST_TIMEOUT_SECS", "x"),
            ("BLOG_MAX_CONNECTIONS", "-1"),
        ] {
            assert_eq!(parse(&[(k, v)]).unwrap_err().name, k);
        }
    }
}
