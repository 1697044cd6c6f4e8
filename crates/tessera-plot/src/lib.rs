//! Plotting tessera experiment results (JSON lines) to PNG or SVG.
//!
//! ```no_run
//! use tessera_plot::{plot, read_jsonl, PlotSpec};
//! let rows = read_jsonl("results.jsonl")?;
//! let spec = PlotSpec::new("zipf", ["throughput", "commit_rate", "p90"]);
//! plot(&rows, &spec, std::path::Path::new("fig.png"))?;
//! # anyhow::Ok(())
//! ```
//!
//! One panel per y metric (up to three side by side, then further rows), one
//! line with markers per value of [`PlotSpec::series`], points sorted by x.
//! Rows that share a series and an x value are averaged (e.g. repeated seeds).
//!
//! Text is rendered with DejaVu Sans embedded in the binary (via the `dejavu`
//! crate), so PNG output needs no system fonts or fontconfig.

mod data;
mod render;

use std::path::Path;
use std::sync::OnceLock;

use anyhow::{anyhow, bail, Context, Result};
use plotters::prelude::*;
use serde_json::Value;

pub use data::{alias_target, parse_jsonl, read_jsonl};

/// What to plot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlotSpec {
    /// Numeric field on the x axis (e.g. `zipf`, `clients`).
    pub x: String,
    /// Metrics, one panel each. Aliases: `throughput`, `p50`, `p90`, `p99`,
    /// `msgs`, `commit` (see [`alias_target`]); any numeric field works.
    pub ys: Vec<String>,
    /// Field whose values make the separate lines; default `protocol`.
    pub series: String,
    /// Figure title; a default is derived from the metrics when `None`.
    pub title: Option<String>,
}

impl PlotSpec {
    /// A spec with `series = "protocol"` and no explicit title.
    pub fn new<S: Into<String>>(x: impl Into<String>, ys: impl IntoIterator<Item = S>) -> Self {
        Self {
            x: x.into(),
            ys: ys.into_iter().map(Into::into).collect(),
            series: "protocol".to_string(),
            title: None,
        }
    }
}

/// Register the embedded font with plotters (once per process).
fn ensure_fonts() -> Result<()> {
    static FONTS: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    FONTS
        .get_or_init(|| {
            let regular = dejavu::sans::regular();
            for family in ["sans-serif", "serif", "monospace"] {
                plotters::style::register_font(family, FontStyle::Normal, regular)
                    .map_err(|_| "embedded DejaVu Sans font failed to parse".to_string())?;
            }
            Ok(())
        })
        .clone()
        .map_err(|e| anyhow!(e))
}

enum Format {
    Png,
    Svg,
}

fn format_of(out: &Path) -> Result<Format> {
    let ext = out
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("png") => Ok(Format::Png),
        Some("svg") => Ok(Format::Svg),
        Some(other) => bail!(
            "unsupported output format `.{other}` for {}: use .png or .svg",
            out.display()
        ),
        None => bail!(
            "output {} has no extension: use .png or .svg",
            out.display()
        ),
    }
}

