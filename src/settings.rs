//! Settings from the environment (the table in the README's "Settings" section). A malformed
//! value is an error naming the setting; secrets never print.
//!
//! Longer than most files on purpose: it is the one place where every setting is read, checked
//! and given its default, in the README table's order, so that the table and the code can be
//! compared side by side (the HTTP server's limits are in `settings/server.rs`). The modules that
//! use a setting import it from here; nothing here imports them.

mod server;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

pub use azure_data_cosmos::AccountEndpoint;
pub use server::{
    LimitError, ServerLimits, DEFAULT_HEADER_TIMEOUT, DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_CONNECTIONS_PER_IP, DEFAULT_REQUEST_TIMEOUT,
};

/// The default of `BLOG_FEED_CACHE_MS`: how long a feed snapshot holds on a store that does not
/// signal its commits.
pub const DEFAULT_FEED_CACHE_MAX_AGE: Duration = Duration::from_millis(250);

/// Writes a caller may make per minute by default (`BLOG_WRITES_PER_MINUTE`): a person posting,
/// commenting and liking as fast as they can read and type stays far below one write a second
/// for a minute, while a script reaches it within a second.
pub const DEFAULT_WRITES_PER_MINUTE: u32 = 60;

/// The fan-out limit when `BLOG_TIMELINE_FANOUT_LIMIT` is not set: authors with more followers
/// are merged into timelines when read rather than copied into each.
pub const DEFAULT_TIMELINE_FANOUT_LIMIT: u64 = 10_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    Embedded,
    Cosmos,
}

impl StoreKind {
    /// The name `BLOG_STORE` takes, as `Store::kind` reports it.
    pub fn as_str(self) -> &'static str {
        match self {
            StoreKind::Embedded => "embedded",
            StoreKind::Cosmos => "cosmos",
        }
    }
}

impl FromStr for StoreKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "embedded" => Ok(StoreKind::Embedded),
            "cosmos" => Ok(StoreKind::Cosmos),
            _ => Err(format!("`{s}` is neither `embedded` nor `cosmos`")),
        }
    }
}

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

/// `BLOG_AUTH`: who the caller of a write is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMode {
    /// Nobody is verified: the body's `userId` names the caller (local development only).
    None,
    /// `Authorization: Bearer <JWT>`, validated against an OpenID Connect issuer.
    Jwt,
    /// The principal App Service authentication puts in the `X-MS-CLIENT-PRINCIPAL*` headers.
    EasyAuth,
}

impl AuthMode {
    pub fn as_str(self) -> &'static str {
        match self {
            AuthMode::None => "none",
            AuthMode::Jwt => "jwt",
            AuthMode::EasyAuth => "easyauth",
        }
    }
}

impl FromStr for AuthMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "none" => Ok(AuthMode::None),
            "jwt" => Ok(AuthMode::Jwt),
            "easyauth" => Ok(AuthMode::EasyAuth),
            _ => Err(format!("`{s}` is not `none`, `jwt` or `easyauth`")),
        }
    }
}

/// How callers are identified (`BLOG_AUTH*`), checked at start-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthSettings {
    pub mode: AuthMode,
    /// `BLOG_AUTH_ISSUER`: the OpenID Connect issuer, exactly as tokens name it in `iss`.
    /// Required for `jwt`; in `easyauth` only published to clients (`GET /api/config`).
    pub issuer: Option<String>,
    /// `BLOG_AUTH_AUDIENCE`: the `aud` tokens must carry (`jwt`).
    pub audience: Option<String>,
    /// `BLOG_AUTH_JWKS_URL`: where the issuer's keys are; unset: from the issuer's discovery
    /// document (`<issuer>/.well-known/openid-configuration`).
    pub jwks_url: Option<String>,
    /// `BLOG_AUTH_CLIENT_ID`: the public client id a browser signs in with (published only).
    pub client_id: Option<String>,
    /// `BLOG_AUTH_SCOPES`: the scopes a client asks for (space- or comma-separated; published only).
    pub scopes: Vec<String>,
    /// `BLOG_AUTH_WRITE_SCOPE`: a write needs this among the caller's delegated scopes (`scp`)
    /// or application roles (`roles`), else 403 (`jwt`, `easyauth`); unset: any verified caller.
    pub write_scope: Option<String>,
    /// In Azure (`WEBSITE_SITE_NAME` set) App Service authentication is off
    /// (`WEBSITE_AUTH_ENABLED` is not true): nothing strips client-sent `X-MS-CLIENT-PRINCIPAL*`
    /// headers, so `easyauth` must not trust them.
    pub platform_auth_off: bool,
    /// Running in Azure (`WEBSITE_SITE_NAME` set). Under the Functions host without it (`func
    /// start` on a developer's machine) no App Service authentication stands in front of the
    /// handler, so nothing strips client-sent `X-MS-CLIENT-PRINCIPAL*` headers.
    pub in_azure: bool,
}

