//! Settings from the environment (CONTRACT §1). A malformed value is an error naming the setting.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    Embedded,
    Cosmos,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

/// The Cosmos DB settings, as given (the Cosmos store interprets them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CosmosSettings {
    /// `COSMOS`: `AccountEndpoint=…;AccountKey=…;`.
    pub connection_string: Option<String>,
    /// `COSMOS__accountEndpoint`: identity-based connection.
    pub account_endpoint: Option<String>,
    /// `COSMOS__clientId`: a user-assigned managed identity.
    pub client_id: Option<String>,
    /// `COSMOS_DATABASE`.
    pub database: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Where to listen.
    pub addr: SocketAddr,
    /// Running under the Functions host (`FUNCTIONS_CUSTOMHANDLER_PORT` set).
    pub hosted: bool,
    pub store: StoreKind,
    pub db_path: PathBuf,
    pub pump: bool,
    pub cosmos: CosmosSettings,
    pub log_format: LogFormat,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("setting `{name}` is invalid: {why}")]
pub struct SettingError {
    pub name: &'static str,
    pub why: String,
}

fn bad(name: &'static str, why: impl Into<String>) -> SettingError {
    SettingError {
        name,
        why: why.into(),
    }
}

impl Settings {
    pub fn from_env() -> Result<Self, SettingError> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// Parse from any variable lookup (tests pass a map).
    pub fn from_lookup(var: impl Fn(&str) -> Option<String>) -> Result<Self, SettingError> {
        let get = |k: &str| var(k).filter(|v| !v.trim().is_empty());
        let port = |name: &'static str, v: String| {
            v.trim()
                .parse::<u16>()
                .map_err(|_| bad(name, format!("`{v}` is not a port number")))
        };

        let hosted_port = get("FUNCTIONS_CUSTOMHANDLER_PORT")
            .map(|v| port("FUNCTIONS_CUSTOMHANDLER_PORT", v))
            .transpose()?;
        let addr = match hosted_port {
            // The host talks to the handler on loopback only.
            Some(p) => SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), p),
            None => {
                let p = get("PORT")
                    .map(|v| port("PORT", v))
                    .transpose()?
                    .unwrap_or(7071);
                let ip = match get("BLOG_BIND") {
                    Some(v) => v
                        .trim()
                        .parse::<IpAddr>()
                        .map_err(|_| bad("BLOG_BIND", format!("`{v}` is not an IP address")))?,
                    None => IpAddr::V4(Ipv4Addr::LOCALHOST),
                };
                SocketAddr::new(ip, p)
            }
        };
        let hosted = hosted_port.is_some();

        let cosmos = CosmosSettings {
            connection_string: get("COSMOS"),
            account_endpoint: get("COSMOS__accountEndpoint"),
            client_id: get("COSMOS__clientId"),
            database: get("COSMOS_DATABASE").unwrap_or_else(|| "blog".into()),
        };
        let any_cosmos = cosmos.connection_string.is_some() || cosmos.account_endpoint.is_some();
        let store = match get("BLOG_STORE").as_deref().map(str::trim) {
            None if any_cosmos => StoreKind::Cosmos,
            None => StoreKind::Embedded,
            Some(v) if v.eq_ignore_ascii_case("embedded") => StoreKind::Embedded,
            Some(v) if v.eq_ignore_ascii_case("cosmos") => StoreKind::Cosmos,
            Some(v) => {
                return Err(bad(
                    "BLOG_STORE",
                    format!("`{v}` is neither `embedded` nor `cosmos`"),
                ))
            }
        };
        if store == StoreKind::Cosmos && !any_cosmos {
            return Err(bad(
                "COSMOS",
                "the Cosmos store needs `COSMOS` or `COSMOS__accountEndpoint`",
            ));
        }
        let pump = match get("BLOG_PUMP").as_deref().map(str::trim) {
            None => !hosted,
            Some(v) if v.eq_ignore_ascii_case("on") || v == "true" || v == "1" => true,
            Some(v) if v.eq_ignore_ascii_case("off") || v == "false" || v == "0" => false,
            Some(v) => return Err(bad("BLOG_PUMP", format!("`{v}` is neither `on` nor `off`"))),
        };
        let log_format = match get("BLOG_LOG_FORMAT").as_deref().map(str::trim) {
            None => LogFormat::Text,
            Some(v) if v.eq_ignore_ascii_case("text") => LogFormat::Text,
            Some(v) if v.eq_ignore_ascii_case("json") => LogFormat::Json,
            Some(v) => {
                return Err(bad(
                    "BLOG_LOG_FORMAT",
                    format!("`{v}` is neither `text` nor `json`"),
                ))
            }
        };
        Ok(Settings {
            addr,
            hosted,
            store,
            db_path: get("BLOG_DB_PATH")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(".data/blog.db")),
            pump,
            cosmos,
            log_format,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn parse(pairs: &[(&str, &str)]) -> Result<Settings, SettingError> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Settings::from_lookup(|k| m.get(k).cloned())
    }

    #[test]
    fn defaults_are_standalone_embedded_on_7071() {
        let s = parse(&[]).unwrap();
        assert_eq!(s.addr, "127.0.0.1:7071".parse().unwrap());
        assert!(!s.hosted && s.pump);
        assert_eq!(s.store, StoreKind::Embedded);
        assert_eq!(s.db_path, PathBuf::from(".data/blog.db"));
        assert_eq!(s.cosmos.database, "blog");
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
    fn a_cosmos_setting_selects_the_cosmos_store_unless_told_otherwise() {
        let s = parse(&[(
            "COSMOS__accountEndpoint",
            "https://x.documents.azure.com:443/",
        )])
        .unwrap();
        assert_eq!(s.store, StoreKind::Cosmos);
        let s = parse(&[
            ("COSMOS", "AccountEndpoint=x;AccountKey=y;"),
            ("BLOG_STORE", "embedded"),
        ])
        .unwrap();
        assert_eq!(s.store, StoreKind::Embedded);
    }

    #[test]
    fn malformed_settings_are_named() {
        for (k, v) in [
            ("PORT", "http"),
            ("FUNCTIONS_CUSTOMHANDLER_PORT", "99999"),
            ("BLOG_BIND", "localhost:1"),
            ("BLOG_STORE", "postgres"),
            ("BLOG_PUMP", "maybe"),
            ("BLOG_LOG_FORMAT", "xml"),
        ] {
            assert_eq!(parse(&[(k, v)]).unwrap_err().name, k);
        }
        assert_eq!(
            parse(&[("BLOG_STORE", "cosmos")]).unwrap_err().name,
            "COSMOS"
        );
    }
}
