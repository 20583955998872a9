//! What a token says: the claims read from a verified token, the tell-tale of an ID token, and
//! a reason for a refusal that echoes nothing from the token.

use serde::Deserialize;

#[derive(Deserialize)]
pub(super) struct Claims {
    pub(super) iss: String,
    #[serde(default)]
    pub(super) oid: Option<String>,
    #[serde(default)]
    pub(super) sub: Option<String>,
    /// Delegated scopes: space-separated (Microsoft Entra ID, RFC 8693), or a list.
    #[serde(default)]
    pub(super) scp: Option<serde_json::Value>,
    /// Application roles.
    #[serde(default)]
    pub(super) roles: Option<serde_json::Value>,
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
pub(super) fn id_token_claim(claims: &Claims) -> Option<&'static str> {
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
pub(super) fn claim_values(claim: Option<serde_json::Value>) -> Vec<String> {
    match claim {
        Some(serde_json::Value::String(s)) => s.split_whitespace().map(String::from).collect(),
        Some(serde_json::Value::Array(values)) => values
            .into_iter()
            .filter_map(|v| v.as_str().map(String::from))
            .collect(),
        _ => Vec::new(),
    }
}

/// A reason for the caller, without echoing anything from the token.
pub(super) fn reason(e: &jsonwebtoken::errors::Error) -> String {
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
}
