//! `BLOG_WEBPUBSUB_ENDPOINT` and `BLOG_WEBPUBSUB_HUB`: Azure Web PubSub as the push service of
//! live updates (`docs/live.md`), reached with a Microsoft Entra token of the app's identity,
//! never an access key.

use super::read::bad;
use super::{Lookup, SettingError};

/// The hub's name when `BLOG_WEBPUBSUB_HUB` is not set.
pub const DEFAULT_WEBPUBSUB_HUB: &str = "live";

/// Where live updates are pushed to, and with which identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebPubSubSettings {
    /// `BLOG_WEBPUBSUB_ENDPOINT`: `https://<name>.webpubsub.azure.com`, without a trailing `/`
    /// (plain `http` only for a host on this machine: a local emulator or stand-in).
    pub endpoint: String,
    /// `BLOG_WEBPUBSUB_HUB`: a letter, then letters, digits or `_` (the service's rule).
    pub hub: String,
    /// The identity the token comes from: the one the Cosmos DB client uses
    /// (`COSMOS__credential=managedidentity` or `COSMOS__clientId`: the managed identity, the
    /// user-assigned one with that client id; otherwise the developer's own sign-in).
    pub identity: Identity,
}

/// Whose Microsoft Entra token authenticates the calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    ManagedIdentity { client_id: Option<String> },
    DeveloperTools,
}

/// `None` when `BLOG_WEBPUBSUB_ENDPOINT` is unset: no push service.
pub(super) fn webpubsub_settings(get: &Lookup) -> Result<Option<WebPubSubSettings>, SettingError> {
    // The hub is checked even without an endpoint: a bad value is named either way.
    let hub = get("BLOG_WEBPUBSUB_HUB")
        .map(|v| v.trim().to_string())
        .unwrap_or_else(|| DEFAULT_WEBPUBSUB_HUB.into());
    let mut chars = hub.chars();
    let hub_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && hub.len() <= 128;
    if !hub_ok {
        return Err(bad(
            "BLOG_WEBPUBSUB_HUB",
            format!("`{hub}` is not a hub name: a letter, then letters, digits or `_`"),
        ));
    }
    let Some(endpoint) = get("BLOG_WEBPUBSUB_ENDPOINT") else {
        return Ok(None);
    };
    let endpoint = check_endpoint(endpoint.trim())?;
    let client_id = get("COSMOS__clientId").map(|v| v.trim().to_string());
    let managed =
        get("COSMOS__credential").is_some_and(|v| v.trim().eq_ignore_ascii_case("managedidentity"));
    let identity = if managed || client_id.is_some() {
        Identity::ManagedIdentity { client_id }
    } else {
        Identity::DeveloperTools
    };
    Ok(Some(WebPubSubSettings {
        endpoint,
        hub,
        identity,
    }))
}

/// `https://host[:port]` (a trailing `/` dropped); `http://` only for `localhost` or a loopback
/// address.
fn check_endpoint(endpoint: &str) -> Result<String, SettingError> {
    let name = "BLOG_WEBPUBSUB_ENDPOINT";
    let not_https = || {
        bad(
            name,
            format!("`{endpoint}` is not an https:// URL (`https://<name>.webpubsub.azure.com`)"),
        )
    };
    let (https, rest) = match (
        endpoint.strip_prefix("https://"),
        endpoint.strip_prefix("http://"),
    ) {
        (Some(rest), _) => (true, rest),
        (None, Some(rest)) => (false, rest),
        _ => return Err(not_https()),
    };
    let host_port = rest.strip_suffix('/').unwrap_or(rest);
    let valid = !host_port.is_empty()
        && host_port
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']'));
    if !valid {
        return Err(bad(
            name,
            format!("`{endpoint}` is not `https://host[:port]` (no path, query or credentials)"),
        ));
    }
    if !https {
        let host = match host_port.rsplit_once(':') {
            Some((h, port)) if port.chars().all(|c| c.is_ascii_digit()) => h,
            _ => host_port,
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let loopback = host == "localhost"
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback());
        if !loopback {
            return Err(not_https());
        }
    }
    Ok(format!(
        "{}://{host_port}",
        if https { "https" } else { "http" }
    ))
}

#[cfg(test)]
mod tests {
    use crate::settings::tests::parse;
    use crate::settings::webpubsub::{Identity, WebPubSubSettings};

    #[test]
    fn the_endpoint_is_https_and_the_hub_has_a_default() {
        let s = parse(&[(
            "BLOG_WEBPUBSUB_ENDPOINT",
            "https://blog-x.webpubsub.azure.com/",
        )])
        .unwrap();
        assert_eq!(
            s.webpubsub,
            Some(WebPubSubSettings {
                endpoint: "https://blog-x.webpubsub.azure.com".into(),
                hub: "live".into(),
                identity: Identity::DeveloperTools,
            })
        );
        let s = parse(&[
            ("BLOG_WEBPUBSUB_ENDPOINT", "http://127.0.0.1:8080"),
            ("BLOG_WEBPUBSUB_HUB", "blog_1"),
            ("COSMOS__credential", "managedidentity"),
        ])
        .unwrap()
        .webpubsub
        .unwrap();
        assert_eq!(s.endpoint, "http://127.0.0.1:8080");
        assert_eq!(s.hub, "blog_1");
        assert_eq!(s.identity, Identity::ManagedIdentity { client_id: None });
        assert_eq!(parse(&[]).unwrap().webpubsub, None);
        for (k, v) in [
            (
                "BLOG_WEBPUBSUB_ENDPOINT",
                "http://blog-x.webpubsub.azure.com",
            ),
            ("BLOG_WEBPUBSUB_ENDPOINT", "blog-x.webpubsub.azure.com"),
            ("BLOG_WEBPUBSUB_ENDPOINT", "https://a/b"),
            ("BLOG_WEBPUBSUB_ENDPOINT", "https://u:p@a"),
            ("BLOG_WEBPUBSUB_HUB", "1hub"),
            ("BLOG_WEBPUBSUB_HUB", "a-b"),
        ] {
            let mut pairs = vec![(k, v)];
            if k != "BLOG_WEBPUBSUB_ENDPOINT" {
                pairs.push(("BLOG_WEBPUBSUB_ENDPOINT", "https://x.webpubsub.azure.com"));
            }
            let e = parse(&pairs).unwrap_err();
            assert_eq!(e.name, k, "{v}: {e}");
        }
    }
}
