//! Local accounts: an email and a password kept by this service, and the tokens it signs for
//! them (what a RealWorld client signs in with, and `BLOG_AUTH=local` for the native API).
//!
//! - **Passwords** are hashed with Argon2id (the crate's defaults: 19 MiB, two passes), a salt
//!   of 16 random bytes each, and kept as a PHC string; never logged, never returned. A check
//!   against an unknown account still hashes once ([`verify_password`] with `None`), so a wrong
//!   password and an unknown email take the same time.
//! - **Tokens** are JWTs signed with ES256 by one P-256 key ([`TokenKey`]): `iss` is [`ISSUER`],
//!   `sub` the account's subject (a random id given at registration, which no rename changes,
//!   so a token outlives a change of username or email), `exp` [`TOKEN_LIFETIME`] after issue.
//!   The key is the setting `BLOG_TOKEN_KEY` (its PKCS#8 form, base64), the same for every
//!   instance; standalone on the embedded store without it, one is made at the first start and
//!   kept beside the database file, readable by its owner only.
//! - The identity a token proves is (`ISSUER`, subject), so the user it acts as is derived as
//!   for any other issuer ([`super::Identity::user_id`]): every rule about callers holds as is.

use std::time::Duration;

use base64::Engine as _;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

use super::Identity;

/// The issuer of local accounts' tokens (never an URL, so it cannot be mistaken for an OpenID
/// Connect issuer's).
pub const ISSUER: &str = "blog:local";
/// The audience of local accounts' tokens.
const AUDIENCE: &str = "blog";
/// How long a token holds.
pub const TOKEN_LIFETIME: Duration = Duration::from_secs(30 * 24 * 3600);

/// A password's length limits, in characters: at least 8 and any up to 256 (at least 64 must be
/// accepted, and no rule of composition applies).
pub const PASSWORD_MIN_CHARS: usize = 8;
pub const PASSWORD_MAX_CHARS: usize = 256;

/// The key local accounts' tokens are signed and checked with. Never printed.
pub struct TokenKey {
    encoding: EncodingKey,
    decoding: DecodingKey,
}

impl std::fmt::Debug for TokenKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenKey(..)")
    }
}

#[derive(Serialize, Deserialize)]
struct Claims {
    iss: String,
    aud: String,
    sub: String,
    iat: u64,
    exp: u64,
}

impl TokenKey {
    /// From a P-256 private key in PKCS#8 DER form.
    pub fn from_pkcs8(der: &[u8]) -> Result<TokenKey, String> {
        use ring::signature::KeyPair as _;
        let pair = ring::signature::EcdsaKeyPair::from_pkcs8(
            &ring::signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            der,
            &ring::rand::SystemRandom::new(),
        )
        .map_err(|_| "not a P-256 private key in PKCS#8 form".to_string())?;
        Ok(TokenKey {
            encoding: EncodingKey::from_ec_der(der),
            decoding: DecodingKey::from_ec_der(pair.public_key().as_ref()),
        })
    }

    /// From the setting's form: the PKCS#8 DER key in standard base64.
    pub fn from_base64(s: &str) -> Result<TokenKey, String> {
        let der = base64::engine::general_purpose::STANDARD
            .decode(s.trim())
            .map_err(|_| "not base64".to_string())?;
        TokenKey::from_pkcs8(&der)
    }

    /// A new random key, with its PKCS#8 DER form (to keep).
    pub fn generate() -> (TokenKey, Vec<u8>) {
        let der = ring::signature::EcdsaKeyPair::generate_pkcs8(
            &ring::signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            &ring::rand::SystemRandom::new(),
        )
        .expect("the system's random source works")
        .as_ref()
        .to_vec();
        (
            TokenKey::from_pkcs8(&der).expect("a generated key reads"),
            der,
        )
    }

