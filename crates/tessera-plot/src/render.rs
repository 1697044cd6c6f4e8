//! Drawing a [`Figure`] onto any plotters backend.

use anyhow::{anyhow, Result};
use plotters::coord::Shift;
use plotters::element::{Drawable, PointCollection};
use plotters::prelude::*;
use plotters::style::text_anchor;
use plotters_backend::{BackendCoord, DrawingErrorKind};

use crate::data::Figure;

/// Tableau-10: distinguishable, reasonably colour-blind friendly.
const PALETTE: [RGBColor; 10] = [
    RGBColor(0x4e, 0x79, 0xa7),
    RGBColor(0xf2, 0x8e, 0x2b),
    RGBColor(0xe1, 0x57, 0x59),
    RGBColor(0x76, 0xb7, 0xb2),
    RGBColor(0x59, 0xa1, 0x4f),
    RGBColor(0xed, 0xc9, 0x48),
    RGBColor(0xb0, 0x7a, 0xa1),
    RGBColor(0xff, 0x9d, 0xa7),
    RGBColor(0x9c, 0x75, 0x5f),
    RGBColor(0x79, 0x70, 0x6c),
];

pub(crate) const PANEL_W: u32 = 600;
pub(crate) const PANEL_H: u32 = 440;
const TITLE_H: u32 = 44;
const LEGEND_ROW_H: u32 = 30;
const FONT: &str = "sans-serif";

fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// Grid shape for `n` panels: up to three side by side.
pub(crate) fn grid(n: usize) -> (usize, usize) {
    let cols = match n {
        0 | 1 => 1,
        2 => 2,
        4 => 2,
        _ => 3,
    };
    (cols, n.div_ceil(cols).max(1))
}

/// Legend item width estimate (marker + gap + text) used for wrapping.
fn legend_item_w(name: &str) -> u32 {
    // ~9 px per char at 16 px DejaVu Sans is a safe over-estimate.
    46 + 9 * name.chars().count() as u32 + 24
}

fn legend_rows(series: &[String], width: u32) -> Vec<Vec<usize>> {
    let usable = width.saturating_sub(40).max(1);
    let mut rows: Vec<Vec<usize>> = vec![Vec::new()];
    let mut used = 0;
    for (i, s) in series.iter().enumerate() {
        let w = legend_item_w(s);
        if used + w > usable && !rows.last().is_some_and(Vec::is_empty) {
            rows.push(Vec::new());
            used = 0;
        }
        rows.last_mut().expect("non-empty").push(i);
        used += w;
    }
    rows
}

/// Overall canvas size for a figure.
pub(crate) fn canvas_size(fig: &Figure) -> (u32, u32) {
    let (cols, rows) = grid(fig.panels.len());
    let w = PANEL_W * cols as u32;
    let legend_h = LEGEND_ROW_H * legend_rows(&fig.series, w).len() as u32 + 8;
    (w, TITLE_H + legend_h + PANEL_H * rows as u32)
}

/// A series marker (shape chosen by series index) that is independent of the
/// backend type, so it can be drawn through charts over borrowed backends.
struct Marker<C> {
    at: C,
    kind: usize,
    color: RGBColor,
}

impl<'b, C: 'b> PointCollection<'b, C> for &'b Marker<C> {
    type Point = &'b C;
    type IntoIter = std::iter::Once<&'b C>;
    fn point_iter(self) -> Self::IntoIter {
        std::iter::once(&self.at)
    }
}

impl<C, DB: DrawingBackend> Drawable<DB> for Marker<C> {
    fn draw<I: Iterator<Item = BackendCoord>>(
        &self,
        mut pos: I,
        backend: &mut DB,
        _parent_dim: (u32, u32),
    ) -> std::result::Result<(), DrawingErrorKind<DB::ErrorType>> {
        let Some((x, y)) = pos.next() else {
            return Ok(());
        };
        let fill = self.color.filled();
        match self.kind % 5 {
            0 => backend.draw_circle((x, y), 4, &fill, true),
            1 => backend.fill_polygon([(x, y - 6), (x + 6, y + 4), (x - 6, y + 4)], &fill),
            2 => backend.draw_rect((x - 4, y - 4), (x + 4, y + 4), &fill, true),
            3 => {
                let stroke = self.color.stroke_width(2);
                backend.draw_line((x - 5, y - 5), (x + 5, y + 5), &stroke)?;
                backend.draw_line((x - 5, y + 5), (x + 5, y - 5), &stroke)
            }
            _ => backend.fill_polygon([(x, y - 6), (x + 6, y), (x, y + 6), (x - 6, y)], &fill),
        }
    }
}

fn marker<C>(kind: usize, at: C, color: RGBColor) -> Marker<C> {
    Marker { at, kind, color }
}

