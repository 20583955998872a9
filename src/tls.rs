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
use jsonwebtoken::signature::{self, Signer, Verifier};
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

/// jsonwebtoken's provider on ring: it checks RS256 and ES256 signatures and nothing else, and
/// signs ES256 only (the tokens of local accounts, `auth::local`); it uses no JWK utilities.
pub static TOKEN_SIGNATURES: CryptoProvider = CryptoProvider {
    signer_factory: signer,
    verifier_factory: verifier,
    key_utils: KeyUtils::new_unimplemented(),
};

/// ES256 with a P-256 key given as PKCS#8 DER (`EncodingKey::from_ec_der`).
fn signer(alg: &Algorithm, key: &EncodingKey) -> Result<Box<dyn JwtSigner>, Error> {
    if *alg != Algorithm::ES256 || key.family() != AlgorithmFamily::Ec {
        return Err(ErrorKind::InvalidAlgorithm.into());
    }
    let pair = ring::signature::EcdsaKeyPair::from_pkcs8(
        &ring::signature::ECDSA_P256_SHA256_FIXED_SIGNING,
        key.as_bytes(),
        &ring::rand::SystemRandom::new(),
    )
    .map_err(|_| Error::from(ErrorKind::InvalidEcdsaKey))?;
    Ok(Box::new(RingSigner(pair)))
}

struct RingSigner(ring::signature::EcdsaKeyPair);

impl Signer<Vec<u8>> for RingSigner {
    fn try_sign(&self, msg: &[u8]) -> Result<Vec<u8>, signature::Error> {
        self.0
            .sign(&ring::rand::SystemRandom::new(), msg)
            .map(|s| s.as_ref().to_vec())
            .map_err(|_| signature::Error::new())
    }
}

impl JwtSigner for RingSigner {
    fn algorithm(&self) -> Algorithm {
        Algorithm::ES256
    }
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
