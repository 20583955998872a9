//! A scratch directory, removed when dropped: the embedded store's and the process
//! measurements' databases.

use std::path::PathBuf;

/// A scratch directory, removed when dropped.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(what: &str) -> anyhow::Result<Scratch> {
        let nanos = time::OffsetDateTime::now_utc().unix_timestamp_nanos();
        let dir =
            std::env::temp_dir().join(format!("blog-bench-{what}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        Ok(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
