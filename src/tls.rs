//! Cryptography on ring: TLS for the HTTPS clients, and the signature checks of bearer tokens.
//!
//! The HTTPS clients (Cosmos DB, Entra ID tokens for the managed identity, an issuer's discovery
//! document and keys) are reqwest on rustls, and bearer tokens are checked with jsonwebtoken.
//! Both take their cryptography from a process-wide provider, and both crates' built-in
//! provider is aws-lc: a large share of the package, for algorithms ring (which rustls supports
//! as well) has. So they are built without one, and [`install`] installs ring's: rustls's own,
//! and for jsonwebtoken [`TOKEN_SIGNATURES`], which checks the two algorithms bearer tokens may
//! use (RS256, ES256; `auth::jwt` refuses any other before it gets here). Whatever builds a
//! client or checks a token calls [`install`] first; without it reqwest and jsonwebtoken panic.

use std::sync::Once;

use jsonwebtoken::crypto::{CryptoProvider, JwtSigner, JwtVerifier, KeyUtils};
use jsonwebtoken::errors::{Error, ErrorKind};
use jsonwebtoken::signature::{self, Verifier};
use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey, DecodingKeyKind, EncodingKey};
use ring::signature::{
    RsaPublicKeyComponents, UnparsedPublicKey, ECDSA_P256_SHA256_FIXED, RSA_PKCS1_2048_8192_SHA256,
};

/// Install ring as the provider of rustls and of jsonwebtoken, once per process. A provider
/// installed earlier by someone else stays.
pub fn install() {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let _ = TOKEN_SIGNATURES.install_default();
    });
}

/// jsonwebtoken's provider on ring: it checks RS256 and ES256 signatures and nothing else (the
/// handler never signs, and uses no JWK utilities).
pub static TOKEN_SIGNATURES: CryptoProvider = CryptoProvider {
    signer_factory: no_signer,
    verifier_factory: verifier,
    key_utils: KeyUtils::new_unimplemented(),
};

fn no_signer(_: &Algorithm, _: &EncodingKey) -> Result<Box<dyn JwtSigner>, Error> {
    Err(ErrorKind::InvalidAlgorithm.into())
}

fn verifier(alg: &Algorithm, key: &DecodingKey) -> Result<Box<dyn JwtVerifier>, Error> {
    let family = match alg {
        Algorithm::RS256 => AlgorithmFamily::Rsa,
        Algorithm::ES256 => AlgorithmFamily::Ec,
        _ => return Err(ErrorKind::InvalidAlgorithm.into()),
    };
    if key.family() != family {
        return Err(ErrorKind::InvalidKeyFormat.into());
    }
    Ok(Box::new(RingVerifier {
        alg: *alg,
        key: key.clone(),
    }))
}

struct RingVerifier {
    alg: Algorithm,
    key: DecodingKey,
}

impl Verifier<Vec<u8>> for RingVerifier {
    fn verify(&self, msg: &[u8], sig: &Vec<u8>) -> Result<(), signature::Error> {
        let checked = match (self.alg, self.key.kind()) {
            (Algorithm::RS256, DecodingKeyKind::RsaModulusExponent { n, e }) => {
                RsaPublicKeyComponents { n, e }.verify(&RSA_PKCS1_2048_8192_SHA256, msg, sig)
            }
            (Algorithm::RS256, DecodingKeyKind::SecretOrDer(der)) => {
                UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, der).verify(msg, sig)
            }
            // An EC key from a JWK is its uncompressed point, as ring takes it.
            (Algorithm::ES256, DecodingKeyKind::SecretOrDer(point)) => {
                UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, point).verify(msg, sig)
            }
            _ => return Err(signature::Error::new()),
        };
        checked.map_err(|_| signature::Error::new())
    }
}

impl JwtVerifier for RingVerifier {
    fn algorithm(&self) -> Algorithm {
        self.alg
    }
}
