//! The report as a picture: an SVG beside the JSON report (`--json report.json` also writes
//! `report.svg`), for the performance page. Two panels, one row per request in the article's
//! order: the store operations each command costs (V1; V3's request, and V3's change-feed work
//! stacked on it where the command is a write) and the p50 latency of V1 and V3. Below them,
//! when the scale rows ran, one panel per group of them (`chart::scale`), then the live-updates
//! row's (`chart::live`), and last the RealWorld row's (`chart::conduit`).

mod conduit;
mod live;
mod scale;

pub use conduit::write as write_conduit;

use std::path::Path;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::results::{Report, Row};

const V1: RGBColor = RGBColor(150, 150, 150);
const V3: RGBColor = RGBColor(31, 119, 180);
const CHANGE_FEED: RGBColor = RGBColor(158, 202, 225);

/// Write the chart of `report` to `path`.
pub fn write(report: &Report, path: &Path) -> anyhow::Result<()> {
    let rows = &report.rows;
    let top = 140 + 34 * rows.len() as u32;
    let below = report.scale.as_ref().map_or(0, scale::height);
    let rw = conduit::height(&report.conduit);
    let root = SVGBackend::new(path, (1100, top + below + live::HEIGHT + rw)).into_drawing_area();
    root.fill(&WHITE).map_err(draw_error)?;
    let (root, bottom) = root.split_vertically(top);
    let (bottom, rest) = bottom.split_vertically(below);
    let (middle, last) = rest.split_vertically(live::HEIGHT);
    if let Some(s) = &report.scale {
        scale::draw(&bottom, s)?;
    }
    live::draw(&middle, &report.live)?;
    conduit::draw(&last, &report.conduit)?;
    let title = format!(
        "V1 against V3 on the {} store: {} users, {} posts, {} comments, {} likes",
        report.store,
        report.dataset.users,
        report.dataset.posts,
        report.dataset.comments,
        report.dataset.likes
    );
    let root = root
        .titled(&title, ("sans-serif", 18))
        .map_err(draw_error)?;
    let (left, right) = root.split_horizontally(600);

    let ops_max = rows
        .iter()
        .map(|r| {
            let v1 = r.v1.as_ref().map_or(0.0, |s| s.operations.mean);
            v1.max(r.v3.operations.mean + change_feed(r))
        })
        .fold(1.0, f64::max);
    panel(
        &left,
        rows,
        "store operations per command (V3: request + change feed)",
        ops_max * 1.1,
        &[
            ("V1", V1),
            ("V3 request", V3),
            ("V3 change feed", CHANGE_FEED),
        ],
        |r| {
            let mut bars = vec![(r.v1.as_ref().map(|s| s.operations.mean), 0.0, V1)];
            let req = r.v3.operations.mean;
            bars.push((Some(req), 0.0, V3));
            if r.change_feed.is_some() {
                bars.push((Some(change_feed(r)), req, CHANGE_FEED));
            }
            bars
        },
    )?;
    let ms_max = rows
        .iter()
        .map(|r| r.v1.as_ref().map_or(0.0, |s| s.p50_ms).max(r.v3.p50_ms))
        .fold(0.1, f64::max);
    let legend = [("V1", V1), ("V3", V3)];
    panel(
        &right,
        rows,
        "p50 latency (ms)",
        ms_max * 1.1,
        &legend,
        |r| {
            vec![
                (r.v1.as_ref().map(|s| s.p50_ms), 0.0, V1),
                (Some(r.v3.p50_ms), 0.0, V3),
            ]
        },
    )?;
    root.present().map_err(draw_error)?;
    Ok(())
}

fn change_feed(r: &Row) -> f64 {
    r.change_feed
        .as_ref()
        .map_or(0.0, |c| c.operations_per_command)
}

/// A horizontal bar chart: one band per row, in it V1's bar above V3's; each bar is
/// `(value, start, colour)` (a bar starting past 0 is stacked on the one before it).
fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    rows: &[Row],
    caption: &str,
    x_max: f64,
    legend: &[(&str, RGBColor)],
    bars: impl Fn(&Row) -> Vec<(Option<f64>, f64, RGBColor)>,
) -> anyhow::Result<()> {
    let n = rows.len();
    // Row i's band is [n-i-1, n-i] from the bottom (the article's order reads top down); its
    // label sits at the band's centre, V1's bar above it and V3's below.
    let centre = |i: usize| (n - i) as f64 - 0.5;
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 15))
        .margin(12)
        .x_label_area_size(30)
        .y_label_area_size(40)
        .build_cartesian_2d(0.0..x_max, 0.0..n as f64)
        .map_err(draw_error)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(0)
        .draw()
        .map_err(draw_error)?;
    let label = ("sans-serif", 13)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Right, VPos::Center));
    chart
        .draw_series(rows.iter().enumerate().map(|(i, r)| {
            EmptyElement::at((0.0, centre(i))) + Text::new(r.request, (-8, 0), label.clone())
        }))
        .map_err(draw_error)?;
    for (i, row) in rows.iter().enumerate() {
        let c = centre(i);
        for (value, start, colour) in bars(row) {
            let Some(value) = value else { continue };
            let (y0, y1) = if colour == V1 {
                (c, c + 0.38)
            } else {
                (c - 0.38, c)
            };
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(start, y0), (start + value, y1)],
                    colour.filled(),
                )))
                .map_err(draw_error)?;
        }
    }
    for &(label, colour) in legend {
        chart
            .draw_series(std::iter::empty::<Rectangle<(f64, f64)>>())
            .map_err(draw_error)?
            .label(label)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], colour.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(draw_error)?;
    Ok(())
}

pub(crate) fn draw_error<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow::anyhow!("drawing the chart: {e:?}")
}
