//! `BLOG_AUTH=jwt`: bearer tokens from an OpenID Connect issuer (Microsoft Entra ID or any
//! standard one), validated with `jsonwebtoken`.
//!
//! - Only RS256 and ES256; `alg: none`, HS* and every other algorithm are refused before any key
//!   is looked at, and a key is used only for the algorithm family it is (no key confusion).
//! - `iss` and `aud` must equal the settings exactly; `exp` is required; `exp`/`nbf` hold with
//!   60 s leeway.
//! - Only access tokens: an OpenID Connect ID token is refused even when its `aud` is the
//!   audience (a browser client registered under the API's own client id receives ID tokens for
//!   that id). An ID token is told apart by what only ID tokens carry: `nonce`, `at_hash` or
//!   `c_hash` (OpenID Connect Core 1.0, section 2 and 3.1.3.6), or a `typ` claim of `ID`
//!   (Keycloak's marking).
//! - The issuer's keys (JWKS) are fetched on the first token that needs them (from
//!   `BLOG_AUTH_JWKS_URL`, else from the issuer's discovery document), cached, and fetched again
//!   when a token names a key id the cache lacks — at most once per [`REFRESH_INTERVAL`], so
//!   a stream of made-up key ids cannot hammer the issuer. Keys older than [`MAX_KEY_AGE`] are
//!   fetched again on their next use, so a key the issuer has withdrawn stops being trusted
//!   even if no token ever names an unknown key.
//! - A discovery document or key set larger than [`MAX_ISSUER_DOCUMENT`] is refused unread.
//! - When the keys cannot be fetched the write answers 503 with `Retry-After` (and the reason is
//!   logged, never the token); a key already cached keeps working. Reads never get here.
//!
//! One file: checking a token and deciding whether to fetch the keys again are one policy (an
//! unknown key id, a key too old, a fetch too recent), and its guarantees above hold only when
//! read together.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use axum::http::{header, HeaderMap};
use jsonwebtoken::jwk::{
    AlgorithmParameters, EllipticCurve, Jwk, JwkSet, KeyAlgorithm, PublicKeyUse,
};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use tokio::sync::{Mutex, RwLock};

use super::Identity;

/// The least time between two key fetches.
pub const REFRESH_INTERVAL: Duration = Duration::from_secs(5);
/// Cached keys older than this are fetched again on their next use (issuers rotate keys).
pub const MAX_KEY_AGE: Duration = Duration::from_secs(24 * 60 * 60);
/// The most bytes read from the issuer for one discovery document or key set.
pub const MAX_ISSUER_DOCUMENT: usize = 1024 * 1024;
/// Bounds on one fetch, so a write waiting on a slow issuer fails in seconds.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// The leeway on `exp` and `nbf` for clock skew.
const LEEWAY_SECS: u64 = 60;

/// Why a token was not accepted.
#[derive(Debug)]
pub enum JwtError {
    /// The token is not valid (the reason is safe to show: it never contains the token).
    Invalid(String),
    /// The issuer's keys cannot be fetched right now.
    Unavailable { retry_after: Duration },
}

/// The token in `Authorization: Bearer <token>`, if any.
pub fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

struct Key {
    alg: Algorithm,
    key: DecodingKey,
}

#[derive(Default)]
struct KeyCache {
    by_kid: HashMap<String, Key>,
    /// Keys without a `kid` (usable only when a token names none).
    unnamed: Vec<Key>,
    /// When these keys were fetched (`None` before the first fetch).
    fetched_at: Option<Instant>,
}

/// What a token's key lookup does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    /// Use the cached key.
    Use,
    /// Fetch the key set (then use the key if it is still there; when the fetch fails, a cached
    /// key is used all the same).
    Fetch,
    /// Answer without a key: the last fetch is too recent to ask the issuer again.
    Refuse,
}

/// The rule: a cached key is used while the keys are younger than [`MAX_KEY_AGE`]; a missing or
/// too old key calls for a fetch, at most one per [`REFRESH_INTERVAL`]; until the next fetch is
/// due a too-old key is still used and a missing one refused.
fn next_step(cached: bool, keys_age: Duration, since_last_fetch: Option<Duration>) -> Next {
    if cached && keys_age < MAX_KEY_AGE {
        return Next::Use;
    }
    let fetch_due = since_last_fetch.is_none_or(|since| since >= REFRESH_INTERVAL);
    match (fetch_due, cached) {
        (true, _) => Next::Fetch,
        (false, true) => Next::Use,
        (false, false) => Next::Refuse,
    }
}

