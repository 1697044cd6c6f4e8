//! Janus's `--per-column` (issue 6, 2026-11-29; Janus §3: a conflict is
//! on the data a piece accesses): a run is recorded and `--check`ed at the
//! granularity its configuration orders conflicts at. Per column (the
//! default) the replicas may execute NewOrder (`D_NEXT_O_ID`) and Payment
//! (`D_YTD`) in either order on a district row, which the per-row check
//! reports as lost updates: such a run can only be checked per column.
//! Per row (`--per-column off`) nothing may be reordered on a row, and the
//! per-row check, the only one that sees a row-level anomaly, must hold.

use tessera_core::history::History;
use tessera_core::ids::MS;
use tessera_core::txn::Columns;
use tessera_harness::run::check_history;
use tessera_harness::spec::Knobs;
use tessera_harness::{run_bench, BenchOutcome, BenchSpec, RuntimeKind, WorkloadSpec};
use tessera_workloads::tpcc::Mix;
use tessera_workloads::TpccConfig;

/// TPC-C NewOrder and Payment on two warehouses of two districts (the
/// specification's remote shares), eight clients on each: NewOrder and
/// Payment meet on the district rows all the time. No faults: what
/// differs is the granularity only.
fn spec(per_column: Option<bool>) -> BenchSpec {
    let config = TpccConfig {
        shards: 2,
        districts: 2,
        customers: 30,
        items: 200,
        mix: Mix::NEWORDER_PAYMENT,
        by_name: 0,
        ..TpccConfig::spec(2)
    };
    BenchSpec {
        seed: 1,
        clients: 16,
        replicas: Some(3),
        duration: 200 * MS,
        warmup: 50 * MS,
        cooldown: 100 * MS,
        check: true,
        knobs: Knobs {
            per_column,
            ..Knobs::default()
        },
        ..BenchSpec::new(RuntimeKind::Sim, "janus", WorkloadSpec::Tpcc(config))
    }
}

fn run(per_column: Option<bool>) -> (BenchOutcome, History) {
    let mut out = run_bench(&spec(per_column)).expect("runs");
    let history = out
        .history
        .take()
        .expect("a checked run records its history");
    (out, history)
}

/// Writes of part of a row recorded in `h`.
fn column_writes(h: &History) -> usize {
    h.txns
        .iter()
        .flat_map(|t| &t.write_columns)
        .filter(|c| **c != Columns::ALL)
        .count()
}

/// The default run orders conflicts per column: its clients record the
/// columns of writes, and `--check` holds it to the per-column check, which
/// passes; the per-row check of the same history reports the district
/// rows' writers of disjoint columns it reordered, so a run checked per
/// row here would fail.
#[test]
fn a_per_column_run_is_checked_per_column() {
    let (out, h) = run(None);
    assert!(out.raw.client_config.record_columns);
    assert!(column_writes(&h) > 0, "no write of part of a row recorded");
    let level = tessera_checker::Level::StrictSerializable;
    let report = out.check.as_ref().expect("checked");
    assert!(report.ok, "{report}");
    assert_eq!(out.row.check, "pass");
    let columns = check_history(&h, true, level);
    assert!(columns.ok, "{columns}");
    let rows = check_history(&h, false, level);
    assert!(
        !rows.ok,
        "the per-row check found nothing to tell the granularities apart: \
         this run no longer tests the choice"
    );
}

/// `--per-column off` orders conflicts per row: the clients record whole
/// rows, `--check` holds the run to the per-row check, and it passes — the
/// replicas reordered nothing on a row, which the per-row check of the
/// per-column run above shows it would report.
#[test]
fn a_per_row_run_is_checked_per_row() {
    let (out, h) = run(Some(false));
    assert!(!out.raw.client_config.record_columns);
    assert_eq!(column_writes(&h), 0);
    assert!(h.txns.iter().all(|t| t.write_columns.is_empty()));
    let report = out.check.as_ref().expect("checked");
    assert!(report.ok, "{report}");
    assert_eq!(out.row.check, "pass");
    let rows = check_history(&h, false, tessera_checker::Level::StrictSerializable);
    assert!(rows.ok, "{rows}");
    assert!(out.row.committed > 0);
}
