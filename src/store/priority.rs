//! The priority of a piece of work's store writes, where a store has one writer.

/// Which writes go first where a store has one writer (the embedded store's connection): a
/// waiting [`First`](WritePriority::First) write (a request's, the main projection lane's) is
/// served before waiting [`Background`](WritePriority::Background) writes (the timeline lane's
/// fan-out), so that a new post reaches the feed without waiting behind timeline items. Set for
/// a piece of work with [`with_write_priority`]; Cosmos DB has no such queue and ignores it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum WritePriority {
    #[default]
    First,
    Background,
}

tokio::task_local! {
    static WRITE_PRIORITY: WritePriority;
}

/// Run `fut` with its store writes at priority `p` (work it spawns as tasks of their own keeps
/// the default, [`WritePriority::First`]).
pub async fn with_write_priority<F: std::future::Future>(p: WritePriority, fut: F) -> F::Output {
    WRITE_PRIORITY.scope(p, fut).await
}

/// The priority of the store writes of the work running now.
pub fn write_priority() -> WritePriority {
    WRITE_PRIORITY.try_with(|p| *p).unwrap_or_default()
}
