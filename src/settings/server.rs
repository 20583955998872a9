//! The HTTP server's limits, read from the environment with the other settings (the server in
//! `crate::server` applies them).

use std::time::Duration;

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
/// The server's limits; see the module documentation for what each one does.
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

/// A malformed limit setting: its name and why.
pub type LimitError = (&'static str, String);

impl ServerLimits {
    /// From `BLOG_HEADER_TIMEOUT_SECS` (1..=30), `BLOG_REQUEST_TIMEOUT_SECS` (1..=3600),
    /// `BLOG_MAX_CONNECTIONS` (1..=65536) and `BLOG_MAX_CONNECTIONS_PER_IP` (0..=65536, 0: none);
    /// unset means the default, except that the per-address cap is off by default under the
    /// Functions host (`hosted`), where every connection comes from the host.
    pub fn from_lookup(
        get: &impl Fn(&str) -> Option<String>,
        hosted: bool,
    ) -> Result<Self, LimitError> {
        let within = |name: &'static str, min: u64, max: u64, default: u64| match get(name) {
            None => Ok(default),
            Some(v) => v
                .trim()
                .parse::<u64>()
                .ok()
                .filter(|n| (min..=max).contains(n))
                .ok_or_else(|| {
                    (
                        name,
                        format!("`{v}` is not a whole number from {min} to {max}"),
                    )
                }),
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
