//! Run a spec: build the workload, run the protocol, aggregate, check.

use crate::deploy::RawRun;
use crate::registry;
use crate::result::{ResultRow, TypeRow};
use crate::spec::{BenchSpec, WorkloadSpec};
use std::fs::File;
use std::io::BufWriter;
use std::sync::Arc;
use tessera_checker::Report;
use tessera_core::history::History;
use tessera_core::ids::MS;
use tessera_core::stats::ClientStats;
use tessera_core::workload::Workload;
use tessera_protocols::rococo::offline;
use tessera_workloads::{Counter, Micro, TaoBench, Tatp, Tpcc, Ycsb};

/// The result of one run.
pub struct BenchOutcome {
    pub row: ResultRow,
    /// The isolation checker's report, when the spec asked for a check.
    pub check: Option<Report>,
    pub history: Option<History>,
    /// The workload's consistency violations on the final stores, when the
    /// spec asked for a check and the workload defines conditions.
    pub consistency: Option<Vec<String>>,
    pub raw: RawRun,
}

/// Build the workload of a spec.
pub fn workload(spec: &WorkloadSpec) -> anyhow::Result<Arc<dyn Workload>> {
    Ok(match spec {
        WorkloadSpec::Micro(c) => Arc::new(Micro::new(*c)?),
        WorkloadSpec::Ycsb(c) => Arc::new(Ycsb::new(*c)?),
        WorkloadSpec::Counter(c) => Arc::new(Counter::new(*c)?),
        WorkloadSpec::Tpcc(c) => Arc::new(Tpcc::new(*c)?),
        WorkloadSpec::Tatp(c) => Arc::new(Tatp::new(*c)?),
        WorkloadSpec::TaoBench(c) => Arc::new(TaoBench::new(*c)?),
    })
}

/// Rococo's offline SC-graph check (§3.1) of a workload's transaction
/// profiles.
pub fn check_workload(spec: &WorkloadSpec) -> anyhow::Result<offline::Verdict> {
    let wl = workload(spec)?;
    offline::check(&wl.profiles()).map_err(|e| anyhow::anyhow!("--workload {}: {e}", spec.name()))
}

/// Run `spec` to the end and measure it.
pub fn run_bench(spec: &BenchSpec) -> anyhow::Result<BenchOutcome> {
    spec.validate()?;
    let entry = registry::find(&spec.protocol)?;
    let wl = workload(&spec.workload)?;
    let raw = entry.run(spec, wl.clone())?;
    let mut stats = ClientStats::default();
    let mut history = History::default();
    for c in &raw.clients {
        stats.merge(&c.stats);
        history.txns.extend(c.history.iter().cloned());
    }
    let record = raw.client_config.record_history;
    let history = record.then_some(history);
    if let (Some(path), Some(h)) = (&spec.history, &history) {
        let f =
            File::create(path).map_err(|e| anyhow::anyhow!("--history {}: {e}", path.display()))?;
        tessera_checker::write_elle(h, BufWriter::new(f))?;
    }
    let check = match (&history, spec.check) {
        (Some(h), true) => Some(check_history(
            h,
            raw.client_config.record_columns,
            entry.level(spec),
        )),
        _ => None,
    };
    let consistency = if spec.check {
        wl.check_consistency(&raw.stores)
    } else {
        None
    };
    let mut row = row(spec, &raw, &stats, check.as_ref(), consistency.as_deref());
    // Across real processes a lost write is a durability bug the
    // isolation checker cannot see (nobody may read the key again).
    let lost = match (&history, spec.check, spec.runtime) {
        (Some(h), true, crate::RuntimeKind::Tcp) => lost_writes(h, &raw.stores),
        _ => Vec::new(),
    };
    if let Some(first) = lost.first() {
        row.check = "fail".into();
        row.check_detail = Some(format!("{} lost writes; first: {first}", lost.len()));
    }
    Ok(BenchOutcome {
        row,
        check,
        history,
        consistency,
        raw,
    })
}

