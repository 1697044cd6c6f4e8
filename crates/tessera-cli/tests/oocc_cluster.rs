//! The memory-node protocols over real processes (OOCC issue 8): each
//! memory node a `tessera server` that serves only one-sided verbs, two
//! compute nodes (client hosts) in a `tessera bench --runtime tcp` driver
//! running `oocc`, `ford-occ`, `drtm` or `dslr`; a memory node killed
//! mid-run ends the bench with an error naming it, not a hang; a cluster
//! file that replicates a memory node is refused before anything starts,
//! and so is a compute node embedded in another process.

mod common;

use common::{counter, finish_within, row, Cluster, BIN};
use std::process::Command;
use std::time::Duration;

/// Two memory nodes of 1,000 contended keys; transactions of 4 operations,
/// 80% of them reads, half of them on both memory nodes.
const YCSB: &str = "name = \"ycsb\"\npartitions = 2\nkeys_per_partition = 1000\nops_per_txn = 4\nread_ratio = 0.8\nmulti_partition = 0.5\nzipf_theta = 0.6\n";

fn cluster(protocol: &str) -> Cluster {
    Cluster::unlogged(protocol, YCSB, 2, 2)
}

/// The isolation check passes, and so does the lost-write check on the
/// stores fetched from the memory nodes at the end (every committed write
/// must be there: the memory nodes are the only copy); transactions
/// commit, and the coordinators located keys by bucket READs.
fn passes(protocol: &str, extra: &[&str]) -> serde_json::Value {
    let c = cluster(protocol);
    let row = row(c.bench_with("2s", extra), &c);
    assert_eq!(row["check"], "pass", "{protocol}: {row}");
    assert!(row["committed"].as_u64().unwrap() > 50, "{protocol}: {row}");
    assert!(counter(&row, "bucket_reads") > 0, "{protocol}: {row}");
    row
}

/// OOCC with the default 20 µs lease, shorter than a loopback round trip:
/// read-only transactions validate; the second compute node measured its
/// drift against the Lease Manager's host before starting.
#[test]
fn oocc_runs_over_tcp_and_the_check_passes() {
    let row = passes("oocc", &[]);
    assert!(counter(&row, "drift_syncs") > 0, "{row}");
    assert_eq!(counter(&row, "drift_stops"), 0, "{row}");
}

/// With a lease longer than the round trips (5 ms), read-only
/// transactions commit in one round trip over TCP too (§III.B).
#[test]
fn oocc_with_a_long_lease_commits_read_only_transactions_in_one_round() {
    let row = passes("oocc", &["--lease-us", "5000"]);
    assert!(counter(&row, "ro_one_round") > 0, "{row}");
}

#[test]
fn ford_occ_runs_over_tcp_and_the_check_passes() {
    passes("ford-occ", &[]);
}

#[test]
fn drtm_runs_over_tcp_and_the_check_passes() {
    let row = passes("drtm", &[]);
    assert!(counter(&row, "lease_cas") > 0, "{row}");
}

/// A compute node embedded in another process (`tessera txn`, the client
/// library) would not share the bench's clock, on which DrTM's leases are
/// times: it is refused with the reason, not run.
#[test]
fn embedded_compute_nodes_are_refused() {
    let c = cluster("drtm");
    let out = Command::new(BIN)
        .args(["txn", "--config"])
        .arg(&c.config)
        .args(["incr", "k1"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("drtm runs its compute nodes only in `tessera bench"),
        "{err}"
    );
}

#[test]
fn dslr_runs_over_tcp_and_the_check_passes() {
    passes("dslr", &[]);
}

/// A memory node killed with SIGKILL mid-run (no faults of memory nodes
/// are handled: its region is gone) ends the bench with an error that
/// names the lost shard and its address, within the run's duration plus
/// a few seconds, not a hang.
#[test]
fn a_memory_node_killed_mid_run_ends_the_bench_with_an_error() {
    let mut c = cluster("oocc");
    let bench = c.bench("3s");
    std::thread::sleep(Duration::from_millis(1500));
    c.kill9(1);
    let out = finish_within(bench, Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let addr = format!("127.0.0.1:{}", c.ports[1]);
    assert!(
        stderr.contains("shard 1") && stderr.contains(&addr),
        "the error should name shard 1 and {addr}: {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// A memory node serves one shard alone: a cluster file that gives a
/// shard two nodes is refused by `cluster up`, naming the key, before any
/// server starts.
#[test]
fn replicated_memory_nodes_are_refused_before_anything_starts() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("c.toml");
    std::fs::write(
        &f,
        "[cluster]\nprotocol = \"dslr\"\nrun_dir = \"run\"\n[workload]\nname = \"ycsb\"\npartitions = 1\n\
         [[nodes]]\nname = \"m0\"\naddr = \"127.0.0.1:1\"\n[[nodes]]\nname = \"m1\"\naddr = \"127.0.0.1:2\"\n\
         [[shards]]\nreplicas = [\"m0\", \"m1\"]\n",
    )
    .unwrap();
    let out = Command::new(BIN)
        .args(["cluster", "up", "--config"])
        .arg(&f)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("[[shards]] replicas") && err.contains("not replicated"),
        "{err}"
    );
    assert!(!dir.path().join("run").join("pids").exists());
}

/// Protocol knobs given to `bench` on `tcp` reach the driver's
/// coordinators (the long-lease test above), and a protocol that does not
/// read one refuses it there as on the other runtimes, before anything
/// runs (they were silently dropped on `tcp`).
#[test]
fn knobs_a_protocol_does_not_read_are_refused_on_tcp() {
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/cluster-3.toml");
    let out = Command::new(BIN)
        .args(["bench", "--runtime", "tcp", "--config", config])
        .args(["--duration", "1s", "--lease-us", "5"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--lease-us"), "{err}");
}
