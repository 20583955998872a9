//! Settings from the environment: the table of `docs/settings.md` is the one user-facing copy of
//! what each means and its default; each setting's doc comment here states its rule. The
//! environment is read once, through one lookup, in [`Settings::from_lookup`], which assembles
//! [`Settings`] from one file per concern:
//! - `server`: where to listen, CORS origins, the HTTP server's limits, the writes budget;
//! - `store`: the embedded or Cosmos DB store, the Cosmos DB account, the feed snapshot's age;
//! - `auth`: who the caller of a write is (`none`, `jwt`, `easyauth`) and the scopes;
//! - `change_feed`: the in-process pump and the timeline fan-out limit;
//! - `live`: the caps on live-update streams;
//! - `logging`: the log's format and levels;
//! - `webpubsub`: Azure Web PubSub, the push service of live updates on Azure.
//!
//! Each reads its values with `read` (a type's `FromStr`, a switch), which names the setting
//! when a value is malformed.
//!
//! A malformed value is an error naming the setting; secrets never print. Nothing outside this
//! module reads the environment for a setting. The modules that use a setting import it from
//! here; nothing here imports them.

mod auth;
mod change_feed;
mod live;
mod logging;
mod read;
mod server;
mod store;
mod webpubsub;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

pub use auth::{AuthMode, AuthSettings};
pub use change_feed::DEFAULT_TIMELINE_FANOUT_LIMIT;
pub use live::{LiveStreams, DEFAULT_LIVE_STREAMS, DEFAULT_LIVE_STREAMS_PER_CLIENT};
pub use logging::{LogFormat, LogSettings};
use read::flag;
pub use server::{
    ServerLimits, DEFAULT_HEADER_TIMEOUT, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_CONNECTIONS_PER_IP,
    DEFAULT_PORT, DEFAULT_REQUEST_TIMEOUT, DEFAULT_SEARCHES_PER_MINUTE, DEFAULT_WRITES_PER_MINUTE,
};
pub use store::{
    AccountEndpoint, CosmosAuth, CosmosConnection, CosmosSettings, Secret, StoreKind,
    DEFAULT_DB_PATH, DEFAULT_FEED_CACHE_MAX_AGE,
};
pub use webpubsub::{Identity, WebPubSubSettings, DEFAULT_WEBPUBSUB_HUB};

#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Where to listen.
    pub addr: SocketAddr,
    /// Running under the Functions host (`FUNCTIONS_CUSTOMHANDLER_PORT` set).
    pub hosted: bool,
    pub store: StoreKind,
    pub db_path: PathBuf,
    pub pump: bool,
    pub cosmos: CosmosSettings,
    pub log: LogSettings,
    /// `BLOG_CORS_ORIGINS`: the browser origins (`scheme://host[:port]`) allowed to call the API
    /// from another origin, or `["*"]` for any; empty: no CORS headers at all.
    pub cors_origins: Vec<String>,
    /// Header and request timeouts and the connection caps (`BLOG_HEADER_TIMEOUT_SECS`,
    /// `BLOG_REQUEST_TIMEOUT_SECS`, `BLOG_MAX_CONNECTIONS`, `BLOG_MAX_CONNECTIONS_PER_IP`).
    pub server: ServerLimits,
    /// The caps on live-update streams (`BLOG_LIVE_STREAMS`, `BLOG_LIVE_STREAMS_PER_CLIENT`).
    pub live: LiveStreams,
    pub auth: AuthSettings,
    /// How long a snapshot of the feed's first page answers `GET /api/feed` on a store that does
    /// not signal its commits (Cosmos DB); `BLOG_FEED_CACHE_MS`. `0` turns snapshots off on
    /// every store.
    pub feed_cache: Duration,
    /// `BLOG_WRITES_PER_MINUTE`: writes per caller per minute (a bucket of that many, refilled
    /// evenly over the minute); 0: no limit.
    pub writes_per_minute: u32,
    /// `BLOG_SEARCHES_PER_MINUTE`: searches per client address per minute (a bucket of that
    /// many, refilled evenly over the minute); 0: no limit.
    pub searches_per_minute: u32,
    /// `BLOG_TIMELINE_FANOUT_LIMIT`: an author with more followers than this is merged into
    /// timelines when they are read instead of copied into each (see `projection::timeline`).
    pub timeline_fanout_limit: Option<u64>,
    /// `BLOG_CONDUIT`: serve the RealWorld ("Conduit") API under `/api/conduit` (on by default
    /// standalone or with `BLOG_AUTH=local`, off otherwise under the Functions host).
    pub conduit: bool,
    /// `BLOG_TOKEN_KEY`: the key local accounts' tokens are signed with (PKCS#8, base64).
    pub token_key: Option<Secret>,
    /// `BLOG_WEBPUBSUB_ENDPOINT` (and `BLOG_WEBPUBSUB_HUB`): push live updates to Azure Web
    /// PubSub; `None`: no push service.
    pub webpubsub: Option<WebPubSubSettings>,
}

