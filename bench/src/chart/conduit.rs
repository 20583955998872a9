//! The RealWorld row's panels, side by side: each kind's requests per second, its p50 and p99
//! latency, and its store operations per request where the server reports them.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::draw_error;
use super::scale::{panel, Band};
use crate::results::conduit::Conduit;

/// The height the panels take.
pub fn height(c: &Conduit) -> u32 {
    100 + 26 * c.kinds.len() as u32
}

/// Draw the panels of `c` on `area`.
pub fn draw<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, c: &Conduit) -> anyhow::Result<()> {
    let band = |f: &dyn Fn(&crate::results::conduit::ConduitKind) -> Vec<f64>| -> Vec<Band> {
        c.kinds.iter().map(|k| (k.kind.to_string(), f(k))).collect()
    };
    let cells = area.split_evenly((1, 3));
    panel(
        &cells[0],
        "[RW] RealWorld API: requests/s",
        &["requests/s"],
        &band(&|k| vec![k.requests_per_second]),
    )?;
    panel(
        &cells[1],
        "[RW] latency (ms)",
        &["p50", "p99"],
        &band(&|k| vec![k.latency.p50_ms, k.latency.p99_ms]),
    )?;
    panel(
        &cells[2],
        "[RW] store operations per request",
        &["mean", "max"],
        &band(&|k| k.operations.map_or_else(Vec::new, |s| vec![s.mean, s.max])),
    )?;
    Ok(())
}

/// The RealWorld row alone (`--conduit-only`) as a chart of its own.
pub fn write(c: &Conduit, path: &Path) -> anyhow::Result<()> {
    let root = SVGBackend::new(path, (1100, height(c) + 40)).into_drawing_area();
    root.fill(&WHITE).map_err(draw_error)?;
    let title = format!(
        "The RealWorld API at {}: {} users, {} clients",
        c.base, c.users, c.concurrency
    );
    let root = root
        .titled(&title, ("sans-serif", 18))
        .map_err(draw_error)?;
    draw(&root, c)?;
    root.present().map_err(draw_error)?;
    Ok(())
}
