//! Settings from the environment (CONTRACT §1). A malformed value is an error naming the setting.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

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

/// The Cosmos DB settings (CONTRACT §1 plus the development switches), validated at start-up so a
/// malformed value stops the process instead of failing on first use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CosmosSettings {
    /// Where the account is and how to authenticate: from `COSMOS` (connection string with key)
    /// or `COSMOS__accountEndpoint` (identity). `None` when neither is set.
    pub connection: Option<CosmosConnection>,
    /// `COSMOS_DATABASE`.
    pub database: String,
    /// `BLOG_COSMOS_REGION`, else `REGION_NAME` (set by App Service / Functions in Azure): the
    /// region to route to first. `None`: the account's own region order.
    pub region: Option<String>,
    /// `BLOG_COSMOS_EMULATOR`: talk to the local Cosmos DB emulator (accept its self-signed
    /// certificate, send text JSON instead of binary encoding).
    pub emulator: bool,
    /// `BLOG_CREATE_CONTAINERS`: create the database and the four containers when missing
    /// (development only; production containers come from infra).
    pub create_containers: bool,
}

impl Default for CosmosSettings {
    fn default() -> Self {
        CosmosSettings {
            connection: None,
            database: "blog".into(),
            region: None,
            emulator: false,
            create_containers: false,
        }
    }
}

/// A Cosmos DB account endpoint and the way to authenticate to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CosmosConnection {
    /// `https://<account>.documents.azure.com:443/` (or the emulator's `https://localhost:8081/`).
    pub endpoint: String,
    pub auth: CosmosAuth,
}

/// How the Cosmos store authenticates.
///
/// The rule: `COSMOS` (a connection string) means its account key. `COSMOS__accountEndpoint` means
/// a Microsoft Entra token: from the managed identity when `COSMOS__credential=managedidentity`
/// or `COSMOS__clientId` is set (the user-assigned identity with that client id, else the
/// system-assigned one), otherwise from the developer's own sign-in (Azure CLI, then Azure
/// Developer CLI). These are the names the Functions host's Cosmos DB binding reads too.
#[derive(Clone, PartialEq, Eq)]
pub enum CosmosAuth {
    /// The account key of a `COSMOS` connection string (base64).
    Key(String),
    ManagedIdentity {
        /// `COSMOS__clientId`: a user-assigned identity; `None`: the system-assigned identity.
        client_id: Option<String>,
    },
    /// `az login` / `azd auth login` on a developer machine.
    DeveloperTools,
}

/// Never print the account key.
impl std::fmt::Debug for CosmosAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CosmosAuth::Key(_) => f.write_str("Key(<redacted>)"),
            CosmosAuth::ManagedIdentity { client_id } => f
                .debug_struct("ManagedIdentity")
                .field("client_id", client_id)
                .finish(),
            CosmosAuth::DeveloperTools => f.write_str("DeveloperTools"),
        }
    }
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
    /// How long a snapshot of the feed's first page answers `GET /api/feed` on a store that does
    /// not signal its commits (Cosmos DB); `BLOG_FEED_CACHE_MS`. `0` turns snapshots off on
    /// every store.
    pub feed_cache: Duration,
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

        let cosmos = cosmos_settings(&get)?;
        let any_cosmos = cosmos.connection.is_some();
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
        let feed_cache = match get("BLOG_FEED_CACHE_MS") {
            None => crate::api::feed_cache::DEFAULT_MAX_AGE,
            Some(v) => v
                .trim()
                .parse::<u64>()
                .ok()
                .filter(|ms| *ms <= 60_000)
                .map(Duration::from_millis)
                .ok_or_else(|| {
                    bad(
                        "BLOG_FEED_CACHE_MS",
                        format!("`{v}` is not a number of milliseconds from 0 to 60000"),
                    )
                })?,
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
            feed_cache,
        })
    }
}

/// A boolean switch: `true`/`false`, `1`/`0`, `on`/`off`, `yes`/`no` (any case); unset is `false`.
fn flag(name: &'static str, value: Option<String>) -> Result<bool, SettingError> {
    let Some(v) = value else { return Ok(false) };
    match v.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "on" | "yes" => Ok(true),
        "false" | "0" | "off" | "no" => Ok(false),
        _ => Err(bad(name, format!("`{v}` is neither `true` nor `false`"))),
    }
}