/// `--check`'s report on `history` at the granularity it was recorded
/// at: per column where the clients recorded the columns of writes, which
/// they do exactly when the configured run orders conflicts per column
/// ([`registry::ProtocolEntry::checks_per_column`]), per row otherwise.
pub fn check_history(history: &History, per_column: bool, level: tessera_checker::Level) -> Report {
    match per_column {
        true => tessera_checker::check_columns(history, level),
        false => tessera_checker::check(history, level),
    }
}

fn row(
    spec: &BenchSpec,
    raw: &RawRun,
    s: &ClientStats,
    check: Option<&Report>,
    consistency: Option<&[String]>,
) -> ResultRow {
    let cc = &raw.client_config;
    let window_s = (cc.measure_until - cc.measure_from) as f64 / 1e9;
    let per_s = |n: u64| n as f64 / window_s;
    let rate = |c: u64, a: u64| if a == 0 { 0.0 } else { c as f64 / a as f64 };
    let per_txn = |n: u64| {
        if s.run_committed == 0 {
            0.0
        } else {
            n as f64 / s.run_committed as f64
        }
    };
    let (check_s, detail) = match check {
        None => ("skipped".to_string(), None),
        Some(r) if r.ok => ("pass".to_string(), None),
        Some(r) => (
            "fail".to_string(),
            r.violations.first().map(|v| v.to_string()),
        ),
    };
    let (consistency_s, consistency_detail) = match consistency {
        None => ("skipped".to_string(), None),
        Some([]) => ("pass".to_string(), None),
        Some(v) => ("fail".to_string(), v.first().cloned()),
    };
    let tpcc = match &spec.workload {
        WorkloadSpec::Tpcc(c) => Some(c),
        _ => None,
    };
    let neworder = s
        .by_type
        .iter()
        .find(|(n, _)| *n == tessera_workloads::tpcc::NEWORDER)
        .map_or(0, |(_, c)| c.committed);
    ResultRow {
        protocol: spec.protocol.clone(),
        workload: spec.workload.name().to_string(),
        runtime: spec.runtime.name().to_string(),
        shards: spec.workload.shards(),
        clients: spec.effective_clients(),
        zipf: spec.workload.zipf(),
        seed: spec.seed,
        window_s,
        throughput_tps: per_s(s.total.committed),
        commit_rate: rate(s.total.committed, s.total.attempts),
        p50_ms: s.latency_ms(0.5),
        p90_ms: s.latency_ms(0.9),
        p99_ms: s.latency_ms(0.99),
        p999_ms: s.latency_ms(0.999),
        msgs_per_txn: per_txn(raw.net.messages),
        bytes_per_txn: per_txn(raw.net.bytes),
        committed: s.total.committed,
        attempts: s.total.attempts,
        failed: s.total.failed,
        check: check_s,
        check_detail: detail,
        by_type: s
            .by_type
            .iter()
            .map(|(n, c)| TypeRow {
                name: n.to_string(),
                throughput_tps: per_s(c.committed),
                commit_rate: rate(c.committed, c.attempts),
                user_aborts: c.user_aborts,
            })
            .collect(),
        server_cpu_us_per_txn: (raw.server_busy > 0 && s.run_committed > 0)
            .then(|| raw.server_busy as f64 / 1e3 / s.run_committed as f64),
        counters: raw
            .counters
            .iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect(),
        timeline_ms: spec.timeline.map(|w| w as f64 / 1e6),
        timeline_tps: spec.timeline.map_or_else(Vec::new, |w| {
            let w_s = w as f64 / 1e9;
            s.timeline.iter().map(|&n| n as f64 / w_s).collect()
        }),
        samples: spec.timeline.map_or_else(Default::default, |_| {
            let mut m: std::collections::BTreeMap<String, Vec<[f64; 2]>> = Default::default();
            for &(name, t, v) in &raw.samples {
                m.entry(name.to_string())
                    .or_default()
                    .push([t as f64 / 1e6, v as f64]);
            }
            m
        }),
        tpcc_consistency: consistency_s,
        tpcc_consistency_detail: consistency_detail,
        neworder_tps: tpcc.map(|_| per_s(neworder)),
        bytes_per_warehouse: tpcc.map(|c| raw.loaded_bytes / u64::from(c.warehouses.max(1))),
        extra: serde_json::Map::new(),
    }
}

