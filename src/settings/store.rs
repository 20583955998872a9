//! Where the data is: the store (`BLOG_STORE`, `BLOG_DB_PATH`), the Cosmos DB account and its
//! development switches (`COSMOS*`, `BLOG_COSMOS_*`, `BLOG_CREATE_CONTAINERS`), and how long a
//! snapshot of the feed answers on a store that does not signal its commits
//! (`BLOG_FEED_CACHE_MS`).

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

pub use azure_data_cosmos::AccountEndpoint;

use super::read::{bad, flag, parsed};
use super::{Lookup, SettingError};

/// The default of `BLOG_FEED_CACHE_MS`: how long a feed snapshot holds on a store that does not
/// signal its commits.
pub const DEFAULT_FEED_CACHE_MAX_AGE: Duration = Duration::from_millis(250);

/// The embedded store's file when `BLOG_DB_PATH` is not set (created with its directory).
pub const DEFAULT_DB_PATH: &str = ".data/blog.db";

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
    /// `COSMOS_DATABASE`, default `blog`.
    pub database: String,
    /// `BLOG_COSMOS_REGION`, else `REGION_NAME` (set by App Service / Functions in Azure): the
    /// region to route to first. `None`: the account's own region order.
    pub region: Option<String>,
    /// `BLOG_COSMOS_EMULATOR`: talk to the local Cosmos DB emulator (accept its self-signed
    /// certificate, send text JSON instead of binary encoding).
    pub emulator: bool,
    /// `BLOG_CREATE_CONTAINERS`: create the database and the containers when missing
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

/// `BLOG_STORE`: the one named, else the Cosmos store when a Cosmos DB account is configured
/// (`cosmos`), else the embedded one. Naming `cosmos` without an account is an error.
pub(super) fn store_kind(get: &Lookup, cosmos: &CosmosSettings) -> Result<StoreKind, SettingError> {
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
    Ok(store)
}

/// `BLOG_DB_PATH`: the embedded store's file.
pub(super) fn db_path(get: &Lookup) -> PathBuf {
    PathBuf::from(get("BLOG_DB_PATH").unwrap_or_else(|| DEFAULT_DB_PATH.into()))
}

/// `BLOG_FEED_CACHE_MS`: 0 to 60000 milliseconds; 0 turns feed snapshots (and the timeline's
/// snapshot of posts' counts) off on every store.
pub(super) fn feed_cache(get: &Lookup) -> Result<Duration, SettingError> {
    let Some(v) = get("BLOG_FEED_CACHE_MS") else {
        return Ok(DEFAULT_FEED_CACHE_MAX_AGE);
    };
    v.trim()
        .parse::<u64>()
        .ok()
        .filter(|ms| *ms <= 60_000)
        .map(Duration::from_millis)
        .ok_or_else(|| {
            bad(
                "BLOG_FEED_CACHE_MS",
                format!("`{v}` is not a number of milliseconds from 0 to 60000"),
            )
        })
}

pub(super) fn cosmos_settings(get: &Lookup) -> Result<CosmosSettings, SettingError> {
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
    use crate::settings::tests::parse;

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
}
