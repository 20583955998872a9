//! The live-updates row's panels, side by side: the delivery lag with one stream and with all
//! of them, the process's resident set, and the follower's store operations while idle.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::scale::{panel, Band};
use crate::results::live::LiveUpdates;

/// The height the panels take.
pub const HEIGHT: u32 = 220;

/// Draw the panels of `l` on `area`.
pub fn draw<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    l: &LiveUpdates,
) -> anyhow::Result<()> {
    let cells = area.split_evenly((1, 3));
    let lag: Vec<Band> = vec![
        (
            "1 stream".to_string(),
            vec![l.one_stream_lag.p50_ms, l.one_stream_lag.p99_ms],
        ),
        (
            format!("{} streams", l.streams),
            vec![l.lag.p50_ms, l.lag.p99_ms],
        ),
    ];
    panel(
        &cells[0],
        &format!(
            "[LU] live updates: delivery lag (ms), {:.0} events/s",
            l.events_per_second
        ),
        &["p50", "p99"],
        &lag,
    )?;
    let rss: Vec<Band> = [
        ("before", l.rss_before_mib),
        ("streams idle", l.rss_idle_mib),
        ("delivering", l.rss_delivery_peak_mib),
    ]
    .into_iter()
    .map(|(name, v)| (name.to_string(), v.into_iter().collect()))
    .collect();
    panel(&cells[1], "[LU] process RSS (MiB)", &["RSS"], &rss)?;
    let idle: Vec<Band> = l
        .idle
        .iter()
        .map(|i| {
            (
                format!("{} streams", i.streams),
                vec![i.operations_per_second],
            )
        })
        .collect();
    panel(
        &cells[2],
        "[LU] follower's store ops/s, streams idle",
        &["ops/s"],
        &idle,
    )?;
    Ok(())
}