fn cosmos_settings(get: &impl Fn(&str) -> Option<String>) -> Result<CosmosSettings, SettingError> {
    let connection = match (get("COSMOS"), get("COSMOS__accountEndpoint")) {
        // The connection string wins, as it does for the Functions host's binding.
        (Some(cs), _) => Some(parse_connection_string(&cs)?),
        (None, Some(endpoint)) => {
            let endpoint = check_endpoint("COSMOS__accountEndpoint", endpoint.trim())?;
            let client_id = get("COSMOS__clientId").map(|v| v.trim().to_string());
            let managed = match get("COSMOS__credential") {
                None => false,
                Some(v) if v.trim().eq_ignore_ascii_case("managedidentity") => true,
                Some(v) => {
                    return Err(bad(
                        "COSMOS__credential",
                        format!(
                        "`{v}` is not `managedidentity` (leave it unset for a developer sign-in)"
                    ),
                    ))
                }
            };
            let auth = if managed || client_id.is_some() {
                CosmosAuth::ManagedIdentity { client_id }
            } else {
                CosmosAuth::DeveloperTools
            };
            Some(CosmosConnection { endpoint, auth })
        }
        (None, None) => None,
    };
    Ok(CosmosSettings {
        connection,
        database: get("COSMOS_DATABASE")
            .map(|v| v.trim().to_string())
            .unwrap_or_else(|| "blog".into()),
        region: get("BLOG_COSMOS_REGION")
            .or_else(|| get("REGION_NAME"))
            .map(|v| v.trim().to_string()),
        emulator: flag("BLOG_COSMOS_EMULATOR", get("BLOG_COSMOS_EMULATOR"))?,
        create_containers: flag("BLOG_CREATE_CONTAINERS", get("BLOG_CREATE_CONTAINERS"))?,
    })
}

/// `AccountEndpoint=https://…;AccountKey=<base64>;` (keys in any case, parts in any order; other
/// parts are ignored). Errors name `COSMOS` but never echo the key.
fn parse_connection_string(cs: &str) -> Result<CosmosConnection, SettingError> {
    let mut endpoint = None;
    let mut key = None;
    for part in cs.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        // Split at the first `=`: a base64 key ends in `=` padding.
        let Some((k, v)) = part.split_once('=') else {
            return Err(bad("COSMOS", "expected `AccountEndpoint=…;AccountKey=…;`"));
        };
        if k.trim().eq_ignore_ascii_case("AccountEndpoint") {
            endpoint = Some(v.trim().to_string());
        } else if k.trim().eq_ignore_ascii_case("AccountKey") {
            key = Some(v.trim().to_string());
        }
    }
    let endpoint = endpoint.ok_or_else(|| bad("COSMOS", "`AccountEndpoint` is missing"))?;
    let key = key
        .filter(|k| !k.is_empty())
        .ok_or_else(|| bad("COSMOS", "`AccountKey` is missing"))?;
    use base64::Engine as _;
    if base64::engine::general_purpose::STANDARD
        .decode(&key)
        .is_err()
    {
        return Err(bad("COSMOS", "`AccountKey` is not base64"));
    }
    Ok(CosmosConnection {
        endpoint: check_endpoint("COSMOS", &endpoint)?,
        auth: CosmosAuth::Key(key),
    })
}

