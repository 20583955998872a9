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
//!   `BLOG_AUTH_JWKS_URL`, else from the issuer's discovery document) and cached. At most one
//!   fetch is in flight at a time, and every request that needs it shares it; it runs on its own
//!   task, so a request that stops waiting does not cancel it.
//! - A token whose key is cached is checked at once, never waiting on the issuer: when the cached
//!   keys are older than [`MAX_KEY_AGE`] the token is still checked with them while one refresh
//!   runs in the background (so a key the issuer has withdrawn stops being trusted once that
//!   refresh lands, even if no token ever names an unknown key).
//! - Only a token whose key id is not cached waits, for the one fetch in flight (starting it if
//!   none is), and for at most [`UNKNOWN_KEY_WAIT`]; past that it answers 503 while the fetch
//!   goes on.
//! - A new fetch starts at most [`REFRESH_INTERVAL`] after the end of the last one, so a stream
//!   of made-up key ids cannot hammer the issuer, and a slow issuer is never asked again while
//!   it is still answering.
//! - A discovery document or key set larger than [`MAX_ISSUER_DOCUMENT`] is refused unread.
//! - When the keys cannot be fetched the write answers 503 with `Retry-After` (and the reason is
//!   logged, never the token); a key already cached keeps working. Reads never get here.
//!
//! Checking a token and deciding whether to fetch the keys again are one policy (an unknown key
//! id, a key too old, a fetch too recent), kept together in this file, as its guarantees above
//! hold only when read together. What a token's claims say is in `claims`, what is fetched from
//! the issuer and which of its keys are accepted in `issuer`.

mod claims;
mod issuer;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use axum::http::{header, HeaderMap};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use tokio::sync::watch;

use super::Identity;
use claims::{claim_values, id_token_claim, reason, Claims};

/// The least time from the end of one key fetch to the start of the next.
pub const REFRESH_INTERVAL: Duration = Duration::from_secs(5);
/// Cached keys older than this are refreshed in the background on their next use (issuers
/// rotate keys).
pub const MAX_KEY_AGE: Duration = Duration::from_secs(24 * 60 * 60);
/// The longest a token whose key id is not cached waits for the key fetch.
pub const UNKNOWN_KEY_WAIT: Duration = Duration::from_secs(2);
/// The most bytes read from the issuer for one discovery document or key set.
pub const MAX_ISSUER_DOCUMENT: usize = 1024 * 1024;
/// Bounds on one fetch, so a fetch from a slow issuer ends in seconds.
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
    /// Use the cached key, and start a refresh of the key set in the background.
    UseAndRefresh,
    /// Start a fetch of the key set and wait for it.
    Fetch,
    /// Wait for the fetch already in flight.
    Join,
    /// Answer without a key: the last fetch ended too recently to ask the issuer again.
    Refuse,
}

/// The rule, for a token whose key is `cached` (or not), the cached keys `keys_age` old, a fetch
/// `in_flight` or not, and `since_last_end` the end of the last fetch: a cached key is always
/// used at once, and keys older than `max_age` are refreshed meanwhile; a missing key waits for
/// the fetch in flight, or for a new one. A fetch starts only when none is in flight and the
/// last one ended at least `interval` ago; otherwise a missing key is refused.
fn next_step(
    cached: bool,
    keys_age: Duration,
    in_flight: bool,
    since_last_end: Option<Duration>,
    timings: Timings,
) -> Next {
    let fetch_due = !in_flight && since_last_end.is_none_or(|since| since >= timings.interval);
    match (cached, keys_age < timings.max_key_age) {
        (true, true) => Next::Use,
        (true, false) if fetch_due => Next::UseAndRefresh,
        (true, false) => Next::Use,
        (false, _) if in_flight => Next::Join,
        (false, _) if fetch_due => Next::Fetch,
        (false, _) => Next::Refuse,
    }
}

/// How long keys are trusted before a refresh, and how long between fetches.
#[derive(Debug, Clone, Copy)]
struct Timings {
    max_key_age: Duration,
    interval: Duration,
}

impl Default for Timings {
    fn default() -> Self {
        Timings {
            max_key_age: MAX_KEY_AGE,
            interval: REFRESH_INTERVAL,
        }
    }
}

