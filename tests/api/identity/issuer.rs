//! A local OpenID Connect issuer on `127.0.0.1:0`: a discovery document and a JWKS, with keys
//! generated at test time (RS256 and ES256), tokens signed here by hand (so the tests do not
//! rely on the library under test to make them), a switch that takes the JWKS down, one that pads
//! it past any sane size, one that holds the JWKS answer back (a slow issuer), and counts of key
//! fetches asked for and answered.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::rsa::{KeyPair as RsaKeyPair, KeySize};
use aws_lc_rs::signature::{
    EcdsaKeyPair, KeyPair as _, RsaPublicKeyComponents, ECDSA_P256_SHA256_FIXED_SIGNING,
    RSA_PKCS1_SHA256, RSA_PKCS1_SHA384,
};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use base64::Engine as _;
use serde_json::{json, Map, Value};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// The audience every test token is for unless told otherwise.
pub const AUDIENCE: &str = "api://blog-tests";

pub fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

pub fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

enum Pair {
    Rsa(RsaKeyPair),
    Ec(EcdsaKeyPair),
}

/// A signing key with its key id.
pub struct SigningKey {
    pub kid: String,
    pair: Pair,
}

impl SigningKey {
    pub fn rsa(kid: &str) -> Self {
        SigningKey {
            kid: kid.into(),
            pair: Pair::Rsa(RsaKeyPair::generate(KeySize::Rsa2048).expect("an RSA key")),
        }
    }

    pub fn ec(kid: &str) -> Self {
        SigningKey {
            kid: kid.into(),
            pair: Pair::Ec(
                EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING).expect("an EC key"),
            ),
        }
    }

    pub fn alg(&self) -> &'static str {
        match self.pair {
            Pair::Rsa(_) => "RS256",
            Pair::Ec(_) => "ES256",
        }
    }

    /// The public key as a JWK.
    pub fn jwk(&self) -> Value {
        match &self.pair {
            Pair::Rsa(k) => {
                let c = RsaPublicKeyComponents::<Vec<u8>>::from(k.public_key());
                json!({"kty": "RSA", "kid": self.kid, "use": "sig", "alg": "RS256",
                       "n": b64(&c.n), "e": b64(&c.e)})
            }
            Pair::Ec(k) => {
                let p = k.public_key().as_ref();
                json!({"kty": "EC", "kid": self.kid, "use": "sig", "crv": "P-256",
                       "x": b64(&p[1..33]), "y": b64(&p[33..65])})
            }
        }
    }

    /// The RSA modulus (what a key-confusion attacker would use as an HMAC secret).
    pub fn public_bytes(&self) -> Vec<u8> {
        match &self.pair {
            Pair::Rsa(k) => RsaPublicKeyComponents::<Vec<u8>>::from(k.public_key()).n,
            Pair::Ec(k) => k.public_key().as_ref().to_vec(),
        }
    }

    /// A compact JWS over `header` and `claims`, signed with this key as its type signs.
    pub fn sign_with_header(&self, header: &Value, claims: &Value) -> String {
        let input = signing_input(header, claims);
        let sig = match &self.pair {
            Pair::Rsa(k) => {
                let alg = if header["alg"] == "RS384" {
                    &RSA_PKCS1_SHA384
                } else {
                    &RSA_PKCS1_SHA256
                };
                let mut sig = vec![0; k.public_modulus_len()];
                k.sign(alg, &SystemRandom::new(), input.as_bytes(), &mut sig)
                    .unwrap();
                sig
            }
            Pair::Ec(k) => k
                .sign(&SystemRandom::new(), input.as_bytes())
                .unwrap()
                .as_ref()
                .to_vec(),
        };
        format!("{input}.{}", b64(&sig))
    }

    /// A token with this key's algorithm and key id.
    pub fn sign(&self, claims: &Value) -> String {
        self.sign_with_header(
            &json!({"alg": self.alg(), "typ": "JWT", "kid": self.kid}),
            claims,
        )
    }
}

pub fn signing_input(header: &Value, claims: &Value) -> String {
    format!(
        "{}.{}",
        b64(header.to_string().as_bytes()),
        b64(claims.to_string().as_bytes())
    )
}

/// HS256 over `header` and `claims` with `secret`.
pub fn sign_hs256(header: &Value, claims: &Value, secret: &[u8]) -> String {
    use aws_lc_rs::hmac;
    let input = signing_input(header, claims);
    let tag = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, secret), input.as_bytes());
    format!("{input}.{}", b64(tag.as_ref()))
}

struct IssuerState {
    issuer: String,
    keys: Mutex<Vec<Value>>,
    up: AtomicBool,
    jwks_fetches: AtomicUsize,
    /// JWKS requests answered so far, for a test to wait on.
    jwks_answered: tokio::sync::watch::Sender<usize>,
    /// While `true`, a JWKS request waits before it is answered.
    held: tokio::sync::watch::Sender<bool>,
    /// Bytes of padding in the JWKS, and whether it is streamed (no `Content-Length`).
    padding: Mutex<(usize, bool)>,
}

/// The issuer, serving until dropped.
pub struct Issuer {
    /// The issuer id tokens carry in `iss` (`http://127.0.0.1:<port>/tenant/v2.0`).
    pub issuer: String,
    /// Where its keys are (also announced by discovery).
    pub jwks_url: String,
    state: Arc<IssuerState>,
    server: JoinHandle<()>,
}

