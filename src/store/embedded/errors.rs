//! SQLite's errors as the store's.

use super::StoreError;

/// A poisoned lock on the store's connection, as a store error.
pub(super) fn poisoned() -> StoreError {
    StoreError::Other("store connection lock poisoned".into())
}

/// A SQLite error as a store error: busy or locked is `Unavailable` (answered 503), anything
/// else `Other`.
pub(super) fn sql(e: rusqlite::Error) -> StoreError {
    match &e {
        rusqlite::Error::SqliteFailure(f, _)
            if matches!(
                f.code,
                rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
            ) =>
        {
            // Answered 503 + Retry-After, which says nothing of the cause: one process is the only
            // writer, so this is rare and worth a line (with SQLite's extended code).
            tracing::warn!(error = %e, extended_code = f.extended_code, "the embedded store was busy");
            StoreError::Unavailable(e.to_string())
        }
        _ => StoreError::Other(e.to_string()),
    }
}