#[derive(Default)]
struct FetchState {
    /// The fetch in flight: its receiver turns `true` when the fetch has ended.
    in_flight: Option<watch::Receiver<bool>>,
    /// When the last fetch ended.
    last_end: Option<Instant>,
    /// Whether that fetch got the keys.
    last_ok: bool,
    /// From the discovery document, once read.
    discovered_jwks_url: Option<String>,
}

/// Records the end of a fetch when dropped: no longer in flight, when it ended, whether it got
/// the keys; then wakes its waiters.
struct FetchEnd {
    inner: Arc<Inner>,
    ended: watch::Sender<bool>,
    ok: bool,
    discovered: Option<String>,
}

impl Drop for FetchEnd {
    fn drop(&mut self) {
        if let Ok(mut fetch) = self.inner.fetch.lock() {
            fetch.in_flight = None;
            fetch.last_end = Some(Instant::now());
            fetch.last_ok = self.ok;
            if let Some(url) = self.discovered.take() {
                fetch.discovered_jwks_url = Some(url);
            }
        }
        self.ended.send_replace(true);
    }
}

/// Validates tokens for one issuer and audience.
pub struct JwtVerifier {
    inner: Arc<Inner>,
}

struct Inner {
    issuer: String,
    audience: String,
    jwks_url: Option<String>,
    http: reqwest::Client,
    timings: Timings,
    keys: RwLock<KeyCache>,
    /// Never held across an await: deciding whether to fetch, and recording a fetch's end.
    fetch: Mutex<FetchState>,
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
            inner: Arc::new(Inner {
                issuer: issuer.to_string(),
                audience: audience.to_string(),
                jwks_url: jwks_url.map(String::from),
                http,
                timings: Timings::default(),
                keys: RwLock::new(KeyCache::default()),
                fetch: Mutex::new(FetchState::default()),
            }),
        }
    }

    /// The same verifier trusting cached keys for `max_key_age` instead of [`MAX_KEY_AGE`] and
    /// fetching at most every `interval` instead of [`REFRESH_INTERVAL`] (for tests that need
    /// keys to go stale without waiting a day).
    pub fn with_timings(self, max_key_age: Duration, interval: Duration) -> Self {
        let inner = Arc::into_inner(self.inner).expect("not shared yet");
        JwtVerifier {
            inner: Arc::new(Inner {
                timings: Timings {
                    max_key_age,
                    interval,
                },
                ..inner
            }),
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
        validation.set_issuer(&[&self.inner.issuer]);
        validation.set_audience(&[&self.inner.audience]);
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

    /// The key for `kid` usable with `alg`, by [`next_step`]: a cached key at once (refreshing
    /// stale keys in the background), a missing one after the shared fetch, waiting at most
    /// [`UNKNOWN_KEY_WAIT`].
    async fn key_for(&self, kid: Option<&str>, alg: Algorithm) -> Result<DecodingKey, JwtError> {
        let inner = &self.inner;
        let unknown = || JwtError::Invalid("the token's signing key is unknown".into());
        let unavailable = |retry_after| JwtError::Unavailable { retry_after };
        let mut done = {
            // The cache is read under the fetch lock, so a fetch cannot end unseen in between.
            let mut fetch = inner.fetch.lock().expect("fetch state");
            let (key, age) = inner.cached(kid, alg)?;
            let since = fetch.last_end.map(|end| end.elapsed());
            let next = next_step(
                key.is_some(),
                age,
                fetch.in_flight.is_some(),
                since,
                inner.timings,
            );
            match (next, key) {
                (Next::Use, Some(key)) => return Ok(key),
                (Next::UseAndRefresh, Some(key)) => {
                    Inner::start_fetch(inner, &mut fetch);
                    return Ok(key);
                }
                (Next::Fetch, _) => Inner::start_fetch(inner, &mut fetch),
                (Next::Join, _) => fetch.in_flight.clone().expect("a fetch in flight"),
                // Too soon to ask again: the last answer stands.
                _ if fetch.last_ok => return Err(unknown()),
                _ => {
                    let since = since.unwrap_or_default();
                    return Err(unavailable(inner.timings.interval.saturating_sub(since)));
                }
            }
        };
        match tokio::time::timeout(UNKNOWN_KEY_WAIT, done.wait_for(|ended| *ended)).await {
            Ok(_) => {}
            Err(_) => {
                tracing::warn!(
                    waited_ms = UNKNOWN_KEY_WAIT.as_millis() as u64,
                    "the issuer's signing keys are slow to come; the write is refused meanwhile"
                );
                // By then the fetch has ended, one way or the other.
                return Err(unavailable(FETCH_TIMEOUT.saturating_sub(UNKNOWN_KEY_WAIT)));
            }
        }
        let last_ok = inner.fetch.lock().expect("fetch state").last_ok;
        match inner.cached(kid, alg)? {
            (Some(key), _) => Ok(key),
            (None, _) if last_ok => Err(unknown()),
            (None, _) => Err(unavailable(inner.timings.interval)),
        }
    }
}

impl Inner {
    /// Start the one fetch of the key set on its own task, recorded in `fetch` as in flight; it
    /// replaces the cache when it gets the keys, and leaves the cache as it was when it fails.
    fn start_fetch(this: &Arc<Inner>, fetch: &mut FetchState) -> watch::Receiver<bool> {
        let (ended, done) = watch::channel(false);
        fetch.in_flight = Some(done.clone());
        let discovered = fetch.discovered_jwks_url.clone();
        let inner = this.clone();
        tokio::spawn(async move {
            // Ends the fetch even if this task is dropped or panics, so no waiter waits forever
            // and the next fetch can start.
            let mut end = FetchEnd {
                inner: inner.clone(),
                ended,
                ok: false,
                discovered: None,
            };
            match inner.fetch_keys(discovered).await {
                Ok((cache, url)) => {
                    tracing::info!(
                        keys = cache.by_kid.len() + cache.unnamed.len(),
                        "fetched the issuer's signing keys"
                    );
                    *inner.keys.write().expect("key cache") = cache;
                    end.ok = true;
                    end.discovered = url;
                }
                Err(why) if inner.keys.read().expect("key cache").fetched_at.is_some() => {
                    tracing::warn!(
                        error = %why,
                        "cannot refresh the issuer's signing keys; the cached keys stay in use"
                    );
                }
                Err(why) => tracing::warn!(error = %why, "cannot fetch the issuer's signing keys"),
            }
        });
        done
    }

    /// The cached key for `kid` usable with `alg`, and the age of the cached keys.
    fn cached(
        &self,
        kid: Option<&str>,
        alg: Algorithm,
    ) -> Result<(Option<DecodingKey>, Duration), JwtError> {
        let cache = self.keys.read().expect("key cache");
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
    fn cached_keys_are_used_at_once_and_fetches_start_one_at_a_time_an_interval_apart() {
        let t = Timings::default();
        let fresh = MAX_KEY_AGE - Duration::from_secs(1);
        let old = MAX_KEY_AGE;
        let recent = Some(REFRESH_INTERVAL - Duration::from_millis(1));
        let due = Some(REFRESH_INTERVAL);
        let cases = [
            // (key cached, age of the keys, fetch in flight, since the last fetch ended) -> next
            ((true, Duration::ZERO, false, None), Next::Use),
            ((true, fresh, false, recent), Next::Use),
            ((true, fresh, false, due), Next::Use),
            ((true, fresh, true, due), Next::Use),
            // Too old: used all the same, and refreshed in the background when a fetch is due.
            ((true, old, false, None), Next::UseAndRefresh),
            ((true, old, false, due), Next::UseAndRefresh),
            ((true, Duration::MAX, false, due), Next::UseAndRefresh),
            ((true, old, true, due), Next::Use),
            ((true, old, false, recent), Next::Use),
            // Missing: wait for the fetch in flight, or start one when due.
            ((false, Duration::MAX, false, None), Next::Fetch),
            ((false, Duration::ZERO, false, due), Next::Fetch),
            ((false, Duration::MAX, true, None), Next::Join),
            ((false, Duration::ZERO, true, recent), Next::Join),
            ((false, Duration::ZERO, false, recent), Next::Refuse),
            ((false, old, false, recent), Next::Refuse),
        ];
        for ((cached, age, in_flight, since), expected) in cases {
            assert_eq!(
                next_step(cached, age, in_flight, since, t),
                expected,
                "cached {cached}, age {age:?}, in flight {in_flight}, since {since:?}"
            );
        }
    }
}
