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
