//! The results table printed at the end of a run.

use tessera_harness::ResultRow;

/// Render rows as an aligned text table; `params` name extra columns (the
/// swept parameters; a named one, such as `isolation`, shows its name).
pub fn render(rows: &[ResultRow], params: &[&str]) -> String {
    let mut header = vec!["protocol"];
    header.extend(params);
    header.extend([
        "txn/s", "commit%", "p50 ms", "p90 ms", "p99 ms", "msgs/txn", "failed", "check",
    ]);
    let tpcc = rows.iter().any(|r| r.neworder_tps.is_some());
    if tpcc {
        header.extend(["new-orders/s", "consistency"]);
    }
    let mut lines: Vec<Vec<String>> = vec![header.iter().map(|s| s.to_string()).collect()];
    for r in rows {
        let mut l = vec![r.protocol.clone()];
        for p in params {
            let key = p.replace('-', "_");
            let shown = match r.extra.get(&format!("{key}_name")) {
                Some(serde_json::Value::String(name)) => Some(name.clone()),
                _ => r.extra.get(&key).map(|v| v.to_string()),
            };
            l.push(shown.unwrap_or_default());
        }
        l.extend([
            format!("{:.0}", r.throughput_tps),
            format!("{:.1}", r.commit_rate * 100.0),
            format!("{:.3}", r.p50_ms),
            format!("{:.3}", r.p90_ms),
            format!("{:.3}", r.p99_ms),
            format!("{:.2}", r.msgs_per_txn),
            r.failed.to_string(),
            r.check.clone(),
        ]);
        if tpcc {
            l.push(format!("{:.0}", r.neworder_tps.unwrap_or(0.0)));
            l.push(r.tpcc_consistency.clone());
        }
        lines.push(l);
    }
    let cols = lines[0].len();
    let widths: Vec<usize> = (0..cols)
        .map(|c| lines.iter().map(|l| l[c].len()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for (i, l) in lines.iter().enumerate() {
        let cells: Vec<String> = l
            .iter()
            .enumerate()
            .map(|(c, s)| {
                if c == 0 {
                    format!("{s:<w$}", w = widths[c])
                } else {
                    format!("{s:>w$}", w = widths[c])
                }
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
        if i == 0 {
            out.push_str(&"-".repeat(widths.iter().sum::<usize>() + 2 * (cols - 1)));
            out.push('\n');
        }
    }
    if tpcc {
        out.push_str(&by_type(rows));
    }
    out
}

/// Per transaction type: committed per second and commit rate; the loaded
/// size per warehouse.
fn by_type(rows: &[ResultRow]) -> String {
    let mut out = String::from("\nper type (txn/s, commit%, user aborts):\n");
    for r in rows {
        let types: Vec<String> = r
            .by_type
            .iter()
            .map(|t| {
                format!(
                    "{} {:.0} ({:.1}%, {})",
                    t.name,
                    t.throughput_tps,
                    t.commit_rate * 100.0,
                    t.user_aborts
                )
            })
            .collect();
        out.push_str(&format!("  {}: {}\n", r.protocol, types.join(", ")));
    }
    if let Some(b) = rows.iter().find_map(|r| r.bytes_per_warehouse) {
        out.push_str(&format!("loaded: {:.1} MB per warehouse\n", b as f64 / 1e6));
    }
    out
}