impl Issuer {
    pub async fn start() -> Issuer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let issuer = format!("{base}/tenant/v2.0");
        let jwks_url = format!("{base}/tenant/discovery/keys");
        let state = Arc::new(IssuerState {
            issuer: issuer.clone(),
            keys: Mutex::new(Vec::new()),
            up: AtomicBool::new(true),
            jwks_fetches: AtomicUsize::new(0),
            jwks_answered: tokio::sync::watch::Sender::new(0),
            held: tokio::sync::watch::Sender::new(false),
            padding: Mutex::new((0, false)),
        });
        let app = Router::new()
            .route(
                "/tenant/v2.0/.well-known/openid-configuration",
                get(discovery),
            )
            .route("/tenant/discovery/keys", get(jwks))
            .with_state(state.clone());
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Issuer {
            issuer,
            jwks_url,
            state,
            server,
        }
    }

    /// Publish exactly these keys.
    pub fn publish(&self, keys: &[&SigningKey]) {
        *self.state.keys.lock().unwrap() = keys.iter().map(|k| k.jwk()).collect();
    }

    /// Take the discovery document and the JWKS down (503) or bring them back.
    pub fn set_up(&self, up: bool) {
        self.state.up.store(up, Ordering::SeqCst);
    }

    /// Pad the JWKS (still valid JSON, the same keys) with `bytes` of filler, streamed in chunks
    /// without a `Content-Length` when `streamed`.
    pub fn pad(&self, bytes: usize, streamed: bool) {
        *self.state.padding.lock().unwrap() = (bytes, streamed);
    }

    /// Hold every JWKS answer back until `hold(false)` (a slow issuer), or let them go.
    pub fn hold(&self, held: bool) {
        self.state.held.send_replace(held);
    }

    /// How many JWKS requests were answered (a request whose client gave up while it was held
    /// back is not).
    pub fn jwks_answered(&self) -> usize {
        *self.state.jwks_answered.borrow()
    }

    /// Wait until `n` JWKS requests have been answered (20 s at most).
    pub async fn jwks_answered_at_least(&self, n: usize) {
        let mut answered = self.state.jwks_answered.subscribe();
        let wait = answered.wait_for(|a| *a >= n);
        tokio::time::timeout(std::time::Duration::from_secs(20), wait)
            .await
            .unwrap_or_else(|_| panic!("{n} JWKS requests never answered"))
            .unwrap();
    }

    /// How many times the JWKS was asked for (also while down).
    pub fn jwks_fetches(&self) -> usize {
        self.state.jwks_fetches.load(Ordering::SeqCst)
    }

    /// Standard claims for `subject`, valid for ten minutes, with `extra` merged in (a `null`
    /// in `extra` removes that claim).
    pub fn claims(&self, subject: &str, extra: Value) -> Value {
        let t = now();
        let mut c = json!({
            "iss": self.issuer, "aud": AUDIENCE, "sub": subject,
            "iat": t, "nbf": t - 5, "exp": t + 600,
        });
        merge(&mut c, extra);
        c
    }

    /// A valid token for `subject` signed with `key`.
    pub fn token(&self, key: &SigningKey, subject: &str) -> String {
        key.sign(&self.claims(subject, json!({})))
    }
}

pub fn merge(target: &mut Value, extra: Value) {
    let Value::Object(extra) = extra else { return };
    let t: &mut Map<String, Value> = target.as_object_mut().unwrap();
    for (k, v) in extra {
        if v.is_null() {
            t.remove(&k);
        } else {
            t.insert(k, v);
        }
    }
}

impl Drop for Issuer {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn discovery(State(s): State<Arc<IssuerState>>) -> Response {
    if !s.up.load(Ordering::SeqCst) {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    let base = s.issuer.trim_end_matches("/v2.0");
    Json(json!({
        "issuer": s.issuer,
        "authorization_endpoint": format!("{base}/oauth2/v2.0/authorize"),
        "token_endpoint": format!("{base}/oauth2/v2.0/token"),
        "jwks_uri": format!("{base}/discovery/keys"),
        "id_token_signing_alg_values_supported": ["RS256", "ES256"],
    }))
    .into_response()
}

async fn jwks(State(s): State<Arc<IssuerState>>) -> Response {
    s.jwks_fetches.fetch_add(1, Ordering::SeqCst);
    let _ = s.held.subscribe().wait_for(|held| !held).await;
    s.jwks_answered.send_modify(|a| *a += 1);
    if !s.up.load(Ordering::SeqCst) {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    let keys = s.keys.lock().unwrap().clone();
    let (padding, streamed) = *s.padding.lock().unwrap();
    if padding == 0 {
        return Json(json!({ "keys": keys })).into_response();
    }
    let head = format!(r#"{{"keys":{},"padding":""#, Value::Array(keys));
    let chunk = "x".repeat(64 * 1024);
    let mut parts = vec![head];
    parts.extend(std::iter::repeat_n(chunk, padding.div_ceil(64 * 1024)));
    parts.push("\"}".into());
    let json = [("content-type", "application/json")];
    if streamed {
        let stream = futures::stream::iter(
            parts
                .into_iter()
                .map(|p| Ok::<_, std::io::Error>(axum::body::Bytes::from(p))),
        );
        (json, axum::body::Body::from_stream(stream)).into_response()
    } else {
        (json, parts.concat()).into_response()
    }
}