    /// The key kept in the file `path` (PKCS#8 DER, base64), made and written there (owner-only)
    /// when there is none.
    pub fn load_or_create(path: &std::path::Path) -> Result<TokenKey, String> {
        match std::fs::read_to_string(path) {
            Ok(s) => TokenKey::from_base64(&s).map_err(|e| format!("{}: {e}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let (key, der) = TokenKey::generate();
                let text = base64::engine::general_purpose::STANDARD.encode(der);
                write_private(path, text.as_bytes())
                    .map_err(|e| format!("cannot keep the token key in {}: {e}", path.display()))?;
                Ok(key)
            }
            Err(e) => Err(format!("{}: {e}", path.display())),
        }
    }

    /// A token for the account `subject`.
    pub fn issue(&self, subject: &str) -> String {
        crate::tls::install();
        let now = unix_now();
        let claims = Claims {
            iss: ISSUER.into(),
            aud: AUDIENCE.into(),
            sub: subject.into(),
            iat: now,
            exp: now + TOKEN_LIFETIME.as_secs(),
        };
        jsonwebtoken::encode(&Header::new(Algorithm::ES256), &claims, &self.encoding)
            .expect("an ES256 signature with a valid key")
    }

    /// The identity a token proves, or why it proves none (signature, issuer, audience, expiry:
    /// at most 60 s of leeway).
    pub fn verify(&self, token: &str) -> Result<Identity, String> {
        crate::tls::install();
        let mut v = Validation::new(Algorithm::ES256);
        v.set_issuer(&[ISSUER]);
        v.set_audience(&[AUDIENCE]);
        v.leeway = 60;
        let data =
            jsonwebtoken::decode::<Claims>(token, &self.decoding, &v).map_err(|e| e.to_string())?;
        Ok(Identity::new(ISSUER, data.claims.sub))
    }
}

/// The token of `Authorization: Bearer <token>` or `Token <token>` (the scheme RealWorld clients
/// send), if any.
pub fn presented_token(headers: &axum::http::HeaderMap) -> Option<&str> {
    let value = headers
        .get(axum::http::header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    (scheme.eq_ignore_ascii_case("token") || scheme.eq_ignore_ascii_case("bearer"))
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(unix)]
fn write_private(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(bytes)?;
    f.sync_all()
}

#[cfg(not(unix))]
fn write_private(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, bytes)
}

/// The PHC string of `password`'s Argon2id hash, with a fresh random salt. CPU- and
/// memory-bound: call it off the async runtime's threads.
pub fn hash_password(password: &str) -> String {
    use argon2::password_hash::{PasswordHasher as _, SaltString};
    let salt_bytes = uuid::Uuid::new_v4().into_bytes();
    let salt = SaltString::encode_b64(&salt_bytes).expect("16 bytes make a salt");
    argon2::Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .expect("Argon2id hashes any password")
        .to_string()
}

/// Whether `password` is the one `phc` was made from. With no hash (an unknown account), a
/// hash is still checked, so the answer takes as long as for a known one, and is `false`.
pub fn verify_password(password: &str, phc: Option<&str>) -> bool {
    use argon2::password_hash::{PasswordHash, PasswordVerifier as _};
    static DECOY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let decoy = DECOY.get_or_init(|| hash_password("a password that no account has"));
    let (phc, known) = match phc {
        Some(p) => (p, true),
        None => (decoy.as_str(), false),
    };
    let Ok(parsed) = PasswordHash::new(phc) else {
        return false;
    };
    let ok = argon2::Argon2::default()
        .verify_password(password.as_bytes(), &parsed)
        .is_ok();
    ok && known
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_proves_its_subject_and_nothing_else() {
        let (key, _) = TokenKey::generate();
        let token = key.issue("account-1");
        let identity = key.verify(&token).unwrap();
        assert_eq!(identity, Identity::new(ISSUER, "account-1"));
        // Another key's token, a changed payload and garbage are refused.
        let (other, _) = TokenKey::generate();
        assert!(key.verify(&other.issue("account-1")).is_err());
        let mut parts: Vec<String> = token.split('.').map(String::from).collect();
        parts[1] = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(
            br#"{"iss":"blog:local","aud":"blog","sub":"account-2","iat":1,"exp":99999999999}"#,
        );
        assert!(key.verify(&parts.join(".")).is_err());
        assert!(key.verify("not a token").is_err());
    }

    #[test]
    fn a_token_is_presented_as_bearer_or_token() {
        use axum::http::{header::AUTHORIZATION, HeaderMap, HeaderValue};
        let with = |v: &'static str| {
            let mut h = HeaderMap::new();
            h.insert(AUTHORIZATION, HeaderValue::from_static(v));
            h
        };
        assert_eq!(presented_token(&with("Bearer abc")), Some("abc"));
        assert_eq!(presented_token(&with("token  abc ")), Some("abc"));
        assert_eq!(presented_token(&with("Basic abc")), None);
        assert_eq!(presented_token(&with("Bearer ")), None);
        assert_eq!(presented_token(&HeaderMap::new()), None);
    }

    #[test]
    fn a_key_reads_back_from_its_kept_form() {
        let (key, der) = TokenKey::generate();
        let text = base64::engine::general_purpose::STANDARD.encode(&der);
        let again = TokenKey::from_base64(&text).unwrap();
        assert!(again.verify(&key.issue("s")).is_ok());
        assert!(TokenKey::from_base64("bm90IGEga2V5").is_err());
        assert!(!format!("{key:?}").contains(&text));
    }

    #[test]
    fn a_password_matches_only_its_own_hash() {
        let phc = hash_password("password123");
        assert!(phc.starts_with("$argon2id$"));
        assert!(!phc.contains("password123"));
        assert!(verify_password("password123", Some(&phc)));
        assert!(!verify_password("password124", Some(&phc)));
        assert!(!verify_password("password123", None));
        assert_ne!(
            phc,
            hash_password("password123"),
            "each hash has its own salt"
        );
    }
}