#[derive(Default)]
struct FetchState {
    last_attempt: Option<Instant>,
    /// Whether that attempt got the keys.
    last_ok: bool,
    /// From the discovery document, once read.
    discovered_jwks_url: Option<String>,
}

/// Validates tokens for one issuer and audience.
pub struct JwtVerifier {
    issuer: String,
    audience: String,
    jwks_url: Option<String>,
    http: reqwest::Client,
    keys: RwLock<KeyCache>,
    /// Held while fetching, so concurrent writes wait for one fetch instead of starting many.
    fetch: Mutex<FetchState>,
}

#[derive(Deserialize)]
struct Claims {
    iss: String,
    #[serde(default)]
    oid: Option<String>,
    #[serde(default)]
    sub: Option<String>,
    /// Delegated scopes: space-separated (Microsoft Entra ID, RFC 8693), or a list.
    #[serde(default)]
    scp: Option<serde_json::Value>,
    /// Application roles.
    #[serde(default)]
    roles: Option<serde_json::Value>,
    /// Claims only an ID token carries ([`id_token_claim`]).
    #[serde(default)]
    nonce: Option<serde_json::Value>,
    #[serde(default)]
    at_hash: Option<serde_json::Value>,
    #[serde(default)]
    c_hash: Option<serde_json::Value>,
    #[serde(default)]
    typ: Option<serde_json::Value>,
}

/// The claim that makes a token an OpenID Connect ID token, not an access token: `nonce`,
/// `at_hash` or `c_hash` (which OpenID Connect defines for ID tokens only), or a `typ` claim of
/// `ID`. An ID token says who signed in to a client; it grants nothing at an API.
fn id_token_claim(claims: &Claims) -> Option<&'static str> {
    let is_id =
        |typ: &serde_json::Value| typ.as_str().is_some_and(|t| t.eq_ignore_ascii_case("id"));
    if claims.nonce.is_some() {
        Some("nonce")
    } else if claims.at_hash.is_some() {
        Some("at_hash")
    } else if claims.c_hash.is_some() {
        Some("c_hash")
    } else if claims.typ.as_ref().is_some_and(is_id) {
        Some("typ")
    } else {
        None
    }
}

/// The values of a `scp` or `roles` claim: a space-separated string or a list of strings.
fn claim_values(claim: Option<serde_json::Value>) -> Vec<String> {
    match claim {
        Some(serde_json::Value::String(s)) => s.split_whitespace().map(String::from).collect(),
        Some(serde_json::Value::Array(values)) => values
            .into_iter()
            .filter_map(|v| v.as_str().map(String::from))
            .collect(),
        _ => Vec::new(),
    }
}

impl JwtVerifier {
    pub fn new(issuer: &str, audience: &str, jwks_url: Option<&str>) -> Self {
        // ring for the client's TLS and for the signature checks.
        crate::tls::install();
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(FETCH_TIMEOUT)
            .build()
            .expect("an HTTP client");
        JwtVerifier {
            issuer: issuer.to_string(),
            audience: audience.to_string(),
            jwks_url: jwks_url.map(String::from),
            http,
            keys: RwLock::new(KeyCache::default()),
            fetch: Mutex::new(FetchState::default()),
        }
    }