/// Compact tick labels: 12000 -> "12k", 0.250 -> "0.25".
pub(crate) fn fmt_tick(v: &f64) -> String {
    let v = *v;
    let a = v.abs();
    let trim = |s: String| {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    };
    if a == 0.0 {
        "0".into()
    } else if a >= 1e6 {
        format!("{}M", trim(format!("{:.2}", v / 1e6)))
    } else if a >= 1e4 {
        format!("{}k", trim(format!("{:.1}", v / 1e3)))
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        trim(format!("{v:.2}"))
    } else if a >= 0.001 {
        trim(format!("{v:.4}"))
    } else {
        format!("{v:.1e}")
    }
}

fn padded_range(lo: f64, hi: f64, frac: f64) -> (f64, f64) {
    if hi > lo {
        let pad = (hi - lo) * frac;
        (lo - pad, hi + pad)
    } else {
        let pad = if lo.abs() > 0.0 { lo.abs() * 0.1 } else { 1.0 };
        (lo - pad, hi + pad)
    }
}

fn err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("drawing failed: {e:?}")
}

pub(crate) fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, fig: &Figure) -> Result<()> {
    root.fill(&WHITE).map_err(err)?;
    let (w, _) = root.dim_in_pixel();

    // Title.
    let (title_area, rest) = root.split_vertically(TITLE_H);
    title_area
        .draw(&Text::new(
            fig.title.clone(),
            (w as i32 / 2, TITLE_H as i32 / 2),
            TextStyle::from((FONT, 26).into_font())
                .color(&BLACK)
                .pos(text_anchor::Pos::new(
                    text_anchor::HPos::Center,
                    text_anchor::VPos::Center,
                )),
        ))
        .map_err(err)?;

    // Shared legend, centred, wrapped onto several rows if needed.
    let rows = legend_rows(&fig.series, w);
    let legend_h = LEGEND_ROW_H * rows.len() as u32 + 8;
    let (legend_area, panels_area) = rest.split_vertically(legend_h);
    let label_style =
        TextStyle::from((FONT, 18).into_font())
            .color(&BLACK)
            .pos(text_anchor::Pos::new(
                text_anchor::HPos::Left,
                text_anchor::VPos::Center,
            ));
    for (r, items) in rows.iter().enumerate() {
        let total: u32 = items.iter().map(|&i| legend_item_w(&fig.series[i])).sum();
        let mut x = (w.saturating_sub(total) / 2) as i32;
        let y = (LEGEND_ROW_H * r as u32 + LEGEND_ROW_H / 2) as i32;
        for &i in items {
            let c = color(i);
            legend_area
                .draw(&PathElement::new(
                    vec![(x, y), (x + 34, y)],
                    c.stroke_width(2),
                ))
                .map_err(err)?;
            legend_area.draw(&marker(i, (x + 17, y), c)).map_err(err)?;
            legend_area
                .draw(&Text::new(
                    fig.series[i].clone(),
                    (x + 42, y),
                    label_style.clone(),
                ))
                .map_err(err)?;
            x += legend_item_w(&fig.series[i]) as i32;
        }
    }

    // Panels.
    let (cols, nrows) = grid(fig.panels.len());
    let cells = panels_area.split_evenly((nrows, cols));
    for (panel, area) in fig.panels.iter().zip(cells.iter()) {
        let pts = || panel.lines.iter().flat_map(|l| l.points.iter());
        let (xmin, xmax) = pts().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| {
            (a.min(p.0), b.max(p.0))
        });
        let (ymin, ymax) = pts().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| {
            (a.min(p.1), b.max(p.1))
        });
        let (x0, x1) = padded_range(xmin, xmax, 0.04);
        let (y0, y1) = if ymin >= 0.0 {
            // Non-negative metrics: anchor at zero so magnitudes compare honestly.
            let hi = if ymax > 0.0 { ymax * 1.08 } else { 1.0 };
            (0.0, hi)
        } else {
            padded_range(ymin, ymax, 0.06)
        };

        let mut chart = ChartBuilder::on(area)
            .caption(&panel.label, (FONT, 20))
            .margin(14)
            .x_label_area_size(48)
            .y_label_area_size(72)
            .build_cartesian_2d(x0..x1, y0..y1)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc(&fig.x_label)
            .y_desc(&panel.label)
            .x_labels(8)
            .y_labels(8)
            .x_label_formatter(&fmt_tick)
            .y_label_formatter(&fmt_tick)
            .label_style((FONT, 15))
            .axis_desc_style((FONT, 17))
            .light_line_style(RGBColor(0xf4, 0xf4, 0xf4))
            .bold_line_style(RGBColor(0xd0, 0xd0, 0xd0))
            .draw()
            .map_err(err)?;

        for line in &panel.lines {
            let c = color(line.series);
            chart
                .draw_series(LineSeries::new(
                    line.points.iter().copied(),
                    c.stroke_width(2),
                ))
                .map_err(err)?;
            chart
                .draw_series(line.points.iter().map(|&p| marker(line.series, p, c)))
                .map_err(err)?;
        }
    }
    Ok(())
}
