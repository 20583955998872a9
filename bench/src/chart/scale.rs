//! The scale rows' panels, two a line: writes per like by audience, others' lag while the big
//! author acts, the operations of a timeline page, and a like's price by the post's total. Each
//! bar is labelled with its value: the figures span several orders of magnitude.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::draw_error;
use crate::results::scale::Scale;

const FIRST: RGBColor = RGBColor(31, 119, 180);
const SECOND: RGBColor = RGBColor(158, 202, 225);
const PANEL_HEIGHT: u32 = 300;

/// One band of a panel: its label and its bars, top down (at most two).
pub(super) type Band = (String, Vec<f64>);

/// The panels a scale report needs, laid out.
fn panels(s: &Scale) -> Vec<(String, [&'static str; 2], Vec<Band>)> {
    let mut out = Vec::new();
    if let Some(w) = &s.writes_per_like {
        let mut audiences: Vec<(usize, usize, usize)> = w
            .runs
            .iter()
            .map(|r| (r.followers, r.bookmarkers, r.tags))
            .collect();
        audiences.dedup();
        let bands = audiences
            .iter()
            .map(|&(f, b, t)| {
                let of = |mode: &str| {
                    w.runs
                        .iter()
                        .find(|r| {
                            (r.followers, r.bookmarkers, r.tags) == (f, b, t) && r.mode == mode
                        })
                        .map_or(0.0, |r| r.writes_per_like)
                };
                let label = if (b, t) == (0, 0) {
                    format!("{f}")
                } else {
                    format!("{f} f, {b} b, {t} t")
                };
                (label, vec![of("steady"), of("burst")])
            })
            .collect();
        out.push((
            "[W] store writes per like, by followers (f), bookmarkers (b) and tags (t)".to_string(),
            ["steady", "burst"],
            bands,
        ));
    }
    if let Some(l) = &s.others_lag {
        let bands = std::iter::once(&l.quiet)
            .chain(&l.scenarios)
            .map(|s| {
                (
                    s.name.to_string(),
                    vec![s.feed_lag.max_ms, s.follow_lag.max_ms],
                )
            })
            .collect();
        out.push((
            format!(
                "[L] others' max lag (ms), an author of {} followers acting",
                l.followers
            ),
            ["feed", "follow"],
            bands,
        ));
    }
    if let Some(t) = &s.timeline_pages {
        let band = |name: &str, p: &crate::results::scale::PageRead| {
            (
                format!("{name} ({} merged)", p.merged_authors),
                vec![p.operations_mean, p.latency.p99_ms],
            )
        };
        out.push((
            "[T2/T3] a timeline page: store operations, p99 (ms)".to_string(),
            ["operations", "p99 ms"],
            vec![band("T2", &t.ordinary), band("T3", &t.merged)],
        ));
    }
    if let Some(p) = &s.like_price {
        let bands = [&p.small, &p.large]
            .iter()
            .map(|c| (format!("{}", c.post_likes), vec![c.operations(), c.writes]))
            .collect();
        out.push((
            "[P] a like's store operations and writes, by the post's likes".to_string(),
            ["operations", "writes"],
            bands,
        ));
    }
    out
}

/// The height the panels of `s` take.
pub fn height(s: &Scale) -> u32 {
    let n = panels(s).len() as u32;
    n.div_ceil(2) * PANEL_HEIGHT
}

/// Draw the panels of `s` on `area`, two a line.
pub fn draw<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, s: &Scale) -> anyhow::Result<()> {
    let panels = panels(s);
    let lines = panels.len().div_ceil(2);
    if lines == 0 {
        return Ok(());
    }
    let cells = area.split_evenly((lines, 2));
    for (cell, (caption, legend, bands)) in cells.iter().zip(&panels) {
        panel(cell, caption, legend, bands)?;
    }
    Ok(())
}

pub(super) fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    caption: &str,
    legend: &[&str],
    bands: &[Band],
) -> anyhow::Result<()> {
    let n = bands.len().max(1);
    let x_max = bands
        .iter()
        .flat_map(|(_, bars)| bars.iter().copied())
        .fold(1.0, f64::max)
        * 1.25;
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 14))
        .margin(10)
        .x_label_area_size(25)
        .y_label_area_size(110)
        .build_cartesian_2d(0.0..x_max, 0.0..n as f64)
        .map_err(draw_error)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(0)
        .draw()
        .map_err(draw_error)?;
    let label = ("sans-serif", 12)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Right, VPos::Center));
    let value = ("sans-serif", 11)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Left, VPos::Center));
    for (i, (name, bars)) in bands.iter().enumerate() {
        let centre = (n - i) as f64 - 0.5;
        chart
            .draw_series(std::iter::once(
                EmptyElement::at((0.0, centre)) + Text::new(name.clone(), (-6, 0), label.clone()),
            ))
            .map_err(draw_error)?;
        for (j, (&v, colour)) in bars.iter().zip([FIRST, SECOND]).enumerate() {
            let (y0, y1) = if j == 0 {
                (centre, centre + 0.38)
            } else {
                (centre - 0.38, centre)
            };
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(0.0, y0), (v, y1)],
                    colour.filled(),
                )))
                .map_err(draw_error)?;
            chart
                .draw_series(std::iter::once(
                    EmptyElement::at((v, (y0 + y1) / 2.0))
                        + Text::new(short(v), (4, 0), value.clone()),
                ))
                .map_err(draw_error)?;
        }
    }
    for (name, colour) in legend.iter().zip([FIRST, SECOND]) {
        chart
            .draw_series(std::iter::empty::<Rectangle<(f64, f64)>>())
            .map_err(draw_error)?
            .label(*name)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], colour.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(draw_error)?;
    Ok(())
}

/// A bar's value, short.
fn short(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}
