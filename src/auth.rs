//! Who is calling. Reads are anonymous; every write acts as the caller that `BLOG_AUTH` decides:
//!
//! - `none`: nobody is verified and the body's `userId` names the caller (local development);
//! - `jwt`: `Authorization: Bearer <JWT>` from an OpenID Connect issuer ([`jwt`]);
//! - `easyauth`: the principal App Service authentication vouches for ([`easyauth`]);
//! - `local`: `Authorization: Bearer <token>` (or `Token <token>`) this service signed for a local
//!   account ([`local`]), checked with the process's one [`local::TokenKey`], which [`Auth`]
//!   holds in every mode (the Conduit API's accounts sign in with it whatever the mode).
//!
//! One user per identity: the user's id is derived from the identity ([`Identity::user_id`]),
//! so finding the caller's user is one point read and a second `POST /api/users` by the same
//! identity is a create conflict. [`Caller`] says who acts for every write (the API extracts it
//! from each write request), and the methods on it are the only place that compares a body's
//! `userId` or a path's user with the caller.

pub mod easyauth;
pub mod jwt;
pub mod local;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::http::request::Parts;
use axum::http::Method;
use base64::Engine as _;
use sha2::{Digest, Sha256};

use crate::domain::{Id, Kind};
use crate::error::{ApiError, ApiResult};
use crate::settings::{AuthMode, AuthSettings};
use crate::store::{Container, Store};

/// A verified identity: who vouches for it (the token's `iss`, or Easy Auth's identity provider)
/// and the stable id it names (`oid`, else `sub`; or Easy Auth's principal id).
///
/// Never printed: `Debug` shows only the derived user id.
#[derive(Clone, PartialEq, Eq)]
pub struct Identity {
    issuer: String,
    subject: String,
    /// The delegated scopes (`scp`) and application roles (`roles`) the identity was granted.
    grants: Vec<String>,
}

impl Identity {
    pub fn new(issuer: impl Into<String>, subject: impl Into<String>) -> Self {
        Identity {
            issuer: issuer.into(),
            subject: subject.into(),
            grants: Vec::new(),
        }
    }

    /// The same identity, granted these scopes and roles.
    pub fn with_grants(self, grants: impl IntoIterator<Item = String>) -> Self {
        Identity {
            grants: grants.into_iter().collect(),
            ..self
        }
    }

    /// Whether the identity was granted `scope_or_role` (exactly, as a scope or a role).
    pub fn is_granted(&self, scope_or_role: &str) -> bool {
        self.grants.iter().any(|g| g == scope_or_role)
    }

    /// The id of this identity's user: `u-` and the first 128 bits of SHA-256 over issuer and
    /// subject, URL-safe base64 (24 characters). The same identity always gets the same id; a
    /// random id (`BLOG_AUTH=none`) never looks like one.
    pub fn user_id(&self) -> Id {
        let mut h = Sha256::new();
        h.update(self.issuer.as_bytes());
        h.update([0u8]);
        h.update(self.subject.as_bytes());
        let digest = h.finalize();
        let short = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&digest[..16]);
        Id::parse("user id", &format!("u-{short}")).expect("a derived id is a valid id")
    }
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Identity(user {})", self.user_id())
    }
}

/// The settings a client needs to sign in, and nothing else of them (no audience, keys or
/// write scope): what `GET /api/config` answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientConfig {
    pub mode: AuthMode,
    pub issuer: Option<String>,
    pub client_id: Option<String>,
    pub scopes: Vec<String>,
}

/// How this process identifies callers: built once from the settings, shared by every request.
pub struct Auth {
    settings: AuthSettings,
    jwt: Option<jwt::JwtVerifier>,
    /// The key local accounts' tokens are signed and checked with: the process's one key.
    key: local::TokenKey,
}

impl Auth {
    /// `BLOG_AUTH=none`: the default for tests and the bench.
    pub fn none() -> Self {
        Auth::new(&AuthSettings::default())
    }

    /// `BLOG_AUTH=easyauth` behind App Service authentication (the settings refuse it
    /// standalone; tests use it directly).
    pub fn easy_auth() -> Self {
        Auth::new(&AuthSettings {
            mode: AuthMode::EasyAuth,
            ..AuthSettings::default()
        })
    }

