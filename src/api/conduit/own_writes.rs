//! Reading one's own writes: a write the change feed carries into a list answers once the
//! in-process pump has applied it (at most [`OWN_WRITES_WAIT`]), so the caller's next read of
//! any list shows it.

use super::{AppState, OWN_WRITES_WAIT};

/// Wait until the change feed has carried this request's write into the lists (see
/// [`OWN_WRITES_WAIT`]).
pub(super) async fn wait(state: &AppState) {
    if !state.progress.passed(OWN_WRITES_WAIT).await {
        tracing::debug!("the change feed did not carry the write within the wait");
    }
    // A snapshot of the feed taken before the projection must not hide it.
    state.feed.forget();
    state.counts.forget();
}