/// Where the embedded store at `db_path` keeps the key of local accounts' tokens when
/// `BLOG_TOKEN_KEY` is not set: beside it, `<file name>.token-key`.
pub fn token_key_path(db_path: &std::path::Path) -> PathBuf {
    let mut name = db_path.file_name().unwrap_or_default().to_os_string();
    name.push(".token-key");
    db_path.with_file_name(name)
}

/// `var` with every `BLOG_AUTH*` variable unset.
fn without_auth(var: impl Fn(&str) -> Option<String>) -> impl Fn(&str) -> Option<String> {
    move |k| (!k.starts_with("BLOG_AUTH")).then(|| var(k))?
}

/// A variable lookup: the value of a set, non-blank variable.
type Lookup<'a> = dyn Fn(&str) -> Option<String> + 'a;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("setting `{name}` is invalid: {why}")]
pub struct SettingError {
    pub name: &'static str,
    pub why: String,
}

impl Settings {
    pub fn from_env() -> Result<Self, SettingError> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// From the environment less the `BLOG_AUTH*` settings: who may call the service does not
    /// concern a process that serves no requests (the operations commands), so a mode valid only
    /// under the Functions host does not stop it.
    pub fn from_env_without_auth() -> Result<Self, SettingError> {
        Self::from_lookup(without_auth(|k| std::env::var(k).ok()))
    }

