//! `BLOG_AUTH=easyauth`: the caller App Service authentication (Easy Auth) vouches for.
//!
//! When authentication is on, the platform validates the caller's session or bearer token,
//! strips any `X-MS-CLIENT-PRINCIPAL*` header a client sent, and sets:
//! - `X-MS-CLIENT-PRINCIPAL-IDP`: the identity provider (`aad` for Microsoft Entra ID);
//! - `X-MS-CLIENT-PRINCIPAL-ID`: the principal's id at that provider;
//! - `X-MS-CLIENT-PRINCIPAL`: base64 JSON `{"auth_typ": …, "claims": [{"typ": …, "val": …}], …}`.
//!
//! The identity is (provider, principal id). Only that stripping makes the headers trustworthy,
//! so the settings allow this mode only under the Functions host; in Azure with authentication
//! off no header is trusted, and under `func start` (see [`forgeable`]) the start-up log says
//! in an error that anyone can forge a write.

use axum::http::HeaderMap;
use base64::Engine as _;
use serde::Deserialize;

use super::Identity;
use crate::settings::{AuthMode, AuthSettings};

/// Whether anyone can forge the caller: `easyauth` under the Functions host outside Azure
/// (`func start`, `WEBSITE_SITE_NAME` unset), where no App Service authentication strips the
/// principal headers a client sends, yet they are trusted. (In Azure with authentication off no
/// header is trusted; standalone, `easyauth` is refused.)
pub fn forgeable(settings: &AuthSettings) -> bool {
    settings.mode == AuthMode::EasyAuth && !settings.in_azure
}

pub const PRINCIPAL: &str = "x-ms-client-principal";
pub const PRINCIPAL_IDP: &str = "x-ms-client-principal-idp";
pub const PRINCIPAL_ID: &str = "x-ms-client-principal-id";

/// Claim types that carry delegated scopes (space-separated).
const SCOPE_CLAIMS: &[&str] = &["http://schemas.microsoft.com/identity/claims/scope", "scp"];
/// Claim types that carry an application role (one per claim).
const ROLE_CLAIMS: &[&str] = &[
    "roles",
    "http://schemas.microsoft.com/ws/2008/06/identity/claims/role",
];

/// Claim types that carry a principal's stable id, in order of preference.
const ID_CLAIMS: &[&str] = &[
    "http://schemas.microsoft.com/identity/claims/objectidentifier",
    "oid",
    "sub",
    "http://schemas.xmlsoap.org/ws/2005/05/identity/claims/nameidentifier",
];

#[derive(Deserialize)]
struct Principal {
    auth_typ: Option<String>,
    #[serde(default)]
    claims: Vec<Claim>,
}

#[derive(Deserialize)]
struct Claim {
    typ: String,
    val: String,
}

/// The identity in the Easy Auth headers; `None` when there are none (anonymous). Headers that
/// are present but malformed or contradict each other are an error (its text names no value).
pub fn identify(headers: &HeaderMap) -> Result<Option<Identity>, String> {
    let text = |name: &str| -> Result<Option<String>, String> {
        headers
            .get(name)
            .map(|v| {
                v.to_str()
                    .map(|s| s.trim().to_string())
                    .map_err(|_| format!("`{name}` is not text"))
            })
            .transpose()
            .map(|v| v.filter(|s| !s.is_empty()))
    };
    let idp = text(PRINCIPAL_IDP)?;
    let id = text(PRINCIPAL_ID)?;
    let principal = text(PRINCIPAL)?
        .map(|encoded| decode(&encoded))
        .transpose()?;
    if idp.is_none() && id.is_none() && principal.is_none() {
        return Ok(None);
    }
    let auth_typ = principal.as_ref().and_then(|p| p.auth_typ.clone());
    let idp = match (idp, auth_typ) {
        (Some(h), Some(p)) if !h.eq_ignore_ascii_case(&p) => {
            return Err(format!(
                "`{PRINCIPAL_IDP}` and the principal's `auth_typ` disagree"
            ))
        }
        (Some(h), _) => h,
        (None, Some(p)) => p,
        (None, None) => return Err(format!("`{PRINCIPAL_IDP}` is missing")),
    };
    let id = id
        .or_else(|| {
            let claims = &principal.as_ref()?.claims;
            ID_CLAIMS.iter().find_map(|typ| {
                claims
                    .iter()
                    .find(|c| c.typ == *typ && !c.val.is_empty())
                    .map(|c| c.val.clone())
            })
        })
        .ok_or_else(|| format!("`{PRINCIPAL_ID}` is missing"))?;
    let claims = principal.map(|p| p.claims).unwrap_or_default();
    let grants = claims.into_iter().flat_map(|c| {
        if SCOPE_CLAIMS.contains(&c.typ.as_str()) {
            c.val.split_whitespace().map(String::from).collect()
        } else if ROLE_CLAIMS.contains(&c.typ.as_str()) {
            vec![c.val]
        } else {
            Vec::new()
        }
    });
    Ok(Some(
        Identity::new(idp.to_ascii_lowercase(), id).with_grants(grants),
    ))
}

