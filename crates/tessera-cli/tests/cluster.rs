//! Multi-process tests: three `tessera server` processes on loopback, a
//! `tessera bench --runtime tcp` driver, and kill -9 of a server mid-run.
//!
//! `TESSERA_KILL_RUNS` (default 1) sets how many kill/restart runs each
//! protocol gets; CI's acceptance is 20 in a row.

mod common;

use common::{Cluster, BIN};
use std::path::Path;
use std::process::{Child, Command, Output};
use std::time::Duration;

/// The bench's output once it exits, which must be a success (the
/// servers' logs come from the cluster's drop if not).
fn finished(bench: Child) -> Output {
    let out = bench.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "bench failed: {stderr}\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    out
}

fn committed(rows: &[serde_json::Value]) -> u64 {
    rows.last().unwrap()["committed"].as_u64().unwrap()
}

#[test]
fn three_servers_run_ycsb_with_occ_and_2pl_and_the_check_passes() {
    for protocol in ["occ", "2pl-ww"] {
        let c = Cluster::new(protocol, true);
        finished(c.bench("2s"));
        let rows = c.rows();
        assert_eq!(
            rows.last().unwrap()["check"],
            "pass",
            "{protocol}: {rows:?}"
        );
        assert!(committed(&rows) > 100, "{protocol}: {rows:?}");
    }
}

/// TPC-C's full mix over three warehouses, one per server, with remote
/// NewOrder lines and Payments (the spec's 1% and 15%), fsync on and off:
/// the isolation check, the lost-write check and TPC-C's consistency
/// conditions (clause 3.3.2) on the servers' final stores pass.
#[test]
fn three_servers_run_tpcc_with_occ_and_2pl_and_the_check_passes() {
    let tpcc = "name = \"tpcc\"\nwarehouses = 3\ncustomers = 300\nitems = 2000\n\
                remote_payment = 15.0\nremote_neworder = { perline = 1.0 }\n";
    for (protocol, fsync) in [("occ", true), ("2pl-ww", false)] {
        let c = Cluster::with_workload(protocol, fsync, tpcc);
        finished(c.bench("2s"));
        let rows = c.rows();
        assert_eq!(
            rows.last().unwrap()["check"],
            "pass",
            "{protocol}: {rows:?}"
        );
        assert_eq!(
            rows.last().unwrap()["tpcc_consistency"],
            "pass",
            "{protocol}: {rows:?}"
        );
        assert!(committed(&rows) > 100, "{protocol}: {rows:?}");
    }
}

/// OOCC §VIII.B's TATP and TAOBench-like workloads cross processes (their
/// wire codecs) and pass the check on three servers.
#[test]
fn three_servers_run_tatp_and_taobench_and_the_check_passes() {
    for workload in [
        "name = \"tatp\"\nsubscribers = 3000\npartitions = 3\n",
        "name = \"taobench\"\nobjects = 30000\nedges = 15000\npartitions = 3\n",
    ] {
        let c = Cluster::with_workload("occ", false, workload);
        finished(c.bench("1s"));
        let rows = c.rows();
        assert_eq!(
            rows.last().unwrap()["check"],
            "pass",
            "{workload}: {rows:?}"
        );
        assert!(committed(&rows) > 100, "{workload}: {rows:?}");
    }
}

fn kill_runs() -> usize {
    std::env::var("TESSERA_KILL_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
}

#[test]
fn a_server_killed_mid_run_recovers_and_no_committed_write_is_lost() {
    for run in 0..kill_runs() {
        for protocol in ["occ", "2pl-ww"] {
            let mut c = Cluster::new(protocol, false);
            let bench = c.bench("4s");
            let victim = 1 + run % 2;
            c.kill9_mid_run(
                victim,
                Duration::from_millis(1200 + 100 * (run as u64 % 7)),
                Duration::from_millis(200),
            );
            finished(bench);
            let rows = c.rows();
            let row = rows.last().unwrap();
            assert_eq!(row["check"], "pass", "run {run} {protocol}: {row}");
            assert!(committed(&rows) > 100, "run {run} {protocol}: {row}");
            assert!(
                c.log(victim).contains("recovered log"),
                "s{victim} did not replay its log:\n{}",
                c.log(victim)
            );
        }
    }
}

#[test]
fn cluster_files_with_mistakes_are_rejected_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("bad.toml");
    let write = |s: &str| std::fs::write(&f, s).unwrap();
    let run = |args: &[&str], f: &Path| {
        let out = Command::new(BIN).args(args).arg(f).output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    write(
        "[cluster]\nprotocol = \"occ\"\n[workload]\nname = \"ycsb\"\n[[nodes]]\nname = \"a\"\naddr = \"127.0.0.1:1\"\n[[nodes]]\nname = \"a\"\naddr = \"127.0.0.1:2\"\n[[shards]]\nreplicas = [\"a\"]\n",
    );
    let (code, err) = run(&["cluster", "up", "--config"], &f);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("duplicate node name 'a'"), "{err}");
    write(
        "[cluster]\nprotocol = \"paxos\"\n[workload]\nname = \"ycsb\"\n[[nodes]]\nname = \"a\"\naddr = \"127.0.0.1:1\"\n[[shards]]\nreplicas = [\"a\"]\n",
    );
    let (code, err) = run(&["cluster", "up", "--config"], &f);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("paxos") && err.contains("occ"), "{err}");
}