/// Writes of committed transactions missing from the final stores.
///
/// For every key a committed transaction wrote, the store's final version
/// must be the write of a committed (or unknown-outcome) attempt `W` — not
/// the initial version, not an aborted attempt's — and no committed writer
/// of the key may have started after `W` ended: strict serializability
/// would order that writer after `W`, so its write would be the final one.
/// Where the store keeps column versions ([`Store::writers`], a protocol
/// checked per column), this holds per column: for each set of columns
/// with one last writer `W`, among the committed writers of those columns.
///
/// [`Store::writers`]: tessera_core::storage::Store::writers
pub fn lost_writes(history: &History, stores: &[tessera_core::storage::Store]) -> Vec<String> {
    use tessera_core::history::{HistoryTxn, Outcome};
    use tessera_core::ids::{Key, TxnId, Version};
    use tessera_core::txn::Columns;
    let mut writers: std::collections::BTreeMap<Key, Vec<usize>> = Default::default();
    let mut by_id: tessera_core::FastMap<TxnId, usize> = tessera_core::fast_map();
    for (i, t) in history.txns.iter().enumerate() {
        if t.outcome == Outcome::Aborted {
            continue;
        }
        by_id.insert(t.id, i);
        for k in &t.writes {
            writers.entry(*k).or_default().push(i);
        }
    }
    // The columns of `key` that `t` wrote, as a mask (0: all).
    let wrote = |t: &HistoryTxn, key: Key| {
        t.writes
            .iter()
            .position(|&k| k == key)
            .map_or(Columns::ALL, |i| {
                t.write_columns.get(i).copied().unwrap_or(Columns::ALL)
            })
    };
    let meet = |a: Columns, b: Columns| a.bits() & b.bits() != 0;
    let mut lost = Vec::new();
    for (key, ws) in writers {
        let last_writers = stores.iter().find(|s| s.get(key).is_some()).map_or_else(
            || vec![(Columns::ALL, Version::INITIAL)],
            |s| s.writers(key),
        );
        for (columns, version) in last_writers {
            let committed = || {
                ws.iter()
                    .map(|&i| &history.txns[i])
                    .filter(|t| t.outcome == Outcome::Committed)
                    .filter(|t| meet(wrote(t, key), columns))
            };
            if committed().next().is_none() {
                continue;
            }
            let at = match columns {
                Columns::ALL => format!("key {key}"),
                c => format!("key {key} columns {:#x}", c.0),
            };
            // An attempt whose outcome is unknown may not have resolved its
            // keys (a TPC-C Payment by last name lists a placeholder
            // customer row): any write of its into the key's table may be
            // this one.
            let last = by_id
                .get(&TxnId(version.0))
                .map(|&i| &history.txns[i])
                .filter(|w| {
                    w.writes.contains(&key)
                        || (w.outcome == Outcome::Unknown
                            && w.writes.iter().any(|k| k.table == key.table))
                });
            match last {
                None => lost.push(format!(
                    "{at}: final version {version:?} is no committed write (committed writers: {:?})",
                    committed().map(|t| t.id).collect::<Vec<_>>()
                )),
                Some(w) => {
                    if let Some(t) = committed().find(|t| t.start > w.end) {
                        lost.push(format!(
                            "{at}: {:?} committed after {:?} ended, but the store holds {:?}'s write",
                            t.id, w.id, w.id
                        ));
                    }
                }
            }
        }
    }
    lost
}

/// A duration in milliseconds, for messages.
pub fn ms(t: u64) -> u64 {
    t / MS
}

#[cfg(test)]
mod tests {
    use super::lost_writes;
    use tessera_core::history::{History, HistoryTxn, Outcome};
    use tessera_core::ids::{Key, NodeId, TxnId};
    use tessera_core::storage::Store;