    /// The identity a valid token names: (`iss`, `oid` when present, else `sub`).
    pub async fn verify(&self, token: &str) -> Result<Identity, JwtError> {
        let header = jsonwebtoken::decode_header(token)
            .map_err(|_| JwtError::Invalid("malformed token".into()))?;
        let alg = header.alg;
        if !matches!(alg, Algorithm::RS256 | Algorithm::ES256) {
            return Err(JwtError::Invalid(format!(
                "algorithm {alg:?} is not accepted (RS256 and ES256 only)"
            )));
        }
        let key = self.key_for(header.kid.as_deref(), alg).await?;

        let mut validation = Validation::new(alg);
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&self.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        validation.leeway = LEEWAY_SECS;
        validation.validate_exp = true;
        validation.validate_nbf = true;
        let data = jsonwebtoken::decode::<Claims>(token, &key, &validation)
            .map_err(|e| JwtError::Invalid(reason(&e)))?;
        let claims = data.claims;
        if let Some(claim) = id_token_claim(&claims) {
            return Err(JwtError::Invalid(format!(
                "an ID token (it carries `{claim}`) is not an access token for this API"
            )));
        }
        let subject = claims
            .oid
            .or(claims.sub)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| JwtError::Invalid("the token names no `oid` or `sub`".into()))?;
        let mut grants = claim_values(claims.scp);
        grants.extend(claim_values(claims.roles));
        Ok(Identity::new(claims.iss, subject).with_grants(grants))
    }

    /// The cached key for `kid` usable with `alg`, fetching the key set when it is not cached
    /// or the cached keys are too old ([`next_step`]).
    async fn key_for(&self, kid: Option<&str>, alg: Algorithm) -> Result<DecodingKey, JwtError> {
        let (key, age) = self.cached(kid, alg).await?;
        if let (Some(key), Next::Use) = (&key, next_step(true, age, None)) {
            return Ok(key.clone());
        }
        let mut fetch = self.fetch.lock().await;
        // Another request may have fetched while this one waited.
        let (key, age) = self.cached(kid, alg).await?;
        let since = fetch.last_attempt.map(|last| last.elapsed());
        match (next_step(key.is_some(), age, since), key) {
            (Next::Use, Some(key)) => return Ok(key),
            (Next::Fetch, key) => self.refetch(&mut fetch, key.is_some()).await?,
            // Too soon to ask again: the last answer stands.
            (_, _) => {
                let since = since.unwrap_or_default();
                return Err(if fetch.last_ok {
                    JwtError::Invalid("the token's signing key is unknown".into())
                } else {
                    JwtError::Unavailable {
                        retry_after: REFRESH_INTERVAL.saturating_sub(since),
                    }
                });
            }
        }
        drop(fetch);
        self.cached(kid, alg)
            .await?
            .0
            .ok_or_else(|| JwtError::Invalid("the token's signing key is unknown".into()))
    }

    /// Fetch the key set into the cache. When the fetch fails and the token's key was cached
    /// (`had_key`), the cache stays as it was and that key keeps working.
    async fn refetch(&self, fetch: &mut FetchState, had_key: bool) -> Result<(), JwtError> {
        fetch.last_attempt = Some(Instant::now());
        let fetched = self.fetch_keys(fetch).await;
        fetch.last_ok = fetched.is_ok();
        match fetched {
            Ok(cache) => {
                tracing::info!(
                    keys = cache.by_kid.len() + cache.unnamed.len(),
                    "fetched the issuer's signing keys"
                );
                *self.keys.write().await = cache;
                Ok(())
            }
            Err(why) if had_key => {
                tracing::warn!(
                    error = %why,
                    "cannot refresh the issuer's signing keys; the cached keys stay in use"
                );
                Ok(())
            }
            Err(why) => {
                tracing::warn!(error = %why, "cannot fetch the issuer's signing keys");
                Err(JwtError::Unavailable {
                    retry_after: REFRESH_INTERVAL,
                })
            }
        }
    }

    /// The cached key for `kid` usable with `alg`, and the age of the cached keys.
    async fn cached(
        &self,
        kid: Option<&str>,
        alg: Algorithm,
    ) -> Result<(Option<DecodingKey>, Duration), JwtError> {
        let cache = self.keys.read().await;
        let age = cache.fetched_at.map_or(Duration::MAX, |at| at.elapsed());
        let key = match kid {
            Some(kid) => cache.by_kid.get(kid),
            // Without a `kid`, only an unambiguous key will do.
            None => {
                let mut fits = cache
                    .unnamed
                    .iter()
                    .chain(cache.by_kid.values())
                    .filter(|k| k.alg == alg);
                match (fits.next(), fits.next()) {
                    (Some(k), None) => Some(k),
                    _ => None,
                }
            }
        };
        match key {
            None => Ok((None, age)),
            Some(k) if k.alg == alg => Ok((Some(k.key.clone()), age)),
            Some(k) => Err(JwtError::Invalid(format!(
                "the token says {alg:?} but its key is for {:?}",
                k.alg
            ))),
        }
    }

    async fn fetch_keys(&self, fetch: &mut FetchState) -> Result<KeyCache, String> {
        let url = match (&self.jwks_url, &fetch.discovered_jwks_url) {
            (Some(url), _) | (None, Some(url)) => url.clone(),
            (None, None) => {
                let url = self.discover().await?;
                fetch.discovered_jwks_url = Some(url.clone());
                url
            }
        };
        let set: JwkSet = self.get_json(&url).await?;
        let mut cache = KeyCache {
            fetched_at: Some(Instant::now()),
            ..KeyCache::default()
        };
        for jwk in &set.keys {
            let Some(key) = usable(jwk) else { continue };
            match &jwk.common.key_id {
                Some(kid) => {
                    cache.by_kid.insert(kid.clone(), key);
                }
                None => cache.unnamed.push(key),
            }
        }
        Ok(cache)
    }

    /// `jwks_uri` from `<issuer>/.well-known/openid-configuration`, whose `issuer` must be ours.
    async fn discover(&self) -> Result<String, String> {
        #[derive(Deserialize)]
        struct Discovery {
            issuer: String,
            jwks_uri: String,
        }
        let url = format!(
            "{}/.well-known/openid-configuration",
            self.issuer.trim_end_matches('/')
        );
        let doc: Discovery = self.get_json(&url).await?;
        if doc.issuer != self.issuer {
            return Err(format!(
                "the discovery document at {url} is for issuer `{}`, not `{}` \
                 (check BLOG_AUTH_ISSUER)",
                doc.issuer, self.issuer
            ));
        }
        Ok(doc.jwks_uri)
    }

    /// The JSON document at `url`, refused unread beyond [`MAX_ISSUER_DOCUMENT`] bytes.
    async fn get_json<T: serde::de::DeserializeOwned>(&self, url: &str) -> Result<T, String> {
        let mut resp = self
            .http
            .get(url)
            .send()
            .await
            .map_err(|e| format!("GET {url}: {e}"))?;
        let status = resp.status();
        if !status.is_success() {
            return Err(format!("GET {url}: {status}"));
        }
        let too_large = || {
            format!("GET {url}: the answer is larger than {MAX_ISSUER_DOCUMENT} bytes, the most accepted")
        };
        if resp
            .content_length()
            .is_some_and(|n| n > MAX_ISSUER_DOCUMENT as u64)
        {
            return Err(too_large());
        }
        let mut body = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(|e| format!("GET {url}: {e}"))? {
            if body.len() + chunk.len() > MAX_ISSUER_DOCUMENT {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        serde_json::from_slice(&body).map_err(|e| format!("GET {url}: not the expected JSON: {e}"))
    }
}

/// A signing key this service accepts: RSA (RS256) or EC P-256 (ES256), not for encryption,
/// and not announcing a different algorithm. Anything else (symmetric keys above all) is skipped.
fn usable(jwk: &Jwk) -> Option<Key> {
    if matches!(jwk.common.public_key_use, Some(PublicKeyUse::Encryption)) {
        return None;
    }
    let alg = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => Algorithm::RS256,
        AlgorithmParameters::EllipticCurve(p) if p.curve == EllipticCurve::P256 => Algorithm::ES256,
        _ => return None,
    };
    match jwk.common.key_algorithm {
        None => {}
        Some(KeyAlgorithm::RS256) if alg == Algorithm::RS256 => {}
        Some(KeyAlgorithm::ES256) if alg == Algorithm::ES256 => {}
        Some(_) => return None,
    }
    let key = DecodingKey::from_jwk(jwk).ok()?;
    Some(Key { alg, key })
}

