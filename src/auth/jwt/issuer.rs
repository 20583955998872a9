//! What is fetched from the issuer: its discovery document and key set, each refused unread
//! beyond [`MAX_ISSUER_DOCUMENT`], and which of its keys this service accepts.

use std::time::Instant;

use jsonwebtoken::jwk::{
    AlgorithmParameters, EllipticCurve, Jwk, JwkSet, KeyAlgorithm, PublicKeyUse,
};
use jsonwebtoken::{Algorithm, DecodingKey};
use serde::Deserialize;

use super::{Inner, Key, KeyCache, MAX_ISSUER_DOCUMENT};

impl Inner {
    /// The key set, and the key set's URL when discovery found it on this fetch.
    pub(super) async fn fetch_keys(
        &self,
        discovered: Option<String>,
    ) -> Result<(KeyCache, Option<String>), String> {
        let (url, found) = match (&self.jwks_url, discovered) {
            (Some(url), _) => (url.clone(), None),
            (None, Some(url)) => (url, None),
            (None, None) => {
                let url = self.discover().await?;
                (url.clone(), Some(url))
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
        Ok((cache, found))
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

#[cfg(test)]
mod tests {
    use super::*;

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