    /// From checked settings (`jwt` has its issuer and audience), with a token key made for this
    /// `Auth` alone ([`Auth::with_token_key`] gives the configured one). No I/O: keys are
    /// fetched on the first write that needs them.
    pub fn new(settings: &AuthSettings) -> Self {
        let jwt = match (settings.mode, &settings.issuer, &settings.audience) {
            (AuthMode::Jwt, Some(issuer), Some(audience)) => Some(jwt::JwtVerifier::new(
                issuer,
                audience,
                settings.jwks_url.as_deref(),
            )),
            (AuthMode::Jwt, _, _) => panic!("`BLOG_AUTH=jwt` without issuer and audience"),
            _ => None,
        };
        Auth {
            settings: settings.clone(),
            jwt,
            key: local::TokenKey::generate().0,
        }
    }

    /// The same, signing and checking local accounts' tokens with `key`.
    pub fn with_token_key(self, key: local::TokenKey) -> Self {
        Auth { key, ..self }
    }

    /// The key local accounts' tokens are signed and checked with.
    pub fn token_key(&self) -> &local::TokenKey {
        &self.key
    }

    /// In `jwt`, trust cached issuer keys for `max_key_age` and fetch them at most every
    /// `interval` instead of the defaults (24 h and 5 s): for tests that need keys to go stale
    /// without waiting a day. Other modes are unchanged.
    pub fn with_jwt_timings(mut self, max_key_age: Duration, interval: Duration) -> Self {
        self.jwt = self
            .jwt
            .map(|verifier| verifier.with_timings(max_key_age, interval));
        self
    }

    pub fn mode(&self) -> AuthMode {
        self.settings.mode
    }

    /// With `BLOG_AUTH_WRITE_SCOPE` set, a write (not a read such as `GET /api/me`) needs that
    /// value among the identity's scopes or roles: a token for the audience proves who is
    /// calling, not that the application they signed in with may write. 403 otherwise.
    pub(crate) fn may_write(&self, parts: &Parts, identity: &Identity) -> ApiResult<()> {
        match &self.settings.write_scope {
            Some(scope)
                if !matches!(parts.method, Method::GET | Method::HEAD)
                    && !identity.is_granted(scope) =>
            {
                Err(ApiError::Forbidden(format!(
                    "writes need the scope or role `{scope}`, which the caller was not granted"
                )))
            }
            _ => Ok(()),
        }
    }

    /// What a client needs to know to sign in (`GET /api/config`): public values only.
    pub fn client_config(&self) -> ClientConfig {
        ClientConfig {
            mode: self.settings.mode,
            issuer: self.settings.issuer.clone(),
            client_id: self.settings.client_id.clone(),
            scopes: self.settings.scopes.clone(),
        }
    }

    /// The identity a request carries in this mode (`None`: anonymous). Headers of the other
    /// mode are ignored.
    pub(crate) async fn identify(&self, parts: &Parts) -> ApiResult<Option<Identity>> {
        match self.settings.mode {
            AuthMode::None => Ok(None),
            AuthMode::EasyAuth if self.settings.platform_auth_off => Err(ApiError::Unauthorized {
                detail: "App Service authentication is off, so no caller can be identified".into(),
                challenge: None,
            }),
            AuthMode::EasyAuth => {
                easyauth::identify(&parts.headers).map_err(|detail| ApiError::Unauthorized {
                    detail,
                    challenge: None,
                })
            }
            AuthMode::Jwt => {
                let verifier = self.jwt.as_ref().expect("jwt mode has a verifier");
                let Some(token) = jwt::bearer_token(&parts.headers) else {
                    return Ok(None);
                };
                match verifier.verify(token).await {
                    Ok(identity) => Ok(Some(identity)),
                    Err(jwt::JwtError::Invalid(why)) => Err(invalid_bearer(&why)),
                    Err(jwt::JwtError::Unavailable { retry_after }) => {
                        Err(ApiError::IdentityUnavailable { retry_after })
                    }
                }
            }
            AuthMode::Local => {
                let Some(token) = local::presented_token(&parts.headers) else {
                    return Ok(None);
                };
                self.key
                    .verify(token)
                    .map(Some)
                    .map_err(|why| invalid_bearer(&why))
            }
        }
    }
}

/// 401 for a bearer token that proves nothing, saying why in `WWW-Authenticate` too.
fn invalid_bearer(why: &str) -> ApiError {
    ApiError::Unauthorized {
        detail: format!("the bearer token is not valid: {why}"),
        challenge: Some(format!(
            "Bearer error=\"invalid_token\", error_description=\"{}\"",
            why.replace(['"', '\\'], "'")
        )),
    }
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Auth({})", self.settings.mode.as_str())
    }
}

