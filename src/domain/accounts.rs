//! Local accounts' items: the guards that keep usernames (handles) and emails unique on a store
//! whose unique keys hold only inside one partition. Each guard is an item of its own partition
//! of `users`, whose id (and partition key) is derived from the lowercased name or email, so
//! that two accounts claiming the same one meet in one create: exactly one succeeds. A guard
//! names the user holding it; the email's guard also holds what signing in needs (the account's
//! subject and its password's hash), so a sign-in is one point read before the user's.

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// `type` of a username's guard and of an email's guard.
pub const HANDLE: &str = "handle";
pub const EMAIL: &str = "email";

/// The guard id of a username or email: the kind and the first 144 bits of the SHA-256 of the
/// lowercased value (no address or name in an id, which logs and the change feed carry).
fn guard_id(kind: &str, value: &str) -> String {
    let digest = Sha256::digest(value.to_lowercase().as_bytes());
    let short = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&digest[..18]);
    format!("{kind}-{short}")
}

/// The id of the guard of `username` (case does not matter).
pub fn handle_id(username: &str) -> String {
    guard_id(HANDLE, username)
}

/// The id of the guard of `email` (case does not matter).
pub fn email_id(email: &str) -> String {
    guard_id(EMAIL, email)
}

/// A username's guard: held by `owner`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HandleGuard {
    pub id: String,
    /// The partition key: the same as `id`.
    pub user_id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub owner: String,
}

impl HandleGuard {
    pub fn new(username: &str, owner: &str) -> HandleGuard {
        let id = handle_id(username);
        HandleGuard {
            user_id: id.clone(),
            id,
            kind: HANDLE.into(),
            owner: owner.into(),
        }
    }
}

/// An email's guard: held by `owner`, whose account is `subject` (what its tokens name) and
/// whose password hashes to `password_hash` (a PHC string, never returned).
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EmailGuard {
    pub id: String,
    pub user_id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub owner: String,
    pub subject: String,
    pub password_hash: String,
}

impl std::fmt::Debug for EmailGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "EmailGuard({} of {})", self.id, self.owner)
    }
}

impl EmailGuard {
    pub fn new(email: &str, owner: &str, subject: &str, password_hash: String) -> EmailGuard {
        let id = email_id(email);
        EmailGuard {
            user_id: id.clone(),
            id,
            kind: EMAIL.into(),
            owner: owner.into(),
            subject: subject.into(),
            password_hash,
        }
    }
}

/// An email address as an account takes it: trimmed, at most 254 characters, one `@` with
/// something on either side, no white space or control character.
pub fn parse_email(s: &str) -> Result<String, super::Invalid> {
    let e = s.trim();
    let bad = |why: &str| Err(super::Invalid::new("email", why));
    if e.is_empty() {
        return bad("can't be blank");
    }
    if e.chars().count() > 254 || e.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return bad("is invalid");
    }
    match e.split_once('@') {
        Some((local, domain))
            if !local.is_empty() && !domain.is_empty() && !domain.contains('@') =>
        {
            Ok(e.to_string())
        }
        _ => bad("is invalid"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guards_ignore_case_and_hide_the_value() {
        assert_eq!(handle_id("Ana"), handle_id("ana"));
        assert_ne!(handle_id("ana"), handle_id("anna"));
        assert_ne!(handle_id("ana@x.org"), email_id("ana@x.org"));
        assert!(!email_id("ana@x.org").contains("ana"));
        crate::domain::Id::parse("id", &email_id("a/b?c#d@x.org")).unwrap();
        let g = EmailGuard::new("a@x.org", "u-1", "s", "$argon2id$secret".into());
        assert!(!format!("{g:?}").contains("secret"));
    }

    #[test]
    fn emails_need_one_at_with_both_sides() {
        assert_eq!(parse_email(" a@x.org ").unwrap(), "a@x.org");
        for bad in ["", "  ", "ax.org", "@x.org", "a@", "a@b@c", "a b@x.org"] {
            assert!(parse_email(bad).is_err(), "{bad:?}");
        }
        assert_eq!(parse_email("").unwrap_err().detail, "can't be blank");
    }
}