impl Default for AuthSettings {
    fn default() -> Self {
        AuthSettings {
            mode: AuthMode::None,
            issuer: None,
            audience: None,
            jwks_url: None,
            client_id: None,
            scopes: Vec::new(),
            write_scope: None,
            platform_auth_off: false,
            in_azure: false,
        }
    }
}

/// A secret setting (the Cosmos DB account key): compared and used, never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The secret itself, for the one place that needs it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl From<&str> for Secret {
    fn from(s: &str) -> Self {
        Secret(s.to_string())
    }
}

impl From<String> for Secret {
    fn from(s: String) -> Self {
        Secret(s)
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

impl std::fmt::Display for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// The Cosmos DB settings (the account and the development switches), validated at start-up so a
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
    pub endpoint: AccountEndpoint,
    pub auth: CosmosAuth,
}

/// How the Cosmos store authenticates.
///
/// The rule: `COSMOS` (a connection string) means its account key. `COSMOS__accountEndpoint` means
/// a Microsoft Entra token: from the managed identity when `COSMOS__credential=managedidentity`
/// or `COSMOS__clientId` is set (the user-assigned identity with that client id, else the
/// system-assigned one), otherwise from the developer's own sign-in (Azure CLI, then Azure
/// Developer CLI). These are the names the Functions host's Cosmos DB binding reads too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CosmosAuth {
    /// The account key of a `COSMOS` connection string (base64).
    Key(Secret),
    ManagedIdentity {
        /// `COSMOS__clientId`: a user-assigned identity; `None`: the system-assigned identity.
        client_id: Option<String>,
    },
    /// `az login` / `azd auth login` on a developer machine.
    DeveloperTools,
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
    /// `BLOG_CORS_ORIGINS`: the browser origins (`scheme://host[:port]`) allowed to call the API
    /// from another origin, or `["*"]` for any; empty: no CORS headers at all.
    pub cors_origins: Vec<String>,
    /// Header and request timeouts and the connection cap (`BLOG_HEADER_TIMEOUT_SECS`,
    /// `BLOG_REQUEST_TIMEOUT_SECS`, `BLOG_MAX_CONNECTIONS`).
    pub server: ServerLimits,
    pub auth: AuthSettings,
    /// How long a snapshot of the feed's first page answers `GET /api/feed` on a store that does
    /// not signal its commits (Cosmos DB); `BLOG_FEED_CACHE_MS`. `0` turns snapshots off on
    /// every store.
    pub feed_cache: Duration,
    /// `BLOG_WRITES_PER_MINUTE`: writes per caller per minute (a bucket of that many, refilled
    /// evenly over the minute); 0: no limit.
    pub writes_per_minute: u32,
    /// `BLOG_TIMELINE_FANOUT_LIMIT`: an author with more followers than this is merged into
    /// timelines when they are read instead of copied into each (see `projection::timeline`).
    pub timeline_fanout_limit: u64,
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

/// Parse an optional setting with its type's `FromStr`, naming the setting on error.
fn parsed<T: FromStr<Err = String>>(
    name: &'static str,
    value: Option<String>,
) -> Result<Option<T>, SettingError> {
    value
        .map(|v| v.parse::<T>().map_err(|why| bad(name, why)))
        .transpose()
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
        let store = parsed("BLOG_STORE", get("BLOG_STORE"))?.unwrap_or(if any_cosmos {
            StoreKind::Cosmos
        } else {
            StoreKind::Embedded
        });
        if store == StoreKind::Cosmos && !any_cosmos {
            return Err(bad(
                "COSMOS",
                "the Cosmos store needs `COSMOS` or `COSMOS__accountEndpoint`",
            ));
        }
        let feed_cache = match get("BLOG_FEED_CACHE_MS") {
            None => DEFAULT_FEED_CACHE_MAX_AGE,
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
        let writes_per_minute = match get("BLOG_WRITES_PER_MINUTE") {
            None => DEFAULT_WRITES_PER_MINUTE,
            Some(v) => v
                .trim()
                .parse::<u32>()
                .ok()
                .filter(|n| *n <= 1_000_000)
                .ok_or_else(|| {
                    bad(
                        "BLOG_WRITES_PER_MINUTE",
                        format!("`{v}` is not a whole number from 0 (no limit) to 1000000"),
                    )
                })?,
        };
        let timeline_fanout_limit = match get("BLOG_TIMELINE_FANOUT_LIMIT") {
            None => DEFAULT_TIMELINE_FANOUT_LIMIT,
            Some(v) => v.trim().parse::<u64>().map_err(|_| {
                bad(
                    "BLOG_TIMELINE_FANOUT_LIMIT",
                    format!("`{v}` is not a whole number of followers"),
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
            pump: flag("BLOG_PUMP", get("BLOG_PUMP"))?.unwrap_or(!hosted),
            cosmos,
            cors_origins: cors_origins(get("BLOG_CORS_ORIGINS"))?,
            log_format: parsed("BLOG_LOG_FORMAT", get("BLOG_LOG_FORMAT"))?
                .unwrap_or(LogFormat::Text),
            auth: auth_settings(&get, hosted, addr)?,
            server: ServerLimits::from_lookup(&get, hosted).map_err(|(n, why)| bad(n, why))?,
            feed_cache,
            writes_per_minute,
            timeline_fanout_limit,
        })
    }
}

/// `BLOG_CORS_ORIGINS`: comma-separated origins as a browser sends them in `Origin`
/// (`https://app.example.com`, `http://localhost:5173`: scheme, host and optional port, no path
/// and no trailing slash), or `*` alone for any origin.
fn cors_origins(value: Option<String>) -> Result<Vec<String>, SettingError> {
    const NAME: &str = "BLOG_CORS_ORIGINS";
    let Some(v) = value else {
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

/// A switch, the same for every one: `true`/`false`, `1`/`0`, `on`/`off`, `yes`/`no` in any case.
/// `None` when unset, so each switch picks its own default.
fn flag(name: &'static str, value: Option<String>) -> Result<Option<bool>, SettingError> {
    let Some(v) = value else { return Ok(None) };
    match v.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "on" | "yes" => Ok(Some(true)),
        "false" | "0" | "off" | "no" => Ok(Some(false)),
        _ => Err(bad(name, format!("`{v}` is neither `on` nor `off`"))),
    }
}

fn auth_settings(
    get: &impl Fn(&str) -> Option<String>,
    hosted: bool,
    addr: SocketAddr,
) -> Result<AuthSettings, SettingError> {
    let default = if hosted {
        AuthMode::EasyAuth
    } else {
        AuthMode::None
    };
    let mode = parsed("BLOG_AUTH", get("BLOG_AUTH"))?.unwrap_or(default);
    // `none` lets anyone write as anyone: on an address other machines can reach that is an open
    // blog, so it takes the operator's explicit word, never a default or a forgotten setting.
    let open_writes = flag(
        "BLOG_INSECURE_OPEN_WRITES",
        get("BLOG_INSECURE_OPEN_WRITES"),
    )?
    .unwrap_or(false);
    if mode == AuthMode::None && !addr.ip().is_loopback() && !open_writes {
        return Err(bad(
            "BLOG_AUTH",
            format!(
                "`none` on {addr}, an address other machines can reach, would let anyone write \
                 as any user: set `BLOG_AUTH=jwt`, or bind to loopback (`BLOG_BIND=127.0.0.1`), \
                 or set `BLOG_INSECURE_OPEN_WRITES=true` if open writes are meant"
            ),
        ));
    }
    if mode == AuthMode::EasyAuth && !hosted {
        // The `X-MS-CLIENT-PRINCIPAL*` headers are trustworthy only behind App Service
        // authentication, which strips them from what clients send.
        return Err(bad(
            "BLOG_AUTH",
            "`easyauth` is allowed only under the Functions host (App Service authentication \
             strips client-sent identity headers; standalone nothing would): use `jwt` or `none`",
        ));
    }
    let url = |name: &'static str| -> Result<Option<String>, SettingError> {
        get(name)
            .map(|v| check_issuer_url(name, v.trim()))
            .transpose()
    };
    let issuer = url("BLOG_AUTH_ISSUER")?;
    let jwks_url = url("BLOG_AUTH_JWKS_URL")?;
    let audience = get("BLOG_AUTH_AUDIENCE").map(|v| v.trim().to_string());
    if mode == AuthMode::Jwt {
        if issuer.is_none() {
            return Err(bad("BLOG_AUTH_ISSUER", "`BLOG_AUTH=jwt` needs the issuer"));
        }
        if audience.is_none() {
            return Err(bad(
                "BLOG_AUTH_AUDIENCE",
                "`BLOG_AUTH=jwt` needs the audience",
            ));
        }
    }
    Ok(AuthSettings {
        mode,
        issuer,
        audience,
        jwks_url,
        client_id: get("BLOG_AUTH_CLIENT_ID").map(|v| v.trim().to_string()),
        scopes: get("BLOG_AUTH_SCOPES")
            .map(|v| {
                v.split(|c: char| c == ',' || c.is_whitespace())
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default(),
        write_scope: get("BLOG_AUTH_WRITE_SCOPE").map(|v| v.trim().to_string()),
        in_azure: get("WEBSITE_SITE_NAME").is_some(),
        platform_auth_off: get("WEBSITE_SITE_NAME").is_some()
            && !matches!(
                flag("WEBSITE_AUTH_ENABLED", get("WEBSITE_AUTH_ENABLED")),
                Ok(Some(true))
            ),
    })
}

/// An issuer or key URL: `https://`, or plain `http://` to this machine only (a local issuer).
fn check_issuer_url(name: &'static str, value: &str) -> Result<String, SettingError> {
    let url = reqwest::Url::parse(value).map_err(|e| bad(name, format!("`{value}`: {e}")))?;
    let host = url.host_str().unwrap_or("");
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    match url.scheme() {
        "https" if !host.is_empty() => Ok(value.to_string()),
        "http" if loopback => Ok(value.to_string()),
        _ => Err(bad(
            name,
            format!("`{value}` is not an https:// URL (plain http only to this machine)"),
        )),
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
        emulator: flag("BLOG_COSMOS_EMULATOR", get("BLOG_COSMOS_EMULATOR"))?.unwrap_or(false),
        create_containers: flag("BLOG_CREATE_CONTAINERS", get("BLOG_CREATE_CONTAINERS"))?
            .unwrap_or(false),
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
            key = Some(Secret::new(v.trim()));
        }
    }
    let endpoint = endpoint.ok_or_else(|| bad("COSMOS", "`AccountEndpoint` is missing"))?;
    let key = key
        .filter(|k| !k.expose().is_empty())
        .ok_or_else(|| bad("COSMOS", "`AccountKey` is missing"))?;
    use base64::Engine as _;
    if base64::engine::general_purpose::STANDARD
        .decode(key.expose())
        .is_err()
    {
        return Err(bad("COSMOS", "`AccountKey` is not base64"));
    }
    Ok(CosmosConnection {
        endpoint: check_endpoint("COSMOS", &endpoint)?,
        auth: CosmosAuth::Key(key),
    })
}

/// An `http(s)://host[:port]/` URL, parsed once into the SDK's endpoint type; the SDK decides
/// later whether plain `http` is allowed (only for an emulator on this machine).
fn check_endpoint(name: &'static str, endpoint: &str) -> Result<AccountEndpoint, SettingError> {
    let rest = endpoint
        .strip_prefix("https://")
        .or_else(|| endpoint.strip_prefix("http://"))
        .ok_or_else(|| bad(name, format!("`{endpoint}` is not an https:// URL")))?;
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    if host.is_empty() || host.contains(char::is_whitespace) || host.contains('@') {
        return Err(bad(name, format!("`{endpoint}` has no valid host")));
    }
    endpoint
        .parse::<AccountEndpoint>()
        .map_err(|_| bad(name, format!("`{endpoint}` is not a valid URL")))
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
        assert_eq!(s.writes_per_minute, 60);
        let s = parse(&[("BLOG_WRITES_PER_MINUTE", " 0 ")]).unwrap();
        assert_eq!(s.writes_per_minute, 0);
        assert_eq!(s.timeline_fanout_limit, 10_000);
        let s = parse(&[("BLOG_TIMELINE_FANOUT_LIMIT", "0")]).unwrap();
        assert_eq!(s.timeline_fanout_limit, 0);
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
            ("BLOG_AUTH", "basic"),
            ("BLOG_AUTH_ISSUER", "http://login.example.com/"),
            ("BLOG_AUTH_JWKS_URL", "not a url"),
            ("BLOG_FEED_CACHE_MS", "-1"),
            ("BLOG_FEED_CACHE_MS", "fast"),
            ("BLOG_FEED_CACHE_MS", "600000"),
            ("BLOG_WRITES_PER_MINUTE", "-1"),
            ("BLOG_WRITES_PER_MINUTE", "lots"),
            ("BLOG_WRITES_PER_MINUTE", "1000001"),
            ("BLOG_TIMELINE_FANOUT_LIMIT", "-1"),
            ("BLOG_TIMELINE_FANOUT_LIMIT", "many"),
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
        assert_eq!(c.endpoint.url().as_str(), "https://localhost:8081/");
        assert_eq!(c.auth, CosmosAuth::Key(EMULATOR_KEY.into()));
        // Order and case of the parts do not matter; the key never shows in Debug output.
        let cs = format!(
            "accountkey={EMULATOR_KEY}; accountendpoint=https://a.documents.azure.com:443/"
        );
        let s = parse(&[("COSMOS", &cs)]).unwrap();
        assert!(!format!("{s:?}").contains(EMULATOR_KEY));
        let c = s.cosmos.connection.unwrap();
        assert_eq!(c.endpoint.url().host_str(), Some("a.documents.azure.com"));
        assert!(!format!("{c:?}").contains(EMULATOR_KEY));
        let CosmosAuth::Key(key) = &c.auth else {
            panic!("key auth")
        };
        assert_eq!(format!("{key} {key:?}"), "<redacted> <redacted>");
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

    #[test]
    fn every_switch_takes_the_same_spellings_in_any_case() {
        for (v, on) in [
            ("true", true),
            ("TRUE", true),
            ("On", true),
            ("1", true),
            ("Yes", true),
            ("false", false),
            ("OFF", false),
            ("0", false),
            ("no", false),
        ] {
            let s = parse(&[
                ("BLOG_PUMP", v),
                ("BLOG_COSMOS_EMULATOR", v),
                ("BLOG_CREATE_CONTAINERS", v),
            ])
            .unwrap();
            assert_eq!(s.pump, on, "{v}");
            assert_eq!(s.cosmos.emulator, on, "{v}");
            assert_eq!(s.cosmos.create_containers, on, "{v}");
        }
        let s = parse(&[("BLOG_STORE", "Embedded"), ("BLOG_LOG_FORMAT", "JSON")]).unwrap();
        assert_eq!(
            (s.store, s.log_format),
            (StoreKind::Embedded, LogFormat::Json)
        );
    }

    #[test]
    fn auth_defaults_to_none_standalone_and_easyauth_under_the_host() {
        assert_eq!(parse(&[]).unwrap().auth, AuthSettings::default());
        let s = parse(&[("FUNCTIONS_CUSTOMHANDLER_PORT", "40123")]).unwrap();
        assert_eq!(s.auth.mode, AuthMode::EasyAuth);
        let s = parse(&[
            ("FUNCTIONS_CUSTOMHANDLER_PORT", "40123"),
            ("BLOG_AUTH", "None"),
        ]);
        assert_eq!(s.unwrap().auth.mode, AuthMode::None);
    }

    #[test]
    fn in_azure_app_service_authentication_must_be_on_for_easyauth() {
        let host = ("FUNCTIONS_CUSTOMHANDLER_PORT", "40123");
        assert!(
            !parse(&[host]).unwrap().auth.platform_auth_off,
            "local func start"
        );
        let site = ("WEBSITE_SITE_NAME", "func-blog");
        assert!(parse(&[host, site]).unwrap().auth.platform_auth_off);
        let on = ("WEBSITE_AUTH_ENABLED", "True");
        assert!(!parse(&[host, site, on]).unwrap().auth.platform_auth_off);
    }

    #[test]
    fn easyauth_standalone_is_refused_naming_the_setting() {
        let e = parse(&[("BLOG_AUTH", "easyauth")]).unwrap_err();
        assert_eq!(e.name, "BLOG_AUTH");
        assert!(e.why.contains("Functions host"), "{e}");
    }

    #[test]
    fn auth_none_on_a_network_address_is_refused_unless_open_writes_are_meant() {
        for bind in ["0.0.0.0", "192.0.2.10", "::"] {
            let e = parse(&[("BLOG_BIND", bind)]).unwrap_err();
            assert_eq!(e.name, "BLOG_AUTH", "{bind}");
            assert!(e.why.contains("BLOG_INSECURE_OPEN_WRITES=true"), "{e}");
            assert!(e.why.contains("BLOG_AUTH=jwt"), "{e}");
            let e = parse(&[("BLOG_BIND", bind), ("BLOG_AUTH", "none")]).unwrap_err();
            assert_eq!(e.name, "BLOG_AUTH", "{bind}");
            let s = parse(&[("BLOG_BIND", bind), ("BLOG_INSECURE_OPEN_WRITES", "true")]);
            assert_eq!(s.unwrap().auth.mode, AuthMode::None, "{bind}");
            let e = parse(&[("BLOG_BIND", bind), ("BLOG_INSECURE_OPEN_WRITES", "off")]);
            assert_eq!(e.unwrap_err().name, "BLOG_AUTH", "{bind}");
        }
        for bind in ["127.0.0.1", "127.0.0.2", "::1"] {
            assert!(parse(&[("BLOG_BIND", bind)]).is_ok(), "{bind}");
        }
        let e = parse(&[("BLOG_INSECURE_OPEN_WRITES", "maybe")]).unwrap_err();
        assert_eq!(e.name, "BLOG_INSECURE_OPEN_WRITES");
        let jwt = parse(&[
            ("BLOG_BIND", "0.0.0.0"),
            ("BLOG_AUTH", "jwt"),
            ("BLOG_AUTH_ISSUER", "https://login.example.com/t/v2.0"),
            ("BLOG_AUTH_AUDIENCE", "api://blog"),
        ]);
        assert_eq!(jwt.unwrap().auth.mode, AuthMode::Jwt);
    }

    #[test]
    fn jwt_needs_issuer_and_audience() {
        let e = parse(&[("BLOG_AUTH", "jwt"), ("BLOG_AUTH_AUDIENCE", "api://blog")]);
        assert_eq!(e.unwrap_err().name, "BLOG_AUTH_ISSUER");
        let e = parse(&[
            ("BLOG_AUTH", "jwt"),
            ("BLOG_AUTH_ISSUER", "https://login.example.com/t/v2.0"),
        ]);
        assert_eq!(e.unwrap_err().name, "BLOG_AUTH_AUDIENCE");
        let s = parse(&[
            ("BLOG_AUTH", "JWT"),
            ("BLOG_AUTH_ISSUER", "https://login.example.com/t/v2.0"),
            ("BLOG_AUTH_AUDIENCE", "api://blog"),
            ("BLOG_AUTH_JWKS_URL", "http://127.0.0.1:9/keys"),
            ("BLOG_AUTH_CLIENT_ID", "spa-client"),
            (
                "BLOG_AUTH_SCOPES",
                "openid, api://blog/Posts.Write  profile",
            ),
        ])
        .unwrap()
        .auth;
        assert_eq!(s.mode, AuthMode::Jwt);
        assert_eq!(
            s.issuer.as_deref(),
            Some("https://login.example.com/t/v2.0")
        );
        assert_eq!(s.audience.as_deref(), Some("api://blog"));
        assert_eq!(s.jwks_url.as_deref(), Some("http://127.0.0.1:9/keys"));
        assert_eq!(s.client_id.as_deref(), Some("spa-client"));
        assert_eq!(s.scopes, ["openid", "api://blog/Posts.Write", "profile"]);
        assert_eq!(s.write_scope, None);
        let s = parse(&[
            ("BLOG_AUTH", "jwt"),
            ("BLOG_AUTH_ISSUER", "https://login.example.com/t/v2.0"),
            ("BLOG_AUTH_AUDIENCE", "api://blog"),
            ("BLOG_AUTH_WRITE_SCOPE", " Blog.Write "),
        ]);
        assert_eq!(s.unwrap().auth.write_scope.as_deref(), Some("Blog.Write"));
    }
}