/// The user id a request acted as, for the request's log line (set by [`Caller`]).
#[derive(Clone, Default)]
pub struct ActingUser(Arc<OnceLock<String>>);

impl ActingUser {
    pub fn get(&self) -> Option<&str> {
        self.0.get().map(String::as_str)
    }

    pub(crate) fn set(&self, id: &Id) {
        let _ = self.0.set(id.to_string());
    }
}

/// Who is calling, for a write (or `GET /api/me`).
///
/// In `jwt`, `easyauth` and `local` a request without a valid identity is refused here with 401
/// (in `jwt` and `local` with `WWW-Authenticate: Bearer`), before its body is read; so a refused
/// write writes nothing.
#[derive(Debug, Clone)]
pub enum Caller {
    /// `BLOG_AUTH=none`: nobody is verified; the body's `userId` names who acts.
    Unverified,
    /// A verified identity: acts as its own user and no other.
    Verified(Identity),
}

impl Caller {
    /// The user who acts. Verified: the caller's own user; a body's `userId` may repeat it and
    /// anything else is 403. Unverified: the body's `userId`, which must be there.
    pub fn acts_as(&self, named: Option<&str>) -> ApiResult<Id> {
        match self {
            Caller::Unverified => {
                let named = named.ok_or_else(|| {
                    ApiError::invalid(
                        crate::error::Place::Body,
                        "userId",
                        "`userId` is required (`BLOG_AUTH=none`)",
                    )
                })?;
                Ok(Id::parse("userId", named)?)
            }
            Caller::Verified(identity) => {
                let own = identity.user_id();
                match named {
                    Some(n) if n != own.as_str() => Err(ApiError::Forbidden(format!(
                        "`userId` `{n}` is not the signed-in caller's user"
                    ))),
                    _ => Ok(own),
                }
            }
        }
    }

    /// The current username of `user_id` (who [`Caller::acts_as`]), read once. No such user:
    /// 403 for a verified caller (they must create their user first), 422 for a named one.
    pub async fn username(&self, store: &dyn Store, user_id: &Id) -> ApiResult<String> {
        let user = store
            .read(Container::Users, user_id.as_str(), user_id.as_str())
            .await?;
        let name = user
            .as_ref()
            .filter(|u| crate::domain::is_live(u, Kind::User))
            .and_then(|u| u["username"].as_str())
            .map(String::from);
        match (name, self) {
            (Some(name), _) => Ok(name),
            (None, Caller::Verified(_)) => Err(ApiError::Forbidden(
                "the signed-in caller has no user yet: create it with `POST /api/users`".into(),
            )),
            (None, Caller::Unverified) => Err(ApiError::UnknownUser(format!(
                "user `{user_id}` (`userId`) does not exist"
            ))),
        }
    }

    /// May the caller rename `user`? Verified: only their own user. Unverified: anyone.
    pub fn may_rename(&self, user: &Id) -> ApiResult<()> {
        match self {
            Caller::Verified(identity) if identity.user_id() != *user => Err(ApiError::Forbidden(
                format!("only its owner may rename user `{user}`"),
            )),
            _ => Ok(()),
        }
    }

    /// May the caller delete what is owned by one of `owners` (a comment: its author and its
    /// post's author)? Verified: only when their own user is one of them, else 403 with
    /// `refusal`. Unverified (`BLOG_AUTH=none`): anyone, as every write there acts as anyone.
    pub fn may_act_for(&self, owners: &[&str], refusal: impl FnOnce() -> String) -> ApiResult<()> {
        match self {
            Caller::Verified(identity) if !owners.contains(&identity.user_id().as_str()) => {
                Err(ApiError::Forbidden(refusal()))
            }
            _ => Ok(()),
        }
    }

    /// The id of the user `POST /api/users` creates: the caller's own (one per identity), or a
    /// fresh one when unverified.
    pub fn new_user_id(&self) -> Id {
        match self {
            Caller::Verified(identity) => identity.user_id(),
            Caller::Unverified => Id::new(),
        }
    }

    /// What a create conflict on the caller's user means: a signed-in caller already has one.
    pub fn user_exists(&self, id: &Id) -> ApiError {
        match self {
            Caller::Verified(_) => {
                ApiError::UserExists(format!("the signed-in caller already has user `{id}`"))
            }
            Caller::Unverified => ApiError::UserExists(format!("user `{id}` already exists")),
        }
    }

