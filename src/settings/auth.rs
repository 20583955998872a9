//! Who the caller of a write is: `BLOG_AUTH` (`none`, `jwt`, `easyauth`, `local`), the issuer,
//! audience and keys a token is checked against, what a browser signs in with, and the scope a
//! write needs.

use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;

use super::read::{bad, flag, parsed};
use super::{Lookup, SettingError};

/// `BLOG_AUTH`: who the caller of a write is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMode {
    /// Nobody is verified: the body's `userId` names the caller (local development only).
    None,
    /// `Authorization: Bearer <JWT>`, validated against an OpenID Connect issuer.
    Jwt,
    /// The principal App Service authentication puts in the `X-MS-CLIENT-PRINCIPAL*` headers.
    EasyAuth,
    /// `Authorization: Bearer <token>` (or `Token <token>`) signed by this service for a local
    /// account (registered through the Conduit API; `crate::auth::local`).
    Local,
}

impl AuthMode {
    pub fn as_str(self) -> &'static str {
        match self {
            AuthMode::None => "none",
            AuthMode::Jwt => "jwt",
            AuthMode::EasyAuth => "easyauth",
            AuthMode::Local => "local",
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
            "local" => Ok(AuthMode::Local),
            _ => Err(format!("`{s}` is not `none`, `jwt`, `easyauth` or `local`")),
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

/// `BLOG_AUTH*`, with the platform's `WEBSITE_SITE_NAME` and `WEBSITE_AUTH_ENABLED`: the mode
/// defaults to `easyauth` under the Functions host (`hosted`) and `none` standalone; a mode that
/// would trust what nobody checks is refused.
pub(super) fn auth_settings(
    get: &Lookup,
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
                 as any user: set `BLOG_AUTH=jwt` or `BLOG_AUTH=local`, or bind to loopback (`BLOG_BIND=127.0.0.1`), \
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
             strips client-sent identity headers; standalone nothing would): use `jwt`, `local` \
             or `none`",
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
    let write_scope = get("BLOG_AUTH_WRITE_SCOPE").map(|v| v.trim().to_string());
    if mode == AuthMode::Local && write_scope.is_some() {
        // A local account's token grants no scope or role, so the setting would refuse every
        // write.
        return Err(bad(
            "BLOG_AUTH_WRITE_SCOPE",
            "`BLOG_AUTH=local` tokens carry no scopes or roles: unset it",
        ));
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
        write_scope,
        in_azure: get("WEBSITE_SITE_NAME").is_some(),
        platform_auth_off: get("WEBSITE_SITE_NAME").is_some()
            && !matches!(
                flag("WEBSITE_AUTH_ENABLED", get("WEBSITE_AUTH_ENABLED")),
                Ok(Some(true))
            ),
    })
}

/// What `BLOG_AUTH=local` needs of the other settings: the Conduit API on (accounts register and
/// sign in there), and on Cosmos DB the key `BLOG_TOKEN_KEY` (every instance must check a token
/// with the key that signed it; only the embedded store keeps one of its own).
pub(super) fn check_local(
    auth: &AuthSettings,
    conduit: bool,
    store: super::StoreKind,
    token_key: bool,
) -> Result<(), SettingError> {
    if auth.mode != AuthMode::Local {
        return Ok(());
    }
    if !conduit {
        return Err(bad(
            "BLOG_CONDUIT",
            "`BLOG_AUTH=local` needs it on: local accounts register and sign in through the \
             Conduit API (`/api/conduit/api/users`)",
        ));
    }
    if store == super::StoreKind::Cosmos && !token_key {
        return Err(bad(
            "BLOG_TOKEN_KEY",
            "`BLOG_AUTH=local` on Cosmos DB needs the key tokens are signed with, the same for \
             every instance (a P-256 private key, PKCS#8, base64; see docs/identity.md)",
        ));
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::tests::parse;

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
    fn local_is_a_sign_in_on_any_address_standalone_and_under_the_host() {
        for pairs in [
            &[("BLOG_AUTH", "local")][..],
            &[("BLOG_AUTH", "Local"), ("BLOG_BIND", "0.0.0.0")],
            &[
                ("BLOG_AUTH", "local"),
                ("FUNCTIONS_CUSTOMHANDLER_PORT", "40123"),
            ],
        ] {
            let s = parse(pairs).unwrap();
            assert_eq!(s.auth.mode, AuthMode::Local, "{pairs:?}");
            assert_eq!(s.auth.mode.as_str(), "local");
            // Accounts register through the Conduit API, so it is on, under the host too.
            assert!(s.conduit, "{pairs:?}");
            // Signed-in callers get the default write budget.
            assert_eq!(s.writes_per_minute, 60, "{pairs:?}");
        }
        let e = parse(&[("BLOG_AUTH", "locals")]).unwrap_err();
        assert_eq!(e.name, "BLOG_AUTH");
        assert!(e.why.contains("`local`"), "{e}");
    }

    #[test]
    fn local_needs_the_conduit_api_and_on_cosmos_a_shared_key() {
        let e = parse(&[("BLOG_AUTH", "local"), ("BLOG_CONDUIT", "off")]).unwrap_err();
        assert_eq!(e.name, "BLOG_CONDUIT");
        assert!(e.why.contains("/api/conduit/api/users"), "{e}");
        let cosmos = ("COSMOS", "AccountEndpoint=https://x/;AccountKey=a2V5;");
        let e = parse(&[("BLOG_AUTH", "local"), cosmos]).unwrap_err();
        assert_eq!(e.name, "BLOG_TOKEN_KEY");
        assert!(e.why.contains("every instance"), "{e}");
        let s = parse(&[("BLOG_AUTH", "local"), cosmos, ("BLOG_TOKEN_KEY", "a2V5")]);
        assert_eq!(s.unwrap().auth.mode, AuthMode::Local);
        // Other modes ask for neither.
        assert!(parse(&[cosmos]).is_ok());
        let e = parse(&[
            ("BLOG_AUTH", "local"),
            ("BLOG_AUTH_WRITE_SCOPE", "Blog.Write"),
        ]);
        assert_eq!(e.unwrap_err().name, "BLOG_AUTH_WRITE_SCOPE");
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