    /// Parse from any variable lookup (tests pass a map). A variable set to blanks counts as
    /// unset.
    pub fn from_lookup(var: impl Fn(&str) -> Option<String>) -> Result<Self, SettingError> {
        let get = |k: &str| var(k).filter(|v| !v.trim().is_empty());
        let get: &Lookup<'_> = &get;
        let (addr, hosted) = server::listen(get)?;
        let cosmos = store::cosmos_settings(get)?;
        let auth = auth::auth_settings(get, hosted, addr)?;
        // Standalone on loopback without sign-in only this machine's processes can write: a
        // developer's scripts, which the default budget would trip.
        let local_only = !hosted && addr.ip().is_loopback() && auth.mode == AuthMode::None;
        let store = store::store_kind(get, &cosmos)?;
        // Local accounts sign up through the Conduit API, so `local` turns it on by default.
        let conduit = flag("BLOG_CONDUIT", get("BLOG_CONDUIT"))?
            .unwrap_or(!hosted || auth.mode == AuthMode::Local);
        let token_key = get("BLOG_TOKEN_KEY").map(Secret::new);
        auth::check_local(&auth, conduit, store, token_key.is_some())?;
        Ok(Settings {
            addr,
            hosted,
            store,
            db_path: store::db_path(get),
            pump: change_feed::pump(get, hosted)?,
            cosmos,
            cors_origins: server::cors_origins(get)?,
            log: logging::log_settings(get)?,
            auth,
            server: ServerLimits::from_lookup(get, hosted)?,
            live: LiveStreams::from_lookup(get)?,
            feed_cache: store::feed_cache(get)?,
            writes_per_minute: server::writes_per_minute(get, local_only)?,
            searches_per_minute: server::searches_per_minute(get)?,
            timeline_fanout_limit: change_feed::timeline_fanout_limit(get)?,
            conduit,
            token_key,
            webpubsub: webpubsub::webpubsub_settings(get)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// The settings a process with exactly these variables gets.
    pub(crate) fn parse(pairs: &[(&str, &str)]) -> Result<Settings, SettingError> {
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
        // Standalone on loopback without sign-in: no write budget unless one is set.
        assert_eq!(s.writes_per_minute, 0);
        let s = parse(&[("BLOG_WRITES_PER_MINUTE", "60")]).unwrap();
        assert_eq!(s.writes_per_minute, 60);
        // Any address others can reach, or any identity, keeps the default budget.
        for pairs in [
            &[
                ("BLOG_BIND", "0.0.0.0"),
                ("BLOG_INSECURE_OPEN_WRITES", "true"),
            ][..],
            &[
                ("BLOG_AUTH", "jwt"),
                ("BLOG_AUTH_ISSUER", "https://issuer.example"),
                ("BLOG_AUTH_AUDIENCE", "api://x"),
            ][..],
        ] {
            let s = parse(pairs).unwrap_or_else(|e| panic!("{pairs:?}: {e}"));
            assert_eq!(s.writes_per_minute, 60, "{pairs:?}");
        }
        let s = parse(&[("BLOG_WRITES_PER_MINUTE", " 0 ")]).unwrap();
        assert_eq!(s.writes_per_minute, 0);
        assert_eq!(s.timeline_fanout_limit, None);
        let s = parse(&[("BLOG_TIMELINE_FANOUT_LIMIT", "0")]).unwrap();
        assert_eq!(s.timeline_fanout_limit, Some(0));
    }

    #[test]
    fn the_operations_commands_ignore_who_may_call() {
        let vars: HashMap<&str, &str> = HashMap::from([
            ("BLOG_AUTH", "easyauth"),
            ("BLOG_AUTH_ISSUER", "not a url"),
            ("BLOG_DB_PATH", "/srv/blog.db"),
        ]);
        let lookup = |k: &str| vars.get(k).map(|v| v.to_string());
        assert_eq!(Settings::from_lookup(lookup).unwrap_err().name, "BLOG_AUTH");
        let s = Settings::from_lookup(without_auth(lookup)).unwrap();
        assert_eq!(s.auth, AuthSettings::default());
        assert_eq!(s.db_path, PathBuf::from("/srv/blog.db"));
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
            ("BLOG_LIVE_STREAMS", "0"),
            ("BLOG_LIVE_STREAMS_PER_CLIENT", "some"),
        ] {
            assert_eq!(parse(&[(k, v)]).unwrap_err().name, k);
        }
        assert_eq!(
            parse(&[("BLOG_STORE", "cosmos")]).unwrap_err().name,
            "COSMOS"
        );
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
            (s.store, s.log.format),
            (StoreKind::Embedded, LogFormat::Json)
        );
    }

    /// The settings table of `docs/settings.md`: each row's variables and its default (the last
    /// column).
    fn documented_rows() -> Vec<(Vec<String>, String)> {
        include_str!("../docs/settings.md")
            .lines()
            .filter(|l| l.starts_with("| `"))
            .map(|row| {
                let cells: Vec<&str> = row.trim().trim_matches('|').split(" | ").collect();
                let default = cells.last().unwrap_or(&"").trim().to_string();
                (in_backticks(cells[0]), default)
            })
            .collect()
    }

    /// The `quoted` parts of a table cell.
    fn in_backticks(cell: &str) -> Vec<String> {
        cell.split('`')
            .skip(1)
            .step_by(2)
            .map(String::from)
            .collect()
    }

    /// The settings table (`docs/settings.md`) is the one user-facing copy of the settings, so it must name
    /// every setting that is read, and only those, each with the default the code has: setting a
    /// variable to its documented default changes nothing.
    #[test]
    fn the_readme_table_names_every_setting_with_the_default_in_code() {
        let rows = documented_rows();
        assert!(
            !rows.is_empty(),
            "the settings table (`docs/settings.md`) has rows"
        );
        let host = ("FUNCTIONS_CUSTOMHANDLER_PORT", "40123");
        let endpoint = (
            "COSMOS__accountEndpoint",
            "https://x.documents.azure.com:443/",
        );
        // Every variable looked up, standalone, hosted and with a Cosmos DB account (where the
        // identity settings are read).
        let read = std::cell::RefCell::new(std::collections::BTreeSet::new());
        for pairs in [&[][..], &[host], &[endpoint]] {
            let m: HashMap<&str, &str> = pairs.iter().copied().collect();
            Settings::from_lookup(|k| {
                read.borrow_mut().insert(k.to_string());
                m.get(k).map(|v| v.to_string())
            })
            .unwrap();
        }
        let read = read.into_inner();
        let documented: Vec<&String> = rows.iter().flat_map(|(names, _)| names).collect();
        for name in &documented {
            assert!(
                read.contains(*name),
                "docs/settings.md documents `{name}`; nothing reads it"
            );
        }
        // The platform's own variables (`WEBSITE_*`, `REGION_NAME`) are described where they
        // matter, not as settings of this service.
        for name in read
            .iter()
            .filter(|n| n.starts_with("BLOG_") || n.starts_with("COSMOS"))
        {
            assert!(
                documented.contains(&name),
                "`{name}` is read but missing from the settings table (`docs/settings.md`)"
            );
        }

        let same = |name: &str, value: &str, base: &[(&str, &str)]| {
            let mut with = base.to_vec();
            with.push((name, value));
            assert_eq!(
                parse(base).unwrap(),
                parse(&with).unwrap(),
                "docs/settings.md gives `{name}` the default `{value}` ({base:?}); the code does not"
            );
        };
        // Defaults described rather than given as a value (taken from another variable or from the
        // issuer).
        const DESCRIBED: &[&str] = &["BLOG_COSMOS_REGION", "BLOG_AUTH_JWKS_URL"];
        for (names, default) in &rows {
            let values = in_backticks(default);
            if default.starts_with("unset") || default.starts_with('\u{2014}') {
                continue;
            }
            let [name] = names.as_slice() else {
                panic!("{names:?}: a row naming several settings has a value as default");
            };
            if default.contains(" standalone") && default.contains("under the") {
                same(name, &values[0], &[]);
                same(name, &values[1], &[host]);
            } else if let Some(otherwise) = default.split(", else `").nth(1) {
                same(name, otherwise.trim_end_matches('`'), &[]);
            } else if *default == format!("`{}`", values.first().map_or("", String::as_str)) {
                same(name, &values[0], &[]);
            } else {
                assert!(
                    DESCRIBED.contains(&name.as_str()),
                    "`{name}`: the default `{default}` is not a form this test compares"
                );
            }
        }
    }
}