    /// The caller's own user id, for `GET /api/me`; 401 when nobody is verified.
    pub fn own_user_id(&self) -> ApiResult<Id> {
        match self {
            Caller::Verified(identity) => Ok(identity.user_id()),
            Caller::Unverified => Err(ApiError::Unauthorized {
                detail: "`BLOG_AUTH=none`: no caller is signed in".into(),
                challenge: None,
            }),
        }
    }
}

/// Say at start-up how callers are identified; `none` is a warning, and a loud one when the
/// address is reachable from other machines.
pub fn announce(settings: &AuthSettings, addr: std::net::SocketAddr) {
    match settings.mode {
        AuthMode::EasyAuth if settings.platform_auth_off => tracing::error!(
            "BLOG_AUTH=easyauth but App Service authentication is off (WEBSITE_AUTH_ENABLED is \
             not true): client-sent identity headers are not stripped, so none is trusted and \
             every write answers 401. Turn authentication on (see docs/identity.md)."
        ),
        AuthMode::EasyAuth if easyauth::forgeable(settings) => tracing::error!(
            "BLOG_AUTH=easyauth outside Azure (WEBSITE_SITE_NAME is not set, as under `func \
             start`): no App Service authentication strips client-sent X-MS-CLIENT-PRINCIPAL* \
             headers, so ANYONE can forge a write as ANY identity. Set BLOG_AUTH=none for local \
             development, or deploy behind App Service authentication."
        ),
        AuthMode::None if !addr.ip().is_loopback() => tracing::error!(
            %addr,
            "BLOG_AUTH=none on an address other machines can reach: ANYONE can write as ANY \
             user. Set BLOG_AUTH=jwt or local (or run under the Functions host with easyauth)."
        ),
        AuthMode::None => tracing::warn!(
            "BLOG_AUTH=none: writes are not authenticated and act as the body's `userId` \
             (local development only)"
        ),
        mode => tracing::info!(auth = mode.as_str(), "callers are identified"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_id_is_stable_short_and_distinct_per_identity() {
        let a = Identity::new("https://issuer/", "oid-1").user_id();
        assert_eq!(a, Identity::new("https://issuer/", "oid-1").user_id());
        assert_eq!(a.as_str().len(), 24);
        assert!(a.as_str().starts_with("u-"));
        assert!(a
            .as_str()
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'));
        assert_ne!(a, Identity::new("https://other/", "oid-1").user_id());
        assert_ne!(a, Identity::new("https://issuer/", "oid-2").user_id());
        // The separator keeps (ab, c) and (a, bc) apart.
        assert_ne!(
            Identity::new("ab", "c").user_id(),
            Identity::new("a", "bc").user_id()
        );
    }

    #[test]
    fn an_identity_never_prints_its_subject() {
        let i = Identity::new("https://issuer/", "secret-subject");
        assert!(!format!("{i:?}").contains("secret-subject"));
        assert!(!format!("{i:?}").contains("issuer"));
    }

    #[test]
    fn a_verified_caller_acts_only_as_its_own_user() {
        let identity = Identity::new("iss", "sub");
        let own = identity.user_id();
        let c = Caller::Verified(identity);
        assert_eq!(c.acts_as(None).unwrap(), own);
        assert_eq!(c.acts_as(Some(own.as_str())).unwrap(), own);
        assert!(matches!(
            c.acts_as(Some("other")),
            Err(ApiError::Forbidden(_))
        ));
        assert!(c.may_rename(&own).is_ok());
        let other = Id::parse("id", "other").unwrap();
        assert!(matches!(c.may_rename(&other), Err(ApiError::Forbidden(_))));
        assert_eq!(c.new_user_id(), own);
    }

    #[test]
    fn an_unverified_caller_is_whoever_the_body_names() {
        let c = Caller::Unverified;
        assert_eq!(c.acts_as(Some("ana")).unwrap().as_str(), "ana");
        assert!(matches!(c.acts_as(None), Err(ApiError::InvalidInput(_))));
        assert!(matches!(
            c.acts_as(Some("a/b")),
            Err(ApiError::InvalidInput(_))
        ));
        assert!(c.may_rename(&Id::parse("id", "x").unwrap()).is_ok());
        assert!(matches!(
            c.own_user_id(),
            Err(ApiError::Unauthorized { .. })
        ));
    }
}