fn decode(encoded: &str) -> Result<Principal, String> {
    let e = base64::engine::general_purpose::STANDARD;
    let bytes = e
        .decode(encoded)
        .or_else(|_| base64::engine::general_purpose::STANDARD_NO_PAD.decode(encoded))
        .map_err(|_| format!("`{PRINCIPAL}` is not base64"))?;
    serde_json::from_slice(&bytes).map_err(|_| format!("`{PRINCIPAL}` is not a principal"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    fn principal(v: serde_json::Value) -> String {
        base64::engine::general_purpose::STANDARD.encode(v.to_string())
    }

    /// Forgeable exactly when `easyauth` runs under the host outside Azure (`func start`).
    #[test]
    fn principal_headers_can_be_forged_under_func_start_only() {
        let forgeable_with = |pairs: &[(&str, &str)]| {
            let env: std::collections::HashMap<_, _> = pairs.iter().copied().collect();
            let settings =
                crate::settings::Settings::from_lookup(|k| env.get(k).map(|v| v.to_string()))
                    .unwrap();
            forgeable(&settings.auth)
        };
        let host = ("FUNCTIONS_CUSTOMHANDLER_PORT", "40123");
        let site = ("WEBSITE_SITE_NAME", "func-blog");
        let auth_on = ("WEBSITE_AUTH_ENABLED", "true");
        // `func start`: easyauth is the default under the host, or set explicitly.
        assert!(forgeable_with(&[host]));
        assert!(forgeable_with(&[host, ("BLOG_AUTH", "easyauth")]));
        // In Azure, behind App Service authentication or with it off (then nothing is trusted).
        assert!(!forgeable_with(&[host, site, auth_on]));
        assert!(!forgeable_with(&[host, site]));
        // Other modes trust no principal header.
        assert!(!forgeable_with(&[host, ("BLOG_AUTH", "none")]));
        assert!(!forgeable_with(&[]));
    }

    #[test]
    fn scopes_and_roles_in_the_principal_are_grants() {
        let p = principal(json!({"auth_typ": "aad", "claims": [
            {"typ": "http://schemas.microsoft.com/identity/claims/scope", "val": "openid Blog.Write"},
            {"typ": "roles", "val": "Blog.Admin"},
            {"typ": "name", "val": "Blog.Reader"},
        ]}));
        let i = identify(&headers(&[(PRINCIPAL_ID, "o1"), (PRINCIPAL, &p)]))
            .unwrap()
            .unwrap();
        assert!(i.is_granted("Blog.Write") && i.is_granted("openid") && i.is_granted("Blog.Admin"));
        assert!(!i.is_granted("Blog.Reader") && !i.is_granted("Blog"));
    }

    #[test]
    fn no_headers_is_anonymous() {
        assert_eq!(identify(&HeaderMap::new()).unwrap(), None);
    }

    #[test]
    fn the_identity_is_provider_and_principal_id() {
        let p = principal(json!({"auth_typ": "aad", "claims": [{"typ": "oid", "val": "o1"}]}));
        let a = identify(&headers(&[
            (PRINCIPAL_IDP, "aad"),
            (PRINCIPAL_ID, "o1"),
            (PRINCIPAL, &p),
        ]))
        .unwrap();
        assert_eq!(a, Some(Identity::new("aad", "o1")));
        // The id headers alone, or the principal alone, name the same identity.
        let b = identify(&headers(&[(PRINCIPAL_IDP, "aad"), (PRINCIPAL_ID, "o1")])).unwrap();
        let c = identify(&headers(&[(PRINCIPAL, &p)])).unwrap();
        assert_eq!(a, b);
        assert_eq!(a, c);
        // Another provider with the same id is someone else.
        let d = identify(&headers(&[(PRINCIPAL_IDP, "github"), (PRINCIPAL_ID, "o1")])).unwrap();
        assert_ne!(a, d);
    }

    #[test]
    fn malformed_or_contradicting_headers_are_refused() {
        let aad = principal(json!({"auth_typ": "aad", "claims": []}));
        for h in [
            headers(&[(PRINCIPAL_ID, "o1")]),
            headers(&[(PRINCIPAL_IDP, "aad")]),
            headers(&[(PRINCIPAL, "not base64!")]),
            headers(&[(PRINCIPAL, &principal(json!(["x"])))]),
            headers(&[(PRINCIPAL, &aad)]),
            headers(&[
                (PRINCIPAL_IDP, "github"),
                (PRINCIPAL_ID, "o1"),
                (PRINCIPAL, &aad),
            ]),
        ] {
            assert!(identify(&h).is_err(), "{h:?}");
        }
    }
}