    fn txn(seq: u32, start: u64, end: u64, writes: &[Key], outcome: Outcome) -> HistoryTxn {
        HistoryTxn {
            id: TxnId::new(NodeId(3), 0, seq),
            process: 0,
            start,
            end,
            reads: Vec::new(),
            writes: writes.to_vec(),
            write_columns: Vec::new(),
            outcome,
        }
    }

    /// A store holding `key` as written by attempt `seq`.
    fn store(key: Key, seq: u32) -> Vec<Store> {
        let mut s = Store::new();
        s.install(
            key,
            Default::default(),
            TxnId::new(NodeId(3), 0, seq).version(),
        );
        vec![s]
    }

    #[test]
    fn the_last_committed_write_is_no_loss() {
        let k = Key::new(2, 7);
        let h = History {
            txns: vec![
                txn(1, 0, 10, &[k], Outcome::Committed),
                txn(2, 20, 30, &[k], Outcome::Committed),
            ],
        };
        assert!(lost_writes(&h, &store(k, 2)).is_empty());
        // The earlier write survived a later committed one: lost.
        assert_eq!(lost_writes(&h, &store(k, 1)).len(), 1);
        // Nothing written at all: lost.
        assert_eq!(lost_writes(&h, &[Store::new()]).len(), 1);
    }

    #[test]
    fn an_aborted_write_in_the_store_is_a_loss() {
        let k = Key::new(2, 7);
        let h = History {
            txns: vec![
                txn(1, 0, 10, &[k], Outcome::Committed),
                txn(2, 20, 30, &[k], Outcome::Aborted),
            ],
        };
        assert_eq!(lost_writes(&h, &store(k, 2)).len(), 1);
    }

    /// A Payment by last name still in flight at the end lists its
    /// customer as a placeholder row; its write to the real row is fine.
    #[test]
    fn an_unknown_attempt_may_have_written_an_unresolved_key() {
        let k = Key::new(2, 7);
        let placeholder = Key::new(2, u64::MAX);
        let h = History {
            txns: vec![
                txn(1, 0, 10, &[k], Outcome::Committed),
                txn(2, 20, u64::MAX, &[placeholder], Outcome::Unknown),
            ],
        };
        assert!(lost_writes(&h, &store(k, 2)).is_empty());
        // Not when it only wrote other tables.
        let other = History {
            txns: vec![
                txn(1, 0, 10, &[k], Outcome::Committed),
                txn(2, 20, u64::MAX, &[Key::new(3, u64::MAX)], Outcome::Unknown),
            ],
        };
        assert_eq!(lost_writes(&other, &store(k, 2)).len(), 1);
    }

    /// Per column: writers of disjoint columns of a row installed in the
    /// opposite order of their real-time order are no loss; a later
    /// writer of a column whose write the store lacks is.
    #[test]
    fn columns_installed_in_either_order_are_no_loss_a_missing_column_write_is() {
        use tessera_core::txn::Columns;
        let k = Key::new(1, 7);
        let (a, b) = (Columns(0b01), Columns(0b10));
        let col = |seq, start, end, c| HistoryTxn {
            write_columns: vec![c],
            ..txn(seq, start, end, &[k], Outcome::Committed)
        };
        let v = |seq| TxnId::new(NodeId(3), 0, seq).version();
        let mut s = Store::new();
        s.install_columns(k, Default::default(), v(2), b);
        s.install_columns(k, Default::default(), v(1), a);
        let h = History {
            txns: vec![col(1, 0, 10, a), col(2, 20, 30, b)],
        };
        assert!(lost_writes(&h, std::slice::from_ref(&s)).is_empty());
        let later = History {
            txns: vec![col(1, 0, 10, a), col(2, 20, 30, b), col(3, 40, 50, a)],
        };
        let lost = lost_writes(&later, std::slice::from_ref(&s));
        assert_eq!(lost.len(), 1, "{lost:?}");
        assert!(lost[0].contains("columns 0x1"), "{lost:?}");
    }
}