/// Render `rows` according to `spec` into `out` (`.png` or `.svg`).
pub fn plot(rows: &[Value], spec: &PlotSpec, out: &Path) -> Result<()> {
    let format = format_of(out)?;
    let fig = data::prepare(rows, spec)?;
    ensure_fonts()?;
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating output directory {}", dir.display()))?;
    }
    let size = render::canvas_size(&fig);
    let ctx = || format!("writing {}", out.display());
    match format {
        Format::Png => {
            let root = BitMapBackend::new(out, size).into_drawing_area();
            render::draw(&root, &fig).with_context(ctx)?;
            root.present()
                .map_err(|e| anyhow!("{e:?}"))
                .with_context(ctx)?;
        }
        Format::Svg => {
            let root = SVGBackend::new(out, size).into_drawing_area();
            render::draw(&root, &fig).with_context(ctx)?;
            root.present()
                .map_err(|e| anyhow!("{e:?}"))
                .with_context(ctx)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn synthetic() -> Vec<Value> {
        let mut rows = Vec::new();
        for (pi, proto) in ["2pl", "occ", "tapir", "calvin"].iter().enumerate() {
            for (k, zipf) in [0.0, 0.5, 0.8, 0.9, 0.99, 1.2].iter().enumerate() {
                let contention = zipf * zipf;
                rows.push(json!({
                    "protocol": proto,
                    "workload": "ycsb",
                    "runtime": "sim",
                    "zipf": zipf,
                    "throughput_tps": 42000.0 * (1.0 - 0.12 * pi as f64) / (1.0 + contention * (1.0 + pi as f64 * 0.4)),
                    "commit_rate": 1.0 - 0.15 * contention * (1.0 + pi as f64 * 0.3),
                    "p50_ms": 1.2 + 0.3 * k as f64 + 0.2 * pi as f64,
                    "p90_ms": 3.0 + 1.5 * contention * (1 + pi) as f64,
                    "p99_ms": 9.0 + 6.0 * contention * (1 + pi) as f64,
                    "msgs_per_txn": 4.0 + pi as f64,
                }));
            }
        }
        // Rows listed out of x order must still be drawn sorted.
        rows.reverse();
        rows
    }

    fn spec() -> PlotSpec {
        PlotSpec::new("zipf", ["throughput", "commit_rate", "p90"])
    }

    #[test]
    fn png_and_svg_are_written() {
        let dir = tempfile::tempdir().unwrap();
        let rows = synthetic();

        let png = dir.path().join("fig.png");
        plot(&rows, &spec(), &png).unwrap();
        let bytes = std::fs::read(&png).unwrap();
        assert!(bytes.len() > 1000, "png too small: {}", bytes.len());
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");

        let svg = dir.path().join("sub/fig.SVG");
        plot(&rows, &spec(), &svg).unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.starts_with("<svg"), "{}", &text[..text.len().min(80)]);
        for needle in [
            "tapir",
            "throughput (txn/s)",
            "p90 latency (ms)",
            "commit rate",
        ] {
            assert!(text.contains(needle), "svg lacks {needle}");
        }

        // Five metrics: a 3 + 2 grid.
        let all = PlotSpec {
            title: Some("all metrics".into()),
            ..PlotSpec::new("zipf", ["throughput", "commit_rate", "p50", "p99", "msgs"])
        };
        let grid = dir.path().join("grid.png");
        plot(&rows, &all, &grid).unwrap();
        assert_eq!(&std::fs::read(&grid).unwrap()[..4], b"\x89PNG");

        // `TESSERA_PLOT_SAMPLE=/tmp/x.png cargo test` keeps copies to look at.
        if let Ok(sample) = std::env::var("TESSERA_PLOT_SAMPLE") {
            plot(&rows, &spec(), Path::new(&sample)).unwrap();
            plot(&rows, &all, &Path::new(&sample).with_extension("grid.png")).unwrap();
        }
    }

    #[test]
    fn single_metric_and_no_series_field() {
        let dir = tempfile::tempdir().unwrap();
        let rows: Vec<Value> = (1..=5)
            .map(|c| json!({"clients": c * 8, "throughput_tps": 1000 * c}))
            .collect();
        let out = dir.path().join("one.png");
        plot(&rows, &PlotSpec::new("clients", ["tps"]), &out).unwrap();
        assert!(std::fs::metadata(&out).unwrap().len() > 500);
    }

    #[test]
    fn points_sorted_and_duplicates_averaged() {
        let rows = vec![
            json!({"protocol": "a", "x": 2, "y": 10}),
            json!({"protocol": "a", "x": 1, "y": 5}),
            json!({"protocol": "a", "x": 2, "y": 20}),
            json!({"protocol": "b", "x": 1, "y": 1}),
        ];
        let fig = data::prepare(&rows, &PlotSpec::new("x", ["y"])).unwrap();
        assert_eq!(fig.series, vec!["a", "b"]);
        let rows: Vec<Value> = ["zz", "aa", "mm"]
            .iter()
            .map(|p| json!({"protocol": p, "x": 1, "y": 1}))
            .collect();
        let fig2 = data::prepare(&rows, &PlotSpec::new("x", ["y"])).unwrap();
        assert_eq!(fig2.series, vec!["aa", "mm", "zz"]);
        assert_eq!(fig.panels[0].lines[0].points, vec![(1.0, 5.0), (2.0, 15.0)]);
        assert_eq!(fig.panels[0].lines[1].points, vec![(1.0, 1.0)]);
    }

    #[test]
    fn unknown_y_field_is_named_with_numeric_fields_listed() {
        let dir = tempfile::tempdir().unwrap();
        let err = plot(
            &synthetic(),
            &PlotSpec::new("zipf", ["throughput", "latency"]),
            &dir.path().join("x.png"),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("`latency`"), "{err}");
        assert!(err.contains("numeric fields present"), "{err}");
        assert!(
            err.contains("p99_ms") && err.contains("throughput_tps"),
            "{err}"
        );
        assert!(!err.contains("protocol"), "non-numeric listed: {err}");
        assert!(!dir.path().join("x.png").exists());

        // A field that exists but is not numeric.
        let err = data::prepare(&synthetic(), &PlotSpec::new("zipf", ["workload"]))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("`workload`") && err.contains("not numeric"),
            "{err}"
        );
    }

    #[test]
    fn missing_x_is_an_error_naming_it() {
        let mut rows = synthetic();
        rows[3].as_object_mut().unwrap().remove("zipf");
        let err = data::prepare(&rows, &spec()).unwrap_err().to_string();
        assert!(err.contains("row 4") && err.contains("`zipf`"), "{err}");

        let err = data::prepare(&synthetic(), &PlotSpec::new("clients", ["p90"]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("`clients`"), "{err}");

        let rows = vec![json!({"protocol": "a", "zipf": "high", "p90_ms": 1})];
        let err = data::prepare(&rows, &spec()).unwrap_err().to_string();
        assert!(err.contains("not a number"), "{err}");
    }

    #[test]
    fn bad_output_extension() {
        let err = plot(&synthetic(), &spec(), Path::new("/tmp/fig.jpg"))
            .unwrap_err()
            .to_string();
        assert!(err.contains(".jpg") && err.contains(".png"), "{err}");
    }

    #[test]
    fn read_jsonl_reports_line_numbers() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.jsonl");
        std::fs::write(&p, "{\"a\":1}\n\n{\"a\":2}\n{oops}\n").unwrap();
        let err = format!("{:#}", read_jsonl(&p).unwrap_err());
        assert!(err.contains("line 4"), "{err}");
        assert!(err.contains("r.jsonl"), "{err}");

        std::fs::write(&p, "{\"a\":1}\n\n{\"a\":2}\n").unwrap();
        assert_eq!(read_jsonl(&p).unwrap().len(), 2);
    }

    #[test]
    fn tick_format() {
        assert_eq!(render::fmt_tick(&0.0), "0");
        assert_eq!(render::fmt_tick(&12000.0), "12k");
        assert_eq!(render::fmt_tick(&12500.0), "12.5k");
        assert_eq!(render::fmt_tick(&2_500_000.0), "2.5M");
        assert_eq!(render::fmt_tick(&0.25), "0.25");
        assert_eq!(render::fmt_tick(&1.5), "1.5");
        assert_eq!(render::fmt_tick(&250.0), "250");
    }
}