/// A reason for the caller, without echoing anything from the token.
fn reason(e: &jsonwebtoken::errors::Error) -> String {
    use jsonwebtoken::errors::ErrorKind as K;
    match e.kind() {
        K::ExpiredSignature => "the token has expired".into(),
        K::ImmatureSignature => "the token is not valid yet (`nbf`)".into(),
        K::InvalidIssuer => "the token's issuer (`iss`) is not accepted".into(),
        K::InvalidAudience => "the token's audience (`aud`) is not accepted".into(),
        K::InvalidSignature => "the signature does not verify".into(),
        K::MissingRequiredClaim(c) => format!("the token lacks `{c}`"),
        K::InvalidAlgorithm => "the token's algorithm does not match its key".into(),
        _ => "malformed token".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bearer_token_is_taken_from_the_authorization_header_only() {
        let mut h = HeaderMap::new();
        assert_eq!(bearer_token(&h), None);
        h.insert(header::AUTHORIZATION, "Bearer abc.def.ghi".parse().unwrap());
        assert_eq!(bearer_token(&h), Some("abc.def.ghi"));
        h.insert(header::AUTHORIZATION, "bearer  xyz ".parse().unwrap());
        assert_eq!(bearer_token(&h), Some("xyz"));
        h.insert(header::AUTHORIZATION, "Basic dXNlcjpwdw==".parse().unwrap());
        assert_eq!(bearer_token(&h), None);
        h.insert(header::AUTHORIZATION, "Bearer ".parse().unwrap());
        assert_eq!(bearer_token(&h), None);
    }

    #[test]
    fn keys_are_fetched_when_missing_or_too_old_and_never_more_often_than_the_interval() {
        let fresh = MAX_KEY_AGE - Duration::from_secs(1);
        let old = MAX_KEY_AGE;
        let recent = Some(REFRESH_INTERVAL - Duration::from_millis(1));
        let due = Some(REFRESH_INTERVAL);
        let cases = [
            // (key cached, age of the keys, since the last fetch) -> next
            ((true, Duration::ZERO, None), Next::Use),
            ((true, fresh, recent), Next::Use),
            ((true, fresh, due), Next::Use),
            ((true, old, None), Next::Fetch),
            ((true, old, due), Next::Fetch),
            ((true, Duration::MAX, due), Next::Fetch),
            // Too old, but the issuer was asked a moment ago: the key keeps working meanwhile.
            ((true, old, recent), Next::Use),
            ((false, Duration::MAX, None), Next::Fetch),
            ((false, Duration::ZERO, due), Next::Fetch),
            ((false, Duration::ZERO, recent), Next::Refuse),
            ((false, old, recent), Next::Refuse),
        ];
        for ((cached, age, since), expected) in cases {
            assert_eq!(
                next_step(cached, age, since),
                expected,
                "cached {cached}, age {age:?}, since {since:?}"
            );
        }
    }

    #[test]
    fn id_tokens_are_told_apart_by_the_claims_only_they_carry() {
        let claims = |extra: serde_json::Value| -> Claims {
            let mut c = serde_json::json!({"iss": "https://issuer", "sub": "s"});
            c.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            serde_json::from_value(c).unwrap()
        };
        let cases = [
            (serde_json::json!({}), None),
            (
                serde_json::json!({"scp": "Blog.Write", "typ": "Bearer"}),
                None,
            ),
            (serde_json::json!({"nonce": "n"}), Some("nonce")),
            (serde_json::json!({"at_hash": "h"}), Some("at_hash")),
            (serde_json::json!({"c_hash": "h"}), Some("c_hash")),
            (serde_json::json!({"typ": "ID"}), Some("typ")),
            (serde_json::json!({"typ": "id"}), Some("typ")),
        ];
        for (extra, expected) in cases {
            assert_eq!(id_token_claim(&claims(extra.clone())), expected, "{extra}");
        }
    }

    #[test]
    fn symmetric_and_encryption_keys_are_never_used() {
        let oct: Jwk = serde_json::from_value(serde_json::json!({
            "kty": "oct", "kid": "h", "k": "c2VjcmV0"
        }))
        .unwrap();
        assert!(usable(&oct).is_none());
        let enc: Jwk = serde_json::from_value(serde_json::json!({
            "kty": "RSA", "kid": "e", "use": "enc", "n": "sXch", "e": "AQAB"
        }))
        .unwrap();
        assert!(usable(&enc).is_none());
        let mislabelled: Jwk = serde_json::from_value(serde_json::json!({
            "kty": "RSA", "kid": "m", "alg": "RS512", "n": "sXch", "e": "AQAB"
        }))
        .unwrap();
        assert!(usable(&mislabelled).is_none());
        let rsa: Jwk = serde_json::from_value(serde_json::json!({
            "kty": "RSA", "kid": "r", "alg": "RS256", "n": "sXch", "e": "AQAB"
        }))
        .unwrap();
        assert_eq!(usable(&rsa).map(|k| k.alg), Some(Algorithm::RS256));
    }
}
