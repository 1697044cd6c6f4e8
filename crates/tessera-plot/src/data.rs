//! Reading result rows and turning them into per-panel, per-series point lists.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use serde_json::Value;

use crate::PlotSpec;

/// Read a JSON-lines file: one JSON value per non-blank line.
///
/// Parse errors name the file and the 1-based line number.
pub fn read_jsonl(path: impl AsRef<Path>) -> Result<Vec<Value>> {
    let path = path.as_ref();
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    parse_jsonl(&text).with_context(|| format!("parsing {}", path.display()))
}

/// Parse JSON-lines text (see [`read_jsonl`]); errors carry `line N:`.
pub fn parse_jsonl(text: &str) -> Result<Vec<Value>> {
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let value: Value =
            serde_json::from_str(line).map_err(|e| anyhow!("line {}: invalid JSON: {e}", i + 1))?;
        rows.push(value);
    }
    Ok(rows)
}

/// Short names accepted for the usual result fields.
const ALIASES: &[(&str, &str)] = &[
    ("throughput", "throughput_tps"),
    ("tps", "throughput_tps"),
    ("p50", "p50_ms"),
    ("p90", "p90_ms"),
    ("p99", "p99_ms"),
    ("msgs", "msgs_per_txn"),
    ("commit", "commit_rate"),
    ("cpu", "server_cpu_us_per_txn"),
    ("neworders", "neworder_tps"),
];

/// The canonical field an alias stands for (or the name itself).
pub fn alias_target(name: &str) -> &str {
    ALIASES
        .iter()
        .find(|(a, _)| *a == name)
        .map(|(_, t)| *t)
        .unwrap_or(name)
}

/// Human-friendly axis label for well-known fields.
pub(crate) fn pretty_label(field: &str) -> String {
    match field {
        "throughput_tps" => "throughput (txn/s)".into(),
        "commit_rate" => "commit rate".into(),
        "abort_rate" => "abort rate".into(),
        "p50_ms" => "p50 latency (ms)".into(),
        "p90_ms" => "p90 latency (ms)".into(),
        "p99_ms" => "p99 latency (ms)".into(),
        "msgs_per_txn" => "messages / txn".into(),
        "server_cpu_us_per_txn" => "server CPU per committed txn (µs)".into(),
        "neworder_tps" => "new-orders/s".into(),
        other => other.to_string(),
    }
}

fn num(v: Option<&Value>) -> Option<f64> {
    v.and_then(Value::as_f64).filter(|f| f.is_finite())
}

/// Sorted names of the fields that are numeric in at least one row.
pub(crate) fn numeric_fields(rows: &[&serde_json::Map<String, Value>]) -> Vec<String> {
    let set: BTreeSet<&str> = rows
        .iter()
        .flat_map(|r| r.iter())
        .filter(|(_, v)| num(Some(v)).is_some())
        .map(|(k, _)| k.as_str())
        .collect();
    set.into_iter().map(str::to_string).collect()
}

/// Resolve a user-given field name (possibly an alias) to a field that is
/// numeric in at least one row. The literal name wins over the alias.
fn resolve_field(
    rows: &[&serde_json::Map<String, Value>],
    name: &str,
    role: &str,
) -> Result<String> {
    let name = name.trim();
    if name.is_empty() {
        bail!("empty {role} field name");
    }
    let has = |f: &str| rows.iter().any(|r| num(r.get(f)).is_some());
    if has(name) {
        return Ok(name.to_string());
    }
    let target = alias_target(name);
    if target != name && has(target) {
        return Ok(target.to_string());
    }
    let present = numeric_fields(rows);
    let listed = if present.is_empty() {
        "(none)".to_string()
    } else {
        present.join(", ")
    };
    let alias_note = if target != name {
        format!(" (alias for `{target}`)")
    } else {
        String::new()
    };
    let kind_note = if rows
        .iter()
        .any(|r| r.contains_key(name) || r.contains_key(target))
    {
        "is not numeric in any row"
    } else {
        "is not present in any row"
    };
    bail!("unknown {role} field `{name}`{alias_note}: it {kind_note}; numeric fields present: {listed}")
}

/// One line on a panel.
#[derive(Debug, Clone)]
pub(crate) struct Line {
    /// Index into [`Figure::series`] (fixes colour and marker).
    pub series: usize,
    /// Points sorted by x; repeated x values are averaged.
    pub points: Vec<(f64, f64)>,
}

/// One y metric.
#[derive(Debug, Clone)]
pub(crate) struct Panel {
    pub label: String,
    pub lines: Vec<Line>,
}

