//! Cosmos DB statuses mapped to [`StoreError`]s, and the request charge of failed calls.

use std::time::Duration;

use azure_data_cosmos::CosmosError;

use crate::store::StoreError;

/// When a 429 carries no `x-ms-retry-after-ms`.
const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(1);

/// What the store needs to know about a failed call, apart from the SDK's error type, so the
/// mapping is a pure function with table tests.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Failure {
    pub status: u16,
    pub sub_status: Option<u16>,
    /// `x-ms-retry-after-ms` of the final response, when there was one.
    pub retry_after_ms: Option<u64>,
    pub message: String,
}

impl Failure {
    pub fn of(e: &CosmosError) -> Self {
        let status = e.status();
        Failure {
            status: u16::from(status),
            sub_status: status.sub_status().map(|s| s.value()),
            retry_after_ms: e.response().and_then(|r| r.headers().retry_after_ms),
            message: e.to_string(),
        }
    }

    /// As [`Failure::into_store_error`], for a call that carried a caller's continuation token.
    pub fn into_continuation_error(self) -> StoreError {
        // 500/20020 is how the SDK reports a `c1.` token whose payload is not its JSON.
        if self.status == 400 || (self.status == 500 && self.sub_status == Some(20020)) {
            return StoreError::BadContinuation(self.message);
        }
        self.into_store_error()
    }

    pub fn into_store_error(self) -> StoreError {
        match self.status {
            404 => StoreError::NotFound,
            409 => StoreError::Conflict,
            412 => StoreError::PreconditionFailed,
            429 => StoreError::Throttled {
                retry_after: self
                    .retry_after_ms
                    .map(Duration::from_millis)
                    .unwrap_or(DEFAULT_RETRY_AFTER),
            },
            // 408 and 503 cover the SDK's own transport failures (DNS, connect, I/O, timeouts)
            // too; 449 is a transient write race. They may well succeed a moment later.
            408 | 449 | 503 => StoreError::Unavailable(self.message),
            // A missing data-plane role, a firewall rule, a wrong key: retrying does not help
            // until someone fixes the configuration.
            401 | 403 => StoreError::Forbidden(self.message),
            400 | 413 => StoreError::BadRequest(self.message),
            _ => StoreError::Other(self.message),
        }
    }
}

/// Map an SDK error to a store error.
pub(super) fn store_error(e: &CosmosError) -> StoreError {
    Failure::of(e).into_store_error()
}

/// Map the error of a call that carried a caller's continuation token: a token the SDK or the
/// service rejects (malformed, from another query or container) is `BadContinuation`, which
/// the HTTP layer answers with 400.
pub(super) fn continuation_error(e: &CosmosError) -> StoreError {
    Failure::of(e).into_continuation_error()
}

/// The request units a failed call still consumed (a 429 or 404 is charged too).
pub(super) fn error_charge(e: &CosmosError) -> f64 {
    e.diagnostics()
        .map(|d| d.total_request_charge().value())
        .unwrap_or(0.0)
}

/// The error a failed transactional batch operation stands for: a batch answers 207 with one
/// result per operation, the failing one with its own status and the others with 424.
pub(super) fn batch_operation_error(status: u16, retry_after: Option<Duration>) -> StoreError {
    Failure {
        status,
        sub_status: None,
        retry_after_ms: retry_after.map(|d| d.as_millis() as u64),
        message: format!("batch operation failed with status {status}"),
    }
    .into_store_error()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(status: u16, retry_after_ms: Option<u64>) -> Failure {
        Failure {
            status,
            sub_status: None,
            retry_after_ms,
            message: format!("{status}"),
        }
    }

    #[test]
    fn cosmos_statuses_map_to_store_errors() {
        let map = |s, r| failure(s, r).into_store_error();
        assert!(matches!(map(404, None), StoreError::NotFound));
        assert!(matches!(map(409, None), StoreError::Conflict));
        assert!(matches!(map(412, None), StoreError::PreconditionFailed));
        assert!(matches!(
            map(429, Some(250)),
            StoreError::Throttled { retry_after } if retry_after == Duration::from_millis(250)
        ));
        assert!(matches!(
            map(429, None),
            StoreError::Throttled { retry_after } if retry_after == Duration::from_secs(1)
        ));
        for s in [408, 449, 503] {
            assert!(matches!(map(s, None), StoreError::Unavailable(_)), "{s}");
        }
        for s in [401, 403] {
            let e = map(s, None);
            assert!(
                matches!(&e, StoreError::Forbidden(m) if m == &s.to_string()),
                "{s}"
            );
            assert!(!e.is_transient());
        }
        assert!(matches!(map(400, None), StoreError::BadRequest(_)));
        assert!(matches!(map(500, None), StoreError::Other(_)));
    }

    #[test]
    fn cosmos_continuation_failures_are_bad_continuations() {
        let with = |status, sub_status| Failure {
            status,
            sub_status,
            retry_after_ms: None,
            message: "m".into(),
        };
        for f in [with(400, None), with(500, Some(20020))] {
            assert!(matches!(
                f.into_continuation_error(),
                StoreError::BadContinuation(_)
            ));
        }
        assert!(matches!(
            with(500, None).into_continuation_error(),
            StoreError::Other(_)
        ));
        assert!(matches!(
            with(403, None).into_continuation_error(),
            StoreError::Forbidden(_)
        ));
    }

    #[test]
    fn cosmos_batch_operation_statuses_map_like_single_calls() {
        assert!(matches!(
            batch_operation_error(404, None),
            StoreError::NotFound
        ));
        assert!(matches!(
            batch_operation_error(409, None),
            StoreError::Conflict
        ));
        assert!(matches!(
            batch_operation_error(429, Some(Duration::from_millis(40))),
            StoreError::Throttled { retry_after } if retry_after == Duration::from_millis(40)
        ));
    }
}