/// An `http(s)://host[:port]/` URL; the SDK decides later whether plain `http` is allowed (only
/// for an emulator on this machine).
fn check_endpoint(name: &'static str, endpoint: &str) -> Result<String, SettingError> {
    let rest = endpoint
        .strip_prefix("https://")
        .or_else(|| endpoint.strip_prefix("http://"))
        .ok_or_else(|| bad(name, format!("`{endpoint}` is not an https:// URL")))?;
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    if host.is_empty() || host.contains(char::is_whitespace) || host.contains('@') {
        return Err(bad(name, format!("`{endpoint}` has no valid host")));
    }
    Ok(endpoint.to_string())
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
        assert_eq!(s.feed_cache, Duration::from_millis(250));
        let s = parse(&[("BLOG_FEED_CACHE_MS", "0")]).unwrap();
        assert_eq!(s.feed_cache, Duration::ZERO);
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
            ("COSMOS", "AccountEndpoint=https://x/;AccountKey=a2V5;"),
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
            ("BLOG_FEED_CACHE_MS", "-1"),
            ("BLOG_FEED_CACHE_MS", "fast"),
            ("BLOG_FEED_CACHE_MS", "600000"),
        ] {
            assert_eq!(parse(&[(k, v)]).unwrap_err().name, k);
        }
        assert_eq!(
            parse(&[("BLOG_STORE", "cosmos")]).unwrap_err().name,
            "COSMOS"
        );
    }

    /// The local emulator's well-known key.
    const EMULATOR_KEY: &str =
        "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw==";

    #[test]
    fn cosmos_connection_string_gives_key_auth() {
        let cs = format!("AccountEndpoint=https://localhost:8081/;AccountKey={EMULATOR_KEY};");
        let s = parse(&[("COSMOS", &cs)]).unwrap();
        assert_eq!(s.store, StoreKind::Cosmos);
        let c = s.cosmos.connection.unwrap();
        assert_eq!(c.endpoint, "https://localhost:8081/");
        assert_eq!(c.auth, CosmosAuth::Key(EMULATOR_KEY.into()));
        // Order and case of the parts do not matter; the key never shows in Debug output.
        let cs = format!(
            "accountkey={EMULATOR_KEY}; accountendpoint=https://a.documents.azure.com:443/"
        );
        let s = parse(&[("COSMOS", &cs)]).unwrap();
        let c = s.cosmos.connection.unwrap();
        assert_eq!(c.endpoint, "https://a.documents.azure.com:443/");
        assert!(!format!("{c:?}").contains(EMULATOR_KEY));
    }

    #[test]
    fn cosmos_malformed_connection_strings_are_named_without_the_key() {
        for cs in [
            "AccountEndpoint=https://x.documents.azure.com/",
            "AccountKey=abcd",
            "AccountEndpoint=https://x/;AccountKey=not base64!",
            "AccountEndpoint=ftp://x/;AccountKey=abcd",
            "AccountEndpoint=https:///;AccountKey=abcd",
            "just some text",
        ] {
            let e = parse(&[("COSMOS", cs)]).unwrap_err();
            assert_eq!(e.name, "COSMOS", "{cs}");
            assert!(!e.why.contains("abcd"), "{e}");
        }
    }

    #[test]
    fn cosmos_identity_connection_picks_the_credential() {
        let ep = (
            "COSMOS__accountEndpoint",
            "https://x.documents.azure.com:443/",
        );
        let auth = |pairs: &[(&str, &str)]| parse(pairs).unwrap().cosmos.connection.unwrap().auth;
        assert_eq!(auth(&[ep]), CosmosAuth::DeveloperTools);
        assert_eq!(
            auth(&[ep, ("COSMOS__credential", "managedidentity")]),
            CosmosAuth::ManagedIdentity { client_id: None }
        );
        assert_eq!(
            auth(&[ep, ("COSMOS__clientId", "1234")]),
            CosmosAuth::ManagedIdentity {
                client_id: Some("1234".into())
            }
        );
        assert_eq!(
            auth(&[
                ep,
                ("COSMOS__credential", "ManagedIdentity"),
                ("COSMOS__clientId", "1234")
            ]),
            CosmosAuth::ManagedIdentity {
                client_id: Some("1234".into())
            }
        );
        // The connection string wins over the identity settings.
        let cs = format!("AccountEndpoint=https://k/;AccountKey={EMULATOR_KEY}");
        assert_eq!(
            auth(&[ep, ("COSMOS", &cs)]),
            CosmosAuth::Key(EMULATOR_KEY.into())
        );
    }

    #[test]
    fn cosmos_switches_and_their_errors() {
        let s = parse(&[]).unwrap().cosmos;
        assert_eq!(s, CosmosSettings::default());
        let s = parse(&[
            ("COSMOS_DATABASE", "blogtest"),
            ("BLOG_COSMOS_EMULATOR", "true"),
            ("BLOG_CREATE_CONTAINERS", "1"),
            ("REGION_NAME", "West Europe"),
        ])
        .unwrap()
        .cosmos;
        assert_eq!(s.database, "blogtest");
        assert!(s.emulator && s.create_containers);
        assert_eq!(s.region.as_deref(), Some("West Europe"));
        let s = parse(&[
            ("REGION_NAME", "West Europe"),
            ("BLOG_COSMOS_REGION", "East US"),
        ]);
        assert_eq!(s.unwrap().cosmos.region.as_deref(), Some("East US"));
        for (k, v) in [
            ("BLOG_COSMOS_EMULATOR", "sure"),
            ("BLOG_CREATE_CONTAINERS", "maybe"),
            ("COSMOS__accountEndpoint", "x.documents.azure.com"),
        ] {
            assert_eq!(parse(&[(k, v)]).unwrap_err().name, k);
        }
        let e = parse(&[
            ("COSMOS__accountEndpoint", "https://x/"),
            ("COSMOS__credential", "clientsecret"),
        ])
        .unwrap_err();
        assert_eq!(e.name, "COSMOS__credential");
    }
}