/// Everything the renderer needs.
#[derive(Debug, Clone)]
pub(crate) struct Figure {
    pub title: String,
    pub x_label: String,
    pub series: Vec<String>,
    pub panels: Vec<Panel>,
}

fn series_key(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

pub(crate) fn prepare(rows: &[Value], spec: &PlotSpec) -> Result<Figure> {
    if rows.is_empty() {
        bail!("no result rows to plot");
    }
    if spec.ys.iter().all(|y| y.trim().is_empty()) {
        bail!("no y metric given (e.g. throughput, commit_rate, p90)");
    }
    let objs: Vec<&serde_json::Map<String, Value>> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| {
            r.as_object()
                .ok_or_else(|| anyhow!("row {} is not a JSON object", i + 1))
        })
        .collect::<Result<_>>()?;

    // x: every row must carry it, as a number.
    let x_field = {
        let literal = spec.x.trim();
        let target = alias_target(literal);
        if literal.is_empty() {
            bail!("empty x field name");
        }
        if objs.iter().any(|r| r.contains_key(literal))
            || !objs.iter().any(|r| r.contains_key(target))
        {
            literal.to_string()
        } else {
            target.to_string()
        }
    };
    let mut xs = Vec::with_capacity(objs.len());
    for (i, r) in objs.iter().enumerate() {
        match r.get(&x_field) {
            None | Some(Value::Null) => {
                let mut keys: Vec<&str> = r.keys().map(String::as_str).collect();
                keys.sort_unstable();
                bail!(
                    "row {} has no x field `{x_field}` (fields in that row: {}); numeric fields across rows: {}",
                    i + 1,
                    keys.join(", "),
                    numeric_fields(&objs).join(", ")
                );
            }
            Some(v) => match num(Some(v)) {
                Some(x) => xs.push(x),
                None => bail!(
                    "row {}: x field `{x_field}` is not a number (got {v})",
                    i + 1
                ),
            },
        }
    }

    // Series, sorted by name so a protocol keeps its colour across figures
    // regardless of row order.
    let keys: Vec<Option<String>> = objs
        .iter()
        .map(|r| series_key(r.get(&spec.series)))
        .collect();
    let single = keys.iter().all(Option::is_none);
    let names: Vec<String> = keys
        .iter()
        .map(|k| match k {
            Some(s) => s.clone(),
            None if single => "all".to_string(),
            None => format!("(no {})", spec.series),
        })
        .collect();
    let series: Vec<String> = names
        .iter()
        .cloned()
        .collect::<BTreeSet<String>>()
        .into_iter()
        .collect();
    let series_idx: Vec<usize> = names
        .iter()
        .map(|n| series.binary_search(n).expect("name is in the set"))
        .collect();

    let mut panels = Vec::new();
    for y in spec.ys.iter().filter(|y| !y.trim().is_empty()) {
        let field = resolve_field(&objs, y, "y")?;
        // (series, x bits) -> (sum, count)
        let mut acc: Vec<HashMap<u64, (f64, f64, u32)>> = vec![HashMap::new(); series.len()];
        for (i, r) in objs.iter().enumerate() {
            if let Some(v) = num(r.get(&field)) {
                let x = xs[i];
                let key = if x == 0.0 { 0 } else { x.to_bits() };
                let e = acc[series_idx[i]].entry(key).or_insert((x, 0.0, 0));
                e.1 += v;
                e.2 += 1;
            }
        }
        let lines = acc
            .into_iter()
            .enumerate()
            .filter(|(_, m)| !m.is_empty())
            .map(|(s, m)| {
                let mut points: Vec<(f64, f64)> = m
                    .into_values()
                    .map(|(x, sum, n)| (x, sum / n as f64))
                    .collect();
                points.sort_by(|a, b| a.0.total_cmp(&b.0));
                Line { series: s, points }
            })
            .collect();
        panels.push(Panel {
            label: pretty_label(&field),
            lines,
        });
    }

    let title = match &spec.title {
        Some(t) => t.clone(),
        None => {
            let metrics: Vec<&str> = panels.iter().map(|p| p.label.as_str()).collect();
            let mut t = format!("{} vs {}", metrics.join(", "), x_field);
            let workloads: BTreeSet<String> = objs
                .iter()
                .filter_map(|r| series_key(r.get("workload")))
                .collect();
            if workloads.len() == 1 {
                t.push_str(&format!(
                    " — {}",
                    workloads.into_iter().next().unwrap_or_default()
                ));
            }
            t
        }
    };

    Ok(Figure {
        title,
        x_label: pretty_label(&x_field),
        series,
        panels,
    })
}
