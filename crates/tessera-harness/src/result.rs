//! One row of results: one (protocol, point) of a run, as a JSON object.

use serde::{Deserialize, Serialize};

/// The JSON object written per (protocol, point) with `--out`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ResultRow {
    pub protocol: String,
    pub workload: String,
    pub runtime: String,
    pub shards: u32,
    pub clients: u32,
    pub zipf: f64,
    pub seed: u64,
    /// Length of the measurement window, seconds.
    pub window_s: f64,
    pub throughput_tps: f64,
    /// Commits / attempts, inside the window.
    pub commit_rate: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub msgs_per_txn: f64,
    pub bytes_per_txn: f64,
    pub committed: u64,
    pub attempts: u64,
    /// Transactions given up after the retry cap.
    pub failed: u64,
    /// `pass`, `fail` or `skipped`.
    pub check: String,
    /// The first violation when `check` is `fail`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub check_detail: Option<String>,
    /// Per transaction type: (name, committed per second, commit rate).
    #[serde(default)]
    pub by_type: Vec<TypeRow>,
    /// Server CPU time per committed transaction, µs (simulator only: the
    /// modelled per-event cost plus what nodes charged).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub server_cpu_us_per_txn: Option<f64>,
    /// The protocol's own counters over the whole run (e.g. NOCC's aborts
    /// at the switch and at the store).
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty", default)]
    pub counters: std::collections::BTreeMap<String, u64>,
    /// `--timeline`: the window length, ms, and the throughput of each
    /// window over the whole run from time 0 (warm-up and cool-down
    /// included), txn/s.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub timeline_ms: Option<f64>,
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub timeline_tps: Vec<f64>,
    /// `--timeline`: the protocol's values over time, per name, as
    /// `[time ms, value]` at each change (e.g. OOCC's `lease_ns`).
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty", default)]
    pub samples: std::collections::BTreeMap<String, Vec<[f64; 2]>>,
    /// The workload's own consistency conditions on the final stores (TPC-C
    /// clause 3.3.2): `pass`, `fail` or `skipped` (no `--check`, or a
    /// workload without conditions).
    #[serde(default = "skipped")]
    pub tpcc_consistency: String,
    /// The first violated condition when `tpcc_consistency` is `fail`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub tpcc_consistency_detail: Option<String>,
    /// TPC-C: committed NewOrders per second (the papers' new-orders/s).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub neworder_tps: Option<f64>,
    /// TPC-C: bytes of the loaded database per warehouse (all shards'
    /// stores right after loading, replicated tables included).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub bytes_per_warehouse: Option<u64>,
    /// The swept parameter's name and value, when part of a sweep.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

fn skipped() -> String {
    "skipped".into()
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct TypeRow {
    pub name: String,
    pub throughput_tps: f64,
    pub commit_rate: f64,
    /// Rolled back by the procedure itself (TPC-C's invalid item), in the
    /// window; counted in the attempts, never retried.
    #[serde(default)]
    pub user_aborts: u64,
}

/// `--timeline` rows as points over time for a plot: one per window, with
/// `time_ms` (the window's middle), `throughput_tps`, each sample's value
/// at the window's end (`lease_ns` as `lease_us`, others by name) and
/// `line`: the protocol and the value of `param` (a row field), so that
/// each run makes one line. Rows without a timeline give none.
pub fn timeline_points(rows: &[ResultRow], param: &str) -> Vec<serde_json::Value> {
    let mut points = Vec::new();
    for r in rows {
        let Some(w) = r.timeline_ms else { continue };
        let line = match r.extra.get(param) {
            Some(v) => format!("{} {param}={v}", r.protocol),
            None => r.protocol.clone(),
        };
        for (i, &tps) in r.timeline_tps.iter().enumerate() {
            let end = (i + 1) as f64 * w;
            let mut p = serde_json::Map::new();
            p.insert("line".into(), line.clone().into());
            p.insert("time_ms".into(), ((i as f64 + 0.5) * w).into());
            p.insert("throughput_tps".into(), tps.into());
            for (name, series) in &r.samples {
                let Some(&[_, v]) = series.iter().rev().find(|[t, _]| *t < end) else {
                    continue;
                };
                match name.strip_suffix("_ns") {
                    Some(stem) => p.insert(format!("{stem}_us"), (v / 1e3).into()),
                    None => p.insert(name.clone(), v.into()),
                };
            }
            points.push(serde_json::Value::Object(p));
        }
    }
    points
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeline_points_carry_each_window_and_the_sample_in_force() {
        let mut extra = serde_json::Map::new();
        extra.insert("oocc_lease_adapt".into(), 1.0.into());
        let row = ResultRow {
            protocol: "oocc".into(),
            workload: "ycsb".into(),
            runtime: "sim".into(),
            shards: 2,
            clients: 1,
            zipf: 0.0,
            seed: 1,
            window_s: 0.003,
            throughput_tps: 0.0,
            commit_rate: 1.0,
            p50_ms: 0.0,
            p90_ms: 0.0,
            p99_ms: 0.0,
            p999_ms: 0.0,
            msgs_per_txn: 0.0,
            bytes_per_txn: 0.0,
            committed: 0,
            attempts: 0,
            failed: 0,
            check: "skipped".into(),
            check_detail: None,
            by_type: Vec::new(),
            server_cpu_us_per_txn: None,
            counters: Default::default(),
            timeline_ms: Some(1.0),
            timeline_tps: vec![10.0, 20.0, 30.0],
            samples: [("lease_ns".to_string(), vec![[0.0, 4_000.0], [1.5, 7_000.0]])]
                .into_iter()
                .collect(),
            tpcc_consistency: "skipped".into(),
            tpcc_consistency_detail: None,
            neworder_tps: None,
            bytes_per_warehouse: None,
            extra,
        };
        let points = timeline_points(&[row], "oocc_lease_adapt");
        let got: Vec<(f64, f64, f64)> = points
            .iter()
            .map(|p| {
                let f = |k: &str| p[k].as_f64().unwrap();
                (f("time_ms"), f("throughput_tps"), f("lease_us"))
            })
            .collect();
        // The lease set at 1.5 ms is in force at the end of windows 2 and 3.
        assert_eq!(
            got,
            vec![(0.5, 10.0, 4.0), (1.5, 20.0, 7.0), (2.5, 30.0, 7.0)]
        );
        assert_eq!(points[0]["line"], "oocc oocc_lease_adapt=1.0");
    }
}
